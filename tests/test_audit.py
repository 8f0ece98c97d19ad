import json
import math

import numpy as np
import pytest

from ragen2.audit import (
    DEFAULT_TOP_P_VALUES,
    LOW_DISPERSION,
    audit,
    audit_from_scores,
    run_audit_command,
)
from ragen2.filter import FilterConfig, select_groups

# Six hand-made groups of four rollouts, one of each kind the audit separates.
MIXED_SCORES = np.array([
    [1.0, 0.0, 1.0, 0.0],      # varied
    [1.0, 1.0, 1.0, 1.0],      # all succeeded
    [0.0, 0.0, 0.0, 0.0],      # all failed
    [-0.1, -0.1, -0.1, -0.1],  # all failed (format penalty), still zero variance
    [0.5, 0.5, 0.5, 0.5],      # same reward, mixed success flags: "other"
    [1.0, 0.0, 0.0, 0.0],      # varied
])
MIXED_SUCCESS = np.array([
    [1, 0, 1, 0],
    [1, 1, 1, 1],
    [0, 0, 0, 0],
    [0, 0, 0, 0],
    [1, 0, 1, 0],
    [1, 0, 0, 0],
])


def _strict_json(report) -> dict:
    return json.loads(json.dumps(report.to_dict(), allow_nan=False))


def test_all_zero_scores_have_no_signal():
    report = audit_from_scores(np.zeros((5, 4)), np.zeros((5, 4)))
    zv = report.zero_variance
    assert (zv["count"], zv["share"], zv["all_fail"], zv["all_success"], zv["other"]) == (5, 1.0, 5, 0, 0)
    assert math.isnan(report.rv_summary["dispersion"])
    assert report.rv_summary["mean"] == 0.0 and report.rv_summary["max"] == 0.0
    assert report.histogram["count"].tolist() == [5]
    linear = report.keep_ratios.query("strategy == 'top_p' and mode == 'linear' and value < 1")
    assert (linear.kept_ratio == 0).all()  # linear top-p skips an all-zero step (docs/method.md §4.3)
    assert report.suggestion.rule == "no_signal"
    assert report.suggestion.include_zero and report.suggestion.value == 1.0
    assert _strict_json(report)["rv_summary"]["dispersion"] is None


def test_all_successes_are_zero_variance_successes():
    report = audit_from_scores(np.ones((3, 8)), np.ones((3, 8)))
    zv = report.zero_variance
    assert (zv["all_success"], zv["all_fail"], zv["other"], zv["share"]) == (3, 0, 0, 1.0)
    assert set(report.groups.kind) == {"all_success"}
    assert report.suggestion.rule == "no_signal"


def test_mixed_table_zero_variance_split_and_rv_statistics():
    report = audit_from_scores(MIXED_SCORES, MIXED_SUCCESS, env_seeds=[10, 11, 12, 13, 14, 15])
    zv = report.zero_variance
    assert (zv["count"], zv["all_success"], zv["all_fail"], zv["other"]) == (4, 1, 2, 1)
    assert zv["share"] == pytest.approx(4 / 6)
    assert zv["all_fail_share"] == pytest.approx(2 / 6)
    assert report.groups.kind.tolist() == ["varied", "all_success", "all_fail", "all_fail",
                                           "other_zero_variance", "varied"]
    assert report.groups.seed.tolist() == [10, 11, 12, 13, 14, 15]

    rv = MIXED_SCORES.std(axis=1, ddof=1)
    rv[rv < 1e-9] = 0.0
    np.testing.assert_allclose(report.groups.reward_std, rv)
    np.testing.assert_allclose(report.groups.reward_mean, MIXED_SCORES.mean(axis=1))
    np.testing.assert_allclose(report.groups.success_rate, MIXED_SUCCESS.mean(axis=1))
    summary = report.rv_summary
    assert summary["dispersion"] == pytest.approx(rv.std() / rv.mean())
    assert summary["dispersion_nonzero"] == pytest.approx(rv[rv > 0].std() / rv[rv > 0].mean())
    assert summary["q50"] == pytest.approx(np.quantile(rv, 0.5))
    assert summary["q90"] == pytest.approx(np.quantile(rv, 0.9))
    assert (summary["min"], summary["max"]) == (0.0, pytest.approx(rv.max()))
    assert report.histogram["count"].sum() == 6
    assert report.histogram["count"].iloc[0] == 4  # the RV = 0 row
    assert report.histogram["share"].sum() == pytest.approx(1.0)


