import copy
import tempfile
from pathlib import Path

import pytest
import torch

from ragen2 import envs
from ragen2.config import EnvConfig, PolicyConfig, RolloutConfig
from ragen2.policy import load_policy, make_tiny_policy
from ragen2.rollout.backends import HFBackend, sample_tokens
from ragen2.rollout.collect import collect_rollouts, execute_actions
from ragen2.rollout.prompt import render
from tests.rollout._fake_env import NAME, LineEnv, registered

SMALL = PolicyConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_positions=1024,
                     tokenizer_vocab_size=600)


@pytest.fixture(scope="module")
def policy():
    torch.set_num_threads(1)
    with registered(), tempfile.TemporaryDirectory() as tmp:
        path = make_tiny_policy(SMALL, [NAME], Path(tmp), seed=0)
        model, tokenizer = load_policy(path, device="cpu")
        with registered():
            yield model, tokenizer


class ScriptedBackend:
    """Answers each prompt with ``script(prompt_text)`` (the text after the opening ``<think>``)."""

    def __init__(self, tokenizer, script):
        self.tokenizer, self.script = tokenizer, script

    def generate(self, prompts_ids, max_new_tokens, temperature, seed, *, greedy=False):
        out = []
        for ids in prompts_ids:
            text = self.script(self.tokenizer.decode(ids))
            out.append(self.tokenizer(text, add_special_tokens=False)["input_ids"][:max_new_tokens])
        return out


def _turn_number(prompt: str) -> int:
    return int(prompt.rsplit("Turn ", 1)[1].split(":", 1)[0])


def _masked_text(tokenizer, ids, mask):
    return tokenizer.decode([t for t, m in zip(ids, mask) if m])


def _check_sequence(tokenizer, traj):
    """The masks pick exactly the stored responses (+ end of turn) and their reasoning."""
    assert len(traj.input_ids) == len(traj.loss_mask) == len(traj.reasoning_mask)
    expected = "".join(t.response_text + "<|im_end|>" for t in traj.turns)
    assert _masked_text(tokenizer, traj.input_ids, traj.loss_mask) == expected
    assert traj.response_length == sum(traj.loss_mask)
    assert all(r <= m for r, m in zip(traj.reasoning_mask, traj.loss_mask))
    reasoning = "".join(t.response_text.removeprefix("<think>").split("</think>", 1)[0] for t in traj.turns)
    assert _masked_text(tokenizer, traj.input_ids, traj.reasoning_mask) == reasoning
    for turn in traj.turns:
        if turn.think:
            assert turn.response_text.startswith(f"<think>{turn.think}</think>")
    # The sequence is the rendering of the conversation tokenised once; tokenising it piecewise, cut at
    # every assistant span, gives the same ids, so token boundaries fall exactly on the span edges.
    text = tokenizer.decode(traj.input_ids)
    assert tokenizer(text, add_special_tokens=False)["input_ids"] == traj.input_ids
    cuts, cursor = [0], 0
    for turn in traj.turns:
        start = text.index(turn.response_text, cursor)
        cursor = start + len(turn.response_text) + len("<|im_end|>")
        cuts += [start, cursor]
    pieces = [text[a:b] for a, b in zip(cuts, cuts[1:] + [len(text)])]
    piecewise = [i for piece in pieces for i in tokenizer(piece, add_special_tokens=False)["input_ids"]]
    assert piecewise == traj.input_ids
    first = traj.turns[0]
    assert traj.first_prompt_ids == first.prompt_ids
    assert tokenizer.decode(first.prompt_ids) == first.prompt_text
    assert first.prompt_text.endswith("<|im_start|>assistant\n<think>")
    assert traj.input_ids[:len(first.prompt_ids) - 1] == first.prompt_ids[:-1]


def _rollout_cfg(**kw):
    base = dict(max_new_tokens=24, max_context_tokens=4096)
    base.update(kw)
    return RolloutConfig(**base)


