"""The paper's tables from run results, and the paper's own numbers (package data) to set beside them.

- :func:`main_table`: rows = algorithm (PPO, DAPO, GRPO, Dr. GRPO), columns = env (+ Average); each
  cell holds the no-filter success and the gain from filtering (paired by seed), mean ± std over
  seeds and the seed counts, in percent.
- :func:`main_table_vs_paper`: the same numbers in long form with the paper's beside them.
- :func:`paper_main_table`, :func:`paper_reference_values`: the paper's main table and its C2
  Spearman values, read from ``ragen2/repro/data/`` (facts copied from the paper, with their header);
  :func:`paper_gain`: the paper's mean Top-p gain over some of its cells (the effect C1 is held to).
- :func:`learning_table`: validation success at the warm start and at the end of training, per cell.
"""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from ragen2.repro.runs import SUCCESS_METRIC, start_end_values
from ragen2.repro.stats import pair_by_seed

ALGO_LABELS = {"ppo": "PPO", "dapo": "DAPO", "grpo": "GRPO", "dr_grpo": "Dr. GRPO"}
"""``trainer.algo`` -> the paper's row label (also the row order)."""
ENV_LABELS = {
    "sokoban": "Sokoban",
    "frozenlake": "FrozenLake",
    "metamathqa": "MetaMathQA",
    "countdown": "Countdown",
    "webshop": "WebShop",
    "searchqa": "SearchQA",
    "deepcoder": "DeepCoder",
    "bandit": "Bandit",
}
"""Registry env name -> the paper's column label (also the column order)."""
PAPER_VARIANT_ALGO = {"PPO Qwen2.5-3B": "PPO", "DAPO": "DAPO", "GRPO": "GRPO", "Dr. GRPO": "Dr. GRPO"}
"""Rows of the paper's table that are the algorithm comparison (all Qwen2.5-3B)."""
STATS = ("no_filter_mean", "no_filter_std", "n_no_filter", "gain_mean", "gain_std", "n_pairs")
"""The numbers in each cell of :func:`main_table`."""
AVERAGE = "Average"


def _data_path(name: str) -> Path:
    return Path(str(resources.files("ragen2.repro") / "data" / name))


def paper_main_table(path: str | Path | None = None) -> pd.DataFrame:
    """The paper's main table (``group, variant, env, no_filter, gain``; percent / points)."""
    path = Path(path) if path is not None else _data_path("paper_main_table.csv")
    table = pd.read_csv(path, comment="#")
    expected = ["group", "variant", "env", "no_filter", "gain"]
    if list(table.columns) != expected:
        raise ValueError(f"{path}: columns must be {expected}, got {list(table.columns)}")
    return table


def paper_reference_values() -> pd.DataFrame:
    """The paper's C2 Spearman rho of each metric vs final success (``metric, label, paper_rho``).

    ``metric`` is the proxy name of :func:`ragen2.metrics.mi_proxies`, logged per step as
    ``collapse_<family>/<metric>``.
    """
    return pd.read_csv(_data_path("paper_spearman_c2.csv"), comment="#")


def _mean_std(values: np.ndarray) -> tuple[float, float]:
    if values.size == 0:
        return math.nan, math.nan
    return float(values.mean()), float(values.std(ddof=1)) if values.size > 1 else math.nan


def _cell(no_filter: pd.Series, pairs: pd.DataFrame, scale: float) -> dict[str, float]:
    nf_mean, nf_std = _mean_std(no_filter.to_numpy(float) * scale)
    gain_mean, gain_std = _mean_std(pairs["diff"].to_numpy(float) * scale)
    return {
        "no_filter_mean": nf_mean,
        "no_filter_std": nf_std,
        "n_no_filter": int(no_filter.size),
        "gain_mean": gain_mean,
        "gain_std": gain_std,
        "n_pairs": int(len(pairs)),
    }


def _ordered(values, labels: dict[str, str]) -> list[str]:
    known = [k for k in labels if k in set(values)]
    return known + sorted(set(values) - set(known))


