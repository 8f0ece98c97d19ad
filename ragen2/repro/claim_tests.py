"""Claim tests: a verdict (:class:`ragen2.repro.claims.Claim`) from tables of runs, with the numbers behind it.

Each function turns a table into ``agree``, ``disagree`` or ``inconclusive`` by the rule of
:func:`ragen2.repro.stats.decide` and writes the statistics into the evidence string. The generic tests
(:func:`paired_claim`, :func:`trend_claim`, :func:`combine`, :func:`with_context`, :func:`gain_by_value`,
:func:`correlation_table`) serve several claims; :func:`correlation_claim` (C2), :func:`quartile_claim`
(C3), :func:`grad_claim` (C4), :func:`stochasticity_claim` (C5) and :func:`intervention_claim` (C7) are
the shapes of single claims. :mod:`ragen2.repro.verdicts` applies them to what each notebook loads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ragen2.repro.claims import Claim
from ragen2.repro.prompt_tables import quartile_units
from ragen2.repro.runs import EPISODE_COLUMNS, SUCCESS_METRIC, start_end_values
from ragen2.repro.stats import decide, paired_test, spearman, within_strata_spearman
from ragen2.repro.studies import arms, filter_gain_units, sweep_units, unit_boards

SMALLEST_EFFECTS = {
    "C3_success": 0.05,
    "C3_mi": 0.05,
    "C5": 0.02,
    "C6_mi": 0.1,
    "C6_zero_variance": 0.5,
    "C7_rho": -0.3,
}
"""Smallest effects that would count as the paper's, for claims where the paper gives no number, fixed
before the CPU runs were looked at (so the bar cannot follow the data). A verdict is ``disagree`` when the
95 % interval of our effect excludes it (our data rule out an effect that large) even though no significant
effect was found either way: C3, top minus bottom RV quartile, 5 points of success and 0.05 nats of
per-token MI; C5, the filter's gain at partial slip minus its gain at the extremes, 2 points (the paper's
FrozenLake gains span 0.6-10.9); C6, Top-p minus none in final per-token MI, 0.1 nats (a third of the +0.34 of
the preliminary CPU experiment, docs/preregistrations.md §7.0), and a rise of 0.5 zero-variance groups per batch (mean of the last 5 steps minus the first
5); C7, a Spearman rho of -0.3 between the top-p value and final success, the bar of C7's context statistic
and of its power statement only (C7 is decided by :func:`intervention_claim`'s paired test against C1's
paper effect). Where the paper gives a number (C1: its mean FrozenLake gain over the algorithms run; C2:
its rho of +0.39 for MI-ZScore), that number is used instead."""


def paired_rows(runs: pd.DataFrame, value: str, a: str, b: str, *, condition: str = "condition",
                pair_on: str | Sequence[str] = "seed") -> pd.DataFrame:
    """``value`` under conditions ``a`` and ``b`` side by side, one row per ``pair_on`` key present in both (columns
    ``a`` and ``b``): the pairs of :func:`paired_claim`."""
    keys = [pair_on] if isinstance(pair_on, str) else list(pair_on)
    data = runs.dropna(subset=[value])
    sides = [data[data[condition] == c].set_index(keys)[value].rename(c) for c in (a, b)]
    return pd.concat(sides, axis=1, join="inner").dropna()


def paired_boards(runs: pd.DataFrame, value: str, a: str, b: str, *, condition: str = "condition",
                  pair_on: str | Sequence[str] = "seed") -> np.ndarray | None:
    """The per-board differences behind :func:`paired_rows`' pairs (``[pairs, boards]``, rows in its order): ``a``'s
    outcome on each validation board minus ``b``'s, for a ``value`` with per-board outcomes
    (:data:`ragen2.repro.runs.EPISODE_COLUMNS`); None where ``value`` has none or a paired run lacks its record."""
    column = EPISODE_COLUMNS.get(value)
    if column is None or column not in runs.columns:
        return None
    keys = [pair_on] if isinstance(pair_on, str) else list(pair_on)
    data = runs.dropna(subset=[value])
    sides = [data[data[condition] == c].set_index(keys)[column].rename(c) for c in (a, b)]
    joined = pd.concat(sides, axis=1, join="inner")
    joined = joined.loc[paired_rows(runs, value, a, b, condition=condition, pair_on=pair_on).index]
    if joined.empty or any(x is None or (isinstance(x, float) and math.isnan(x)) for x in joined.to_numpy().ravel()):
        return None
    first, second = np.stack(joined[a].to_list()), np.stack(joined[b].to_list())
    return first - second if first.shape == second.shape else None


def paired_claim(claim: str, runs: pd.DataFrame, value: str, a: str, b: str, *, direction: str = "greater",
                 condition: str = "condition", pair_on: str | Sequence[str] = "seed", what: str = "",
                 scale: float = 1.0, paper_effect: float | None = None) -> Claim:
    """A claim judged by a paired test of ``value`` under condition ``a`` vs ``b``.

    Pairs are rows that agree on ``pair_on`` (one or several columns, e.g. ``("env", "algo",
    "seed")``). The verdict is :meth:`ragen2.repro.stats.PairedResult.verdict` (paired t-test of ``a - b``;
    ``disagree`` also when the t-CI excludes ``paper_effect``, the smallest difference that would
    count as the paper's effect); with fewer than 2 pairs it is ``inconclusive``. Where ``value`` has per-board
    outcomes (:func:`paired_boards`), the test's interval and p include the evaluation's noise.
    """
    joined = paired_rows(runs, value, a, b, condition=condition, pair_on=pair_on)
    label = f"{what}: " if what else ""
    if len(joined) < 2:
        return Claim(claim, "inconclusive", f"{label}{len(joined)} pair(s) of {a} vs {b} on {value}; too few")
    boards = paired_boards(runs, value, a, b, condition=condition, pair_on=pair_on)
    result = paired_test(joined[a].to_numpy(), joined[b].to_numpy(), boards=boards)
    verdict = result.verdict(direction, paper_effect)
    return Claim(claim, verdict, f"{label}{value} {a} - {b}: {result.summary(scale=scale)}{_paper_text(paper_effect, scale)}")


def _paper_text(paper_effect: float | None, scale: float = 1.0) -> str:
    return f"; paper's effect {paper_effect * scale:+.3g}" if paper_effect is not None else ""


def trend_claim(claim: str, steps: pd.DataFrame, metric: str, *, direction: str, what: str = "",
                paper_effect: float | None = None, window: int = 1) -> Claim:
    """Does ``metric`` rise (``greater``) or fall (``less``) over training in each run?

    Per run: the mean of its last ``window`` logged values minus the mean of its first ``window``
    (a window of several steps for noisy per-step counts); a paired t-test over runs.
    """
    ends = start_end_values(steps, metric, window)
    label = f"{what}: " if what else ""
    if len(ends) < 2:
        return Claim(claim, "inconclusive", f"{label}{metric} logged at {2 * window}+ steps in {len(ends)} run(s); "
                                            "too few")
    result = paired_test(ends["last"].to_numpy(), ends["first"].to_numpy())
    verdict = result.verdict(direction, paper_effect)
    span = f"mean of the last {window} - first {window} steps" if window > 1 else "last - first"
    return Claim(claim, verdict, f"{label}{metric} {span} over {len(ends)} runs: "
                                 f"{result.summary().replace(' pairs', ' runs')}{_paper_text(paper_effect)}")


def combine(claim: str, parts: Sequence[Claim]) -> Claim:
    """One verdict from several sub-tests of a claim: all agree -> agree, any disagree -> disagree."""
    verdicts = {p.verdict for p in parts}
    verdict = "agree" if verdicts == {"agree"} else "disagree" if "disagree" in verdicts else "inconclusive"
    return Claim(claim, verdict, "; ".join(p.evidence for p in parts))


def with_context(primary: Claim, *context: Claim) -> Claim:
    """``primary``'s verdict with the evidence of secondary tests appended (they inform, not decide)."""
    extra = "; ".join(f"(context) {c.evidence}" for c in context)
    return Claim(primary.claim, primary.verdict, primary.evidence + (f"; {extra}" if extra else ""))


def gain_by_value(runs: pd.DataFrame, value_col: str, metric: str = "final_success", a: str = "top_p",
                  b: str = "none") -> pd.DataFrame:
    """Per ``value_col`` (e.g. slip rate): mean of ``a``, of ``b``, and the paired gain ``a - b`` over seeds."""
    rows = []
    for value, part in runs.groupby(value_col):
        pair = part.pivot_table(index="seed", columns="condition", values=metric)
        has = a in pair.columns and b in pair.columns
        gain = (pair[a] - pair[b]).dropna() if has else pd.Series(dtype=float)
        rows.append({value_col: value, f"{a}_mean": pair[a].mean() if a in pair.columns else math.nan,
                     f"{b}_mean": pair[b].mean() if b in pair.columns else math.nan,
                     "gain_mean": gain.mean() if len(gain) else math.nan,
                     "gain_std": gain.std(ddof=1) if len(gain) > 1 else math.nan, "n_pairs": len(gain)})
    return pd.DataFrame(rows)


def stochasticity_units(runs: pd.DataFrame, value_col: str = "slip_rate", mid: tuple[float, float] = (0.05, 0.5),
                        a: str = "top_p", b: str = "none") -> pd.DataFrame | None:
    """C5's units: per seed, the mean gain ``a - b`` over slip rates in ``[mid[0], mid[1]]`` (column ``mid``) and
    over the others (``ends``); None when the two conditions are not both present."""
    wide = runs.pivot_table(index=["seed", value_col], columns="condition", values="final_success")
    if a not in wide.columns or b not in wide.columns:
        return None
    gain = (wide[a] - wide[b]).dropna().rename("gain").reset_index()
    is_mid = gain[value_col].between(*mid)
    return pd.DataFrame({"mid": gain[is_mid].groupby("seed")["gain"].mean(),
                         "ends": gain[~is_mid].groupby("seed")["gain"].mean()}).dropna()


def stochasticity_claim(claim: str, runs: pd.DataFrame, value_col: str = "slip_rate",
                        mid: tuple[float, float] = (0.05, 0.5), a: str = "top_p", b: str = "none",
                        paper_effect: float | None = None) -> Claim:
    """C5: the filter's gain is larger at partial stochasticity than at the extremes.

    Per seed: mean gain ``a - b`` over slip rates in ``[mid[0], mid[1]]`` minus the mean gain over
    the other slip rates; a paired test over seeds of that difference (direction greater).
    """
    per_seed = stochasticity_units(runs, value_col, mid, a, b)
    if per_seed is None:
        return Claim(claim, "inconclusive", f"conditions {a!r} and {b!r} are not both present")
    if len(per_seed) < 2:
        return Claim(claim, "inconclusive", f"{len(per_seed)} seed(s) with both mid and extreme slip rates; too few")
    res = paired_test(per_seed["mid"].to_numpy(), per_seed["ends"].to_numpy())
    return Claim(claim, res.verdict("greater", paper_effect),
                 f"gain({a} - {b}) at slip in [{mid[0]:g}, {mid[1]:g}] minus gain elsewhere: {res.summary()}"
                 f"{_paper_text(paper_effect)}")


def correlation_table(runs: pd.DataFrame, metrics: dict[str, str], target: str = "final_success",
                      paper: pd.DataFrame | None = None) -> pd.DataFrame:
    """Spearman rho of each metric column vs ``target`` across runs (NaNs dropped per metric).

    Returns:
        ``metric, label, rho, ci_low, ci_high, p, n`` (+ ``paper_rho`` when ``paper`` is given);
        metrics with fewer than 3 finite runs get NaN.
    """
    lookup = {} if paper is None else dict(zip(paper["metric"], paper["paper_rho"]))
    rows = []
    for col, label in metrics.items():
        row = {"metric": col, "label": label, "rho": math.nan, "ci_low": math.nan, "ci_high": math.nan,
               "p": math.nan, "n": 0}
        if col in runs.columns:
            ok = runs[[col, target]].replace([np.inf, -np.inf], np.nan).dropna()
            row["n"] = len(ok)
            if len(ok) >= 3:
                r = spearman(ok[col].to_numpy(), ok[target].to_numpy())
                row.update(rho=r.rho, ci_low=r.ci_low, ci_high=r.ci_high, p=r.p)
        if lookup:
            row["paper_rho"] = lookup.get(col.rsplit("/", 1)[-1], math.nan)
        rows.append(row)
    return pd.DataFrame(rows)


def checkpoint_readings(runs: pd.DataFrame, steps: pd.DataFrame, metrics: Sequence[str],
                        target: str = SUCCESS_METRIC) -> pd.DataFrame:
    """Every reading of every run at a step where ``target`` (validation success) and at least one of ``metrics`` were
    both logged, after step 0: ``run_id``, ``arm`` (:func:`ragen2.repro.studies.arms`), ``step``, ``success`` and one
    column per metric (NaN where not logged then)."""
    wanted = [*metrics, target]
    part = steps[steps["run_id"].isin(set(runs["run_id"])) & steps["metric"].isin(wanted) & (steps["step"] > 0)]
    wide = part.pivot_table(index=["run_id", "step"], columns="metric", values="value", aggfunc="last")
    wide = wide.reindex(columns=wanted).replace([np.inf, -np.inf], np.nan).dropna(subset=[target])
    wide = wide.dropna(subset=list(metrics), how="all").reset_index().rename(columns={target: "success"})
    arm_of = pd.Series(arms(runs).to_numpy(), index=runs["run_id"].to_numpy())
    wide.insert(1, "arm", wide["run_id"].map(arm_of))
    wide.columns.name = None
    return wide


def within_correlation_table(readings: pd.DataFrame, metrics: dict[str, str],
                             paper: pd.DataFrame | None = None) -> pd.DataFrame:
    """Spearman rho of each metric with success within arms, over every reading (:func:`checkpoint_readings`), with
    a bootstrap over runs within arms (:func:`ragen2.repro.stats.within_strata_spearman`).

    Returns:
        :func:`correlation_table`'s columns (``n``: readings used) plus ``runs`` and ``arms`` used; a metric with no
        arm of 3 or more runs gets NaN.
    """
    lookup = {} if paper is None else dict(zip(paper["metric"], paper["paper_rho"]))
    rows = []
    for col, label in metrics.items():
        row = {"metric": col, "label": label, "rho": math.nan, "ci_low": math.nan, "ci_high": math.nan,
               "p": math.nan, "n": 0, "runs": 0, "arms": 0}
        if col in readings.columns:
            ok = readings.dropna(subset=[col, "success"])
            try:
                r = within_strata_spearman(ok[col], ok["success"], ok["arm"], ok["run_id"])
            except ValueError:
                r = None
            if r is not None:
                sizes = ok.groupby("arm")["run_id"].nunique()
                used = ok[ok["arm"].isin(sizes[sizes >= 3].index)]
                row.update(rho=r.rho, ci_low=r.ci_low, ci_high=r.ci_high, p=r.p, n=r.n,
                           runs=used["run_id"].nunique(), arms=used["arm"].nunique())
        if lookup:
            row["paper_rho"] = lookup.get(col.rsplit("/", 1)[-1], math.nan)
        rows.append(row)
    return pd.DataFrame(rows)


def correlation_claim(claim: str, corr: pd.DataFrame, mi_metric: str, entropy_metrics: Sequence[str], *,
                      what: str = "Spearman vs final success (95% bootstrap CIs)") -> Claim:
    """C2: the MI proxy correlates positively with success (significant), and better than entropies.

    ``agree`` = rho(MI) significantly > 0 and larger than every entropy metric's |rho|; ``disagree`` =
    rho(MI) significantly < 0, or below an entropy metric with a significant correlation, or (when
    ``corr`` has the paper's values) a 95 % bootstrap CI of rho(MI) that lies below the paper's rho
    (our runs rule out a correlation as strong as the paper's).
    """
    table = corr.set_index("metric")
    mi = table.loc[mi_metric]
    paper_rho = float(mi["paper_rho"]) if "paper_rho" in table.columns and not pd.isna(mi["paper_rho"]) else None
    base = decide(float(mi["rho"]), float(mi["p"]), "greater", ci=(float(mi["ci_low"]), float(mi["ci_high"])),
                  paper_effect=paper_rho)
    ents = table.loc[[m for m in entropy_metrics if m in table.index]]
    better = bool((mi["rho"] > ents["rho"].abs()).all()) if len(ents) else False
    beaten = bool(((ents["p"] < 0.05) & (ents["rho"].abs() > mi["rho"])).any()) if len(ents) else False
    verdict = base
    if base == "agree" and not better:
        verdict = "inconclusive"
    if beaten:
        verdict = "disagree"
    text = ", ".join(f"{r.label} rho {r.rho:+.2f} [{r.ci_low:+.2f}, {r.ci_high:+.2f}] (p={r.p:.2g}, n={r.n})"
                     for r in corr.itertuples())
    paper = f"; paper: {mi_metric.rsplit('/', 1)[-1]} rho {paper_rho:+.2f}" if paper_rho is not None else ""
    return Claim(claim, verdict, f"{what}: {text}{paper}")


def grad_bucket_rows(grad: pd.DataFrame) -> pd.DataFrame:
    """The gradient-analysis rows C4 is tested on: every (run, step, bucket) row but the ``all`` bucket, with RV and
    both norms present."""
    return grad[grad["bucket"].astype(str) != "all"].dropna(subset=["rv_mean", "task_norm", "reg_norm"])


def grad_claim(claim: str, grad: pd.DataFrame) -> Claim:
    """C4: the task-gradient norm grows with bucket RV while the regularisation norm does not.

    Spearman of ``task_norm`` and of ``reg_norm`` vs ``rv_mean`` over every (run, step, bucket) row
    except the ``all`` bucket. ``agree`` when the task rho is significantly positive and the reg rho
    is not (significantly positive); ``disagree`` when the task rho is significantly negative.
    """
    data = grad_bucket_rows(grad)
    if len(data) < 3:
        return Claim(claim, "inconclusive", f"{len(data)} bucket rows; too few")
    task = spearman(data["rv_mean"], data["task_norm"])
    reg = spearman(data["rv_mean"], data["reg_norm"]) if data["reg_norm"].nunique() > 1 else None
    verdict = decide(task.rho, task.p, "greater")
    reg_grows = reg is not None and decide(reg.rho, reg.p, "greater") == "agree"
    if verdict == "agree" and reg_grows:
        verdict = "inconclusive"
    reg_text = reg.summary().replace(" runs", " bucket rows") if reg is not None else "constant (coefficients 0?)"
    algos = ",".join(sorted(map(str, data["algo"].unique()))) if "algo" in data.columns else "?"
    task_text = task.summary().replace(" runs", " bucket rows")
    return Claim(claim, verdict, f"{algos}: task norm vs RV {task_text}; reg norm vs RV {reg_text}")


def intervention_claim(claim: str, runs: pd.DataFrame, *, sweeps: pd.DataFrame | None = None,
                       context_sweeps: dict[str, str] | None = None, filter_sweep: str = "top-p",
                       paper_effect: float | None = None, paper_rho: float | None = None,
                       value: str = "final_success", scale: float = 100.0, note: str = "") -> Claim:
    """C7: the top-p sweep moves success consistently (lower top-p -> higher success), entropy / KL do not.

    Primary test: :func:`ragen2.repro.studies.filter_gain_units` (final success with Top-p < 1 minus without filter, one
    difference per no-filter run, paired on algorithm, seed and settings), a two-sided paired t-test over
    those units, :meth:`ragen2.repro.stats.PairedResult.verdict` in the direction ``greater`` with
    ``paper_effect`` (C1's paper gain, same scale as ``value``): ``agree`` = gain significantly > 0;
    ``disagree`` = significantly < 0, or a 95 % t-interval that excludes ``paper_effect`` (we rule out a
    move as large as the paper's); else ``inconclusive``. An ``agree`` is downgraded to ``inconclusive``
    when an entropy / KL sweep moves success significantly (:func:`ragen2.repro.studies.sweep_units`, paired t-test, p < 0.05).

    Context (reported, not deciding): each ``context_sweeps`` study's paired difference vs its base point,
    the Spearman rho of swept value vs success per sweep of ``sweeps`` (:func:`ragen2.repro.studies.sweep_table`; with
    ``paper_rho`` as its bar), and that the Top-p 0.9 pairs are C1's.

    Args:
        runs: :func:`ragen2.repro.studies.load_study` of the main and sweep studies (``main``, ``ent``, ``kl``, ``toppsweep``).
        context_sweeps: study tag -> label of the sweeps that should *not* move success
            (default ``{"ent": "entropy coef", "kl": "KL coef"}``).
        filter_sweep: the top-p sweep's label in ``sweeps``.
        scale: factor for the evidence text (100: success in points).
        note: appended to the evidence (e.g. a disclosed change of the test).
    """
    context_sweeps = {"ent": "entropy coef", "kl": "KL coef"} if context_sweeps is None else context_sweeps
    units = filter_gain_units(runs, value)
    main = runs[runs["study"] == "main"]
    moved, context = [], []
    for study, label in context_sweeps.items():
        diffs, base_values = sweep_units(runs, study, main, value)
        base_text = "/".join(f"{v:g}" for v in base_values) or "none"
        if len(diffs) < 2:
            context.append(f"{label}: {len(diffs)} seed(s) paired with the base point ({base_text}); too few")
            continue
        res = paired_test(diffs["treated"].to_numpy(), diffs["base"].to_numpy(), boards=unit_boards(diffs))
        significant = res.t_p < 0.05
        if significant:
            moved.append(label)
        context.append(f"{label}: swept values (mean per seed) - base {base_text}: "
                       f"{res.summary(scale=scale).replace(' pairs', ' seeds')}"
                       + (" (significant)" if significant else ""))
    if sweeps is not None and len(sweeps):
        rhos = []
        for name, part in sweeps.groupby("sweep", sort=False):
            ok = part.dropna(subset=[value])
            rhos.append(f"{name} {spearman(ok['value'], ok[value]).summary()}" if len(ok) >= 3 else f"{name}: <3 runs")
        bar = f" (bar for {filter_sweep}: rho {paper_rho:+.2f})" if paper_rho is not None else ""
        context.append(f"Spearman of swept value vs {value}{bar}: " + "; ".join(rhos))
    n_09 = int((units["partners"].str.split(",").explode().isin(set(main["run_id"]))).sum()) if len(units) else 0
    context.append(f"the primary test shares its {n_09} main-study Top-p pairs with C1 (not independent of it)")
    if len(units) < 2:
        verdict, text = "inconclusive", f"{len(units)} no-filter run(s) with a Top-p < 1 partner; too few"
    else:
        res = paired_test(units["treated"].to_numpy(), units["base"].to_numpy(), boards=unit_boards(units))
        verdict = res.verdict("greater", paper_effect)
        ids = units["partners"].str.split(",").explode()
        counts = ids.map(runs.set_index("run_id")["filter.value"].astype(float)).value_counts().sort_index(ascending=False)
        partners = ", ".join(f"{v:g} x {n}" for v, n in counts.items())
        text = (f"{value}, Top-p < 1 minus no filter, paired on algorithm, seed and settings, one difference per "
                f"no-filter run (filtered partners: top-p {partners}; a run's partners averaged): "
                f"{res.summary(scale=scale).replace(' pairs', ' runs')}{_paper_text(paper_effect, scale)}")
    if verdict == "agree" and moved:
        verdict = "inconclusive"
        text += f"; downgraded from agree: {', '.join(moved)} also moved success significantly"
    extra = "".join(f"; (context) {c}" for c in context)
    return Claim(claim, verdict, text + extra + (f"; {note}" if note else ""))


def quartile_claim(claim: str, quartiles: pd.DataFrame, paper_effect: dict[str, float] | None = None,
                   *, phase: str = "end") -> Claim:
    """C3: success and MI higher in the top RV quartile than in the bottom one, paired over runs.

    The units are the runs' ``phase`` checkpoints (independent policies; :func:`ragen2.repro.prompt_tables.quartile_differences`):
    one Q4 - Q1 difference per run, a two-sided paired t-test for ``success`` and for ``mi``, combined by
    :func:`combine`. Rows of other phases, notably the warm start, are context only: the warm start is
    one policy rolled out with one sampling seed, so repeating it per run would be pseudo-replication.

    ``paper_effect``: optional smallest effect per column (``success``, ``mi``) for the t-CI rule.
    """
    wide, repeated = quartile_units(quartiles, phase)
    where = "final checkpoints" if phase == "end" else f"phase {phase!r}"
    units = f" runs ({where}; the warm start is context only" + (
        f"; {repeated} repeated table(s) counted once)" if repeated else ")")
    parts = []
    for col in ("success", "mi"):
        if (col, 4) not in wide.columns or (col, 1) not in wide.columns:
            parts.append(Claim(claim, "inconclusive", f"{col}: quartiles 1 and 4 missing at phase {phase!r}"))
            continue
        pair = wide[[(col, 4), (col, 1)]].dropna()
        if len(pair) < 2:
            parts.append(Claim(claim, "inconclusive", f"{col}: {len(pair)} run(s) at phase {phase!r}; too few"))
            continue
        res = paired_test(pair[(col, 4)].to_numpy(), pair[(col, 1)].to_numpy())
        effect = (paper_effect or {}).get(col)
        parts.append(Claim(claim, res.verdict("greater", effect),
                           f"{col} Q4 - Q1: {res.summary().replace(' pairs', units)}{_paper_text(effect)}"))
    return combine(claim, parts)
