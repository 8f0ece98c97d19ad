"""One verdict per paper claim, C1..C7: what a notebook has loaded in, the claim and its power numbers out.

Each function applies the claim's test (:mod:`ragen2.repro.claim_tests`) with the claim's fixed settings
(conditions compared, pairing, the paper's effect or :data:`~ragen2.repro.claim_tests.SMALLEST_EFFECTS`),
so that a notebook's claim cell only loads its tables, calls one function and shows the result. The
decision rules are stated in each notebook's introduction.

=====  ==============================  =====================================================  ==========
claim  function                        takes (as the notebook loads it)                       notebook
=====  ==============================  =====================================================  ==========
C1     :func:`c1_filter_gain`           the main study's runs                                  03
C2     :func:`c2_mi_predicts_success`   :func:`~ragen2.repro.claim_tests.correlation_table`    06
C3     :func:`c3_rv_quartiles`          :func:`~ragen2.repro.prompt_tables.rv_quartile_table`  04
C4     :func:`c4_gradient_snr`          the PPO and GRPO gradient-analysis rows                02
C5     :func:`c5_stochasticity`         :func:`~ragen2.repro.studies.slip_runs`                05
C6     :func:`c6_collapse_dynamics`     runs and steps of the ``mech`` and ``main`` studies    07
C7     :func:`c7_interventions`         the main and sweep studies' runs, and the sweep table  08
=====  ==============================  =====================================================  ==========

Every function returns a :class:`Verdict`: the :class:`~ragen2.repro.claims.Claim` the notebook writes to
its claims file, and the :class:`Power` numbers of its power note (C3, C6, C7; empty for the others).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ragen2.repro import collapse_criteria as cc
from ragen2.repro.claim_tests import (
    SMALLEST_EFFECTS,
    combine,
    correlation_claim,
    grad_claim,
    intervention_claim,
    paired_claim,
    quartile_claim,
    stochasticity_claim,
    trend_claim,
    with_context,
)
from ragen2.repro.claims import Claim
from ragen2.repro.prompt_tables import quartile_differences
from ragen2.repro.stats import pair_by_seed, pairs_needed, runs_needed_for_rho
from ragen2.repro.studies import filter_gain_units, mechanism_arms
from ragen2.repro.tables import paper_gain

C2_MI_METRIC = "collapse_first_turn/mi_zscore"
"""The MI proxy C2 holds to the paper's rho (MI-ZScore, +0.39 in the paper)."""
C2_ENTROPY_METRICS = ("collapse_first_turn/conditional_entropy_est", "collapse_first_turn/reasoning_entropy_est",
                      "actor/entropy")
"""The entropy measures the MI proxy must beat in C2."""
C7_DISCLOSURE = ("test changed after the first CPU run: the Spearman-rho test needed about {runs} runs per sweep for "
              "80 % power; this paired test was chosen for its power before its result was computed (its Top-p 0.9 "
              "pairs are C1's, whose result was known); the rho is still reported as context")
"""The disclosure appended to C7's evidence (``{runs}``: :func:`ragen2.repro.stats.runs_needed_for_rho` of
the rho bar)."""


@dataclass(frozen=True)
class Power:
    """The numbers of a power note: a test's units, the spread of their differences, and the units it needs."""

    n: int
    """Units the test has (paired seeds, runs)."""
    mean: float
    """Mean of the units' differences (NaN when the note does not report one)."""
    std: float
    """Sample std of the differences (NaN with fewer than 2 units)."""
    needed: float
    """Units a two-sided paired t-test (or, for a rho, a rank-correlation test) needs for 80 % power against
    :attr:`effect` (NaN when the spread is 0 or unknown)."""
    effect: float
    """The effect the power is computed against."""


@dataclass(frozen=True)
class Verdict:
    """A claim's verdict and the numbers of its power note."""

    claim: Claim
    power: dict[str, Power] = field(default_factory=dict)
    """Part of the test (``success``, ``mi``, ``primary``, ``rho``) -> its power numbers."""


def _paired_power(diffs: pd.Series, effect: float) -> Power:
    std = diffs.std(ddof=1)
    needed = pairs_needed(std, effect) if len(diffs) > 1 and std > 0 else float("nan")
    return Power(n=len(diffs), mean=diffs.mean(), std=std, needed=needed, effect=effect)


def paper_filter_gain(runs: pd.DataFrame) -> float:
    """The paper's mean Top-p gain over the envs and algorithms of ``runs``, as a fraction (C1's paper effect,
    which C7 is held to as well)."""
    return paper_gain(sorted(runs["env"].unique()), sorted(runs["algo"].unique())) / 100


