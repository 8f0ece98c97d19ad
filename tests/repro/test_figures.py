"""Each figure function renders synthetic data into a Figure with the expected axes; saves are stable."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from ragen2.repro import figures as F
from ragen2.repro.artifacts import save_figure
from ragen2.repro.figure_style import new_figure
from ragen2.repro.regimes import regime_points_from_toy
from ragen2.repro.tables import paper_reference_values

ENVS = ("sokoban", "frozenlake")
CONDITIONS = ("top_p", "top_k", "none")
SEEDS = (0, 1, 2)


RAW_KEY = re.compile(r"\b[a-z0-9_]+/[a-z0-9_.]+")  # a logged metric's key, e.g. collapse_first_turn/mi_zscore
CODE_NAMES = {"top_p", "top_k", "none", "keep_rate", "fixedmb", "frozenlake", "sokoban", "grpo", "ppo"}


def reader_texts(fig: Figure) -> list[str]:
    """Every axis label, panel title and legend entry a reader sees on ``fig`` (ticks aside)."""
    texts = [fig.get_suptitle()] if hasattr(fig, "get_suptitle") else []
    for ax in fig.axes:
        texts += [ax.get_xlabel(), ax.get_ylabel(), ax.get_title()]
        texts += [t.get_text() for t in (ax.get_legend().get_texts() if ax.get_legend() else [])]
    texts += [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    return [t for t in texts if t]


def _close(fig: Figure) -> None:
    """Check that ``fig`` reads without its caption (no raw metric key, no code name in a label, title or legend),
    then free it: every figure these tests draw goes through here."""
    for text in reader_texts(fig):
        assert not RAW_KEY.search(text), f"a raw metric key in {text!r}"
        assert not CODE_NAMES & set(re.split(r"[\s,:()=]+", text)), f"a code name in {text!r}"
    fig.clear()


def make_steps() -> pd.DataFrame:
    """Tidy per-step rows for 2 envs x 3 conditions x 3 seeds x 6 logged steps."""
    rng = np.random.default_rng(0)
    rows = []
    metrics = ("val/success", "rollout/response_length_mean", *F.DYNAMICS_METRICS)
    for env in ENVS:
        for cond in CONDITIONS:
            for seed in SEEDS:
                run_id = f"{env}__ppo__{cond}__s{seed}"
                for step in range(0, 60, 10):
                    for metric in metrics:
                        rows.append(
                            {
                                "run_id": run_id,
                                "env": env,
                                "algo": "ppo",
                                "condition": cond,
                                "seed": seed,
                                "step": step,
                                "metric": metric,
                                "value": float(rng.uniform()),
                            }
                        )
    return pd.DataFrame(rows)


def make_runs() -> pd.DataFrame:
    """One row per (slip rate, condition, seed) with final success and final MI/entropy."""
    rng = np.random.default_rng(1)
    rows = []
    for slip in (0.0, 0.02, 0.05, 0.2, 1.0):
        for cond in ("top_p", "none"):
            for seed in SEEDS:
                rows.append(
                    {
                        "slip_rate": slip,
                        "condition": cond,
                        "seed": seed,
                        "final_success": rng.uniform(),
                        "collapse_first_turn/mi_zscore": rng.normal(),
                        "collapse_first_turn/conditional_entropy_est": rng.uniform(0, 3),
                    }
                )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def steps() -> pd.DataFrame:
    return make_steps()


@pytest.fixture(scope="module")
def runs() -> pd.DataFrame:
    return make_runs()


def _axes_count(fig: Figure) -> int:
    return len(fig.axes)


def test_four_regimes_with_toy_and_checkpoints():
    points = pd.concat(
        [
            regime_points_from_toy(),
            pd.DataFrame(
                {
                    "label": ["step 0", "step 100"],
                    "cond_entropy": [1.2, 2.5],
                    "mi": [1.5, 0.3],
                    "source": "checkpoint",
                }
            ),
        ],
        ignore_index=True,
    )
    assert set(points.label[:4]) == {
        "diverse_reasoning",
        "template_collapse",
        "compressed_reasoning",
        "low_entropy_collapse",
    }
    fig = F.fig_four_regimes(points)
    assert isinstance(fig, Figure) and _axes_count(fig) == 1
    texts = {t.get_text() for t in fig.axes[0].texts}
    assert set(F.QUADRANTS) <= texts and "step 100" in texts
    legend = fig.axes[0].get_legend()  # below the axes, off the data: every kind of point and the dashed lines
    assert legend.get_bbox_to_anchor().y0 < fig.axes[0].get_window_extent().y0
    assert [t.get_text() for t in legend.get_texts()][-1] == "regime boundary (mid-range)"
    _close(fig)


def test_four_regimes_draws_into_given_ax():
    outer = new_figure(6, 3)
    ax_left, ax_right = outer.subplots(1, 2)
    fig = F.fig_four_regimes(regime_points_from_toy(), ax=ax_right)
    assert (
        fig is outer
        and _axes_count(fig) == 2
        and len(ax_left.collections) == 0
        and len(ax_right.collections) > 0
    )
    _close(fig)


def test_widget_frame_small_multiples():
    frames = pd.concat([regime_points_from_toy().assign(frame=d) for d in (0.0, 0.5, 1.0, 0.25)])
    fig = F.fig_entropy_vs_mi_widget_frame(frames, highlight=0.5, ncols=3)
    assert _axes_count(fig) == 4  # 2 x 3 grid, unused cells removed
    bold = [ax.title.get_fontweight() for ax in fig.axes]
    assert bold.count("bold") == 1
    _close(fig)


def test_grad_decomposition_rows_per_step():
    rows = []
    for algo in ("ppo", "grpo"):
        for step in (0, 40):
            for b in range(1, 7):
                rv = 0.0 if b == 1 else 0.05 * b
                rows.append(
                    {
                        "algo": algo,
                        "step": step,
                        "bucket": str(b),
                        "rv_mean": rv,
                        "rv_min": rv * 0.8,
                        "rv_max": rv * 1.2,
                        "task_norm": 2 * rv,
                        "reg_norm": 0.3,
                        "kl_norm": 0.1,
                        "entropy_norm": 0.2,
                        "snr": 1.0,
                    }
                )
            rows.append(
                {
                    "algo": algo,
                    "step": step,
                    "bucket": "all",
                    "rv_mean": 0.2,
                    "rv_min": 0,
                    "rv_max": 0.3,
                    "task_norm": 1,
                    "reg_norm": 0.3,
                    "kl_norm": 0.1,
                    "entropy_norm": 0.2,
                    "snr": 3,
                }
            )
    grad = pd.DataFrame(rows)
    fig = F.fig_grad_decomposition(grad)
    assert _axes_count(fig) == 2 * 3
    assert fig.axes[0].get_yscale() == "symlog"
    # 6 buckets (the 'all' row is ignored) per algorithm in the task panel
    assert len(fig.axes[1].lines[0].get_xdata()) == 6
    _close(fig)
    fig = F.fig_grad_decomposition(grad.drop(columns=["rv_min", "rv_max"]), steps=[40])
    assert _axes_count(fig) == 3
    _close(fig)
    with pytest.raises(ValueError, match=r"step\(s\) \[99\]"):
        F.fig_grad_decomposition(grad, steps=[99])


def test_grad_decomposition_whiskers_survive_rounding():
    # three runs with one equal RV: their pandas mean is an ulp below it, a -7e-18 whisker
    rv = 0.05773502691896258
    assert pd.Series([rv] * 3).mean() < rv
    grad = pd.DataFrame([{"algo": "ppo", "run": r, "step": 2, "bucket": "1", "rv_mean": rv, "rv_min": rv,
                          "rv_max": rv, "task_norm": 1.0, "reg_norm": 0.3} for r in range(3)])
    fig = F.fig_grad_decomposition(grad)
    lower, upper = fig.axes[0].containers[0].lines[2][0].get_segments()[0][:, 1]  # the whisker
    assert lower <= rv <= upper and upper - lower < 1e-15
    _close(fig)


def test_success_curves_and_output_length(steps):
    fig = F.fig_success_curves(steps)
    assert _axes_count(fig) == len(ENVS)
    assert fig.axes[0].get_title() == "FrozenLake\n(3 runs each)"
    legend = fig.legends[0]  # one legend, below the panels: the conditions, then what lines and bands are
    assert [t.get_text() for t in legend.get_texts()] == ["Top-p", "Top-k", "no filter", "line: mean over seeds",
                                                          "band: ± 1 std over seeds"]
    assert all(ax.get_legend() is None for ax in fig.axes)
    _close(fig)
    uneven = steps[~((steps.condition == "none") & (steps.seed == 0))]
    fig = F.fig_success_curves(uneven)
    assert fig.axes[0].get_title() == "FrozenLake\n(runs: Top-p 3, Top-k 3, no filter 2)"
    _close(fig)
    one_env = steps[steps.env == "sokoban"]
    fig = F.fig_success_curves(one_env, panel="algo")  # panels by algorithm: the title names the environment too
    assert fig.axes[0].get_title().startswith("Sokoban, ")
    assert "\n" in fig.axes[0].get_ylabel()  # two lines: no taller than the axes
    _close(fig)
    fig = F.fig_output_length(one_env)
    assert _axes_count(fig) == 1
    _close(fig)
    with pytest.raises(ValueError, match="'val/missing'"):
        F.fig_success_curves(steps, metric="val/missing")


def test_training_dynamics(steps):
    one_env = steps[steps.env == "sokoban"]
    fig = F.fig_training_dynamics(one_env)
    assert _axes_count(fig) == len(F.DYNAMICS_METRICS)
    _close(fig)
    with pytest.raises(ValueError, match="several envs"):
        F.fig_training_dynamics(steps)


def test_rv_quartiles():
    rng = np.random.default_rng(2)
    q = pd.DataFrame(
        [
            {"quartile": k, "seed": s, "step": st, "success": rng.uniform(), "mi": rng.uniform()}
            for k in (1, 2, 3, 4)
            for s in SEEDS
            for st in (0, 100)
        ]
    )
    fig = F.fig_rv_quartiles(q)
    assert _axes_count(fig) == 2
    _close(fig)
    fig = F.fig_rv_quartiles(q, hue="step")
    assert _axes_count(fig) == 2
    _close(fig)


def test_stochasticity(runs):
    fig = F.fig_stochasticity(runs)
    assert _axes_count(fig) == 2
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels == ["0%", "2%", "5%", "20%", "100%"]
    _close(fig)


def test_metric_correlations_with_paper_markers():
    ref = paper_reference_values()
    corr = pd.DataFrame(
        {
            "metric": [f"collapse_first_turn/{m}" for m in ref.metric] + ["actor/entropy"],
            "rho": [0.3, 0.1, 0.0, -0.2, -0.1, 0.05],
            "ci_low": [0.0, -0.2, -0.3, -0.5, -0.4, -0.3],
            "ci_high": [0.6, 0.4, 0.3, 0.1, 0.2, 0.4],
        }
    )
    fig = F.fig_metric_correlations(corr, paper=ref)
    assert _axes_count(fig) == 1
    markers = fig.axes[0].collections[-1].get_offsets()
    assert len(markers) == 5  # actor/entropy has no paper value
    assert sorted(np.asarray(markers)[:, 1].tolist()) == sorted(ref.paper_rho.tolist())
    _close(fig)


def test_scatter_vs_success(runs):
    """Axes labelled in words with units, filters by their names, the annotation in the legend, off the data."""
    fig = F.fig_mi_vs_success(runs, annotation="ρ = 0.1")
    ax = fig.axes[0]
    assert _axes_count(fig) == 1 and not ax.texts
    assert "/" not in ax.get_xlabel() and "_" not in ax.get_xlabel() + ax.get_ylabel()
    assert "(share of episodes)" in ax.get_ylabel() and "(z-score, no unit)" in ax.get_xlabel()
    entries = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "ρ = 0.1" in entries and "one dot: one run" in entries
    assert not {"top_p", "top_k", "none"} & set(entries)
    _close(fig)
    fig = F.fig_entropy_vs_success(runs, hue=None)
    assert _axes_count(fig) == 1
    _close(fig)


def test_reward_heatmaps_sorting_and_axes():
    rng = np.random.default_rng(3)
    rewards = pd.DataFrame(
        [
            {"phase": ph, "prompt": p, "rollout": r, "reward": float(rng.uniform() < 0.5)}
            for ph in ("early", "mid", "late")
            for p in range(8)
            for r in range(16)
        ]
    )
    matrix, rv, order = F.reward_matrix(rewards[rewards.phase == "early"])
    assert matrix.shape == (8, 16)
    assert np.all(np.diff(matrix.mean(axis=1)) <= 0) and np.all(np.diff(matrix, axis=1) <= 0)
    assert rv == pytest.approx(matrix.var(axis=1))
    fig = F.fig_reward_heatmaps(rewards)
    assert _axes_count(fig) == 2 * 3 + 1
    _close(fig)
    with pytest.raises(ValueError, match="holes"):
        F.reward_matrix(
            rewards[(rewards.phase == "early") & ~((rewards.prompt == 0) & (rewards.rollout == 3))]
        )


def test_intervention_sweeps():
    rng = np.random.default_rng(4)
    rows = []
    for sweep, values in (
        ("entropy coef", [0, 0.001, 0.01, 0.1]),  # the sweeps as the claim tests name them
        ("KL coef", [0, 0.001, 0.1]),
        ("top-p", [1.0, 0.9, 0.6, "nofilter"]),
    ):
        for v in values:
            for s in SEEDS:
                rows.append(
                    {
                        "sweep": sweep,
                        "value": v,
                        "seed": s,
                        "final_success": rng.uniform(),
                        "final_mi": rng.uniform(),
                    }
                )
    sweeps = pd.DataFrame(rows)
    fig = F.fig_intervention_sweeps(sweeps)
    assert _axes_count(fig) == 6
    ticks = [t.get_text() for t in fig.axes[2].get_xticklabels()]
    assert ticks == ["0.6", "0.9", "1", "nofilter"]
    _close(fig)
    fig = F.fig_intervention_sweeps(sweeps, value_order={"top-p": ["nofilter", 1.0, 0.9, 0.6]})
    assert [t.get_text() for t in fig.axes[2].get_xticklabels()] == ["nofilter", "1", "0.9", "0.6"]
    _close(fig)


def test_missing_columns_are_named():
    with pytest.raises(ValueError, match=r"missing column\(s\) \['mi'\]"):
        F.fig_four_regimes(pd.DataFrame({"cond_entropy": [1.0], "source": ["x"]}))


def test_figure_saves_byte_identically(tmp_path, steps):
    paths = [
        save_figure(
            F.fig_success_curves(steps[steps.env == "sokoban"]),
            "fig_success",
            tmp_path / d,
            caption="Curves.",
        )
        for d in ("a", "b")
    ]
    for kind in ("png", "pdf"):
        assert paths[0][kind].read_bytes() == paths[1][kind].read_bytes()


def test_style_is_not_left_active():
    import matplotlib as mpl

    before = mpl.rcParams["axes.spines.top"], mpl.rcParams["font.size"]
    F.fig_four_regimes(regime_points_from_toy())
    assert (mpl.rcParams["axes.spines.top"], mpl.rcParams["font.size"]) == before


def test_learning_screen_names_its_two_readings_in_a_legend_off_the_data():
    table = pd.DataFrame({"env": ["frozenlake", "frozenlake", "sokoban"], "turns": [1, 1, 1],
                          "algo": ["grpo", "grpo", "ppo"], "start": [23.6, 23.6, 23.6], "gain": [13.7, 11.1, -10.7],
                          "gain_se": [2.7, 2.6, 1.9], "gain_mid": [17.6, 22.7, 4.5]})
    fig = F.fig_learning_screen(table, threshold=15.0, steps=(100, 200))
    legend = fig.axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == [
        "step 200, end of training\n(bar: 95 % interval)", "step 100, same run\n(thin line joins the two)", "no change"]
    assert legend.get_title().get_text() == "one pair of marks per seed"
    assert legend.get_bbox_to_anchor().x0 > fig.axes[0].get_window_extent().x1  # right of the axes, off the data
    assert [t.get_text().split("\n")[0] for t in fig.axes[0].get_xticklabels()] == ["frozenlake", "sokoban"]
    _close(fig)
    fig = F.fig_learning_screen(table, threshold=15.0)  # without step numbers: the readings by name
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()][:2] == [
        "end of training\n(bar: 95 % interval)", "midpoint, same run\n(thin line joins the two)"]
    _close(fig)


def test_curve_pair_names_each_filter():
    curve = pd.DataFrame({"step": [0, 25, 50], "val/success": [0.2, 0.3, 0.4]})
    fig = F.fig_curve_pair({"none": curve, "top_p": curve}, ylabel="validation success (share)", title="FrozenLake")
    assert [t.get_text() for t in fig.legends[0].get_texts()][:2] == ["Top-p", "no filter"]
    _close(fig)
