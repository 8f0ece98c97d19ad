"""The decline study's readings and verdicts, as docs/preregistrations.md §7.19 fixed them before its runs.

Per run, :func:`run_table` reads validation success (the same 512 boards at every reading) at step 0, at its peak
(the largest reading after step 0: steps 25-200) and at the end, and the drop from the peak. The primary
measures, per algorithm: Top-p minus no filter at the end (:func:`contrast` of ``final``), each run's drop from its
peak (:func:`decline_test`: does no-filter success decline beyond what the maximum of noisy readings gives, and
:func:`contrast` of ``drop``). Every paired interval carries the boards' own noise (:func:`ragen2.repro.stats.
paired_test` with per-board differences). :func:`claims_table` turns them into the study's verdicts on C1, C4, C6
(and C7's "not run"), each per algorithm and warm start and pooled, with the preconditions beside them.

Success is a fraction here, as in the runs' logs; tables show points.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ragen2.repro.decline_study import ALGOS, PAPER_GAIN, PEAK_GAIN_THRESHOLD, STUDY, WARM_STARTS
from ragen2.repro.stats import PairedResult, paired_test

MAX_OF_EIGHT = 1.42
"""The expected maximum of 8 independent standard normal readings: a flat curve read 8 times with standard error s
"peaks" about 1.42 s above its mean, so a drop below ``MAX_OF_EIGHT * s`` is what noise alone gives (§7.19)."""
VALUES = ("final", "peak", "drop")
"""What :func:`contrast` compares: success at the end, at the peak, and the drop from the peak."""


def load(runs_root: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The study's runs and steps (:func:`ragen2.repro.studies.load_study`) with ``warm`` (the warm start's SFT seed)
    and ``pair`` (one key per warm start and training seed: the unit that pairs a Top-p run with its no-filter
    run)."""
    from ragen2.repro.studies import load_study

    runs, steps = load_study(runs_root, STUDY)
    runs = runs.assign(warm=runs["study_value"].astype(int))
    runs = runs.assign(pair=runs["warm"] * 100 + runs["seed"])
    return runs, steps


def run_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per run: ``run_id, algo, warm, seed, pair, condition``; success at step 0 (``start``), at its peak
    (``peak``, at ``peak_step``) and at the end (``final``); ``peak_gain`` and ``final_gain`` over the start,
    ``drop`` (peak minus final); ``reading_se`` (the median standard error of one reading over its readings); and the
    per-board outcomes behind them (``start_boards``, ``peak_boards``, ``final_boards``)."""
    rows = []
    for run in runs.itertuples(index=False):
        episodes = run.val_episodes or {}
        later = sorted(step for step in episodes if step > 0)  # step 0 is the warm start
        if 0 not in episodes or not later:
            continue
        means = {step: float(np.mean(episodes[step])) for step in episodes}
        peak_step = max(later, key=lambda step: (means[step], -step))  # the first of equal peaks
        last = later[-1]
        ses = [math.sqrt(means[s] * (1 - means[s]) / len(episodes[s])) for s in sorted(episodes)]
        rows.append({"run_id": run.run_id, "algo": run.algo, "warm": run.warm, "seed": run.seed, "pair": run.pair,
                     "condition": run.condition, "start": means[0], "peak": means[peak_step],
                     "peak_step": peak_step, "final": means[last], "final_step": last,
                     "peak_gain": means[peak_step] - means[0], "final_gain": means[last] - means[0],
                     "drop": means[peak_step] - means[last], "reading_se": float(np.median(ses)),
                     "start_boards": np.asarray(episodes[0], float), "peak_boards": np.asarray(episodes[peak_step], float),
                     "final_boards": np.asarray(episodes[last], float)})
    return pd.DataFrame(rows)


POINT_COLUMNS = ("start", "peak", "final", "peak_gain", "final_gain", "drop", "reading_se")
"""The :func:`run_table` columns that are success shares (shown as points)."""


def runs_in_points(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`run_table` as a reader sees it: success in points, without the per-board outcomes."""
    shown = table.drop(columns=[c for c in table.columns if c.endswith("_boards")] + ["pair"])
    return shown.assign(**{c: 100 * shown[c] for c in POINT_COLUMNS})