def test_keep_ratios_match_select_groups():
    report = audit_from_scores(MIXED_SCORES, MIXED_SUCCESS)
    keep = report.keep_ratios
    # every top-p value in both modes and both include_zero settings, plus top-k 0.25 / 0.5
    assert len(keep) == len(DEFAULT_TOP_P_VALUES) * 2 * 2 + 2 * 2
    assert set(keep["mode"][keep.strategy == "top_p"]) == {"linear", "softmax"}
    rv = report.groups.reward_std.to_numpy()
    for row in keep.itertuples():
        cfg = FilterConfig(strategy=row.strategy, value=row.value, top_p_mode=row.mode if row.strategy == "top_p" else "linear",
                           include_zero=row.include_zero)
        kept = select_groups(rv, cfg)
        assert row.kept_groups == len(kept), row
        assert row.kept_ratio == pytest.approx(len(kept) / 6), row
        assert row.rv_mass_kept == pytest.approx(rv[kept].sum() / rv.sum()), row


def test_per_step_keep_ratio_and_empty_steps():
    scores = np.array([[0, 0, 0, 0], [1, 1, 1, 1], [1, 0, 1, 0], [1, 0, 0, 0]], dtype=float)
    flags = scores.copy()
    report = audit_from_scores(scores, flags, step_groups=2)
    assert (report.meta["step_groups"], report.meta["num_steps"]) == (2, 2)
    rv = report.groups.reward_std.to_numpy()
    for row in report.keep_ratios.itertuples():
        cfg = FilterConfig(strategy=row.strategy, value=row.value, top_p_mode=row.mode if row.strategy == "top_p" else "linear",
                           include_zero=row.include_zero)
        per_step = [len(select_groups(rv[i:i + 2], cfg)) / 2 for i in (0, 2)]
        assert row.step_kept_ratio == pytest.approx(np.mean(per_step)), row
        assert row.step_empty_share == pytest.approx(np.mean([r == 0 for r in per_step])), row
    linear = report.keep_ratios.query("strategy == 'top_p' and mode == 'linear' and value == 0.9")
    assert (linear.step_empty_share == 0.5).all()  # the first step has only zero-variance groups
    with pytest.raises(ValueError, match="step_groups=5"):
        audit_from_scores(scores, flags, step_groups=5)


def test_suggestion_uniform_groups_means_no_filter():
    scores = np.tile([1.0, 0.0, 1.0, 0.0], (8, 1))
    report = audit_from_scores(scores, scores)
    assert report.rv_summary["dispersion"] == pytest.approx(0.0)
    s = report.suggestion
    assert (s.rule, s.value, s.include_zero) == ("uniform", 1.0, True)
    assert s.filter_config().is_noop


def test_suggestion_drop_zero_only_when_signal_groups_are_alike():
    scores = np.vstack([np.tile([1.0, 0.0, 1.0, 0.0], (4, 1)), np.zeros((4, 4))])
    report = audit_from_scores(scores, scores)
    s = report.suggestion
    assert (s.rule, s.value, s.include_zero) == ("drop_zero_only", 1.0, False)
    assert s.expected_kept_ratio == pytest.approx(0.5)
    assert select_groups(report.groups.reward_std.to_numpy(), s.filter_config()).tolist() == [0, 1, 2, 3]


def test_suggestion_spread_rvs_mean_top_p_09_linear():
    scores = np.array([[1, 0, 0, 0], [1, 1, 0, 0], [5, 0, 5, 0], [0, 0, 0, 0], [0.2, 0, 0, 0]], dtype=float)
    report = audit_from_scores(scores, (scores > 0).astype(float))
    assert report.rv_summary["dispersion_nonzero"] > LOW_DISPERSION
    s = report.suggestion
    assert (s.rule, s.strategy, s.value, s.top_p_mode, s.include_zero) == ("spread", "top_p", 0.9, "linear", False)
    kept = select_groups(report.groups.reward_std.to_numpy(), s.filter_config())
    assert s.expected_kept_ratio == pytest.approx(len(kept) / 5)
    assert "heuristic" in s.rationale


def test_suggestion_warns_when_few_groups_survive():
    scores = np.vstack([[10.0, 0.0, 10.0, 0.0], np.tile([0.01, 0.0, 0.0, 0.0], (7, 1))])
    report = audit_from_scores(scores, (scores > 1).astype(float))
    assert report.suggestion.rule == "spread"
    setting = "strategy == 'top_p' and mode == 'linear' and value == 0.9 and not include_zero"
    assert report.keep_ratios.query(setting).kept_groups.item() == 1
    assert any("1.0 of 8 groups" in w for w in report.suggestion.warnings)


def test_other_metrics_rank_by_their_score():
    lengths = np.arange(24, dtype=float).reshape(6, 4)
    report = audit_from_scores(MIXED_SCORES, MIXED_SUCCESS, metric="length", lengths=lengths)
    np.testing.assert_allclose(report.groups.score, lengths.mean(axis=1))
    top = report.keep_ratios.query("strategy == 'top_k' and value == 0.5 and include_zero")
    assert top.kept_groups.item() == 3
    # the suggestion is an RV filter whatever metric the table ranks by
    by_rv = audit_from_scores(MIXED_SCORES, MIXED_SUCCESS).suggestion
    assert report.suggestion == by_rv and report.suggestion.filter_config().metric == "reward_std"
    with pytest.raises(ValueError, match="lengths"):
        audit_from_scores(MIXED_SCORES, MIXED_SUCCESS, metric="length")


