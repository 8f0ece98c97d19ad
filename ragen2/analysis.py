"""Analysis helpers the notebooks call: study selection, per-claim tables and verdicts, prompt-level tables.

Everything a notebook needs beyond loading runs (:mod:`ragen2.results_io`), drawing
(:mod:`ragen2.figures`) and testing (:mod:`ragen2.stats`) lives here, so notebooks stay thin.

- Run ids (:mod:`ragen2.profiles`): :func:`parse_run_id`, :func:`load_study` (runs of some studies,
  with ``study``, ``study_value`` and ``filter_tag`` columns).
- Verdicts: :func:`paired_claim` (a paired comparison over seeds -> :class:`ragen2.claims.Claim`),
  :func:`correlation_table` (C2), :func:`grad_claim` (C4), :func:`sweep_table`,
  :func:`matched_differences` / :func:`filter_gain_units` / :func:`sweep_units` and :func:`intervention_claim`
  (C7), :func:`trend_claim` (C6: a metric rises/falls over training).
- Prompt level (C3, C6 heatmaps): :func:`prompt_level_table` rolls a saved policy out on fixed
  prompts and returns one row per (prompt, rollout) with the reward, the prompt's RV and a per-prompt
  MI proxy; :func:`prompt_tables` computes it for several runs (the warm start once);
  :func:`rv_quartile_table` cuts prompts into RV quartiles; :func:`quartile_claim` tests them over runs.
- Toy regimes (notebook 01): :func:`toy_point`, :func:`regime_points_from_steps`, :func:`show_toy_policy`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ragen2.claims import Claim
from ragen2.results_io import final_values, load_runs, start_end_values
from ragen2.stats import decide, paired_test, spearman

_RUN_ID_RE = re.compile(r"^(?P<env>[^_]+(?:_[^_]+)*)__(?P<algo>[a-z_]+)__(?P<filter>[a-z0-9p]+)__"
                        r"(?P<study>[a-z]+)(?P<value>[0-9p]*)__s(?P<seed>\d+)$")
MI_METRIC = "collapse_first_turn/mi_estimate"
"""The per-token MI proxy used as "the MI" in verdicts (the probe's MI_tok)."""
SMALLEST_EFFECTS = {
    "C3_success": 0.05,
    "C3_mi": 0.05,
    "C5": 0.02,
    "C6_mi": 0.1,
    "C6_zero_variance": 0.5,
    "C7_rho": -0.3,
}
"""Smallest effects that would count as the paper's, for claims where the paper gives no number, fixed
before the CPU runs were looked at. A verdict is ``disagree`` when the 95 % interval of our effect excludes
it (our data rule out an effect that large) even though no significant effect was found either way:
C3, top minus bottom RV quartile, 5 points of success and 0.05 nats of per-token MI; C5, the filter's gain
at partial slip minus its gain at the extremes, 2 points (the paper's FrozenLake gains span 0.6-10.9);
C6, Top-p minus none in final per-token MI, 0.1 nats (a third of the CPU probe's +0.34), and a rise of
0.5 zero-variance groups per batch (mean of the last 5 steps minus the first 5); C7, a Spearman rho of -0.3 between the
top-p value and final success (since the first CPU run only the bar of C7's context statistic and of its power
statement: C7 is decided by :func:`intervention_claim`'s paired test against C1's paper effect). Where the paper
gives a number (C1: its mean FrozenLake gain over the algorithms run; C2: its rho of +0.39 for MI-ZScore), that
number is used instead."""


# ---------------------------------------------------------------------------------------------
# Run ids and studies
# ---------------------------------------------------------------------------------------------
def parse_run_id(run_id: str) -> dict[str, Any]:
    """The parts of ``<env>__<algo>__<filter>__<study><value>__s<seed>``.

    Returns:
        ``env, algo, filter_tag, study, study_value (float or NaN), seed``.

    Raises:
        ValueError: the id does not have that shape.
    """
    m = _RUN_ID_RE.match(run_id)
    if m is None:
        raise ValueError(f"run id {run_id!r} is not of the form <env>__<algo>__<filter>__<study>__s<seed>")
    value = m["value"]
    return {"env": m["env"], "algo": m["algo"], "filter_tag": m["filter"], "study": m["study"],
            "study_value": float(value.replace("p", ".")) if value else math.nan, "seed": int(m["seed"])}


def load_study(runs_root: str | Path, studies: str | Sequence[str],
               metrics: Sequence[str] = ()) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Runs (and their steps) of the given studies, with the run-id parts as columns.

    Args:
        runs_root: folder of run directories.
        studies: study tag(s) without value (``main``, ``slip``, ``mech``, ``ent``, ...).
        metrics: per-step metrics whose final value is added to ``runs`` as columns.

    Raises:
        FileNotFoundError: no run of these studies.
    """
    wanted = {studies} if isinstance(studies, str) else set(studies)
    runs, steps = load_runs(runs_root)
    parts = pd.DataFrame([parse_run_id(r) for r in runs["run_id"]])
    runs = runs.assign(study=parts["study"].to_numpy(), study_value=parts["study_value"].to_numpy(),
                       filter_tag=parts["filter_tag"].to_numpy())
    runs = runs[runs["study"].isin(wanted)].reset_index(drop=True)
    if runs.empty:
        raise FileNotFoundError(f"no run of study {sorted(wanted)} under {str(runs_root)!r}")
    steps = steps[steps["run_id"].isin(set(runs["run_id"]))].reset_index(drop=True)
    steps = steps.merge(runs[["run_id", "study", "study_value", "filter_tag"]], on="run_id")
    if metrics:
        runs = runs.merge(final_values(steps, list(metrics)), on="run_id", how="left")
    return runs, steps


# ---------------------------------------------------------------------------------------------
# Verdicts
# ---------------------------------------------------------------------------------------------
def paired_claim(claim: str, runs: pd.DataFrame, value: str, a: str, b: str, *, direction: str = "greater",
                 condition: str = "condition", pair_on: str | Sequence[str] = "seed", what: str = "",
                 scale: float = 1.0, paper_effect: float | None = None) -> Claim:
    """A claim judged by a paired test of ``value`` under condition ``a`` vs ``b``.

    Pairs are rows that agree on ``pair_on`` (one or several columns, e.g. ``("env", "algo",
    "seed")``). The verdict is :meth:`ragen2.stats.PairedResult.verdict` (paired t-test of ``a - b``;
    ``disagree`` also when the t-CI excludes ``paper_effect``, the smallest difference that would
    count as the paper's effect); with fewer than 2 pairs it is ``inconclusive``.
    """
    keys = [pair_on] if isinstance(pair_on, str) else list(pair_on)
    data = runs.dropna(subset=[value])
    sides = [data[data[condition] == c].set_index(keys)[value].rename(c) for c in (a, b)]
    joined = pd.concat(sides, axis=1, join="inner").dropna()
    label = f"{what}: " if what else ""
    if len(joined) < 2:
        return Claim(claim, "inconclusive", f"{label}{len(joined)} pair(s) of {a} vs {b} on {value}; too few")
    result = paired_test(joined[a].to_numpy(), joined[b].to_numpy())
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


def stochasticity_claim(claim: str, runs: pd.DataFrame, value_col: str = "slip_rate",
                        mid: tuple[float, float] = (0.05, 0.5), a: str = "top_p", b: str = "none",
                        paper_effect: float | None = None) -> Claim:
    """C5: the filter's gain is larger at partial stochasticity than at the extremes.

    Per seed: mean gain ``a - b`` over slip rates in ``[mid[0], mid[1]]`` minus the mean gain over
    the other slip rates; a paired test over seeds of that difference (direction greater).
    """
    wide = runs.pivot_table(index=["seed", value_col], columns="condition", values="final_success")
    if a not in wide.columns or b not in wide.columns:
        return Claim(claim, "inconclusive", f"conditions {a!r} and {b!r} are not both present")
    gain = (wide[a] - wide[b]).dropna().rename("gain").reset_index()
    is_mid = gain[value_col].between(*mid)
    per_seed = pd.DataFrame({"mid": gain[is_mid].groupby("seed")["gain"].mean(),
                             "ends": gain[~is_mid].groupby("seed")["gain"].mean()}).dropna()
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


def correlation_claim(claim: str, corr: pd.DataFrame, mi_metric: str, entropy_metrics: Sequence[str]) -> Claim:
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
    return Claim(claim, verdict, f"Spearman vs final success (95% bootstrap CIs): {text}{paper}")


def grad_claim(claim: str, grad: pd.DataFrame) -> Claim:
    """C4: the task-gradient norm grows with bucket RV while the regularisation norm does not.

    Spearman of ``task_norm`` and of ``reg_norm`` vs ``rv_mean`` over every (run, step, bucket) row
    except the ``all`` bucket. ``agree`` when the task rho is significantly positive and the reg rho
    is not (significantly positive); ``disagree`` when the task rho is significantly negative.
    """
    data = grad[grad["bucket"].astype(str) != "all"].dropna(subset=["rv_mean", "task_norm", "reg_norm"])
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


SWEPT_COLUMNS = {"ent": "trainer.entropy_coef", "kl": "trainer.kl_coef", "toppsweep": "filter.value"}
"""The config column each intervention sweep changes."""
SETTING_COLUMNS = ("env", "algo", "trainer.steps", "trainer.entropy_coef", "trainer.entropy_scope", "trainer.kl_coef",
                   "filter.strategy", "filter.value", "filter.top_p_mode", "filter.include_zero", "env.kwargs.success_rate")
"""Config columns that must agree for a run of another study to stand in as a sweep or slip point."""


def _setting_keys(frame: pd.DataFrame, ignore: Sequence[str]) -> list[tuple]:
    cols = [c for c in SETTING_COLUMNS if c not in ignore]
    for col in cols:
        if col not in frame.columns:
            frame = frame.assign(**{col: math.nan})
    return [tuple(map(str, row)) for row in frame[cols].to_numpy()]


def borrowed_points(study_runs: pd.DataFrame, candidates: pd.DataFrame, ignore: Sequence[str]) -> pd.DataFrame:
    """Rows of ``candidates`` whose settings equal those of some run in ``study_runs`` except the ``ignore``
    columns (the swept ones): a profile with ``reuse_main`` trains such points once, in the main study.

    Both tables come from :func:`load_study`; seeds are not compared.
    """
    wanted = set(_setting_keys(study_runs, ignore))
    mask = [k in wanted for k in _setting_keys(candidates, ignore)]
    return candidates[mask]


def slip_runs(runs_root: str | Path, metrics: Sequence[str] = ()) -> pd.DataFrame:
    """C5's runs with ``slip_rate`` = 1 - FrozenLake's ``success_rate``.

    The main study's runs with the same algorithm, filter and trainer settings as some slip run (at
    any slip rate) are added as their own slip rate (FrozenLake's base 2 %), unless the slip study
    has runs at that rate and seed itself.
    """
    slip, _ = load_study(runs_root, "slip", metrics=metrics)
    try:
        main, _ = load_study(runs_root, "main", metrics=metrics)
    except FileNotFoundError:
        main = slip.iloc[0:0]
    borrowed = borrowed_points(slip, main, ignore=("env.kwargs.success_rate",))
    out = pd.concat([slip, borrowed], ignore_index=True)
    out["slip_rate"] = (1.0 - out["env.kwargs.success_rate"].astype(float)).round(6)
    return out.drop_duplicates(subset=["slip_rate", "condition", "seed", "algo"], keep="first").reset_index(drop=True)


def sweep_table(runs: pd.DataFrame, sweeps: dict[str, str], mi_metric: str = MI_METRIC,
                base: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per run of the intervention sweeps: ``sweep, value, seed, run_id, final_success, final_mi``.

    Args:
        runs: from :func:`load_study` with the final ``mi_metric`` column.
        sweeps: study tag -> sweep label (``{"ent": "entropy coef", "kl": "KL coef", "toppsweep": "top-p"}``).
            The value is read from the config column the sweep changes (:data:`SWEPT_COLUMNS`; top-p 1.0
            = no filter).
        base: optional runs of another study (the main one) that are points of a sweep: those whose
            settings equal a sweep run's except the swept column (and, for top-p, ``include_zero``).
    """
    rows = []
    for study, label in sweeps.items():
        column = SWEPT_COLUMNS[study]
        part = runs[runs["study"] == study]
        if base is not None and len(part):
            ignore = (column, "filter.include_zero") if study == "toppsweep" else (column,)
            part = pd.concat([part, borrowed_points(part, base, ignore)], ignore_index=True)
        for d in part.to_dict("records"):
            rows.append({"sweep": label, "value": float(d[column]), "seed": d["seed"], "run_id": d["run_id"],
                         "final_success": d["final_success"], "final_mi": d.get(mi_metric, math.nan)})
    if not rows:
        raise ValueError(f"no runs of the sweeps {sorted(sweeps)}")
    return pd.DataFrame(rows).drop_duplicates(subset=["sweep", "run_id"]).reset_index(drop=True)


def matched_differences(treated: pd.DataFrame, bases: pd.DataFrame, ignore: Sequence[str],
                        value: str = "final_success") -> pd.DataFrame:
    """Paired differences ``treated - base`` with one row per base run, the unit of the test.

    A treated run is matched to the base run with the same ``seed`` and the same settings
    (:data:`SETTING_COLUMNS`, which include env and algorithm) except the ``ignore`` columns (the
    changed factor); when several bases match, the one of its own ``study`` wins, else the first.
    A base with several treated partners (e.g. top-p 0.9 and 0.6 at the same seed) gets the mean of
    its partners' values, so no run enters a test twice (pairs sharing a base are not independent).
    Runs with a NaN ``value`` and treated runs without a base are left out.

    Returns:
        ``base_run_id, env, algo, seed, n_partners, partners`` (run ids, comma-separated), ``base``,
        ``treated`` (partner mean), ``diff`` (``treated - base``); empty (same columns) when nothing matches.
    """
    columns = ["base_run_id", "env", "algo", "seed", "n_partners", "partners", "base", "treated", "diff"]
    treated, bases = treated.dropna(subset=[value]), bases.dropna(subset=[value])
    def column(frame: pd.DataFrame, name: str) -> list:
        return frame[name].tolist() if name in frame.columns else [None] * len(frame)

    base_study, treated_study, treated_id = column(bases, "study"), column(treated, "study"), column(treated, "run_id")
    index: dict[tuple, list[int]] = {}
    for i, (key, seed) in enumerate(zip(_setting_keys(bases, ignore), bases["seed"])):
        index.setdefault((key, int(seed)), []).append(i)
    partners: dict[int, list[int]] = {}
    for j, (key, seed) in enumerate(zip(_setting_keys(treated, ignore), treated["seed"])):
        found = index.get((key, int(seed)), [])
        own = [i for i in found if treated_study[j] is not None and base_study[i] == treated_study[j]]
        if found:
            partners.setdefault((own or found)[0], []).append(j)
    rows = []
    for i, js in sorted(partners.items()):
        base = bases.iloc[i]
        mean = float(treated[value].iloc[js].mean())
        rows.append({"base_run_id": base.get("run_id"), "env": base.get("env"), "algo": base.get("algo"),
                     "seed": int(base["seed"]), "n_partners": len(js), "partners": ",".join(str(treated_id[j]) for j in js),
                     "base": float(base[value]), "treated": mean, "diff": mean - float(base[value])})
    return pd.DataFrame(rows, columns=columns)


def filter_gain_units(runs: pd.DataFrame, value: str = "final_success",
                      studies: Sequence[str] = ("main", "toppsweep")) -> pd.DataFrame:
    """C7's primary pairs: runs with Top-p < 1 vs the no-filter run with the same algorithm, seed and settings.

    Among the runs of ``studies`` (from :func:`load_study`), the treated runs are those with
    ``filter.strategy == "top_p"`` and ``filter.value < 1`` (main-study Top-p 0.9 of every algorithm,
    the top-p sweep's points), the bases those with ``condition == "none"``; matched by
    :func:`matched_differences` ignoring ``filter.value`` and ``filter.include_zero``, so a no-filter run
    with two filtered partners (CPU profile: GRPO at 0.9 and 0.6) is one unit with their mean gain.
    """
    data = runs[runs["study"].isin(list(studies))]
    top_p = (data["filter.strategy"] == "top_p") & (data["filter.value"].astype(float) < 1)
    return matched_differences(data[top_p], data[data["condition"] == "none"],
                               ("filter.value", "filter.include_zero"), value)


def sweep_units(runs: pd.DataFrame, study: str, main: pd.DataFrame | None = None,
                value: str = "final_success") -> tuple[pd.DataFrame, list[float]]:
    """A sweep's runs vs its base point, one row per base run (its swept values averaged, paired by seed).

    The base point is the ``main`` runs whose settings equal the sweep's except the swept column
    (:data:`SWEPT_COLUMNS`; the CPU profile's base is the main study's GRPO no-filter cells); when
    ``main`` has none, the sweep's own runs at its smallest value (coefficient 0). Sweep runs at a
    base value are not treated.

    Returns:
        :func:`matched_differences`'s table and the base value(s).
    """
    column = SWEPT_COLUMNS[study]
    part = runs[runs["study"] == study]
    bases = borrowed_points(part, main, (column,)) if main is not None and len(part) else part.iloc[0:0]
    if bases.empty and len(part):
        low = part[column].astype(float).min()
        bases = part[part[column].astype(float) == low]
    base_values = sorted(set(bases[column].astype(float)))
    treated = part[~part[column].astype(float).isin(base_values)]
    return matched_differences(treated, bases, (column,), value), base_values


def intervention_claim(claim: str, runs: pd.DataFrame, *, sweeps: pd.DataFrame | None = None,
                       context_sweeps: dict[str, str] | None = None, filter_sweep: str = "top-p",
                       paper_effect: float | None = None, paper_rho: float | None = None,
                       value: str = "final_success", scale: float = 100.0, note: str = "") -> Claim:
    """C7: the top-p sweep moves success consistently (lower top-p -> higher success), entropy / KL do not.

    Primary test: :func:`filter_gain_units` (final success with Top-p < 1 minus without filter, one
    difference per no-filter run, paired on algorithm, seed and settings), a two-sided paired t-test over
    those units, :meth:`ragen2.stats.PairedResult.verdict` in the direction ``greater`` with
    ``paper_effect`` (C1's paper gain, same scale as ``value``): ``agree`` = gain significantly > 0;
    ``disagree`` = significantly < 0, or a 95 % t-interval that excludes ``paper_effect`` (we rule out a
    move as large as the paper's); else ``inconclusive``. An ``agree`` is downgraded to ``inconclusive``
    when an entropy / KL sweep moves success significantly (:func:`sweep_units`, paired t-test, p < 0.05).

    Context (reported, not deciding): each ``context_sweeps`` study's paired difference vs its base point,
    the Spearman rho of swept value vs success per sweep of ``sweeps`` (:func:`sweep_table`; with
    ``paper_rho`` as its bar), and that the Top-p 0.9 pairs are C1's.

    Args:
        runs: :func:`load_study` of the main and sweep studies (``main``, ``ent``, ``kl``, ``toppsweep``).
        context_sweeps: study tag -> label of the sweeps that should *not* move success
            (default ``{"ent": "entropy coef", "kl": "KL coef"}``).
        filter_sweep: the top-p sweep's label in ``sweeps``.
        scale: factor for the evidence text (100: success in points).
        note: appended to the evidence (e.g. the history of the test).
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
        res = paired_test(diffs["treated"].to_numpy(), diffs["base"].to_numpy())
        significant = res.t_p < 0.05
        if significant:
            moved.append(label)
        context.append(f"{label}: swept values (mean per seed) - base {base_text}: "
                       f"{res.summary(scale=scale).replace(' pairs', ' seeds')}"
                       + (" (significant)" if significant else ""))
    if sweeps is not None:
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
        res = paired_test(units["treated"].to_numpy(), units["base"].to_numpy())
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


# ---------------------------------------------------------------------------------------------
# Prompt-level tables (C3, C6)
# ---------------------------------------------------------------------------------------------
def prompt_level_table(run_dir: str | Path, *, phase: str = "end", num_prompts: int = 32, group_size: int = 8,
                       cache_dir: str | Path = "data/cache", seed: int = 0, first_seed: int = 900_000
                       ) -> pd.DataFrame:
    """Roll a run's policy out on fixed prompts and score each prompt: reward, RV, a per-prompt MI proxy.

    Args:
        run_dir: a run directory (``config.json``, ``checkpoints/``).
        phase: ``start`` = the policy RL started from (the warm start), ``end`` = the latest checkpoint,
            ``mid`` = the kept checkpoint (``trainer.keep_every``) nearest half the latest step.
        num_prompts, group_size: prompts (env seeds ``first_seed + i``) x rollouts each.
        cache_dir: the warm-start cache.
        seed: sampling seed (the same for every run and phase, so prompts and noise are shared).

    Returns:
        One row per (prompt, rollout): ``prompt, rollout, reward, success, rv`` (population variance of
        the prompt's rewards), ``mi`` (mean over the prompt's first-turn reasonings of
        ``log p(z|x) - log mean_j p(z|x_j)`` per token: how much better the own prompt explains the
        reasoning than the average prompt) and ``phase``.
    """
    import json

    import torch

    from ragen2.config import RunConfig, from_dict
    from ragen2.metrics.scoring import cross_logprobs
    from ragen2.policy import load_policy
    from ragen2.rollout.collect import collect_rollouts
    from ragen2.trainer.checkpoint import kept_checkpoints, latest_checkpoint, load_checkpoint
    from ragen2.warmstart import initial_policy

    if phase not in ("start", "mid", "end"):
        raise ValueError(f"phase must be 'start', 'mid' or 'end', got {phase!r}")
    if num_prompts < 2 or group_size < 1:
        raise ValueError(f"need num_prompts >= 2 and group_size >= 1, got {num_prompts}, {group_size}")
    run_dir = Path(run_dir)
    cfg = from_dict(RunConfig, json.loads((run_dir / "config.json").read_text()))
    model, tokenizer = load_policy(initial_policy(cfg, Path(cache_dir)), dtype=cfg.policy.dtype,
                                   device=cfg.policy.device)
    if phase != "start":
        ckpt = latest_checkpoint(run_dir)
        if ckpt is None:
            raise FileNotFoundError(f"{run_dir} has no checkpoint (trainer.save_freq 0 and unfinished?)")
        if phase == "mid":
            earlier = {step: path for step, path in kept_checkpoints(run_dir).items() if path != ckpt}
            if not earlier:
                raise FileNotFoundError(f"{run_dir} keeps no checkpoint before its latest (trainer.keep_every 0?)")
            last = max(kept_checkpoints(run_dir))
            ckpt = earlier[min(earlier, key=lambda step: (abs(step - last / 2), step))]
        model.load_state_dict(load_checkpoint(ckpt, map_location=next(model.parameters()).device)["actor"])
    model.eval()
    seeds = [first_seed + i for i in range(num_prompts)]
    with torch.no_grad():
        batch = collect_rollouts(model, tokenizer, cfg.env, cfg.rollout, seeds, group_size=group_size,
                                 temperature=cfg.rollout.temperature, seed=seed)
        trajs = batch.trajectories
        prompts = [trajs[g * group_size].first_prompt_ids for g in range(num_prompts)]
        rows = [(i, t) for i, t in enumerate(trajs) if t.first_reasoning_ids]
        gap = np.full(len(trajs), np.nan)
        if rows:
            logp, lengths = cross_logprobs(model, tokenizer, prompts, [t.first_reasoning_ids for _, t in rows])
            per_tok = logp / np.maximum(lengths, 1)[:, None]
            marginal = np.logaddexp.reduce(per_tok, axis=1) - math.log(num_prompts)
            for k, (i, _) in enumerate(rows):
                gap[i] = per_tok[k, i // group_size] - marginal[k]
    scores = batch.scores.reshape(num_prompts, group_size)
    out = pd.DataFrame({
        "prompt": np.repeat(np.arange(num_prompts), group_size),
        "rollout": np.tile(np.arange(group_size), num_prompts),
        "reward": scores.ravel(),
        "success": batch.successes.reshape(-1).astype(float),
        "rv": np.repeat(scores.var(axis=1), group_size),
        "mi_row": gap,
    })
    out["mi"] = out.groupby("prompt")["mi_row"].transform("mean")
    return out.drop(columns="mi_row").assign(phase=phase, run_id=run_dir.name)


WARM_START_SECTIONS = ("env", "policy", "warm_start", "rollout")
"""Config sections that fix a run's ``start`` prompt table (the warm-start policy, the prompts, the sampling)."""


def prompt_tables(runs_root: str | Path, run_ids: Sequence[str], phases: Sequence[str] = ("start", "end"),
                  *, start_label: str = "warm start", workers: int = 1, **kwargs: Any) -> pd.DataFrame:
    """:func:`prompt_level_table` of several runs and phases, concatenated; the warm start once.

    The ``start`` phase is the policy RL started from, not something a run produced: runs whose configs
    agree in :data:`WARM_START_SECTIONS` roll the same policy out on the same prompts with the same
    sampling seed, so their start tables are identical. It is therefore computed once per distinct
    warm start (through the first such run's config) and labelled ``run_id = start_label``
    (``"<start_label> <k> (<env>)"`` when the runs have several warm starts), so that
    a test over runs cannot count one policy several times. Every other phase is computed per run.

    Each table is computed on one torch thread, so the result does not depend on ``workers``.

    Args:
        runs_root: folder of run directories.
        run_ids: the runs.
        phases: phases of :func:`prompt_level_table` (``start`` handled as above).
        start_label: ``run_id`` of the warm-start rows.
        workers: processes computing tables side by side (1: all in this process).
        **kwargs: passed to :func:`prompt_level_table` (``num_prompts``, ``group_size``, ``cache_dir``, ...).
    """
    import json

    if not len(run_ids):
        raise ValueError("run_ids is empty")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers!r}")
    root = Path(runs_root)
    jobs: list[tuple[Path, str, str | None]] = []  # (run dir, phase, run_id label; None: the run's name)
    if "start" in phases:
        starts: dict[str, tuple[str, str]] = {}  # warm-start signature -> (first run id, env name)
        for rid in run_ids:
            cfg = json.loads((root / rid / "config.json").read_text())
            key = json.dumps({k: cfg.get(k) for k in WARM_START_SECTIONS}, sort_keys=True, default=str)
            starts.setdefault(key, (rid, str((cfg.get("env") or {}).get("name", "?"))))
        for k, (rid, env) in enumerate(starts.values()):
            jobs.append((root / rid, "start", start_label if len(starts) == 1 else f"{start_label} {k + 1} ({env})"))
    jobs += [(root / rid, phase, None) for rid in run_ids for phase in phases if phase != "start"]
    if workers == 1 or len(jobs) == 1:
        parts = [_one_thread_table(job, kwargs) for job in jobs]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=min(workers, len(jobs)),
                                 mp_context=multiprocessing.get_context("spawn")) as pool:
            parts = list(pool.map(_one_thread_table, jobs, [kwargs] * len(jobs)))
    return pd.concat(parts, ignore_index=True)