def main_table(
    runs_df: pd.DataFrame,
    *,
    value: str = "final_success",
    filtered: str = "top_p",
    baseline: str = "none",
    scale: float = 100.0,
    average: bool = True,
) -> pd.DataFrame:
    """The paper's main table from one row per run.

    For each (algorithm, env): the no-filter success (mean ± std over the baseline runs) and the
    gain from filtering (mean ± std of ``filtered - baseline`` over seeds run in both conditions).
    The ``Average`` column averages each seed over all envs shown, using only seeds that have every
    env (baseline runs for the no-filter part, pairs for the gain). Runs whose ``value`` is NaN are
    left out.

    Args:
        runs_df: columns ``algo, env, condition, seed`` and ``value`` (from ``load_runs``).
        value: the success column (fractions in [0, 1] with ``scale=100`` -> percent).
        filtered, baseline: the two ``condition`` labels compared.
        scale: multiplies every success value (100: fraction -> percent).
        average: add the ``Average`` column.

    Returns:
        Index ``algorithm`` (PPO, DAPO, GRPO, Dr. GRPO, then others), columns MultiIndex
        ``(env label, stat)`` with stats :data:`STATS`.
    """
    missing = [c for c in ("algo", "env", "condition", "seed", value) if c not in runs_df.columns]
    if missing:
        raise ValueError(f"runs_df lacks column(s) {missing}")
    data = runs_df.dropna(subset=[value])
    data = data[data["condition"].isin([filtered, baseline])]
    if data.empty:
        raise ValueError(f"no runs with a {value!r} under condition {filtered!r} or {baseline!r}")
    algos = _ordered(data["algo"].unique(), ALGO_LABELS)
    envs = _ordered(data["env"].unique(), ENV_LABELS)
    rows = {}
    for algo in algos:
        cells: dict[tuple[str, str], float] = {}
        per_env_nf, per_env_pairs = {}, {}
        for env in envs:
            part = data[(data["algo"] == algo) & (data["env"] == env)]
            no_filter = part.loc[part["condition"] == baseline, ["seed", value]].set_index("seed")[value]
            pairs = pair_by_seed(part, value, "condition", filtered, baseline)
            per_env_nf[env], per_env_pairs[env] = no_filter, pairs["diff"]
            for stat, number in _cell(no_filter, pairs, scale).items():
                cells[(ENV_LABELS.get(env, env), stat)] = number
        if average:
            nf = pd.concat(per_env_nf, axis=1).dropna().mean(axis=1)
            gain = pd.concat(per_env_pairs, axis=1).dropna().mean(axis=1).rename("diff").to_frame()
            for stat, number in _cell(nf, gain, scale).items():
                cells[(AVERAGE, stat)] = number
        rows[ALGO_LABELS.get(algo, algo)] = cells
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.columns = pd.MultiIndex.from_tuples(table.columns, names=["env", "stat"])
    table.index.name = "algorithm"
    for col in table.columns:
        if col[1].startswith("n_"):
            table[col] = table[col].astype(int)
    return table


def topk_row_label(algo: str) -> str:
    """The row label of an algorithm's Top-k row in :func:`with_topk_row`."""
    return f"{ALGO_LABELS.get(algo, algo)}, Top-k 0.25"


TOPK_ROW = topk_row_label("ppo")
"""The Top-k row of the paper's main table (the paper runs Top-k with PPO only)."""


def with_topk_row(table: pd.DataFrame, runs_df: pd.DataFrame, *, value: str = "final_success",
                  scale: float = 100.0) -> pd.DataFrame:
    """``table`` (a :func:`main_table`) with one more row per algorithm that has Top-k runs in ``runs_df``
    (:func:`topk_row_label`; the paper's: PPO, :data:`TOPK_ROW`): that algorithm's no-filter success and the paired
    gain of Top-k over it, per env of ``table`` (C1's ordering Top-p >= Top-k >= none, read beside the algorithm's
    row); its ``Average`` is over the envs where the algorithm has Top-k runs.

    ``table`` unchanged when no algorithm has a Top-k run in ``runs_df``.
    """
    out = table
    for algo in sorted(runs_df.loc[runs_df["condition"] == "top_k", "algo"].unique()):
        runs = runs_df[(runs_df["algo"] == algo) & runs_df["condition"].isin(["top_k", "none"])]
        envs = {ENV_LABELS.get(e, e): e for e in runs["env"].unique()}
        shown = [e for e in table.columns.get_level_values("env").unique() if e in envs or e == AVERAGE]
        runs = runs[runs["env"].isin([envs[e] for e in shown if e != AVERAGE])]
        row = main_table(runs, value=value, filtered="top_k", scale=scale, average=AVERAGE in shown)
        row = row.rename(index={ALGO_LABELS.get(algo, algo): topk_row_label(algo)})
        out = pd.concat([out, row.reindex(columns=table.columns)])
    out.index.name = table.index.name
    for col in out.columns:
        if col[1].startswith("n_"):
            out[col] = out[col].fillna(0).astype(int)
    return out


