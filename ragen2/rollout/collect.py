"""The batched multi-turn rollout loop (docs/method.md §1.0, §2.3-§2.6, §2.9).

All live trajectories generate together each turn; finished ones leave the batch. Every trajectory
ends up as one token sequence (:mod:`ragen2.rollout.sequence`) with its score on the last token.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ragen2 import envs
from ragen2.config import EnvConfig, RolloutConfig
from ragen2.envs.base import TextEnv
from ragen2.rollout.backends import Generation, GenerationBackend, backend_settings, make_backend
from ragen2.rollout.parse import parse_response
from ragen2.rollout.prompt import (
    THINK_OPEN,
    AgentLimits,
    conversation,
    render,
    resolve_limits,
    reward_message,
    system_prompt,
    turn_block,
)
from ragen2.rollout.sequence import behaviour_scores, fit_context, tokenize_conversations
from ragen2.rollout.types import RolloutBatch, Trajectory, Turn


@dataclass
class TurnOutcome:
    """What executing one parsed response did to the environment."""

    env_reward: float
    valid: bool
    penalised: bool
    executed: list[str]
    info: dict[str, Any]
    obs: str | None
    """The observation after the last step (``None`` when no step was taken)."""


def execute_actions(env: TextEnv, actions: list[str], budget: int) -> TurnOutcome:
    """Run the parsed ``actions`` of one turn (docs/method.md §1.0).

    For envs with ``action_names`` an action must equal a name case-insensitively, else it is
    dropped; for the others an action the env flags ``action_is_valid=False`` counts as dropped (the
    contract guarantees such a step changes nothing). At most ``budget`` valid actions run, stopping
    at the end of the episode. A turn is penalised when any action was dropped or none was valid.
    """
    dropped = False
    candidates = actions
    if env.action_names:
        lookup = {name.lower(): name for name in env.action_names}
        mapped = [lookup.get(a.lower()) for a in actions]
        dropped = any(m is None for m in mapped)
        candidates = [m for m in mapped if m is not None]
    reward, executed, info, obs = 0.0, [], {}, None
    for action in candidates:
        if len(executed) >= budget:
            break
        obs, step_reward, terminated, truncated, info = env.step(action)
        reward += float(step_reward)
        if info.get("action_is_valid", True):
            executed.append(action)
        else:
            dropped = True
        if terminated or truncated:
            break
    valid = bool(executed)
    return TurnOutcome(reward, valid, dropped or not valid, executed, info, obs)


@dataclass
class _Live:
    """Book-keeping of one trajectory while it is rolled out."""

    group: int
    env_seed: int
    env: TextEnv
    obs: str
    user_texts: list[str] = field(default_factory=list)      # training / X version (no warnings)
    gen_user_texts: list[str] = field(default_factory=list)  # what the model was shown
    responses: list[str] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    generations: list[tuple[list[int], Generation]] = field(default_factory=list)  # (prompt shown, sample) per turn
    actions_used: int = 0
    penalties: int = 0
    env_reward: float = 0.0
    done: bool = False
    success: bool = False
    last_valid: bool = True
    last_reward: float | None = None


def _open_turn(traj: _Live, turn: int, limits: AgentLimits) -> None:
    """Append the user message of ``turn`` (reward feedback + state block) to both histories."""
    prefix = reward_message(traj.last_reward) if traj.last_reward is not None else ""
    left = limits.max_actions_per_traj - traj.actions_used
    traj.user_texts.append(prefix + turn_block(turn, traj.obs, left, limits.max_tokens_hint))
    traj.gen_user_texts.append(prefix + turn_block(turn, traj.obs, left, limits.max_tokens_hint,
                                                   warning=not traj.last_valid))


def collect_rollouts(model, tokenizer, env_cfg: EnvConfig, rollout_cfg: RolloutConfig, seeds: list[int], *,
                     group_size: int, temperature: float, seed: int, greedy: bool = False,
                     backend: GenerationBackend | None = None) -> RolloutBatch:
    """Roll out ``len(seeds)`` groups of ``group_size`` trajectories (group-contiguous rows).

    Args:
        model: The policy (eval mode); used through ``backend`` (default: :class:`HFBackend`).
        tokenizer: Its tokenizer (left padding, pad token set).
        env_cfg: Which environment, with its constructor kwargs.
        rollout_cfg: Limits, context cap, ``max_new_tokens``, format penalty.
        seeds: One env seed per group; every member of a group resets with it.
        group_size: Trajectories per group.
        temperature: Sampling temperature (ignored when ``greedy``).
        seed: Sampling seed; the same seed gives the same batch.
        greedy: Greedy decoding instead of sampling.
        backend: Optional generation backend (default: ``rollout_cfg.backend`` with its settings,
            :func:`ragen2.rollout.backends.backend_settings`).
    """
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size!r}")
    if not seeds:
        raise ValueError("seeds is empty: at least one group is needed")
    if backend is None:
        backend = make_backend(rollout_cfg.backend, model, tokenizer, **backend_settings(rollout_cfg))
    trajs = []
    for group, env_seed in enumerate(seeds):
        for _ in range(group_size):
            env = envs.make(env_cfg.name, **env_cfg.kwargs)
            obs, _ = env.reset(seed=int(env_seed))
            trajs.append(_Live(group=group, env_seed=int(env_seed), env=env, obs=obs))
    limits = resolve_limits(rollout_cfg, trajs[0].env)
    system = system_prompt(trajs[0].env, limits.max_actions_per_traj)

    for turn in range(1, limits.max_turns + 1):
        live = [t for t in trajs if not t.done]
        if not live:
            break
        for traj in live:
            _open_turn(traj, turn, limits)
        prompts = _prompts(tokenizer, system, [t.gen_user_texts for t in live], [t.responses for t in live],
                           rollout_cfg.max_context_tokens)
        outputs = _sample(backend, [ids for _, ids in prompts], rollout_cfg.max_new_tokens, temperature,
                          seed=(seed * 1_000_003 + turn) % 2**62, greedy=greedy)
        for traj, generation, prompt in zip(live, outputs, prompts):
            _finish_turn(traj, turn, tokenizer, system, generation, limits, rollout_cfg, prompt)
    return RolloutBatch(_build_trajectories(trajs, tokenizer, system, rollout_cfg, limits),
                        env_groups=len(seeds), group_size=group_size)


def _sample(backend: GenerationBackend, prompts: list[list[int]], max_new_tokens: int, temperature: float, *,
            seed: int, greedy: bool) -> list[Generation]:
    """The backend's samples with their log-probs where it records them (``sample``), else its bare tokens."""
    if hasattr(backend, "sample"):
        return backend.sample(prompts, max_new_tokens, temperature, seed=seed, greedy=greedy)
    return [Generation(tokens) for tokens in backend.generate(prompts, max_new_tokens, temperature, seed=seed,
                                                               greedy=greedy)]