def _one_thread_table(job: tuple[Path, str, str | None], kwargs: dict[str, Any]) -> pd.DataFrame:
    """One :func:`prompt_tables` job on one torch thread (the caller's thread count is restored)."""
    import torch

    run_dir, phase, label = job
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        table = prompt_level_table(run_dir, phase=phase, **kwargs)
    finally:
        torch.set_num_threads(threads)
    return table if label is None else table.assign(run_id=label)


def rv_quartile_table(prompts: pd.DataFrame, by: Sequence[str] = ("run_id", "phase")) -> pd.DataFrame:
    """Prompts cut into RV quartiles within each ``by`` group (1 = lowest RV; ties broken by prompt id).

    Returns:
        One row per (``by``..., quartile): ``success`` and ``mi`` means over the quartile's prompts and
        ``rv`` mean. Groups with fewer than 4 prompts are skipped.
    """
    per_prompt = prompts.groupby([*by, "prompt"], as_index=False).agg(
        success=("success", "mean"), mi=("mi", "mean"), rv=("rv", "first"))
    parts = []
    for _, part in per_prompt.groupby(list(by)):
        if len(part) < 4:
            continue
        order = part.sort_values(["rv", "prompt"], kind="stable")
        order = order.assign(quartile=(np.arange(len(order)) * 4 // len(order)) + 1)
        parts.append(order)
    if not parts:
        raise ValueError("no group has 4 or more prompts")
    table = pd.concat(parts)
    return table.groupby([*by, "quartile"], as_index=False).agg(success=("success", "mean"), mi=("mi", "mean"),
                                                                 rv=("rv", "mean"))


def _quartile_units(quartiles: pd.DataFrame, phase: str) -> tuple[pd.DataFrame, int]:
    """The test units of C3: one row per run at ``phase`` (columns ``(col, quartile)``), and how many runs
    were dropped because their whole quartile table repeats an earlier run's (one policy counted twice)."""
    part = quartiles[quartiles["phase"] == phase]
    values = [c for c in ("success", "mi", "rv") if c in part.columns]
    wide = part.pivot_table(index="run_id", columns="quartile", values=values)
    repeated = wide.round(12).duplicated()
    return wide[~repeated], int(repeated.sum())


def quartile_differences(quartiles: pd.DataFrame, col: str, phase: str = "end") -> pd.Series:
    """Per run at ``phase``: ``col`` in the top RV quartile minus the bottom one (the units C3 is tested on).

    Only ``phase`` rows count (the warm start, phase ``start``, is one policy shared by every run: context,
    not a unit); a run whose quartile table repeats another's is counted once.
    """
    wide, _ = _quartile_units(quartiles, phase)
    if (col, 4) not in wide.columns or (col, 1) not in wide.columns:
        raise ValueError(f"quartiles 1 and 4 of {col!r} are not both present at phase {phase!r}")
    return (wide[(col, 4)] - wide[(col, 1)]).dropna().rename(f"{col}_q4_minus_q1")


def quartile_claim(claim: str, quartiles: pd.DataFrame, paper_effect: dict[str, float] | None = None,
                   *, phase: str = "end") -> Claim:
    """C3: success and MI higher in the top RV quartile than in the bottom one, paired over runs.

    The units are the runs' ``phase`` checkpoints (independent policies; :func:`quartile_differences`):
    one Q4 - Q1 difference per run, a two-sided paired t-test for ``success`` and for ``mi``, combined by
    :func:`combine`. Rows of other phases, notably the warm start, are context only: the warm start is
    one policy rolled out with one sampling seed, so repeating it per run would be pseudo-replication.

    ``paper_effect``: optional smallest effect per column (``success``, ``mi``) for the t-CI rule.
    """
    wide, repeated = _quartile_units(quartiles, phase)
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


# ---------------------------------------------------------------------------------------------
# Toy regimes (notebook 01)
# ---------------------------------------------------------------------------------------------
def toy_point(dependence: float, diversity: int, template_size: int = 4, num_inputs: int = 8) -> dict[str, float]:
    """Exact H(Z|X), I(X;Z) and H(Z) of a :class:`ragen2.metrics.toy.MixturePolicy`."""
    from ragen2.metrics.toy import MixturePolicy

    p = MixturePolicy(num_inputs=num_inputs, dependence=dependence, diversity=diversity,
                      template_size=template_size)
    return {"cond_entropy": p.conditional_entropy(), "mi": p.mutual_information(), "entropy": p.entropy()}


def toy_estimates(rows_per_column: int = 64, seed: int = 0) -> pd.DataFrame:
    """Exact vs sampled MI / conditional entropy of the four toy regimes (:data:`ragen2.metrics.toy.REGIMES`).

    The sampled values are :func:`ragen2.metrics.mi_proxies` (``mi_seq_estimate``,
    ``conditional_entropy_seq_est``) on :func:`ragen2.metrics.toy.sample_batch` draws.
    """
    from ragen2.metrics import mi_proxies
    from ragen2.metrics.toy import REGIMES, sample_batch

    rng = np.random.default_rng(seed)
    rows = []
    for name, policy in REGIMES.items():
        b = sample_batch(policy, rows_per_column, rng)
        est = mi_proxies(b.logp_sum, b.lengths, b.prompt_index, b.prompt_keys)
        rows.append({"regime": name, "exact_mi": policy.mutual_information(), "estimated_mi": est["mi_seq_estimate"],
                     "exact_cond_entropy": policy.conditional_entropy(),
                     "estimated_cond_entropy": est["conditional_entropy_seq_est"],
                     "exact_entropy": policy.entropy(), "retrieval_accuracy": est["retrieval_accuracy"]})
    return pd.DataFrame(rows)


def regime_points_from_steps(steps: pd.DataFrame, x: str = "collapse_first_turn/conditional_entropy_est",
                             y: str = MI_METRIC) -> pd.DataFrame:
    """First and last (H(Z|X), MI) estimate of each run as points for :func:`ragen2.figures.fig_four_regimes`.

    Returns:
        ``label`` (``<condition> s<seed> start|end``), ``cond_entropy``, ``mi``, ``source`` (``start`` /
        ``end`` checkpoints), ``run_id``.
    """
    rows = []
    wide = steps[steps["metric"].isin([x, y])].pivot_table(index=["run_id", "step"], columns="metric",
                                                           values="value").dropna().reset_index()
    if wide.empty:
        raise ValueError(f"no step logs both {x!r} and {y!r}")
    labels = steps.drop_duplicates("run_id").set_index("run_id")
    for rid, part in wide.groupby("run_id"):
        part = part.sort_values("step")
        for tag, row in (("start", part.iloc[0]), ("end", part.iloc[-1])):
            info = labels.loc[rid]
            rows.append({"label": f"{info['condition']} s{info['seed']} {tag}", "cond_entropy": row[x],
                         "mi": row[y], "source": f"checkpoint ({tag})", "run_id": rid})
    return pd.DataFrame(rows)


def show_toy_policy(dependence: float = 0.5, diversity: int = 4, template_size: int = 4):
    """The toy regimes plus one movable policy on the (H(Z|X), MI) plane, as a displayable PNG image.

    Used as the callback of the notebook-01 sliders (``ipywidgets.interact``); also callable directly.
    """
    from IPython.display import Image

    from ragen2.figures import fig_four_regimes, regime_points_from_toy
    from ragen2.results_io import _figure_bytes

    toy = regime_points_from_toy()
    point = toy_point(dependence, diversity, template_size)
    mine = pd.DataFrame([{"label": f"d={dependence:g}, D={diversity}, T={template_size}",
                          "cond_entropy": point["cond_entropy"], "mi": point["mi"], "source": "your policy"}])
    fig = fig_four_regimes(pd.concat([toy, mine], ignore_index=True))
    return Image(_figure_bytes(fig, "png", 100))
