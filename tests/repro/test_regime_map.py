"""The regime map: its design, its runs and params file, and the map read from synthetic runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from ragen2.repro import collapse_criteria as cc
from ragen2.repro import regime_map as rm
from ragen2.repro.figures import fig_regime_curves, fig_regime_map, fig_regime_trajectories
from ragen2.repro.run_ids import parse_run_id

REPO = Path(__file__).resolve().parents[2]


def test_design_is_a_balanced_half_fraction_whose_last_factor_is_the_product_of_the_others():
    d = rm.design()
    signs = d[[f"{f.name}_sign" for f in rm.FACTORS]].to_numpy()
    assert len(d) == 2 ** (len(rm.FACTORS) - 1) == 8
    assert (signs.sum(axis=0) == 0).all()  # each factor at each level in half the cells
    assert (signs.T @ signs == len(d) * np.eye(len(rm.FACTORS))).all()  # main effects orthogonal
    assert (signs[:, -1] == signs[:, :-1].prod(axis=1)).all()
    assert len({tuple(r) for r in signs}) == len(d)
    for f in rm.FACTORS:
        assert set(d[f.name]) == set(f.levels)


def test_build_pairs_every_cell_with_and_without_the_filter():
    profile = rm.build()
    map_runs = [r for r in profile.runs if parse_run_id(r)["study"] == rm.STUDY]
    assert len(map_runs) == 2 * len(rm.design())
    cells = rm.design().set_index("cell")
    for rid in map_runs:
        cfg = profile.config(rid)
        parts = parse_run_id(rid)
        cell = cells.loc[int(parts["study_value"])]
        assert parts["study"] == rm.STUDY and cfg.trainer.algo == "grpo" and cfg.trainer.steps == rm.STEPS
        assert cfg.warm_start.steps == cell["sft_steps"] and cfg.warm_start.template_fraction == cell["template_fraction"]
        assert cfg.trainer.entropy_coef == cell["entropy_coef"] and cfg.trainer.actor_lr == cell["actor_lr"]
        assert cfg.trainer.entropy_scope == "reasoning" and cfg.trainer.kl_coef == 0.0
        if parts["filter_tag"] == "none":
            assert cfg.filter.value == 1.0 and cfg.filter.include_zero
            twin = profile.config(rid.replace("__none__", "__topp0p9__"))
            assert (twin.filter.value, twin.filter.top_p_mode, twin.filter.include_zero) == (0.9, "linear", False)
            assert twin.seed == cfg.seed and twin.warm_start == cfg.warm_start and twin.trainer == cfg.trainer
    # one warm start per (SFT steps, template share), under the map's own cache
    assert len(profile.warm_starts()) == 4
    assert all(w["path"].startswith(f"{rm.CACHE_DIR}/warm_start/") for w in profile.warm_starts().values())


def test_committed_params_file_is_what_the_profile_writes():
    assert (REPO / rm.PARAMS).read_text() == rm.params_yaml(rm.build())


def test_params_name_the_pipeline_paths():
    pipeline = rm.params(rm.build())["pipeline"]
    assert pipeline["runs_root"] == rm.RUNS_ROOT and pipeline["dvc_file"] == rm.DVC_FILE
    assert "realization" not in pipeline and list(pipeline["notebooks"]) == ["regime_map"]


def test_smoke_build_keeps_the_design_with_smoke_sizes():
    profile = rm.build(smoke=True)
    assert len(profile.runs) == 16 + 4 and len(profile.warm_starts()) == 4  # one confirming pair per seed set
    assert {profile.config(r).trainer.steps for r in profile.runs} == {2}


# ---------------------------------------------------------------------------------------------
# The map, read from synthetic runs
# ---------------------------------------------------------------------------------------------
STEPS = np.arange(0, 201, 10)


def _series(first_half, second_half):
    """A metric flat-ish over steps 0-100 (first_half: start, mid) and then moving to second_half's value."""
    a, b = first_half
    c = second_half
    return np.where(STEPS <= 100, a + (b - a) * STEPS / 100, b + (c - b) * (STEPS - 100) / 100)


def _tidy(rid, metrics, condition, seed=0):
    rows = [{"run_id": rid, "condition": condition, "seed": seed, "step": int(s), "metric": m, "value": float(v)}
            for m, values in metrics.items() for s, v in zip(STEPS, values, strict=True)]
    return rows