def c1_filter_gain(runs: pd.DataFrame) -> Verdict:
    """C1: Top-p raises final validation success over no filter, across environments and algorithms.

    Decided by a paired test over every (env, algorithm, seed) pair against the paper's mean gain on the same
    cells (:func:`paper_filter_gain`); per-algorithm tests and Top-k (where run) are context.
    """
    main = paired_claim("C1", runs, "final_success", "top_p", "none", pair_on=("env", "algo", "seed"),
                        what="all envs and algorithms", scale=100, direction="greater",
                        paper_effect=paper_filter_gain(runs))
    per_algo = [paired_claim("C1", runs[runs["algo"] == algo], "final_success", "top_p", "none",
                             pair_on=("env", "seed"), what=algo, scale=100) for algo in sorted(runs["algo"].unique())]
    topk = ([paired_claim("C1", runs[runs["algo"] == "ppo"], "final_success", "top_k", "none",
                          pair_on=("env", "seed"), what="PPO top-k", scale=100)]
            if "top_k" in set(runs["condition"]) else [])
    return Verdict(with_context(main, *per_algo, *topk))


def c2_mi_predicts_success(corr: pd.DataFrame) -> Verdict:
    """C2: MI-ZScore correlates with final success, and better than every entropy measure
    (:func:`~ragen2.repro.claim_tests.correlation_claim` on :data:`C2_MI_METRIC` and :data:`C2_ENTROPY_METRICS`)."""
    return Verdict(correlation_claim("C2", corr, C2_MI_METRIC, list(C2_ENTROPY_METRICS)))


def c3_rv_quartiles(quartiles: pd.DataFrame) -> Verdict:
    """C3: success and MI are higher in the top RV quartile than in the bottom one, over runs' final checkpoints.

    Power: per column (``success``, ``mi``), the runs' Q4 - Q1 differences against the smallest effect of interest.
    """
    effects = {col: SMALLEST_EFFECTS[f"C3_{col}"] for col in ("success", "mi")}
    claim = quartile_claim("C3", quartiles, paper_effect=effects)
    power = {col: _paired_power(quartile_differences(quartiles, col), effect) for col, effect in effects.items()}
    return Verdict(claim, power)


def c4_gradient_snr(grad: pd.DataFrame) -> Verdict:
    """C4: the task-gradient norm grows with bucket RV while the regularisation norm does not, per algorithm
    (:func:`~ragen2.repro.claim_tests.grad_claim` per algorithm of ``grad``, combined)."""
    per_algo = [grad_claim("C4", grad[grad["algo"] == algo]) for algo in sorted(grad["algo"].unique().tolist())]
    return Verdict(combine("C4", per_algo))


def c5_stochasticity(runs: pd.DataFrame) -> Verdict:
    """C5: the filter's gain is larger at partial slip than at the extremes (against the smallest effect)."""
    return Verdict(stochasticity_claim("C5", runs, paper_effect=SMALLEST_EFFECTS["C5"]))


def collapse_regime_verdict(table: pd.DataFrame, what: str = "") -> dict:
    """C6's rule on one set of paired runs in a collapse regime (docs/method.md §7.11).

    ``table`` is :func:`ragen2.repro.collapse_criteria.run_regimes` of the runs (conditions ``none`` and ``top_p``;
    others are ignored). The no-filter condition *collapses* when at least half its runs are in template collapse
    (:func:`~ragen2.repro.collapse_criteria.condition_collapses`), Top-p likewise; the MI part is the paired test of
    the smoothed final MI, Top-p minus none, against C6's smallest effect. The verdict: ``agree`` when no filter
    collapses, Top-p does not and the MI part agrees; ``disagree`` when no filter collapses and Top-p collapses too
    or the MI part disagrees; else ``inconclusive`` (no collapse to prevent, or an undecided MI part).

    Returns:
        ``collapses_none``, ``collapses_top_p``, ``mi`` (the paired Claim), ``verdict`` and ``summary`` (one line:
        the template-collapse counts, the MI part and the verdict).
    """
    regimes = {c: table.loc[table["condition"] == c, "regime"] for c in ("none", "top_p")}
    none, top = cc.condition_collapses(regimes["none"]), cc.condition_collapses(regimes["top_p"])
    mi = paired_claim("C6", table, "final_mi", "top_p", "none", what=what, paper_effect=SMALLEST_EFFECTS["C6_mi"])
    if none and not top and mi.verdict == "agree":
        verdict = "agree"
    elif none and (top or mi.verdict == "disagree"):
        verdict = "disagree"
    else:
        verdict = "inconclusive"
    n_none, n_top = (int((regimes[c] == "template_collapse").sum()) for c in ("none", "top_p"))
    summary = (f"template collapse in {n_none}/{len(regimes['none'])} no-filter and {n_top}/{len(regimes['top_p'])} "
               f"Top-p runs, {mi.evidence} -> {verdict}")
    return {"collapses_none": none, "collapses_top_p": top, "mi": mi, "verdict": verdict, "summary": summary}