@pytest.mark.parametrize("kwargs, match", [
    (dict(scores=np.zeros((3, 1)), successes=np.zeros((3, 1))), r"samples >= 2.*\(3, 1\)"),
    (dict(scores=np.zeros((3, 4)), successes=np.zeros((3, 5))), r"\(3, 5\)"),
    (dict(scores=np.zeros((2, 4)), successes=np.full((2, 4), 0.5)), "0.5"),
    (dict(scores=np.full((2, 2), np.nan), successes=np.zeros((2, 2))), "non-finite"),
    (dict(scores=np.zeros((2, 4)), successes=np.zeros((2, 4)), metric="rv"), "'rv'"),
    (dict(scores=np.zeros((2, 4)), successes=np.zeros((2, 4)), top_p_values=(1.0, 0.8)), r"0\.9"),
    (dict(scores=np.zeros((2, 4)), successes=np.zeros((2, 4)), env_seeds=[1]), "1 entries"),
])
def test_bad_input_names_the_value(kwargs, match):
    with pytest.raises(ValueError, match=match):
        audit_from_scores(**kwargs)


def test_markdown_and_dict_structure():
    report = audit_from_scores(MIXED_SCORES, MIXED_SUCCESS, step_groups=3, meta={"env": "toy"})
    text = report.to_markdown()
    for heading in ("# Pre-flight filter audit", "## Zero-variance groups", "## Reward-std (RV) distribution",
                    "## Keep ratio per filter setting", "## Suggested filter (heuristic)"):
        assert heading in text
    assert report.suggestion.label in text and "env=toy" in text
    data = _strict_json(report)
    assert set(data) == {"meta", "zero_variance", "rv_summary", "histogram", "keep_ratios", "suggestion", "groups"}
    assert len(data["groups"]) == 6 and data["groups"][4]["kind"] == "other_zero_variance"
    assert data["suggestion"]["rule"] == report.suggestion.rule


def test_cli_rejects_unknown_env_and_bad_json(tmp_path):
    from ragen2.__main__ import build_parser, main

    args = build_parser().parse_args(["audit", "--policy", "tiny", "--env", "frozenlake"])
    assert (args.prompts, args.samples, args.seed, args.out) == (32, 16, 0, None)
    with pytest.raises(ValueError, match="'no_such_env'"):
        run_audit_command("tiny", "no_such_env", cache_dir=tmp_path)
    assert main(["audit", "--policy", "tiny", "--env", "frozenlake", "--env-kwargs", "{bad"]) == 2


def test_end_to_end_tiny_policy_on_frozenlake(tmp_path):
    torch = pytest.importorskip("torch")
    from ragen2 import envs
    from ragen2.config import EnvConfig, PolicyConfig, RolloutConfig
    from ragen2.policy import load_policy, make_tiny_policy

    if "frozenlake" not in envs.available():
        pytest.skip("frozenlake env not present")
    torch.set_num_threads(1)
    small = PolicyConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_positions=1024,
                         tokenizer_vocab_size=600)
    model, tokenizer = load_policy(make_tiny_policy(small, ["frozenlake"], tmp_path, seed=1), device="cpu")
    env_cfg = EnvConfig(name="frozenlake", kwargs={"success_rate": 1.0})
    rollout_cfg = RolloutConfig(env_groups=2, group_size=4, max_new_tokens=16, max_context_tokens=4096)
    run = dict(num_prompts=4, samples_per_prompt=4, seed=3)
    report = audit(model, tokenizer, env_cfg, rollout_cfg, **run)

    assert list(report.groups.columns[:5]) == ["group", "seed", "reward_mean", "reward_std", "success_rate"]
    assert report.groups.seed.tolist() == [rollout_cfg.train_seed + i for i in range(4)]
    assert report.meta["env"] == "frozenlake" and report.meta["temperature"] == rollout_cfg.temperature
    assert (report.meta["num_prompts"], report.meta["samples_per_prompt"], report.meta["step_groups"]) == (4, 4, 2)
    zv = report.zero_variance
    assert zv["count"] == zv["all_success"] + zv["all_fail"] + zv["other"] == int((report.groups.reward_std == 0).sum())
    assert report.histogram["count"].sum() == 4
    assert report.suggestion.rule in {"no_signal", "uniform", "drop_zero_only", "spread"}
    assert "## Suggested filter (heuristic)" in report.to_markdown()
    _strict_json(report)
    again = audit(model, tokenizer, env_cfg, rollout_cfg, **run)  # same seed, same report
    np.testing.assert_array_equal(again.groups.reward_mean, report.groups.reward_mean)
    np.testing.assert_array_equal(again.groups.reward_std, report.groups.reward_std)