def _prompts(tokenizer, system: str, user_texts: list[list[str]], responses: list[list[str]],
             max_tokens: int) -> list[tuple[str, list[int]]]:
    """Generation prompts (text, ids) of several trajectories, capped; each distinct conversation is rendered and
    tokenised once (on turn 1 a group's members share theirs), in one batch."""
    keys = [(tuple(u), tuple(r)) for u, r in zip(user_texts, responses)]
    distinct = list(dict.fromkeys(keys))
    conversations = [conversation(system, list(u), list(r)) for u, r in distinct]
    texts = [render(tokenizer, messages, generation=True) for messages in conversations]
    all_ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    out = {}
    for key, messages, text, ids in zip(distinct, conversations, texts, all_ids):
        if len(ids) > max_tokens:
            _, text, ids = fit_context(tokenizer, messages, max_tokens, generation=True, ids=ids)
        out[key] = (text, list(ids))
    return [(out[key][0], list(out[key][1])) for key in keys]


def _finish_turn(traj: _Live, turn: int, tokenizer, system: str, generation: Generation, limits: AgentLimits,
                 rollout_cfg: RolloutConfig, prompt: tuple[str, list[int]]) -> None:
    traj.generations.append((prompt[1], generation))
    text = THINK_OPEN + tokenizer.decode(generation.tokens, skip_special_tokens=True)
    parsed = parse_response(text, limits.max_actions_per_turn)
    budget = limits.max_actions_per_traj - traj.actions_used
    outcome = execute_actions(traj.env, parsed.actions, budget)
    traj.actions_used += len(outcome.executed)
    traj.penalties += int(outcome.penalised)
    traj.env_reward += outcome.env_reward
    traj.last_valid = outcome.valid
    traj.last_reward = outcome.env_reward
    if outcome.obs is not None:
        traj.obs = outcome.obs
    traj.responses.append(parsed.stored_response)
    # X of this turn: the context as the trainer sees it (no warning lines), capped like the prompt.
    x_text, x_ids = prompt
    if traj.gen_user_texts != traj.user_texts:
        [(x_text, x_ids)] = _prompts(tokenizer, system, [traj.user_texts], [traj.responses[:-1]],
                                     rollout_cfg.max_context_tokens)
    traj.turns.append(Turn(prompt_text=x_text, response_text=parsed.stored_response, think=parsed.think,
                           actions=list(parsed.actions), valid=outcome.valid, env_reward=outcome.env_reward,
                           prompt_ids=x_ids))  # reasoning_ids: filled in batch at the end
    env_done = traj.env.unwrapped.done
    if env_done:
        traj.success = bool(outcome.info.get("success", False))
    traj.done = env_done or traj.actions_used >= limits.max_actions_per_traj or turn >= limits.max_turns


