"""Preconditions beside verdicts: what each claim's argument needs, measured on the runs that decide it.

The paper's argument for a claim needs conditions its own setting had: RL that learns before a filter can help it
learn more (C1), a regulariser and low-variance prompts for the gradient decomposition to show anything (C4), an
episode in which a slip can be corrected (C5), and so on (docs/method.md §4.9; thresholds fixed in
docs/preregistrations.md §7.16 before the runs). A verdict reached where one of them failed says more about the setup
than about the paper, so :func:`gate` turns it into **``untested``**, naming the unmet precondition and keeping what
the test alone gave.

Each notebook measures its claim's preconditions (``c<k>_preconditions``), gates its verdict and writes
``preconditions_<section>.csv`` (:func:`write_preconditions`) beside ``claims_<section>.csv``; the claims stage gates
the final verdicts once more and writes ``table_preconditions`` (:func:`precondition_table`).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ragen2.fileio import write_text_atomic
from ragen2.repro.claims import CLAIM_IDS, Claim
from ragen2.repro.stats import bootstrap_mean_ci, paired_test

LEARNS_POINTS = 15.0
"""Points of validation success over the warm start for "RL learns" (the learning screen's threshold)."""
NOISE_FACTOR = 2.0
"""C2: the spread of final success over runs must be at least this many per-run standard errors."""
FAILING_SHARE_MIN = 0.5
"""C3: the smallest share of failing prompts (success below 0.5) in the lowest RV quartile."""
ZERO_VARIANCE_SHARE_MIN = 0.10
"""C4: the smallest mean share of zero-variance groups over training."""
ENTROPY_COEF_MAX = 0.01
"""C6: the largest entropy coefficient that is not forcing collapse (10 x the paper's 0.001)."""
PAPER_DEFAULTS = {"trainer.entropy_coef": 0.001, "trainer.kl_coef": 0.0}
"""C7: the settings of the sweeps' runs at the paper's defaults (with no filter)."""
VAL_METRIC = "val/success"
TABLE = "table_preconditions"
TABLE_CAPTION = ("Each claim's preconditions (what the paper's argument needs; criteria fixed before the runs, "
                 "docs/preregistrations.md §7.16 and §7.18), measured on the runs that decide the claim in each "
                 "realization; held = held wherever measured. A claim with one not held reads untested in claims.csv, "
                 "except where the criterion says it gates the pooled reading only (then that reading, shown beside "
                 "the verdict as context, is untested).")
CONDITION_R2_MAX = 0.5
"""C2: the largest share of the variance of final success the runs' arms may explain for the pooled rho to read."""
GATES = ("verdict", "pooled reading")
"""What a precondition gates: the claim's verdict, or only the pooled reading shown beside it as context."""
COLUMNS = ("claim", "precondition", "holds_when", "measured", "value", "held", "gates")


@dataclass(frozen=True)
class Precondition:
    """One precondition of one claim and its measured value."""

    claim: str
    precondition: str
    """What the argument needs, in a few words."""
    holds_when: str
    """The pre-registered criterion."""
    measured: str
    """The measured value with its spread and the runs it is measured on (one line)."""
    value: float
    """The number the criterion reads (NaN when not measured)."""
    held: bool | None
    """Whether the criterion holds; ``None``: not measured (its runs absent)."""
    gates: str = "verdict"
    """What an unmet criterion makes untested (:data:`GATES`): the verdict, or only the pooled reading beside it."""

    def __post_init__(self) -> None:
        if self.claim not in CLAIM_IDS:
            raise ValueError(f"claim id {self.claim!r} is not one of {CLAIM_IDS}")
        if self.gates not in GATES:
            raise ValueError(f"gates of {self.claim} must be one of {GATES}, got {self.gates!r}")
        if "\n" in self.measured:
            raise ValueError(f"measured of {self.claim} must be one line, got {self.measured!r}")


def _not_measured(claim: str, precondition: str, holds_when: str, why: str) -> Precondition:
    return Precondition(claim, precondition, holds_when, f"not measured: {why}", math.nan, None)


def gate(claim: Claim, preconditions: Iterable[Precondition]) -> Claim:
    """``claim`` unchanged where every precondition of it held or was not measured; else ``untested``, its evidence
    naming the unmet precondition(s) and what the test alone gave."""
    unmet = [p for p in preconditions if p.claim == claim.claim and p.held is False and p.gates == "verdict"]
    if not unmet:
        return claim
    why = "; ".join(f"{p.precondition} ({p.measured}; needs {p.holds_when})" for p in unmet)
    return Claim(claim.claim, "untested",
                 f"precondition unmet: {why} || the test alone: {claim.verdict}: {claim.evidence}")


# ---------------------------------------------------------------------------------------------
# measurements shared by several claims


def validation_gains(steps: pd.DataFrame, run_ids: Iterable[str], *, peak: bool = False) -> pd.Series:
    """Per run: validation success at the end (``peak``: its highest) minus at step 0, in points."""
    val = steps[(steps["metric"] == VAL_METRIC) & steps["run_id"].isin(set(run_ids))].dropna(subset=["value"])
    out = {}
    for rid, part in val.groupby("run_id"):
        part = part.sort_values("step")
        if part["step"].iloc[0] != 0 or len(part) < 2:
            continue
        end = part["value"].iloc[1:].max() if peak else part["value"].iloc[-1]
        out[rid] = 100.0 * (end - part["value"].iloc[0])
    return pd.Series(out, dtype=float)


def gain_boards(runs: pd.DataFrame, steps: pd.DataFrame, gains: pd.Series, *, peak: bool = False) -> np.ndarray | None:
    """``[runs, boards]``: each run's success on every validation board at the end (``peak``: at its best validation
    after step 0) minus at step 0, in points, rows in ``gains``' order; None where a run kept no per-board record."""
    if "val_episodes" not in runs.columns:
        return None
    by_run = runs.set_index("run_id")["val_episodes"]
    val = steps[(steps["metric"] == VAL_METRIC) & steps["run_id"].isin(set(gains.index))].dropna(subset=["value"])
    rows = []
    for rid in gains.index:
        episodes = by_run.get(rid)
        if not isinstance(episodes, dict) or 0 not in episodes:
            return None
        part = val[(val["run_id"] == rid) & (val["step"] > 0)].sort_values("step")
        step = int(part.loc[part["value"].idxmax(), "step"]) if peak else max(episodes)
        if step not in episodes:
            return None
        rows.append(100.0 * (episodes[step] - episodes[0]))
    return np.stack(rows) if rows else None


def rl_learns(claim: str, steps: pd.DataFrame, run_ids: Iterable[str], *, where: str, peak: bool = False,
              precondition: str = "RL learns", runs: pd.DataFrame | None = None) -> Precondition:
    """Mean validation gain of the no-filter runs ``run_ids`` (``where`` names them) against :data:`LEARNS_POINTS`.

    Its interval includes the evaluation's noise where ``runs`` holds the runs' per-board records
    (:func:`gain_boards`, :func:`ragen2.repro.stats.paired_test`): the runs share their validation boards, so the
    spread between runs alone would leave it out."""
    which = "peak" if peak else "final"
    holds_when = f"mean {which} gain over the warm start >= {LEARNS_POINTS:g} points"
    gains = validation_gains(steps, run_ids, peak=peak)
    if gains.empty:
        return _not_measured(claim, precondition, holds_when, f"no {where} with a step-0 validation")
    boards = gain_boards(runs, steps, gains, peak=peak) if runs is not None else None
    if boards is not None and len(gains) > 1:
        result = paired_test(gains.to_numpy(), np.zeros(len(gains)), boards=boards)
        lo, hi = result.t_ci_low, result.t_ci_high
    else:
        lo, hi = bootstrap_mean_ci(gains.to_numpy()) if len(gains) > 1 else (math.nan, math.nan)
    noise = (f" (95 % t-interval with the evaluation noise of {boards.shape[1]} boards)"
             if boards is not None and len(gains) > 1 else "")
    mean = round(float(gains.mean()), 9)  # success is a count over episodes: no float dust at the threshold
    return Precondition(claim, precondition, holds_when,
                        f"{which} gain {mean:+.1f} points [{lo:+.1f}, {hi:+.1f}]{noise} over {len(gains)} {where}",
                        mean, mean >= LEARNS_POINTS)


def _no_filter(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[runs["condition"] == "none"]


# ---------------------------------------------------------------------------------------------
# per claim


def c1_preconditions(runs: pd.DataFrame, steps: pd.DataFrame, screen: str | None = None) -> list[Precondition]:
    """C1: RL learns in the no-filter runs of the comparison (``runs``: the runs C1 is decided on); its measured text
    also cites ``screen`` (default: what the learning screen found, :data:`ragen2.repro.learning_screen.OUTCOME`)."""
    from ragen2.repro.learning_screen import OUTCOME

    learns = rl_learns("C1", steps, _no_filter(runs)["run_id"], where="no-filter runs of the C1 comparison", runs=runs)
    screen = screen if screen is not None else (OUTCOME.note() if OUTCOME is not None else "")
    return [replace(learns, measured=f"{learns.measured}; {screen}") if screen else learns]


def c2_preconditions(runs: pd.DataFrame) -> list[Precondition]:
    """C2 (docs/preregistrations.md §7.18): final success spreads within the runs' arms beyond evaluation noise (what
    the within-arm test needs), and the arms explain less than half of its variance (what the rho pooled over arms
    needs: an unmet one gates that pooled reading, not the within-arm verdict).

    ``runs``: the runs C2 correlates, with ``final_success``, ``rollout.val_groups`` and the settings of
    :data:`ragen2.repro.studies.ARM_COLUMNS` (an arm: a setting, slip level included, but the seed and warm start).
    """
    from ragen2.repro.studies import arms

    noise_when = (f"pooled within-arm std of final success >= {NOISE_FACTOR:g} x the median per-run standard error "
                  "(arms of 2+ runs)")
    share_when = f"the arms explain < {CONDITION_R2_MAX:.0%} of the variance of final success (R^2)"
    share_name = "filter condition does not explain the spread"
    done = runs.dropna(subset=["final_success"])
    if len(done) < 3:
        return [_not_measured("C2", "success differs beyond noise within arms", noise_when, f"{len(done)} runs"),
                replace(_not_measured("C2", share_name, share_when, f"{len(done)} runs"), gates="pooled reading")]
    p = done["final_success"].astype(float)
    n = done["rollout.val_groups"].astype(float) if "rollout.val_groups" in done else pd.Series(64.0, index=done.index)
    se = float(np.median(np.sqrt(p * (1 - p) / n)))
    arm = arms(done)
    counts = arm.map(arm.value_counts())
    centred = (p - p.groupby(arm).transform("mean"))[counts >= 2]
    dof = int((counts >= 2).sum() - arm[counts >= 2].nunique())
    spread = math.sqrt(float((centred ** 2).sum()) / dof) if dof > 0 else math.nan
    ratio = spread / se if se > 0 and math.isfinite(spread) else math.nan
    if math.isnan(ratio):
        noise = _not_measured("C2", "success differs beyond noise within arms", noise_when,
                              "no arm with 2 or more runs")
    else:
        noise = Precondition("C2", "success differs beyond noise within arms", noise_when,
                             f"within-arm std {100 * spread:.1f} points over {int((counts >= 2).sum())} runs in "
                             f"{arm[counts >= 2].nunique()} arms, median standard error {100 * se:.1f} ({ratio:.1f} x)",
                             ratio, ratio >= NOISE_FACTOR)
    total = float(((p - p.mean()) ** 2).sum())
    r2 = 1.0 - float(((p - p.groupby(arm).transform("mean")) ** 2).sum()) / total if total > 0 else 0.0
    share = Precondition("C2", share_name, share_when,
                         f"R^2 {r2:.2f} over {arm.nunique()} arms, {len(done)} runs (gates the pooled rho only)", r2,
                         r2 < CONDITION_R2_MAX, gates="pooled reading")
    return [noise, share]


def pooled_untested(preconditions: Iterable[Precondition], claim: str) -> str | None:
    """The unmet preconditions that gate ``claim``'s pooled reading, in words (None when none is unmet)."""
    unmet = [p for p in preconditions if p.claim == claim and p.gates == "pooled reading" and p.held is False]
    return "; ".join(f"{p.precondition} ({p.measured.split(' (gates')[0]}; needs {p.holds_when})"
                     for p in unmet) or None


def c3_preconditions(prompts: pd.DataFrame, phase: str = "end") -> list[Precondition]:
    """C3: the lowest RV quartile's prompts are mostly failing ones, in the runs' prompt tables at ``phase``.

    ``prompts``: :func:`ragen2.repro.prompt_tables.prompt_tables` (``run_id, phase, prompt, success, rv``); the
    quartile cut is :func:`~ragen2.repro.prompt_tables.rv_quartile_table`'s (RV ascending, ties by prompt id).
    """
    holds_when = f"share of lowest-RV-quartile prompts with success < 0.5 >= {FAILING_SHARE_MIN:g}"
    at = prompts[prompts["phase"] == phase]
    per_prompt = at.groupby(["run_id", "prompt"], as_index=False).agg(success=("success", "mean"), rv=("rv", "first"))
    lowest = []
    for _, part in per_prompt.groupby("run_id"):
        if len(part) >= 4:
            order = part.sort_values(["rv", "prompt"], kind="stable")
            lowest.append(order.iloc[: len(order) // 4])
    if not lowest:
        return [_not_measured("C3", "low-RV prompts mostly fail", holds_when, f"no run's {phase} prompt table")]
    low = pd.concat(lowest)
    share = float((low["success"] < 0.5).mean())
    return [Precondition("C3", "low-RV prompts mostly fail", holds_when,
                         f"{share:.2f} of {len(low)} lowest-quartile prompts over {low['run_id'].nunique()} runs "
                         f"({phase} of training)", share, share >= FAILING_SHARE_MIN)]


def zero_variance_share(steps: pd.DataFrame, run_ids: Iterable[str]) -> pd.Series:
    """Per run: zero-variance groups over all groups, averaged over its training steps."""
    wanted = set(run_ids)
    part = steps[steps["run_id"].isin(wanted) & steps["metric"].isin(("filter/zero_variance_count",
                                                                       "filter/total_groups"))]
    wide = part.pivot_table(index=["run_id", "step"], columns="metric", values="value").dropna()
    if wide.empty:
        return pd.Series(dtype=float)
    share = wide["filter/zero_variance_count"] / wide["filter/total_groups"]
    return share.groupby(level="run_id").mean()


def zero_task_spread_share(steps: pd.DataFrame, run_ids: Iterable[str]) -> pd.Series:
    """Per run: groups with no task signal (every rollout failed, or every one succeeded:
    ``filter/zero_task_spread_count``) over all groups, averaged over its training steps; empty for runs made before
    the trainer logged it."""
    wanted = set(run_ids)
    part = steps[steps["run_id"].isin(wanted) & steps["metric"].isin(("filter/zero_task_spread_count",
                                                                       "filter/total_groups"))]
    wide = part.pivot_table(index=["run_id", "step"], columns="metric", values="value")
    if wide.empty or "filter/zero_task_spread_count" not in wide:
        return pd.Series(dtype=float)
    wide = wide.dropna()
    share = wide["filter/zero_task_spread_count"] / wide["filter/total_groups"]
    return share.groupby(level="run_id").mean()


def c4_preconditions(runs: pd.DataFrame, steps: pd.DataFrame) -> list[Precondition]:
    """C4: a regulariser in the loss, and low-variance groups present, in the gradient-analysis runs ``runs``. A
    group without task signal is one whose rollouts all fail or all succeed (:func:`zero_task_spread_share`; its
    shaped reward may still spread by a format penalty); runs that did not log it fall back to exact zero reward
    spread (docs/preregistrations.md §7.18)."""
    reg_when = "entropy coefficient + KL coefficient > 0"
    zv_when = (f"groups without task signal (all fail or all succeed) >= {ZERO_VARIANCE_SHARE_MIN:.0%} of groups, "
               "mean over training")
    if runs.empty:
        return [_not_measured("C4", "a regulariser in the loss", reg_when, "no gradient-analysis run"),
                _not_measured("C4", "low-variance prompts present", zv_when, "no gradient-analysis run")]
    reg = runs["trainer.entropy_coef"].astype(float) + runs["trainer.kl_coef"].astype(float)
    out = [Precondition("C4", "a regulariser in the loss", reg_when,
                        f"entropy + KL coefficient {reg.min():g} to {reg.max():g} over {len(runs)} runs",
                        float(reg.min()), bool((reg > 0).all()))]
    exact = zero_variance_share(steps, runs["run_id"])
    task = zero_task_spread_share(steps, runs["run_id"])
    shares, what = (task, "without task signal") if not task.empty else (exact, "with zero reward spread")
    if shares.empty:
        out.append(_not_measured("C4", "low-variance prompts present", zv_when, "no filter metrics logged"))
    else:
        mean = float(shares.mean())
        beside = (f"; zero reward spread {exact.mean():.0%}" if not task.empty and not exact.empty else "")
        out.append(Precondition("C4", "low-variance prompts present", zv_when,
                                f"{mean:.0%} of groups {what} (runs {shares.min():.0%} to {shares.max():.0%}, "
                                f"{len(shares)} runs){beside}", mean, mean >= ZERO_VARIANCE_SHARE_MIN))
    return out


def c5_preconditions(slip: pd.DataFrame, where: str = "runs") -> list[Precondition]:
    """C5: a slip can be corrected (more than one turn per episode) in the slip sweep's runs ``slip``.

    Without a slip study, ``slip`` may be the pipeline's other runs (``where`` names them): whether its setting could
    have let a slip be corrected at all."""
    holds_when = "more than one turn per episode (an observation after a slip)"
    if slip.empty:
        return [_not_measured("C5", "a slip can be corrected", holds_when, "no slip run")]
    turns = slip["rollout.max_turns"].astype(int)
    span = f"{turns.min()}" if turns.min() == turns.max() else f"{turns.min()} to {turns.max()}"
    return [Precondition("C5", "a slip can be corrected", holds_when,
                         f"{span} turn(s) per episode over {len(slip)} {where}",
                         float(turns.min()), bool((turns > 1).all()))]


def c6_preconditions(treated: pd.DataFrame, steps: pd.DataFrame) -> list[Precondition]:
    """C6: RL learns before any decline (peak gain) in the no-filter runs C6 reads, and collapse is not
    forced by a large entropy bonus (``treated``: :func:`~ragen2.repro.studies.mechanism_arms`'s treated runs)."""
    ent_when = f"entropy coefficient <= {ENTROPY_COEF_MAX:g} (10 x the paper's 0.001)"
    learns = rl_learns("C6", steps, _no_filter(treated)["run_id"], where="no-filter runs C6 reads", peak=True,
                       precondition="RL learns before any decline", runs=treated)
    if treated.empty:
        return [learns, _not_measured("C6", "collapse not forced", ent_when, "no mechanism run")]
    ent = treated["trainer.entropy_coef"].astype(float)
    return [learns, Precondition("C6", "collapse not forced", ent_when,
                                 f"entropy coefficient {ent.max():g} over {len(treated)} runs", float(ent.max()),
                                 bool((ent <= ENTROPY_COEF_MAX).all()))]


def c7_preconditions(sweep_runs: pd.DataFrame, steps: pd.DataFrame) -> list[Precondition]:
    """C7: RL learns in the sweeps' runs at the paper's defaults (:data:`PAPER_DEFAULTS`, no filter)."""
    at_default = _no_filter(sweep_runs)
    for column, value in PAPER_DEFAULTS.items():
        if column in at_default:
            at_default = at_default[np.isclose(at_default[column].astype(float), value)]
    return [rl_learns("C7", steps, at_default["run_id"], where="sweep runs at the paper's defaults", runs=at_default)]


# ---------------------------------------------------------------------------------------------
# files


def _to_csv(rows: Sequence[Precondition]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    for p in rows:
        held = "" if p.held is None else str(p.held).lower()
        writer.writerow([p.claim, p.precondition, p.holds_when, p.measured, f"{p.value:.6g}", held, p.gates])
    return buf.getvalue()


def write_preconditions(section: str, rows: Iterable[Precondition], out_dir: str | Path = "paper_figures") -> Path:
    """Write ``<out_dir>/preconditions_<section>.csv`` atomically (claims in C1..C7 order)."""
    rows = sorted(rows, key=lambda p: CLAIM_IDS.index(p.claim))
    if not rows:
        raise ValueError(f"section {section!r} has no precondition rows")
    return write_text_atomic(Path(out_dir) / f"preconditions_{section}.csv", _to_csv(rows))


def read_preconditions(path: str | Path) -> list[Precondition]:
    """Read a ``preconditions_<section>.csv`` (columns exactly :data:`COLUMNS`)."""
    reader = csv.reader(io.StringIO(Path(path).read_text()))
    header = next(reader, None)
    if header is None or tuple(header) != COLUMNS:
        raise ValueError(f"{path}: columns must be exactly {list(COLUMNS)}, got {header}")
    held = {"true": True, "false": False, "": None}
    return [Precondition(c, name, when, measured, float(value), held[h], gates)
            for c, name, when, measured, value, h, gates in reader]


def precondition_table(dirs: dict[str, str | Path]) -> tuple[pd.DataFrame, list[Precondition]]:
    """Every ``preconditions_*.csv`` under each labelled folder (``{"first": dir, "second": dir}``; subfolders
    included: the second realization keeps one per notebook) in one table.

    Returns:
        The table (one row per claim and precondition: ``holds_when``, per label ``<label>`` = the measured text and
        ``held``: held in every label where measured) and all preconditions read (for :func:`gate`).
    """
    read: list[Precondition] = []
    rows: dict[tuple[str, str], dict] = {}
    for label, folder in dirs.items():
        for path in sorted(Path(folder).rglob("preconditions_*.csv")):
            for p in read_preconditions(path):
                read.append(p)
                row = rows.setdefault((p.claim, p.precondition), {"claim": p.claim, "precondition": p.precondition,
                                                                  "holds_when": shown_when(p), "held": None})
                row[label] = p.measured
                if p.held is not None:
                    row["held"] = p.held if row["held"] is None else (row["held"] and p.held)
    ordered = sorted(rows.values(), key=lambda r: (CLAIM_IDS.index(r["claim"]), r["precondition"]))
    table = pd.DataFrame(ordered, columns=["claim", "precondition", "holds_when", *dirs, "held"])
    table["held"] = table["held"].map({True: "yes", False: "no", None: "not measured"})
    return table, read


def as_table(rows: Iterable[Precondition]) -> pd.DataFrame:
    """Preconditions as a table to show beside a verdict (``held``: yes, no or not measured)."""
    shown = {True: "yes", False: "no", None: "not measured"}
    return pd.DataFrame([{"claim": p.claim, "precondition": p.precondition, "holds when": shown_when(p),
                          "measured": p.measured, "held": shown[p.held]} for p in rows])


def shown_when(p: Precondition) -> str:
    """The criterion as tables show it: with what it gates when that is not the verdict."""
    return p.holds_when if p.gates == "verdict" else f"{p.holds_when} (gates the {p.gates} only)"
