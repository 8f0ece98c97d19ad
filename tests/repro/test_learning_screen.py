"""The learning-regime screen: its profile, the paired gains, the threshold and the regimes."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragen2.evaluate import Evaluation
from ragen2.repro import learning_screen as ls

REPO = Path(__file__).resolve().parents[2]


def _report(successes: list[int], seeds: list[int] | None = None) -> Evaluation:
    seeds = seeds or list(range(123, 123 + len(successes)))
    return Evaluation.from_dict({"policy": "p", "temperature": 0.5, "env_seeds": seeds, "sampling_seeds": [0],
                                 "successes": [successes]})


def test_profile_runs_each_setting_with_ppo_and_grpo_from_its_own_warm_start():
    profile = ls.build()
    extra = dict(ls.CONFIRM_SEEDS)
    for key, seeds in ls.FRESH_SEEDS.items():
        extra[key] = extra.get(key, ()) + seeds
    expected = [f"{c.env}__{a}__none__screen{c.turns}__s{s}" for c in ls.CELLS for a in ls.ALGOS
                for s in (*ls.SCREEN_SEEDS, *extra.get((c.env, c.turns, a), ()))]
    assert sorted(profile.runs) == sorted(expected)
    assert sorted(ls.build(smoke=True).runs) == sorted(f"{c.env}__{a}__none__screen{c.turns}__s0" for c in ls.CELLS
                                                       for a in ls.ALGOS)  # the smoke profile: one seed per cell
    for cell in ls.CELLS:
        cfg = profile.config(f"{cell.env}__ppo__none__screen{cell.turns}__s0")
        assert cfg.warm_start.steps == cell.sft_steps and cfg.rollout.max_turns == cell.turns
        assert (cfg.rollout.group_size, cfg.rollout.env_groups, cfg.trainer.steps) == (16, 8, ls.STEPS)
        assert cfg.filter.value == 1.0 and cfg.filter.loss_scaling == "none" and cfg.trainer.actor_lr == 1e-4
        assert cfg.trainer.keep_every == ls.MIDPOINT and cfg.env.name == cell.env
    keys = {profile.warm_start_keys[rid] for rid in profile.runs}
    assert len(keys) == len(ls.CELLS)  # PPO and GRPO of a setting share its warm start
    assert {c.turns for c in ls.CUT_CELLS} == {5} and "Cut" in ls.CUT_CELLS[0].why


def test_params_yaml_carries_the_evaluation_settings():
    import yaml

    data = yaml.safe_load(ls.params_yaml(ls.build()))
    assert data["pipeline"]["evaluate"] == {"episodes": ls.EPISODES, "midpoint": ls.MIDPOINT}
    assert data["pipeline"]["runs_root"] == ls.RUNS_ROOT and "realization" not in data["pipeline"]
    smoke = yaml.safe_load(ls.params_yaml(ls.build(smoke=True)))
    assert smoke["pipeline"]["evaluate"] == {"episodes": 8, "midpoint": 1} and smoke["base"]["trainer"]["steps"] == 2
    assert (REPO / ls.PARAMS).read_text() == ls.params_yaml(ls.build())  # no drift: the committed file is generated


def test_paired_gain_is_the_mean_difference_in_points_with_its_standard_error():
    gain, se = ls.paired_gain(_report([0, 0, 1, 1]), _report([1, 0, 1, 1]))
    assert gain == pytest.approx(25.0) and se == pytest.approx(25.0)


def test_screen_table_reads_the_three_evaluations_and_flags_the_threshold():
    evals = {"frozenlake__ppo__none__screen1__s0": {"initial": _report([0, 0, 0, 1]), "midpoint": _report([1, 0, 0, 1]),
                                                    "final": _report([1, 1, 0, 1])},
             "sokoban__grpo__none__screen1__s0": {"initial": _report([0, 1, 0, 0]), "midpoint": _report([0, 1, 0, 0]),
                                                  "final": _report([0, 1, 0, 0])}}
    table = ls.screen_table(evals, {"sokoban__grpo__none__screen1__s0": 12.0})
    fl = table.set_index("run").loc["frozenlake__ppo__none__screen1__s0"]
    assert (fl["start"], fl["midpoint"], fl["final"], fl["gain"], fl["gain_mid"]) == (25.0, 50.0, 75.0, 50.0, 25.0)
    assert bool(fl["learns"]) and fl["turns"] == 1 and fl["episodes"] == 4
    sok = table.set_index("run").loc["sokoban__grpo__none__screen1__s0"]
    assert sok["gain"] == 0.0 and not bool(sok["learns"]) and sok["train_s"] == 12.0
    evals["sokoban__grpo__none__screen1__s0"]["final"] = _report([0, 1, 0, 0], seeds=[1, 2, 3, 4])
    with pytest.raises(ValueError, match="not evaluated on the same seeds"):
        ls.screen_table(evals)


def test_a_regime_needs_three_seeds_whose_mean_gain_reaches_the_threshold_and_each_ten_points():
    import pandas as pd

    def rows(env, algo, gains, mids=None):
        mids = mids or [0.0] * len(gains)
        return [{"env": env, "turns": 1, "algo": algo, "seed": s, "start": 20.0, "gain": g, "gain_mid": m}
                for s, (g, m) in enumerate(zip(gains, mids))]

    table = pd.DataFrame(rows("frozenlake", "ppo", [20.0, 16.0, 11.0]) + rows("sokoban", "ppo", [30.0, 25.0, 5.0])
                         + rows("sokoban", "grpo", [18.0])
                         + rows("frozenlake", "grpo", [15.0, 14.0, 14.0, 0.0, 0.0, 0.0],
                                [21.0, 21.0, 21.0, 16.0, 15.0, 14.0]))
    confirm = {("frozenlake", 1, "ppo"): (1, 2), ("sokoban", 1, "ppo"): (1, 2), ("frozenlake", 1, "grpo"): (1, 2)}
    fresh = {("frozenlake", 1, "grpo"): (3, 4, 5)}
    out = ls.regimes(table, confirm, fresh).set_index(["env", "algo", "reading"])
    end, mid = f"step {ls.STEPS}, screened and confirming seeds", f"step {ls.MIDPOINT}, fresh seeds"
    assert bool(out.loc[("frozenlake", "ppo", end), "regime"])
    assert not bool(out.loc[("sokoban", "ppo", end), "regime"])  # one seed under 10 points
    grpo = out.loc[("sokoban", "grpo", end)]
    assert bool(grpo["screen_passed"]) and not bool(grpo["regime"]) and grpo["seeds"] == 1  # not confirmed
    fl = out.loc[("frozenlake", "grpo", end)]
    assert fl["seeds"] == 3 and fl["gain_mean"] == pytest.approx(14.333, abs=1e-3) and not bool(fl["regime"])
    fresh_row = out.loc[("frozenlake", "grpo", mid)]  # seeds 3-5 only, read at the midpoint: mean 15, each >= 10
    assert fresh_row["seeds"] == 3 and fresh_row["gain_mean"] == pytest.approx(15.0) and bool(fresh_row["regime"])
    found = ls.outcome(ls.regimes(table, confirm, fresh))
    assert ("frozenlake", 1, "grpo", mid) in found.regimes and found.best[:3] == ("sokoban", 1, "ppo")
    assert found.note().startswith("learning screen (make screen): learning regime(s): frozenlake 1-turn GRPO (step 100")
    none = ls.outcome(ls.regimes(table.assign(gain=0.0, gain_mid=0.0), confirm, fresh))
    assert none.regimes == () and "no learning regime at CPU scale" in none.note()


def test_the_recorded_outcome_is_the_committed_screens():
    """C1's evidence cites :data:`ls.OUTCOME`; it must say what the committed regimes table says."""
    import pandas as pd

    table = pd.read_csv(REPO / "paper_figures" / "table_learning_regimes.csv")
    assert ls.OUTCOME == ls.outcome(table)