def _build_trajectories(trajs: list[_Live], tokenizer, system: str, rollout_cfg: RolloutConfig,
                        limits: AgentLimits) -> list[Trajectory]:
    # Z of every turn: the reasoning text tokenised without special tokens, tags excluded.
    thinking = [turn for traj in trajs for turn in traj.turns if turn.think]
    if thinking:
        z_ids = tokenizer([turn.think for turn in thinking], add_special_tokens=False)["input_ids"]
        for turn, ids in zip(thinking, z_ids):
            turn.reasoning_ids = list(ids)
    cap = rollout_cfg.max_context_tokens
    conversations = [conversation(system, traj.user_texts, traj.responses) for traj in trajs]
    sequences = tokenize_conversations(tokenizer, conversations)
    for i, seq in enumerate(sequences):
        if len(seq.input_ids) > cap:
            conversations[i] = fit_context(tokenizer, conversations[i], cap, generation=False,
                                           ids=seq.input_ids)[0]
            sequences[i] = tokenize_conversations(tokenizer, [conversations[i]])[0]
    out = []
    for traj, seq, kept in zip(trajs, sequences, conversations):
        score = traj.env_reward + rollout_cfg.format_penalty * traj.penalties
        first = traj.turns[0]
        behaviour = behaviour_scores(seq.input_ids, seq.loss_mask, traj.generations)
        out.append(Trajectory(
            group=traj.group, env_seed=traj.env_seed, turns=traj.turns, input_ids=seq.input_ids,
            loss_mask=seq.loss_mask, reasoning_mask=seq.reasoning_mask, score=float(score),
            success=traj.success, num_actions=traj.actions_used, first_prompt_ids=list(first.prompt_ids),
            first_reasoning_ids=list(first.reasoning_ids), response_length=int(sum(seq.loss_mask)),
            info={"num_turns": len(traj.turns), "env_reward": traj.env_reward,
                  "invalid_turns": traj.penalties, "truncated_context": len(kept) < 1 + 2 * len(traj.turns),
                  "max_turns": limits.max_turns},
            **({} if behaviour is None else dict(zip(
                ("behaviour_logprobs", "behaviour_entropies", "behaviour_temperature"), behaviour)))))
    return out