def synthetic_map(collapsing_cell=3):
    """Two cells of the map: ``collapsing_cell``'s no-filter run collapses after step 100 (template), its Top-p twin
    holds; cell 0 is stable in both. Runs and steps carry ``condition`` and ``seed`` as ``read_runs`` labels them."""
    d = rm.design().set_index("cell")
    runs, rows = [], []
    for cell in (0, collapsing_cell):
        for cond in ("none", "top_p"):
            tag = "none" if cond == "none" else "topp0p9"
            rid = f"frozenlake__grpo__{tag}__map{cell}__s0"
            collapse = cell == collapsing_cell and cond == "none"
            metrics = {
                cc.MI: _series((0.6, 0.9), 0.3 if collapse else 0.95),
                cc.RETRIEVAL: _series((0.8, 0.9), 0.5 if collapse else 0.92),
                cc.ENTROPY: _series((0.4, 0.4), 0.45),
                cc.SHARED_PREFIX: _series((0.1, 0.1), 0.5 if collapse else 0.1),
                cc.UNGROUNDED: _series((0.1, 0.1), 0.1),
                cc.LENGTH: _series((28, 28), 20 if collapse else 28),
                "val/success": _series((0.6, 0.6), 0.5 if collapse else 0.7),
                "filter/zero_variance_count": _series((4, 4), 6),
            }
            rows += _tidy(rid, metrics, cond)
            runs.append({"run_id": rid, "condition": cond, "seed": 0, **{f.path: d.loc[cell, f.name] for f in rm.FACTORS}})
    return pd.DataFrame(runs), pd.DataFrame(rows)


def test_map_table_classifies_each_horizon_and_pairs_the_filter():
    runs, steps = synthetic_map()
    warm = pd.DataFrame([{"sft_steps": 600, "template_fraction": 0.3, "greedy_success": 0.6},
                         {"sft_steps": 600, "template_fraction": 0.6, "greedy_success": 0.55}])
    table = rm.map_table(runs, steps, warm).set_index(["cell", "horizon"])
    assert (table.loc[(3, 100), "regime_none"], table.loc[(3, 200), "regime_none"]) == ("stable", "template_collapse")
    assert table.loc[(3, 200), "regime_top_p"] == "stable" and table.loc[(0, 200), "regime_none"] == "stable"
    assert table.loc[(3, 200), "mi_change_none"] < -0.2 < 0 < table.loc[(3, 100), "mi_change_none"]
    assert table.loc[(3, 200), "mi_diff"] > 0.5 and table.loc[(3, 200), "success_diff"] > 0.1
    assert table.loc[(0, 200), "zero_variance_share_none"] == pytest.approx(np.mean(_series((4, 4), 6)[-20:]) / 8)
    assert table.loc[(0, 200), "ws_greedy_success"] == 0.6 and table.loc[(3, 200), "ws_greedy_success"] == 0.55
    assert table.loc[(3, 200), "label"] == rm.cell_label(rm.design().set_index("cell").loc[3])


def test_factor_effects_are_high_minus_low_means():
    table = pd.DataFrame({"horizon": 200, "mi_change_none": [0.0, 1.0, 2.0, 4.0],
                          **{f.name: [f.levels[0], f.levels[1], f.levels[0], f.levels[1]] for f in rm.FACTORS}})
    effects = rm.factor_effects(table)
    assert effects["effect"].tolist() == [1.5] * len(rm.FACTORS) and set(effects["horizon"]) == {200}


def test_example_pair_is_a_template_collapse_before_a_larger_fall_of_another_kind():
    runs, steps = synthetic_map(collapsing_cell=5)
    table = rm.map_table(runs, steps)
    assert rm.example_pair(table, runs) == ("frozenlake__grpo__none__map5__s0", "frozenlake__grpo__topp0p9__map5__s0")
    last = table["horizon"] == table["horizon"].max()
    table.loc[last & (table["cell"] == 0), ["mi_drop_none", "regime_none"]] = [5.0, "noise"]
    assert rm.example_pair(table, runs)[0] == "frozenlake__grpo__none__map5__s0"
    table.loc[last & (table["cell"] == 5), "regime_none"] = "stable"  # no collapse anywhere: the largest fall
    assert rm.example_pair(table, runs)[0] == "frozenlake__grpo__none__map0__s0"