def _boards(row, value: str) -> np.ndarray:
    if value == "drop":
        return row["peak_boards"] - row["final_boards"]
    return row[f"{value}_boards"]


def contrast(table: pd.DataFrame, algo: str, value: str = "final", warm: int | None = None) -> PairedResult | None:
    """Top-p minus no filter on ``value`` (:data:`VALUES`) for ``algo``, paired by warm start and seed (``warm``:
    one warm start's pairs only), the boards' noise in the interval; None with fewer than 2 pairs."""
    if value not in VALUES:
        raise ValueError(f"value must be one of {VALUES}, got {value!r}")
    part = table[(table["algo"] == algo) & ((table["warm"] == warm) if warm is not None else True)]
    sides = {c: part[part["condition"] == c].set_index("pair") for c in ("top_p", "none")}
    pairs = sorted(set(sides["top_p"].index) & set(sides["none"].index))
    if len(pairs) < 2:
        return None
    a, b = (sides[c].loc[pairs] for c in ("top_p", "none"))
    boards = np.stack([_boards(a.loc[p], value) - _boards(b.loc[p], value) for p in pairs])
    return paired_test(a[value].to_numpy(), b[value].to_numpy(), boards=boards)


def decline_test(table: pd.DataFrame, algo: str, warm: int | None = None) -> dict:
    """Does no-filter success decline after its peak (§7.19, measure 2)? The no-filter runs' mean drop with its 95 %
    t-interval over runs, against the floor noise alone gives (:data:`MAX_OF_EIGHT` times the runs' median
    per-reading standard error). Returns ``runs, mean, low, high, floor, declines``."""
    part = table[(table["algo"] == algo) & (table["condition"] == "none")
                 & ((table["warm"] == warm) if warm is not None else True)]
    if len(part) < 2:
        return {"runs": len(part), "mean": math.nan, "low": math.nan, "high": math.nan, "floor": math.nan,
                "declines": False}
    drops = part["drop"].to_numpy()
    result = paired_test(drops, np.zeros_like(drops))
    floor = MAX_OF_EIGHT * float(part["reading_se"].median())
    return {"runs": len(part), "mean": result.mean_diff, "low": result.t_ci_low, "high": result.t_ci_high,
            "floor": floor, "declines": bool(result.t_ci_low > floor)}


CONTRAST_COLUMNS = ("algo", "scope", "value", "pairs", "no_filter", "top_p_minus_none", "low", "high", "p")


