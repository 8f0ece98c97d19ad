"""Tiny random causal LM and synthetic update batches for trainer unit tests (no rollout needed)."""

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from ragen2.rollout.types import Trajectory
from ragen2.trainer.actor import LossSettings, compute_logprobs
from ragen2.trainer.advantages import grpo_advantages
from ragen2.trainer.batch import build_batch

VOCAB = 40

TINY_RUN = [
    "env.name=frozenlake", "warm_start.steps=0", "rollout.env_groups=2", "rollout.group_size=3",
    "rollout.max_turns=1", "rollout.max_new_tokens=12", "rollout.val_groups=2", "trainer.mini_batch_size=3",
    "trainer.micro_batch_size=2", "trainer.actor_lr=1e-3", "trainer.critic_lr=1e-3", "trainer.test_freq=2",
    "trainer.save_freq=1", "trainer.entropy_coef=0.01", "collapse.num_samples=4",
]
"""``--set`` overrides of a whole FrozenLake training run that takes seconds (no warm start, 2 x 3 rollouts)."""


def tiny_lm(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
                      tie_word_embeddings=True)
    model = LlamaForCausalLM(cfg)
    model.eval()
    return model


def trajectories(scores_by_group: list[list[float]], seed: int = 0) -> list[Trajectory]:
    """One trajectory per score; a 4-token prompt (untrained) then 3-7 trained tokens, some reasoning."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for group, scores in enumerate(scores_by_group):
        for score in scores:
            n_resp = int(torch.randint(3, 8, (1,), generator=g))
            ids = torch.randint(1, VOCAB, (4 + n_resp,), generator=g).tolist()
            loss_mask = [0] * 4 + [1] * n_resp
            reasoning = [0] * 4 + [1] * (n_resp - 2) + [0, 0]
            out.append(Trajectory(group=group, env_seed=100 + group, turns=[], input_ids=ids, loss_mask=loss_mask,
                                  reasoning_mask=reasoning, score=float(score), success=score > 0,
                                  num_actions=1, first_prompt_ids=ids[:4], first_reasoning_ids=ids[4:-2],
                                  response_length=n_resp))
    return out


def grpo_batch(model, scores_by_group, seed: int = 0, ref_shift: float = 0.3):
    """An update batch with old log-probs, a perturbed reference and GRPO advantages."""
    batch = build_batch(trajectories(scores_by_group, seed), pad_id=0)
    batch.old_logp, _ = compute_logprobs(model, batch, micro_batch_size=4)
    g = torch.Generator().manual_seed(seed + 1)
    batch.ref_logp = batch.old_logp - ref_shift * torch.rand(batch.old_logp.shape, generator=g)
    batch.advantages = grpo_advantages(batch.scores, batch.group_ids)[:, None] * batch.loss_mask
    return batch


def settings(**kw) -> LossSettings:
    base = dict(agg_mode="token-mean", clip_low=0.2, clip_high=0.28, dual_clip=3.0, entropy_coef=0.01,
                entropy_scope="all", kl_coef=0.1, kl_type="k3", norm_const=16.0)
    base.update(kw)
    return LossSettings(**base)