def test_summary_counts_regimes_per_horizon():
    runs, steps = synthetic_map()
    text = rm.summary(rm.map_table(runs, steps))
    assert "After 100 steps the no-filter runs of the 2 cells are: 2 stable" in text
    assert "After 200 steps" in text and "1 template collapse" in text and "(cells 3)" in text


def test_cell_steps_smooths_and_labels_each_run():
    runs, steps = synthetic_map()
    points = rm.cell_steps(steps)
    one = points[points["run_id"] == "frozenlake__grpo__none__map3__s0"].sort_values("step")
    raw = _series((0.6, 0.9), 0.3)
    assert one["mi"].iloc[-1] == pytest.approx(raw[-3:].mean()) and one["mi"].iloc[0] == pytest.approx(raw[0])
    assert set(points["condition"]) == {"none", "top_p"} and set(points["cell"]) == {0, 3}


def test_factors_table_names_every_factor_and_key():
    t = rm.factors_table()
    assert t["factor"].tolist() == [f.name for f in rm.FACTORS] and t["config key"].tolist()[0] == "warm_start.steps"


# ---------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------
def test_map_figures_draw_from_the_map_tables():
    runs, steps = synthetic_map()
    table = rm.map_table(runs, steps)
    fig = fig_regime_map(table)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    assert any("template collapse" in t.get_text() for t in fig.axes[0].texts)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]  # every mark and every regime named is explained
    assert "0: no change, no difference" in legend and any(t.startswith("template collapse: MI") for t in legend)
    assert not any(ax.get_legend() for ax in fig.axes)  # no legend over the data
    assert "SFT steps" in rm.cell_label(rm.design().iloc[0]) and "tmpl" not in rm.cell_label(rm.design().iloc[0])
    fig = fig_regime_trajectories(rm.cell_steps(steps), labels={0: "zero", 3: "three"})
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == ["zero", "three"]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]  # every mark explained on the figure
    assert legend[-3:] == ["first reading", "last reading", "no filter's first reading"] and "no filter" in legend
    fig = fig_regime_curves(rm.with_cells(steps), cc.LENGTH, ylabel="tokens")
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 2


def test_map_figure_names_a_missing_column():
    with pytest.raises(ValueError, match="mi_diff"):
        fig_regime_map(pd.DataFrame({"label": ["a"], "cell": [0], "horizon": [200], "mi_change_none": [0.1],
                                     "regime_none": ["stable"]}))


# ---------------------------------------------------------------------------------------------
# The pipeline file
# ---------------------------------------------------------------------------------------------
def test_pipeline_declares_every_run_warm_start_and_notebook_output():
    import re

    import nbformat
    import yaml

    dvc = yaml.safe_load((REPO / rm.DVC_FILE).read_text())["stages"]
    assert set(dvc) == {"warmstart", "train", "notebook", "bundle", "publish"}
    assert all(s.get("wdir", dvc[k]["do"].get("wdir") if "do" in dvc[k] else None) == ".." for k, s in dvc.items())
    notebook = dvc["notebook"]
    outs = [next(iter(o)) if isinstance(o, dict) else o for o in notebook["outs"]]
    source = "\n".join(c.source for c in nbformat.read(REPO / "notebooks" / f"{rm.NOTEBOOK}.ipynb", as_version=4).cells
                       if c.cell_type == "code")
    names = set(re.findall(r'save_(?:figure|table)\([^"]*"([a-z0-9_]+)"', source))
    assert names and all(any(o.startswith(f"paper_figures/{n}.") for o in outs) for n in names)
    assert f"notebooks/{rm.NOTEBOOK}.ipynb" in notebook["deps"] and rm.RUNS_ROOT in notebook["deps"]