def format_main_table(table: pd.DataFrame, digits: int = 1) -> pd.DataFrame:
    """Cells as text in the paper's style: ``12.9 ± 1.0 (+16.0 ± 2.0) n=4/4`` (n = no-filter/pairs)."""

    def fmt(x: float, sign: bool = False) -> str:
        if math.isnan(x):
            return "–"
        return f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}"

    out = {}
    for env in table.columns.get_level_values("env").unique():
        c = table[env]
        out[env] = [
            f"{fmt(r.no_filter_mean)} ± {fmt(r.no_filter_std)} ({fmt(r.gain_mean, True)} ± "
            f"{fmt(r.gain_std)}) n={r.n_no_filter}/{r.n_pairs}"
            for r in c.itertuples()
        ]
    return pd.DataFrame(out, index=table.index)


NOT_RUN = "not run here"
"""The ``algorithm`` of :func:`main_table_vs_paper`'s last row, which lists the paper's cells this table has no runs
for."""


def main_table_vs_paper(ours: pd.DataFrame, paper_csv_path: str | Path | None = None) -> pd.DataFrame:
    """Our main table beside the paper's, one row per (algorithm, env) that both have.

    An algorithm's ``Average`` row averages the cells both sides have (ours: per seed over those environments, as
    :func:`main_table`; the paper's: its cells on the same environments), and is left out where that is a single
    cell (it would repeat it). The paper's cells without runs here are collapsed into one last row, algorithm
    :data:`NOT_RUN`, whose ``env`` lists them: an average over the paper's four environments set against ours over
    one would compare unlike things.

    Args:
        ours: the output of :func:`main_table`.
        paper_csv_path: the paper's table (default: the package copy of ``paper_main_table.csv``);
            only its algorithm-comparison rows (:data:`PAPER_VARIANT_ALGO`) are used.

    Returns:
        Index ``(algorithm, env)`` (paper order); columns ``ours_<stat>`` for :data:`STATS`, ``paper_no_filter``,
        ``paper_gain`` and ``delta_no_filter`` / ``delta_gain`` (ours - paper).
    """
    paper = paper_main_table(paper_csv_path)
    paper = paper[paper["variant"].isin(PAPER_VARIANT_ALGO)].assign(
        algorithm=lambda d: d["variant"].map(PAPER_VARIANT_ALGO)
    )
    paper = paper[paper["env"] != AVERAGE].set_index(["algorithm", "env"])[["no_filter", "gain"]].add_prefix("paper_")
    long = ours.stack("env", future_stack=True).add_prefix("ours_")
    long.columns.name = None
    have = long[long["ours_no_filter_mean"].notna()]
    cells = have[have.index.get_level_values("env") != AVERAGE].index
    joined = paper.join(have, how="inner").reindex(cells.intersection(paper.index))
    rows = [joined]
    for algo in dict.fromkeys(joined.index.get_level_values(0)):
        envs = joined.loc[algo].index.tolist()
        if len(envs) > 1 and (algo, AVERAGE) in have.index:
            average = have.loc[[(algo, AVERAGE)]].copy()
            means = paper.loc[[(algo, env) for env in envs]].mean()
            average["paper_no_filter"], average["paper_gain"] = means["paper_no_filter"], means["paper_gain"]
            rows.append(average)
    table = pd.concat(rows)
    table.index.names = ["algorithm", "env"]
    ranks = {
        "algorithm": {a: i for i, a in enumerate(ALGO_LABELS.values())},
        "env": {e: i for i, e in enumerate([*ENV_LABELS.values(), AVERAGE])},
    }
    table = table.sort_index(
        key=lambda idx: pd.Index([(ranks[idx.name].get(v, len(ranks[idx.name])), str(v)) for v in idx])
    )
    table["delta_no_filter"] = table["ours_no_filter_mean"] - table["paper_no_filter"]
    table["delta_gain"] = table["ours_gain_mean"] - table["paper_gain"]
    columns = [f"ours_{s}" for s in STATS] + ["paper_no_filter", "paper_gain", "delta_no_filter", "delta_gain"]
    table = table[columns]
    missing = paper.index.difference(table.index, sort=False)
    if len(missing):
        by_algo: dict[str, list[str]] = {}
        for algo, env in missing:
            by_algo.setdefault(algo, []).append(env)
        text = "; ".join(f"{algo}: {', '.join(envs)}" for algo, envs in by_algo.items())
        empty = pd.DataFrame([[math.nan] * len(columns)], columns=columns,
                             index=pd.MultiIndex.from_tuples([(NOT_RUN, text)], names=["algorithm", "env"]))
        table = pd.concat([table, empty])
    return table