def test_expert_script_solves_and_masks_align(policy):
    model, tokenizer = policy
    seeds = [3, 4]

    def expert(prompt):
        # Read player and goal from the last state in the prompt.
        last = prompt.rsplit("Player: (0,", 1)[1]
        player = int(last[0])
        goal = int(last.split("Goal: (0,", 1)[1][0])
        action = "Right" if goal > player else "Left"
        return f"player {player} goal {goal}</think><answer>{action}</answer>"

    batch = collect_rollouts(model, tokenizer, EnvConfig(name=NAME), _rollout_cfg(max_actions_per_traj=8,
                             max_turns=6), seeds, group_size=3, temperature=1.0, seed=0,
                             backend=ScriptedBackend(tokenizer, expert))
    assert len(batch) == 6 and batch.scores.shape == (2, 3)
    for row, traj in enumerate(batch.trajectories):
        assert traj.group == row // 3 and traj.env_seed == seeds[row // 3]
        assert traj.success and traj.score == pytest.approx(1.0)
        assert all(t.valid for t in traj.turns) and traj.num_actions == len(traj.turns)
        assert traj.turns[0].think.startswith("player")
        assert traj.first_reasoning_ids == tokenizer(traj.turns[0].think, add_special_tokens=False)["input_ids"]
        _check_sequence(tokenizer, traj)
        text = tokenizer.decode(traj.input_ids)
        assert text.count("Reward:\n") == len(traj.turns) - 1  # no reward message after the last turn
        assert text.endswith("</answer><|im_end|>\n")


def test_invalid_actions_penalty_budget_and_state(policy):
    model, tokenizer = policy

    def script(prompt):
        turn = _turn_number(prompt)
        return {1: "x</think><answer>Jump || Right</answer>",   # one dropped -> penalty, one executed
                2: "no tags at all",                            # unparsed -> penalty, no step
                3: "y</think><answer>Left || Left || Left</answer>"}[turn]  # 2 kept (max per turn)

    rc = _rollout_cfg(max_turns=3, max_actions_per_traj=10)
    batch = collect_rollouts(model, tokenizer, EnvConfig(name=NAME), rc, [11], group_size=2,
                             temperature=1.0, seed=0, backend=ScriptedBackend(tokenizer, script))
    traj = batch.trajectories[0]
    turns = traj.turns
    assert [t.valid for t in turns[:2]] == [True, False]
    assert turns[0].actions == ["Jump", "Right"]
    assert turns[1].response_text == "<think>no tags at all" and turns[1].think == ""
    assert turns[1].reasoning_ids == []
    assert len(turns) == 3  # the goal is >= 2 cells away, one Right cannot reach it
    # the state after the unparsed turn is unchanged: turn 3 shows the same state as turn 2
    state = [t.prompt_text.rsplit("State:\n", 1)[1].split("\nYou have", 1)[0] for t in turns]
    assert state[1] == state[2] != state[0]
    assert turns[2].actions == ["Left", "Left"]
    # the warning line is shown to the model but is not part of X or the training sequence
    assert "No valid action provided previously" not in tokenizer.decode(traj.input_ids)
    env = LineEnv()
    env.reset(seed=11)
    reward = 0.0
    for action in ["Right", "Left", "Left"]:
        if not env.done:
            reward += env.step(action)[1]
    penalties = 2
    assert traj.score == pytest.approx(reward - 0.1 * penalties)
    assert traj.info["invalid_turns"] == penalties
    _check_sequence(tokenizer, traj)


def test_execute_actions_semantics():
    env = LineEnv()
    env.reset(seed=5)
    before = env.player
    out = execute_actions(env, ["jump"], budget=4)
    assert not out.valid and out.penalised and out.obs is None and env.player == before
    out = execute_actions(env, ["rIGHT", "LEFT"], budget=1)
    assert out.valid and not out.penalised and out.executed == ["Right"]
    free = copy.deepcopy(env)
    free.action_names = None  # free-form env: the env's own flag decides
    out = execute_actions(free, ["Right", "bogus"], budget=4)
    assert out.penalised and out.executed[:1] == ["Right"]