# ---------------------------------------------------------------------------------------------
# The confirming cell
# ---------------------------------------------------------------------------------------------
def test_build_adds_the_confirming_seed_sets_on_the_confirming_cell():
    profile = rm.build()
    confirm = [r for r in profile.runs if parse_run_id(r)["study"] == rm.CONFIRM_STUDY]
    seeds = sorted({parse_run_id(r)["seed"] for r in confirm})
    assert seeds == sorted(s for group in rm.CONFIRM_SEED_SETS.values() for s in group) and 0 not in seeds
    assert not set(rm.CONFIRM_SEED_SETS["A"]) & set(rm.CONFIRM_SEED_SETS["B"])
    cell = rm.design().set_index("cell").loc[rm.CONFIRM_CELL]
    for rid in confirm:
        cfg = profile.config(rid)
        assert parse_run_id(rid)["study_value"] == rm.CONFIRM_CELL and cfg.seed == parse_run_id(rid)["seed"]
        assert (cfg.warm_start.steps, cfg.trainer.entropy_coef, cfg.trainer.actor_lr) == (
            cell["sft_steps"], cell["entropy_coef"], cell["actor_lr"])


def _confirm_rows(regimes_none, regimes_top, mi_none, mi_top):
    rows = []
    for name, seeds in rm.CONFIRM_SEED_SETS.items():
        for i, seed in enumerate(seeds):
            rows.append({"run_id": f"n{seed}", "cell": 5, "seed": seed, "seed_set": name, "condition": "none",
                         "regime": regimes_none[name][i], "final_mi": mi_none[name][i]})
            rows.append({"run_id": f"t{seed}", "cell": 5, "seed": seed, "seed_set": name, "condition": "top_p",
                         "regime": regimes_top[name][i], "final_mi": mi_top[name][i]})
    return pd.DataFrame(rows)


TC, ST = "template_collapse", "stable"


def test_confirm_verdict_agrees_when_the_filter_prevents_the_collapse_in_both_sets():
    table = _confirm_rows({"A": [TC, TC, TC, ST], "B": [TC, TC, ST, ST]}, {"A": [ST] * 4, "B": [ST, ST, ST, TC]},
                          {"A": [0.3, 0.35, 0.32, 0.5], "B": [0.31, 0.3, 0.4, 0.45]},
                          {"A": [0.8, 0.9, 0.85, 0.95], "B": [0.82, 0.9, 0.88, 0.8]})
    out = rm.confirm_verdicts(table)
    assert [out["sets"][k]["verdict"] for k in ("A", "B")] == ["agree", "agree"] and out["claim"].verdict == "agree"
    assert "template collapse in 3/4 no-filter and 0/4 Top-p runs" in out["claim"].evidence


def test_confirm_verdict_disagrees_when_top_p_collapses_too_and_is_fragile_when_the_sets_differ():
    same = {"A": [0.3, 0.35, 0.32, 0.5], "B": [0.31, 0.3, 0.4, 0.45]}
    table = _confirm_rows({"A": [TC] * 4, "B": [TC] * 4}, {"A": [TC] * 4, "B": [TC, TC, ST, ST]}, same, same)
    out = rm.confirm_verdicts(table)
    assert out["claim"].verdict == "disagree"
    table = _confirm_rows({"A": [TC] * 4, "B": [ST] * 4}, {"A": [TC] * 4, "B": [ST] * 4}, same, same)
    out = rm.confirm_verdicts(table)
    assert (out["sets"]["A"]["verdict"], out["sets"]["B"]["verdict"]) == ("disagree", "inconclusive")
    assert out["claim"].verdict == "inconclusive" and "fragile" in out["claim"].evidence


def test_confirm_table_reads_the_confirming_runs_only():
    runs, steps = synthetic_map()
    renamed = {r: r.replace("__map3__s0", "__confirm3__s1") for r in runs["run_id"] if "__map3__" in r}
    extra_runs = runs[runs["run_id"].isin(renamed)].assign(run_id=lambda f: f["run_id"].map(renamed), seed=1)
    extra_steps = steps[steps["run_id"].isin(renamed)].assign(run_id=lambda f: f["run_id"].map(renamed), seed=1)
    runs = pd.concat([runs, extra_runs], ignore_index=True)
    steps = pd.concat([steps, extra_steps], ignore_index=True)
    table = rm.confirm_table(runs, steps)
    assert sorted(table["run_id"]) == ["frozenlake__grpo__none__confirm3__s1", "frozenlake__grpo__topp0p9__confirm3__s1"]
    assert set(table["seed_set"]) == {"A"} and table.set_index("condition").loc["none", "regime"] == TC
    assert len(rm.map_table(runs, steps)) == 4  # the map ignores the confirming runs (2 cells x 2 horizons)
