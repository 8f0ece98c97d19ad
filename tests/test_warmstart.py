import json

import pytest
import torch

from ragen2.config import EnvConfig, PolicyConfig, RolloutConfig, RunConfig, WarmStartConfig
from ragen2.policy import load_policy, make_tiny_policy
from ragen2.rollout.expert import TEMPLATE_THINKS, is_template
from ragen2.rollout.prompt import turn_block
from ragen2.warmstart import CORPUS_SEED_BASE, build_corpus, sft_loss, tokenize_corpus, train_sft, warm_start
from tests.rollout._fake_env import NAME, LineEnv, registered

SMALL = PolicyConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_positions=512,
                     tokenizer_vocab_size=600)


def _cfg(**ws) -> RunConfig:
    base = dict(steps=6, lr=3e-3, batch_size=8, num_episodes=40, template_fraction=0.25, seed=0)
    base.update(ws)
    return RunConfig(env=EnvConfig(name=NAME), policy=SMALL, warm_start=WarmStartConfig(**base),
                     rollout=RolloutConfig(max_new_tokens=16))


@pytest.fixture(scope="module")
def base_policy(tmp_path_factory):
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("base")
    with registered():
        make_tiny_policy(SMALL, [NAME], out, seed=0)
        yield out


def test_corpus_template_share_and_format(base_policy):
    episodes = build_corpus(_cfg())
    assert len(episodes) == 40 and sum(ep.template for ep in episodes) == 10
    for ep in episodes:
        assert ep.success and ep.score == pytest.approx(1.0)
        thinks = [m["content"].split("</think>")[0].removeprefix("<think>") for m in ep.messages
                  if m["role"] == "assistant"]
        assert all(is_template(t) for t in thinks) == ep.template
        assert ep.template or all(t.startswith("player (0,") for t in thinks)
        assert ep.messages[-1]["role"] == "assistant" and ep.messages[-1]["content"].endswith("</answer>")
    # the first user message is exactly the rollout's turn-1 block
    env = LineEnv()
    obs, _ = env.reset(seed=CORPUS_SEED_BASE)  # episode i uses seed CORPUS_SEED_BASE + i
    assert episodes[0].messages[1]["content"] == turn_block(1, obs, 4, 50)
    answers = {"Left", "Right", "Left || Left", "Right || Right"}
    allowed = {f"<think>{t}</think><answer>{a}</answer>" for t in TEMPLATE_THINKS for a in answers}
    assert {ep.messages[2]["content"] for ep in episodes if ep.template} <= allowed
    assert build_corpus(_cfg(template_fraction=0.0)) and not any(ep.template for ep in build_corpus(
        _cfg(template_fraction=0.0)))
    with pytest.raises(ValueError, match="template_fraction"):
        build_corpus(_cfg(template_fraction=1.5))


def test_sft_steps_reduce_loss_deterministically(base_policy):
    cfg = _cfg()
    losses = []
    for _ in range(2):
        model, tokenizer = load_policy(base_policy, device="cpu")
        sequences = tokenize_corpus(tokenizer, build_corpus(cfg), 4096)
        torch.manual_seed(0)
        losses.append(train_sft(model, sequences, steps=12, lr=1e-2, batch_size=8, seed=0,
                                pad_id=tokenizer.pad_token_id))
    assert losses[0] == losses[1]
    assert sum(losses[0][-3:]) / 3 < 0.7 * sum(losses[0][:3]) / 3


def test_loss_only_on_assistant_tokens(base_policy):
    model, tokenizer = load_policy(base_policy, device="cpu")
    seq = tokenize_corpus(tokenizer, build_corpus(_cfg(num_episodes=1)), 4096)[0]
    ids = torch.tensor([seq.input_ids])
    mask = torch.tensor([seq.loss_mask], dtype=torch.float32)
    assert seq.loss_mask[-1] == 0 and seq.loss_mask[-2] == 1  # "...<|im_end|>" trained, final "\n" not
    with torch.no_grad():
        loss = sft_loss(model, ids, torch.ones_like(ids), mask)
        changed_last = ids.clone()
        changed_last[0, -1] = (changed_last[0, -1] + 1) % len(tokenizer)
        changed_trained = ids.clone()
        changed_trained[0, -2] = (changed_trained[0, -2] + 1) % len(tokenizer)
        assert torch.equal(sft_loss(model, changed_last, torch.ones_like(ids), mask), loss)
        assert not torch.equal(sft_loss(model, changed_trained, torch.ones_like(ids), mask), loss)
        assert float(sft_loss(model, ids, torch.ones_like(ids), torch.zeros_like(mask))) == 0.0


def test_warm_start_end_to_end(base_policy, tmp_path, caplog):
    cfg = _cfg(steps=4)
    with caplog.at_level("INFO", logger="ragen2.warmstart"):
        out = warm_start(cfg, tmp_path / "ws", base_policy=base_policy)
    progress = [r.getMessage() for r in caplog.records]  # what `python -m ragen2 warmstart` prints on stderr
    assert progress[0] == f"warm start ws: {cfg.warm_start.num_episodes} expert episodes of {cfg.env.name}, then 4 SFT steps"
    assert progress[1].startswith("warm start step 4/4: loss ") and "greedy evaluation on 32 seeds" in progress[2]
    assert progress[3].startswith("warm start ws: greedy success ")
    report = json.loads((out / "warm_start.json").read_text())
    assert report["steps"] == 4 and len(report["losses"]) == 4
    assert report["corpus_template_share"] == 0.25
    assert 0.0 <= report["greedy_success"] <= 1.0 and 0.0 <= report["greedy_template_share"] <= 1.0
    model, tokenizer = load_policy(out, device="cpu")
    assert tokenizer.padding_side == "left"
    assert [p.name for p in tmp_path.iterdir()] == ["ws"]
    again = warm_start(cfg, tmp_path / "ws", base_policy=base_policy)  # overwrites, same result
    report2 = json.loads((again / "warm_start.json").read_text())
    assert report2["losses"] == report["losses"] and report2["greedy_success"] == report["greedy_success"]


def test_env_kwargs_override_the_corpus_env_and_share_the_cache_key():
    from ragen2.warmstart import corpus_env, warm_start_key

    slip = RunConfig(env=EnvConfig(name="frozenlake", kwargs={"success_rate": 0.5}))
    det = RunConfig(env=EnvConfig(name="frozenlake", kwargs={"success_rate": 0.98}))
    shared = RunConfig(env=slip.env, warm_start=WarmStartConfig(env_kwargs={"success_rate": 0.98}))
    assert corpus_env(slip).kwargs == {"success_rate": 0.5}
    assert corpus_env(shared).kwargs == {"success_rate": 0.98}
    assert warm_start_key(shared) == warm_start_key(det) != warm_start_key(slip)
    episodes = build_corpus(RunConfig(env=slip.env, warm_start=WarmStartConfig(num_episodes=40, env_kwargs={
        "success_rate": 1.0})))
    assert all(ep.success for ep in episodes)  # deterministic corpus although the run's env slips