def mechanism_regime(treated: pd.DataFrame) -> str:
    """The setting of the mechanism study's treated runs (:func:`~ragen2.repro.studies.mechanism_arms`) in words:
    the regime a C6 verdict holds in."""
    if treated.empty:
        return "mechanism study (no runs)"

    def one(column: str) -> str:
        values = sorted(treated[column].dropna().unique().tolist()) if column in treated else []
        return "/".join(f"{v:g}" for v in values) or "?"

    algo = "/".join(sorted(treated["algo"].unique()))
    return (f"mechanism study ({algo}, warm start {one('warm_start.steps')} SFT steps with template share "
            f"{one('warm_start.template_fraction')}, entropy {one('trainer.entropy_coef')} on reasoning tokens, "
            f"actor lr {one('trainer.actor_lr')}, {one('trainer.steps')} steps)")


def c6_collapse_dynamics(runs: pd.DataFrame, steps: pd.DataFrame) -> Verdict:
    """C6: without a filter the reasoning falls into template collapse; with Top-p it does not and MI holds.

    ``runs`` and ``steps`` are :func:`~ragen2.repro.studies.load_study` of the ``mech`` and ``main`` studies.
    Decided by :func:`collapse_regime_verdict` on the mechanism study's treated runs
    (:func:`~ragen2.repro.studies.mechanism_arms`; their regime, :func:`mechanism_regime`, is named in the
    evidence). Context: Top-k beside Top-p where it was run (its template-collapse count and its final-MI difference
    from no filter), the rise of the zero-variance group count in the treated no-filter runs (mean of the last 5
    steps minus the first 5), and the same MI comparison without the reasoning entropy bonus where the profile has
    that control.

    Power (``mi``): the treated runs' paired Top-p - none differences of the smoothed final MI.
    """
    treated, control = mechanism_arms(runs)
    table = cc.run_regimes(treated, steps)
    regime = mechanism_regime(treated)
    rule = collapse_regime_verdict(table, what="Top-p")
    claim = Claim("C6", rule["verdict"], f"{regime}: {rule['summary']}")
    context = []
    if "top_k" in set(table["condition"]):
        topk = table[table["condition"] == "top_k"]
        n_topk = int((topk["regime"] == "template_collapse").sum())
        mi_topk = paired_claim("C6", table, "final_mi", "top_k", "none", what="Top-k")
        context.append(Claim("C6", mi_topk.verdict, f"template collapse in {n_topk}/{len(topk)} Top-k runs; "
                                                   f"{mi_topk.evidence}"))
    no_filter_ids = set(treated.loc[treated["condition"] == "none", "run_id"])
    context.append(trend_claim("C6", steps[steps["run_id"].isin(no_filter_ids)], "filter/zero_variance_count",
                               direction="greater", what="zero-variance groups, no-filter runs",
                               paper_effect=SMALLEST_EFFECTS["C6_zero_variance"], window=5))
    if not control.empty:
        control_table = cc.run_regimes(control, steps)
        context.append(paired_claim("C6", control_table, "final_mi", "top_p", "none",
                                    what="control without the reasoning entropy bonus"))
    pairs = pair_by_seed(table[table["condition"].isin(["top_p", "none"])], "final_mi", "condition", "top_p", "none")
    return Verdict(with_context(claim, *context), {"mi": _paired_power(pairs["diff"], SMALLEST_EFFECTS["C6_mi"])})


def c7_interventions(studies: pd.DataFrame, sweeps: pd.DataFrame) -> Verdict:
    """C7: lower top-p raises success consistently, while entropy and KL sweeps do not move it.

    ``studies`` is :func:`~ragen2.repro.studies.load_study` of the main and sweep studies, ``sweeps`` their
    :func:`~ragen2.repro.studies.sweep_table`. Decided by :func:`~ragen2.repro.claim_tests.intervention_claim`
    against C1's paper effect, with the change of test disclosed (:data:`C7_DISCLOSURE`).

    Power: ``primary``, the per-run differences of the primary test's units
    (:func:`~ragen2.repro.studies.filter_gain_units`) against the paper's gain; ``rho``, the runs a Spearman
    rho of the bar needs per sweep, against the top-p sweep's runs.
    """
    paper_effect = paper_filter_gain(studies[studies["study"] == "main"])
    rho_bar = SMALLEST_EFFECTS["C7_rho"]
    need_rho = runs_needed_for_rho(rho_bar)
    claim = intervention_claim("C7", studies, sweeps=sweeps, paper_effect=paper_effect, paper_rho=rho_bar,
                               note=C7_DISCLOSURE.format(runs=need_rho))
    units = filter_gain_units(studies)
    diff_std = units["diff"].std(ddof=1) if len(units) > 1 else float("nan")
    primary = Power(n=len(units), mean=units["diff"].mean(), std=diff_std,
                    needed=pairs_needed(diff_std, paper_effect) if diff_std > 0 else float("nan"), effect=paper_effect)
    rho = Power(n=int((sweeps["sweep"] == "top-p").sum()), mean=float("nan"), std=float("nan"), needed=need_rho,
                effect=rho_bar)
    return Verdict(claim, {"primary": primary, "rho": rho})