def test_random_model_determinism_groups_and_masks(policy):
    model, tokenizer = policy
    rc = _rollout_cfg(max_new_tokens=12)
    kw = dict(group_size=4, temperature=1.0)
    a = collect_rollouts(model, tokenizer, EnvConfig(name=NAME), rc, [1, 2], seed=7, **kw)
    b = collect_rollouts(model, tokenizer, EnvConfig(name=NAME), rc, [1, 2], seed=7, **kw)
    c = collect_rollouts(model, tokenizer, EnvConfig(name=NAME), rc, [1, 2], seed=8, **kw)
    assert [t.input_ids for t in a.trajectories] == [t.input_ids for t in b.trajectories]
    assert [t.input_ids for t in a.trajectories] != [t.input_ids for t in c.trajectories]
    for g in range(2):
        rows = a.group_rows([g])
        assert len({tuple(a.trajectories[r].first_prompt_ids) for r in rows}) == 1
    for traj in a.trajectories:
        _check_sequence(tokenizer, traj)
        # a random model never formats: every turn is penalised and nothing is executed
        assert traj.score == pytest.approx(-0.1 * len(traj.turns)) and traj.num_actions == 0


def test_context_cap_drops_oldest_turns(policy):
    model, tokenizer = policy

    def script(prompt):
        return "step</think><answer>Left</answer>"

    rc = _rollout_cfg(max_turns=3, max_actions_per_traj=10, max_context_tokens=1)
    with pytest.warns(UserWarning, match="context cap"):
        batch = collect_rollouts(model, tokenizer, EnvConfig(name=NAME), rc, [2], group_size=1,
                                 temperature=1.0, seed=0, backend=ScriptedBackend(tokenizer, script))
    traj = batch.trajectories[0]
    assert len(traj.turns) >= 2 and traj.info["truncated_context"]
    text = tokenizer.decode(traj.input_ids)
    assert "Turn 1:" not in text and text.count("<|im_start|>assistant") == 1
    assert _masked_text(tokenizer, traj.input_ids, traj.loss_mask) == traj.turns[-1].response_text + "<|im_end|>"