def paper_gain(envs: list[str] | tuple[str, ...], algos: list[str] | tuple[str, ...],
               paper_csv_path: str | Path | None = None) -> float:
    """The paper's mean Top-p gain (points) over the given (env, algorithm) cells of its main table.

    ``envs`` / ``algos`` are registry / ``trainer.algo`` names; cells the paper does not report are skipped.

    Raises:
        ValueError: none of the cells is in the paper's table.
    """
    paper = paper_main_table(paper_csv_path)
    paper = paper[paper["variant"].isin(PAPER_VARIANT_ALGO)]
    labels = {(ENV_LABELS.get(e, e), ALGO_LABELS.get(a, a)) for e in envs for a in algos}
    rows = paper[[(env, PAPER_VARIANT_ALGO[v]) in labels for env, v in zip(paper["env"], paper["variant"])]]
    gains = pd.to_numeric(rows["gain"], errors="coerce").dropna()
    if gains.empty:
        raise ValueError(f"the paper's table has no gain for envs {list(envs)} x algorithms {list(algos)}")
    return float(gains.mean())


def _gain_boards(part: pd.DataFrame, scale: float):
    """Per-board gains (last validation minus step 0) of the runs of ``part``, or None without per-board records."""
    if "start_episodes" not in part or any(not isinstance(x, np.ndarray) for x in
                                           [*part["start_episodes"], *part["final_episodes"]]):
        return None
    return scale * (np.stack(part["final_episodes"].to_list()) - np.stack(part["start_episodes"].to_list()))


def learning_table(runs_df: pd.DataFrame, steps_df: pd.DataFrame, *, metric: str = "val/success",
                   window: int = 1, scale: float = 100.0) -> pd.DataFrame:
    """Did training raise success? Per (env, algorithm, condition): start and end success.

    ``start`` is the mean of a run's first ``window`` logged values of ``metric`` (``val/success``: step
    0, the warm start), ``end`` the mean of its last ``window``; use a window of several steps for the
    noisy per-step ``rollout/success``. The gain ``end - start`` is paired within a run; ``learned``
    says whether its mean exceeds its seed-to-seed standard deviation (the bar of the trainer issue),
    and ``t_p`` is the paired t-test of end vs start.

    Returns:
        One row per cell: ``env, algorithm, condition, n_seeds, start_mean, start_std, end_mean, end_std,
        gain_mean, gain_std, t_p, learned, seeds`` (success in percent with ``scale=100``).
    """
    from ragen2.repro.stats import paired_test

    ends = start_end_values(steps_df, metric, window)
    data = runs_df.set_index("run_id").join(ends, how="inner")
    rows = []
    for (env, algo, cond), part in data.groupby(["env", "algo", "condition"], sort=False):
        start, end = part["first"].to_numpy(float) * scale, part["last"].to_numpy(float) * scale
        gain = end - start
        res = paired_test(end, start, boards=_gain_boards(part, scale)
                          if metric == SUCCESS_METRIC and window == 1 else None) if len(part) >= 2 else None
        gain_std = float(gain.std(ddof=1)) if len(gain) > 1 else math.nan
        rows.append({"env": ENV_LABELS.get(env, env), "algorithm": ALGO_LABELS.get(algo, algo), "condition": cond,
                     "n_seeds": len(part), "start_mean": float(start.mean()), "start_std": _mean_std(start)[1],
                     "end_mean": float(end.mean()), "end_std": _mean_std(end)[1], "gain_mean": float(gain.mean()),
                     "gain_std": gain_std, "t_p": res.t_p if res is not None else math.nan,
                     "learned": bool(len(gain) > 1 and gain.mean() > gain_std),
                     "seeds": ",".join(str(s) for s in sorted(part["seed"]))})
    if not rows:
        raise ValueError(f"no run logs {metric!r} at {2 * window} or more steps")
    order = {a: i for i, a in enumerate(ALGO_LABELS.values())}
    table = pd.DataFrame(rows)
    return table.sort_values(["env", "algorithm", "condition"], key=lambda c: c.map(order).fillna(len(order))
                             if c.name == "algorithm" else c).reset_index(drop=True)
