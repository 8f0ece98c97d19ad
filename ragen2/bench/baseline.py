"""The plain multi-turn loop that the rollout benchmark compares ``collect_rollouts`` with.

For each turn: render and tokenise every live context (padded batch), call ``model.generate``,
decode, parse, step the environments, append. Prompts, parsing and action semantics are ragen2's
own (:mod:`ragen2.rollout.prompt`, :func:`ragen2.rollout.parse_response`,
:func:`ragen2.rollout.execute_actions`), so both loops show the model the same text and do the same
environment work; what differs is the generation and book-keeping around it. Sampling is the
same kind as :class:`ragen2.rollout.HFBackend` (temperature, no top-k/top-p, stop tokens).
"""

from __future__ import annotations

import torch
from transformers import GenerationConfig

from ragen2 import envs
from ragen2.config import EnvConfig, RolloutConfig
from ragen2.rollout import (
    conversation,
    execute_actions,
    parse_response,
    render,
    resolve_limits,
    reward_message,
    stop_token_ids,
    system_prompt,
    turn_block,
)
from ragen2.rollout.prompt import THINK_OPEN


def generate_loop(model, tokenizer, env_cfg: EnvConfig, rollout_cfg: RolloutConfig, seeds: list[int], *,
                  group_size: int, temperature: float, seed: int) -> int:
    """Play ``len(seeds) * group_size`` episodes with plain ``model.generate``; returns new tokens.

    The count is the number of sampled tokens before each row's first stop token, summed over rows
    and turns (the same count :class:`ragen2.rollout.HFBackend` returns).
    """
    if group_size < 1 or not seeds:
        raise ValueError(f"need group_size >= 1 and at least one seed, got {group_size!r} and {seeds!r}")
    games = []
    for env_seed in seeds:
        for _ in range(group_size):
            env = envs.make(env_cfg.name, **env_cfg.kwargs)
            obs, _ = env.reset(seed=int(env_seed))
            games.append({"env": env, "obs": obs, "users": [], "responses": [], "actions": 0,
                          "last_reward": None, "last_valid": True, "done": False})
    limits = resolve_limits(rollout_cfg, games[0]["env"])
    system = system_prompt(games[0]["env"], limits.max_actions_per_traj)
    stops = stop_token_ids(tokenizer)
    config = GenerationConfig(do_sample=True, temperature=float(temperature), top_k=0, top_p=1.0,
                              max_new_tokens=rollout_cfg.max_new_tokens, eos_token_id=stops,
                              pad_token_id=tokenizer.pad_token_id, use_cache=True)
    new_tokens = 0
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for turn in range(1, limits.max_turns + 1):
            live = [g for g in games if not g["done"]]
            if not live:
                break
            for g in live:
                prefix = reward_message(g["last_reward"]) if g["last_reward"] is not None else ""
                left = limits.max_actions_per_traj - g["actions"]
                g["users"].append(prefix + turn_block(turn, g["obs"], left, limits.max_tokens_hint,
                                                      warning=not g["last_valid"]))
            texts = [render(tokenizer, conversation(system, g["users"], g["responses"]), generation=True)
                     for g in live]
            enc = tokenizer(texts, add_special_tokens=False, padding=True, return_tensors="pt")
            enc = {k: v.to(model.device) for k, v in enc.items()}
            with torch.inference_mode():
                out = model.generate(**enc, generation_config=config)
            new = out[:, enc["input_ids"].shape[1]:].tolist()
            replies = tokenizer.batch_decode(new, skip_special_tokens=True)
            for g, ids, reply in zip(live, new, replies):
                new_tokens += next((i for i, t in enumerate(ids) if t in stops), len(ids))
                parsed = parse_response(THINK_OPEN + reply, limits.max_actions_per_turn)
                outcome = execute_actions(g["env"], parsed.actions, limits.max_actions_per_traj - g["actions"])
                g["actions"] += len(outcome.executed)
                g["last_valid"], g["last_reward"] = outcome.valid, outcome.env_reward
                if outcome.obs is not None:
                    g["obs"] = outcome.obs
                g["responses"].append(parsed.stored_response)
                g["done"] = (g["env"].unwrapped.done or g["actions"] >= limits.max_actions_per_traj
                             or turn >= limits.max_turns)
    return new_tokens