def test_hf_backend_paths_agree_and_are_seeded(policy):
    model, tokenizer = policy
    prompt = render(tokenizer, [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
                    generation=True)
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    prompts = [ids, ids[1:], ids]
    shared, plain = HFBackend(model, tokenizer), HFBackend(model, tokenizer, share_prefill=False)
    assert shared.generate(prompts, 10, 1.0, seed=0, greedy=True) == plain.generate(prompts, 10, 1.0, seed=0,
                                                                                      greedy=True)
    for backend in (shared, plain):
        first = backend.generate(prompts, 10, 1.0, seed=3)
        assert first == backend.generate(prompts, 10, 1.0, seed=3)
        assert all(len(x) <= 10 for x in first)
        assert not any(t in backend.stop_ids for x in first for t in x)
    with pytest.raises(ValueError, match="temperature"):
        shared.generate(prompts, 10, 0.0, seed=0)


@pytest.mark.skipif("frozenlake" not in envs.available(), reason="frozenlake env not present")
def test_frozenlake_random_model(tmp_path):
    path = make_tiny_policy(SMALL, ["frozenlake"], tmp_path, seed=1)
    model, tokenizer = load_policy(path, device="cpu")
    batch = collect_rollouts(model, tokenizer, EnvConfig(name="frozenlake", kwargs={"success_rate": 1.0}),
                             _rollout_cfg(max_new_tokens=8), [10000, 10001], group_size=2, temperature=1.0,
                             seed=0)
    assert len(batch) == 4
    for traj in batch.trajectories:
        _check_sequence(tokenizer, traj)
        assert "Coordinates:" in traj.turns[0].prompt_text


def test_sample_tokens_draws_from_the_tempered_softmax():
    logits = torch.tensor([[0.0, 1.0, -float("inf"), 2.0], [3.0, -float("inf"), -float("inf"), 3.0]])
    n, temperature = 20_000, 0.5
    gen = torch.Generator().manual_seed(0)
    draws = torch.stack([sample_tokens(logits, temperature, gen) for _ in range(n)])  # [n, 2]
    probs = torch.softmax(logits.double() / temperature, dim=-1)
    for row in range(2):
        counts = torch.bincount(draws[:, row], minlength=4).double()
        assert counts[probs[row] == 0].sum() == 0  # probability-0 tokens never come up
        sigma = torch.sqrt(n * probs[row] * (1 - probs[row]))
        assert torch.all((counts - n * probs[row]).abs() <= 4 * sigma + 1e-9), (row, counts, n * probs[row])
    again = torch.stack([sample_tokens(logits, temperature, torch.Generator().manual_seed(0)) for _ in range(3)])
    assert torch.equal(again[0], draws[0])  # the generator alone decides the draws


class ScoredScriptedBackend(ScriptedBackend):
    """:class:`ScriptedBackend` as a sampler would report it: with the stop token and the model's log-probs of the
    prompt's last token, of the reply and of the stop (one full forward of prompt + reply per row)."""

    def __init__(self, tokenizer, script, model, temperature=1.0, stop=True):
        super().__init__(tokenizer, script)
        self.model, self.temperature, self.stop = model, temperature, stop

    def sample(self, prompts_ids, max_new_tokens, temperature, seed, *, greedy=False):
        from ragen2.rollout.backends import Generation

        eot = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        out = []
        for ids, tokens in zip(prompts_ids, self.generate(prompts_ids, max_new_tokens, temperature, seed)):
            sampled = tokens + [eot] if self.stop else tokens
            with torch.no_grad():
                logits = self.model(input_ids=torch.tensor([ids + sampled])).logits[0].float() / self.temperature
            lsm = torch.log_softmax(logits, dim=-1)
            positions = range(len(ids) - 2, len(ids) + len(sampled) - 1)  # predicting prompt[-1], then the sample
            targets = [ids[-1], *sampled]
            out.append(Generation(tokens, stop=eot if self.stop else None,
                                  logprobs=[float(lsm[p, t]) for p, t in zip(positions, targets)],
                                  entropies=[float(-(lsm[p].exp() * lsm[p]).sum()) for p in positions],
                                  temperature=self.temperature))
        return out


def _walker(prompt):
    last = prompt.rsplit("Player: (0,", 1)[1]
    player, goal = int(last[0]), int(last.split("Goal: (0,", 1)[1][0])
    return f"player {player} goal {goal}</think><answer>{'Right' if goal > player else 'Left'}</answer>"


def test_trajectories_keep_the_sampling_logprobs_of_exactly_sampled_sequences(policy):
    from ragen2.trainer.actor import compute_logprobs
    from ragen2.trainer.batch import build_batch

    model, tokenizer = policy
    backend = ScoredScriptedBackend(tokenizer, _walker, model, temperature=0.7)
    batch = collect_rollouts(model, tokenizer, EnvConfig(name=NAME), _rollout_cfg(max_actions_per_traj=8, max_turns=6),
                             [3, 4], group_size=2, temperature=0.7, seed=0, backend=backend)
    assert all(t.behaviour_logprobs is not None and t.behaviour_temperature == 0.7 for t in batch.trajectories)
    assert max(len(t.turns) for t in batch.trajectories) > 1  # multi-turn: every turn's prompt is a prefix
    update = build_batch(batch.trajectories, tokenizer.pad_token_id, temperature=0.7)
    logp, ent = compute_logprobs(model, update, micro_batch_size=4, temperature=0.7)
    mask = update.loss_mask > 0
    assert torch.allclose(update.behaviour_logp[mask], logp[mask], atol=1e-5)
    assert torch.allclose(update.behaviour_entropy[mask], ent[mask], atol=1e-5)


@pytest.mark.parametrize("case", ["warning", "rebuilt", "no_stop"])
def test_sequences_that_differ_from_the_sample_have_no_sampling_logprobs(policy, case):
    model, tokenizer = policy

    def script(prompt):
        if case == "warning" and _turn_number(prompt) == 1:
            return "hmm</think><answer>Jump</answer>"  # invalid: turn 2's prompt shows a warning the trainer omits
        if case == "rebuilt":
            return "  spaced out  </think><answer>Left || </answer>"  # stored as <think>spaced out</think>...
        return _walker(prompt)

    backend = ScoredScriptedBackend(tokenizer, script, model, stop=case != "no_stop")
    batch = collect_rollouts(model, tokenizer, EnvConfig(name=NAME), _rollout_cfg(max_actions_per_traj=8, max_turns=6),
                             [3], group_size=2, temperature=1.0, seed=0, backend=backend)
    assert all(t.behaviour_logprobs is None for t in batch.trajectories)