def contrasts_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per algorithm and scope (each warm start, pooled) and value (:data:`VALUES`): the pairs, Top-p minus no
    filter in points with its 95 % interval and p (empty with fewer than 2 pairs), and the no-filter runs' mean on
    that value (:data:`CONTRAST_COLUMNS`)."""
    rows = []
    for algo in ALGOS:
        for warm in (*WARM_STARTS, None):
            part = table[(table["algo"] == algo) & ((table["warm"] == warm) if warm is not None else True)]
            if part.empty:
                continue
            pairs = len(set(part.loc[part["condition"] == "top_p", "pair"]) & set(part.loc[part["condition"] == "none",
                                                                                           "pair"]))
            none = part[part["condition"] == "none"]
            for value in VALUES:
                result = contrast(table, algo, value, warm)
                numbers = ((100 * result.mean_diff, 100 * result.t_ci_low, 100 * result.t_ci_high, result.t_p)
                           if result is not None else (math.nan,) * 4)
                rows.append(dict(zip(CONTRAST_COLUMNS, (algo, _scope(warm), value, pairs, 100 * none[value].mean(),
                                                        *numbers))))
    return pd.DataFrame(rows, columns=list(CONTRAST_COLUMNS))


def snr_table(grad: pd.DataFrame) -> pd.DataFrame:
    """The task-to-regulariser gradient ratio per reward-variance bucket at each reading (§7.19's secondary
    measure): per algorithm, filter, step and bucket (the whole batch's ``all`` row aside), the runs read, the median
    bucket RV and the median ratio ``snr`` (task-gradient norm over regulariser-gradient norm) over runs."""
    part = grad[grad["bucket"].astype(str) != "all"]
    table = (part.groupby(["algo", "condition", "step", "bucket"], sort=True)
             .agg(runs=("run_id", "nunique"), rv_median=("rv_mean", "median"), snr_median=("snr", "median"))
             .reset_index())
    return table


def _scope(warm: int | None) -> str:
    return "pooled" if warm is None else f"warm start {warm}"


def _peak_gain_holds(table: pd.DataFrame, algo: str, warm: int | None) -> tuple[bool, str]:
    none = table[(table["algo"] == algo) & (table["condition"] == "none")
                 & ((table["warm"] == warm) if warm is not None else True)]
    if none.empty:
        return False, "no no-filter runs"
    peak, final = 100 * none["peak_gain"].mean(), 100 * none["final_gain"].mean()
    holds = peak >= PEAK_GAIN_THRESHOLD
    return holds, (f"RL learns before any decline: no-filter mean peak gain {peak:+.1f} points "
                   f"({'>=' if holds else '<'} {PEAK_GAIN_THRESHOLD:g}; at the last step {final:+.1f})")


def _c1(table: pd.DataFrame, algo: str, warm: int | None) -> dict:
    result = contrast(table, algo, "final", warm)
    holds, pre = _peak_gain_holds(table, algo, warm)
    if result is None:
        return {"verdict": "inconclusive", "evidence": "fewer than 2 pairs", "precondition": pre, "holds": holds}
    verdict = result.verdict("greater", PAPER_GAIN[algo] / 100)
    evidence = (f"Top-p - none at the last step {result.summary(scale=100)}; paper's FrozenLake "
                f"{algo.upper()} gain {PAPER_GAIN[algo]:+.1f}")
    return {"verdict": verdict, "evidence": evidence, "precondition": pre, "holds": holds}


def _c6(runs: pd.DataFrame, steps: pd.DataFrame, table: pd.DataFrame, algo: str, warm: int | None) -> dict:
    from ragen2.repro import collapse_criteria as cc
    from ragen2.repro.verdicts import collapse_regime_verdict

    part = runs[(runs["algo"] == algo) & ((runs["warm"] == warm) if warm is not None else True)]
    holds, pre = _peak_gain_holds(table, algo, warm)
    entropy = float(part["trainer.entropy_coef"].max()) if "trainer.entropy_coef" in part else math.nan
    holds = holds and entropy <= 0.01
    pre += f"; collapse is not forced: entropy {entropy:g} (<= 0.01)"
    regimes = cc.run_regimes(part.assign(seed=part["pair"]), steps)  # paired by warm start and seed
    rule = collapse_regime_verdict(regimes, what="Top-p")
    decline = decline_test(table, algo, warm)
    context = (f"; no-filter drop from peak {100 * decline['mean']:+.1f} [{100 * decline['low']:+.1f}, "
               f"{100 * decline['high']:+.1f}] points over {decline['runs']} runs, noise floor "
               f"{100 * decline['floor']:.1f}: {'declines' if decline['declines'] else 'no decline beyond noise'}")
    return {"verdict": rule["verdict"], "evidence": rule["summary"] + context, "precondition": pre, "holds": holds}


def _c4(grad: pd.DataFrame, table: pd.DataFrame, steps: pd.DataFrame, algo: str, warm: int | None) -> dict:
    from ragen2.repro.claim_tests import grad_claim
    from ragen2.repro.preconditions import ZERO_VARIANCE_SHARE_MIN, zero_task_spread_share

    ids = set(table.loc[(table["algo"] == algo) & ((table["warm"] == warm) if warm is not None else True), "run_id"])
    part = grad[grad["run_id"].isin(ids)] if "run_id" in grad else grad.iloc[0:0]
    if part.empty:
        return {"verdict": "inconclusive", "evidence": "no gradient tables", "precondition": "", "holds": False}
    claim = grad_claim("C4", part)
    shares = zero_task_spread_share(steps, sorted(ids))
    share = float(shares.mean()) if not shares.empty else math.nan
    holds = bool(share >= ZERO_VARIANCE_SHARE_MIN)
    pre = (f"low-variance prompts present: groups with no task spread {100 * share:.0f} % of groups "
           f"({'>=' if holds else '<'} 10 %); a regulariser in the loss: entropy 0.001")
    return {"verdict": claim.verdict, "evidence": claim.evidence, "precondition": pre, "holds": holds}


def combine(verdicts: Sequence[tuple[str, bool]]) -> str:
    """The study-level verdict from the per-algorithm ``(verdict, preconditions hold)`` (§7.19): agree when every
    algorithm whose preconditions hold agrees, disagree when one disagrees and none agrees, else inconclusive;
    ``untested`` when no algorithm's preconditions hold."""
    tested = [v for v, holds in verdicts if holds]
    if not tested:
        return "untested"
    if all(v == "agree" for v in tested):
        return "agree"
    if "disagree" in tested and "agree" not in tested:
        return "disagree"
    return "inconclusive"


def claims_table(runs: pd.DataFrame, steps: pd.DataFrame, grad: pd.DataFrame) -> pd.DataFrame:
    """The study's verdicts: per claim (C1, C4, C6) and algorithm, one row per scope (each warm start, pooled) with
    the verdict, its evidence, the preconditions and whether they hold (a verdict whose preconditions fail reads
    ``untested``), ``fragile`` when the warm starts do not both give the pooled verdict; then one ``all`` row per
    claim (:func:`combine` over the algorithms' pooled rows), and C7's row: not run in this study."""
    table = run_table(runs)
    rows = []
    for claim in ("C1", "C4", "C6"):
        pooled = []
        for algo in ALGOS:
            scoped = {}
            for warm in (*WARM_STARTS, None):
                if claim == "C1":
                    got = _c1(table, algo, warm)
                elif claim == "C6":
                    got = _c6(runs, steps, table, algo, warm)
                else:
                    got = _c4(grad, table, steps, algo, warm)
                verdict = got["verdict"] if got["holds"] else "untested"
                scoped[warm] = verdict
                rows.append({"claim": claim, "algo": algo, "scope": _scope(warm), "verdict": verdict,
                             "test_verdict": got["verdict"], "evidence": got["evidence"],
                             "precondition": got["precondition"], "holds": got["holds"], "fragile": False})
            fragile = any(scoped[w] != scoped[None] for w in WARM_STARTS)
            rows[-1]["fragile"] = fragile
            pooled.append((rows[-1]["test_verdict"], rows[-1]["holds"]))
        rows.append({"claim": claim, "algo": "all", "scope": "pooled", "verdict": combine(pooled), "test_verdict": "",
                     "evidence": "per algorithm above", "precondition": "", "holds": any(h for _, h in pooled),
                     "fragile": any(r["fragile"] for r in rows if r["claim"] == claim and r["scope"] == "pooled")})
    rows.append({"claim": "C7", "algo": "all", "scope": "pooled", "verdict": "not run", "test_verdict": "",
                 "evidence": "the regulariser axis (entropy 0.01, 32 runs, about 2.5 hours on two cores) was not run",
                 "precondition": "", "holds": False, "fragile": False})
    return pd.DataFrame(rows)
