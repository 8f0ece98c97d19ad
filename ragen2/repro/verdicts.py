"""One verdict per paper claim, C1..C7: what a notebook has loaded in, the claim and its power numbers out.

Each function applies the claim's test (:mod:`ragen2.repro.claim_tests`) with the claim's fixed settings
(conditions compared, pairing, the paper's effect or :data:`~ragen2.repro.claim_tests.SMALLEST_EFFECTS`),
so that a notebook's claim cell only loads its tables, calls one function and shows the result. The
decision rules are stated in each notebook's introduction.

=====  ==============================  =====================================================  ==========
claim  function                        takes (as the notebook loads it)                       notebook
=====  ==============================  =====================================================  ==========
C1     :func:`c1_filter_gain`           the main and testbed studies' runs                     03
C2     :func:`c2_mi_predicts_success`   :func:`~ragen2.repro.claim_tests.correlation_table`    06
C3     :func:`c3_rv_quartiles`          :func:`~ragen2.repro.prompt_tables.rv_quartile_table`  04
C4     :func:`c4_gradient_snr`          the PPO and GRPO gradient-analysis rows                02
C5     :func:`c5_stochasticity`         :func:`~ragen2.repro.studies.slip_runs`                05
C6     :func:`c6_collapse_dynamics`     runs and steps of the ``mech`` and ``main`` studies    07
C7     :func:`c7_interventions`         the main and sweep studies' runs, and the sweep table  08
=====  ==============================  =====================================================  ==========

Every function returns a :class:`Verdict`: the :class:`~ragen2.repro.claims.Claim` the notebook writes to
its claims file, and the :class:`Power` numbers of its deciding test (the power table of the claims stage).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

from ragen2.repro import collapse_criteria as cc
from ragen2.repro import study_catalog
from ragen2.repro.claim_tests import (
    SMALLEST_EFFECTS,
    combine,
    correlation_claim,
    grad_bucket_rows,
    grad_claim,
    intervention_claim,
    paired_boards,
    paired_claim,
    paired_rows,
    quartile_claim,
    stochasticity_claim,
    stochasticity_units,
    trend_claim,
    with_context,
)
from ragen2.repro.claims import Claim
from ragen2.repro.profiles import ALGOS, PAPER_MAIN_ENVS
from ragen2.repro.prompt_tables import quartile_differences
from ragen2.repro.runs import MI_METRIC
from ragen2.repro.stats import (
    board_variance,
    pair_by_seed,
    pairs_for_interval,
    pairs_needed,
    runs_needed_for_rho,
    t_interval_width,
)
from ragen2.repro.studies import filter_gain_units, mechanism_arms, unit_boards
from ragen2.repro.tables import ALGO_LABELS, ENV_LABELS, paper_gain

C1_STUDIES = study_catalog.claim_studies("C1")
"""The studies C1 is decided on (notebook 03): the main comparison and the rest of the paper's testbed (the main
table's other environments and Top-k; a profile that puts them all in ``main`` has no ``testbed`` runs)."""
C1_ENVS = PAPER_MAIN_ENVS
"""The environments C1 is decided over: the columns of the paper's main table (docs/preregistrations.md §7.13). Runs on
other environments (the success curves' SearchQA, WebShop, DeepCoder) are drawn, not tested."""
C2_STUDIES = study_catalog.claim_studies("C2")
"""The studies whose runs C2 correlates (notebook 06): every run of the profile."""
C2_METRICS = {
    "collapse_first_turn/mi_zscore": "MI-ZScore",
    "collapse_first_turn/mi_seq_estimate": "MI seq estimate",
    "collapse_first_turn/mi_zscore_seq": "MI-ZScore (seq)",
    "collapse_first_turn/retrieval_accuracy": "retrieval accuracy",
    "collapse_first_turn/conditional_entropy_est": "conditional entropy",
    "collapse_first_turn/reasoning_entropy_est": "reasoning entropy",
    "actor/entropy": "token entropy",
}
"""C2's final metrics (logged name -> label) correlated with final success."""
C4_STUDIES = study_catalog.claim_studies("C4")
"""The studies that run the gradient analysis C4 reads (notebook 02)."""
C4_ALGOS = ("ppo", "grpo")
"""The algorithms C4 is decided on."""
C6_STUDIES = study_catalog.claim_studies("C6")
"""The studies C6 reads (notebook 07): the mechanism study, and the main study as its control where it has none."""
C6_METRICS = (MI_METRIC, "collapse_first_turn/retrieval_accuracy")
"""The per-step metrics notebook 07 loads with C6's runs."""
C7_STUDIES = study_catalog.claim_studies("C7")
"""The studies C7 is decided on (notebook 08)."""
C7_METRICS = (MI_METRIC,)
"""The per-step metrics notebook 08 loads with C7's runs."""
C7_SWEEPS = study_catalog.sweep_labels()
"""C7's sweep studies and their labels (:func:`~ragen2.repro.studies.sweep_table`)."""
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
    """Mean of the units' differences (for a rho: the rho; NaN when the note does not report one)."""
    std: float
    """Sample std of the differences (NaN with fewer than 2 units, and for a rho)."""
    needed: float
    """Units a two-sided paired t-test (or, for a rho, a rank-correlation test) needs for 80 % power against
    :attr:`effect` (NaN when the spread is 0 or unknown, or no effect is fixed)."""
    effect: float
    """The effect the power is computed against (NaN: the test decides on significance alone)."""
    kind: str = "paired"
    """``paired`` (a mean of paired differences) or ``rho`` (a rank correlation over runs or rows)."""
    board_se: float = 0.0
    """The standard error the shared evaluation boards add to the mean difference (0 where none was measured); it is
    in :attr:`width`, :attr:`for_interval` and :attr:`needed`, and more pairs do not shrink it."""

    @property
    def width(self) -> float:
        """Width of the 95 % t-interval of the mean difference (paired tests; NaN for a rho)."""
        return t_interval_width(self.std, self.n, board_se=self.board_se) if self.kind == "paired" else float("nan")

    @property
    def for_interval(self) -> float:
        """Pairs whose 95 % t-interval is narrower than :attr:`effect` (:func:`~ragen2.repro.stats.pairs_for_interval`;
        for a rho, :attr:`needed`): the size at which the test decides whatever the mean comes out."""
        if self.kind != "paired":
            return self.needed
        ok = self.std > 0 and math.isfinite(self.std) and self.effect != 0 and math.isfinite(self.effect)
        return pairs_for_interval(self.std, self.effect, board_se=self.board_se) if ok else float("nan")


@dataclass(frozen=True)
class Verdict:
    """A claim's verdict and the numbers of its power note."""

    claim: Claim
    power: dict[str, Power] = field(default_factory=dict)
    """Part of the test (``success``, ``mi``, ``primary``, ``rho``) -> its power numbers."""


def _paired_power(diffs: pd.Series, effect: float, boards=None) -> Power:
    """The power numbers of a paired test of ``diffs``; ``boards``: their per-board differences, whose evaluation
    noise goes into every width and size (:func:`~ragen2.repro.stats.board_variance`)."""
    std = diffs.std(ddof=1)
    board_se = math.sqrt(board_variance(boards)) if boards is not None else 0.0
    needed = pairs_needed(std, effect, board_se=board_se) if len(diffs) > 1 and std > 0 else float("nan")
    return Power(n=len(diffs), mean=diffs.mean(), std=std, needed=needed, effect=effect, board_se=board_se)


def paper_filter_gain(runs: pd.DataFrame) -> float:
    """The paper's mean Top-p gain over the envs and algorithms of ``runs``, as a fraction (C1's paper effect,
    which C7 is held to as well)."""
    return paper_gain(sorted(runs["env"].unique()), sorted(runs["algo"].unique())) / 100


def c1_scope(table: pd.DataFrame) -> str:
    """Which of the paper's main-table algorithms and environments C1 is tested on in ``table``, and which it is not
    (those have no runs here: C1 is untested on them, whatever the verdict)."""
    def names(have, every, labels):
        return ", ".join(labels.get(x, x) for x in every if x in have) or "none"

    algos, envs = set(table["algo"]), set(table["env"])
    tested = f"tested on {names(algos, ALGOS, ALGO_LABELS)} x {names(envs, C1_ENVS, ENV_LABELS)}"
    absent = [names(set(ALGOS) - algos, ALGOS, ALGO_LABELS), names(set(C1_ENVS) - envs, C1_ENVS, ENV_LABELS)]
    if absent == ["none", "none"]:
        return f"(scope) {tested}: every algorithm and environment of the paper's main table"
    return (f"(scope) {tested}; untested (no runs): algorithms {absent[0]}, environments {absent[1]} of the paper's "
            "main table")


def c1_filter_gain(runs: pd.DataFrame) -> Verdict:
    """C1: Top-p raises final validation success over no filter across the main table, with Top-p >= Top-k >= none.

    The rule (docs/preregistrations.md §7.13, fixed before the testbed's runs were trained): over the runs on
    :data:`C1_ENVS`, a paired test of Top-p - none over every (env, algorithm, seed) pair against the paper's
    mean gain on the same cells (:func:`paper_filter_gain`); for the algorithms with Top-k runs (the paper's: PPO), the
    ordering too (docs/preregistrations.md §7.17): paired tests over their (env, algorithm, seed) pairs of Top-p - Top-k
    and Top-k - none, each ``agree`` when significantly
    positive, ``disagree`` when significantly negative (the ordering reversed), else inconclusive. The verdict
    combines them (:func:`~ragen2.repro.claim_tests.combine`: all agree -> agree, any disagree -> disagree).
    Per-algorithm and per-environment gains are context, led by :func:`c1_scope` (what the runs cover).

    Power (``success``): the pairs' Top-p - none differences against the paper's gain.
    """
    table = runs[runs["env"].isin(C1_ENVS)]
    if table.empty:
        return Verdict(Claim("C1", "inconclusive", f"no run on the main table's environments {list(C1_ENVS)}"))
    effect = paper_filter_gain(table)
    main = paired_claim("C1", table, "final_success", "top_p", "none", pair_on=("env", "algo", "seed"),
                        what="all envs and algorithms", scale=100, direction="greater", paper_effect=effect)
    topk_algos = sorted(table.loc[table["condition"] == "top_k", "algo"].unique())
    with_topk = table[table["algo"].isin(topk_algos)]
    names = "/".join(a.upper().replace("_", ". ") for a in topk_algos)
    ordering = [paired_claim("C1", with_topk, "final_success", a, b, pair_on=("env", "algo", "seed"),
                             what=f"ordering, {names} {label}", scale=100)
                for a, b, label in (("top_p", "top_k", "Top-p >= Top-k"), ("top_k", "none", "Top-k >= none"))
                ] if topk_algos else []
    decided = combine("C1", [main, *ordering]) if ordering else main
    per_algo = [paired_claim("C1", table[table["algo"] == algo], "final_success", "top_p", "none",
                             pair_on=("env", "seed"), what=algo, scale=100) for algo in sorted(table["algo"].unique())]
    envs = sorted(table["env"].unique())
    per_env = ([paired_claim("C1", table[table["env"] == env], "final_success", "top_p", "none",
                             pair_on=("algo", "seed"), what=env, scale=100) for env in envs]
               if len(envs) > 1 else [])
    pairs = paired_rows(table, "final_success", "top_p", "none", pair_on=("env", "algo", "seed"))
    decided = Claim("C1", decided.verdict, f"{decided.evidence}; {c1_scope(table)}{_regime_deviation()}")
    return Verdict(with_context(decided, *per_algo, *per_env),
                   {"success": _paired_power(pairs["top_p"] - pairs["none"], effect,
                                             paired_boards(table, "final_success", "top_p", "none",
                                                           pair_on=("env", "algo", "seed")))})


C2_WITHIN = ("Spearman within arms, every reading (steps after 0 with MI and success) vs its success, arms of 3+ runs "
             "(95% bootstrap CIs over runs within arms)")
"""How C2's deciding test reads in its evidence (docs/preregistrations.md §7.18)."""


def _regime_deviation() -> str:
    """The disclosure C1's evidence carries when its learning regime was found by a reading chosen after seeing
    results (:attr:`ragen2.repro.learning_screen.ScreenOutcome.deviation`)."""
    from ragen2.repro.learning_screen import OUTCOME

    return f"; (deviation) the learning regime: {OUTCOME.deviation}" if OUTCOME is not None and OUTCOME.deviation else ""


def c2_mi_predicts_success(corr: pd.DataFrame, pooled: pd.DataFrame | None = None,
                           pooled_untested: str | None = None) -> Verdict:
    """C2: MI-ZScore correlates with success, and better than every entropy measure
    (:func:`~ragen2.repro.claim_tests.correlation_claim` on :data:`C2_MI_METRIC` and :data:`C2_ENTROPY_METRICS`).

    ``corr`` decides: :func:`~ragen2.repro.claim_tests.within_correlation_table` (within arms, every reading; a table
    of :func:`~ragen2.repro.claim_tests.correlation_table`'s shape works as well). ``pooled``, the rho over every
    run's final readings, is context, labelled so; ``pooled_untested`` (the unmet precondition that gates it, when
    one failed) marks it untested.

    Power (``rho``): the units a test of the MI proxy's rho needs to detect the paper's rho, against those it has.
    """
    what = C2_WITHIN if "arms" in corr.columns else "Spearman vs final success (95% bootstrap CIs)"
    claim = correlation_claim("C2", corr, C2_MI_METRIC, list(C2_ENTROPY_METRICS), what=what)
    if pooled is not None:
        mi = pooled.set_index("metric").loc[C2_MI_METRIC]
        state = f"untested: {pooled_untested}" if pooled_untested else "context"
        claim = Claim(claim.claim, claim.verdict,
                      f"{claim.evidence}; (pooled over conditions, {state}) MI-ZScore rho {mi['rho']:+.2f} "
                      f"[{mi['ci_low']:+.2f}, {mi['ci_high']:+.2f}] over {int(mi['n'])} runs' final readings")
    row = corr.set_index("metric").loc[C2_MI_METRIC]
    paper_rho = float(row["paper_rho"]) if "paper_rho" in row and not pd.isna(row["paper_rho"]) else math.nan
    needed = runs_needed_for_rho(paper_rho) if math.isfinite(paper_rho) and paper_rho != 0 else math.nan
    return Verdict(claim, {"rho": Power(n=int(row["n"]), mean=float(row["rho"]), std=math.nan, needed=needed,
                                        effect=paper_rho, kind="rho")})


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
    (:func:`~ragen2.repro.claim_tests.grad_claim` per algorithm of ``grad``, combined).

    Power (``task_rho_<algo>``): the bucket rows each algorithm's test has; no effect size is fixed for C4 (it is
    decided on significance alone), so none is needed or sized.
    """
    algos = sorted(grad["algo"].unique().tolist())
    per_algo = [grad_claim("C4", grad[grad["algo"] == algo]) for algo in algos]
    rows = grad_bucket_rows(grad)
    power = {f"task_rho_{algo}": Power(n=int((rows["algo"] == algo).sum()), mean=math.nan, std=math.nan,
                                      needed=math.nan, effect=math.nan, kind="rho") for algo in algos}
    return Verdict(combine("C4", per_algo), power)


def c5_stochasticity(runs: pd.DataFrame) -> Verdict:
    """C5: the filter's gain is larger at partial slip than at the extremes (against the smallest effect).

    Power (``gain``): the seeds' mid-minus-ends gain differences against the smallest effect.
    """
    effect = SMALLEST_EFFECTS["C5"]
    units = stochasticity_units(runs)
    power = {} if units is None else {"gain": _paired_power(units["mid"] - units["ends"], effect)}
    return Verdict(stochasticity_claim("C5", runs, paper_effect=effect), power)


def collapse_regime_verdict(table: pd.DataFrame, what: str = "") -> dict:
    """C6's rule on one set of paired runs in a collapse regime (docs/preregistrations.md §7.11).

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
    scopes = sorted(treated["trainer.entropy_scope"].dropna().unique()) if "trainer.entropy_scope" in treated else []
    tokens = "reasoning tokens" if scopes == ["reasoning"] else "all tokens" if scopes == ["all"] else "/".join(scopes)
    study = "mechanism study" if set(treated["study"]) == {"mech"} else f"{'/'.join(sorted(set(treated['study'])))} study"
    return (f"{study} ({algo}, warm start {one('warm_start.steps')} SFT steps with template share "
            f"{one('warm_start.template_fraction')}, entropy {one('trainer.entropy_coef')} on {tokens or '?'}, "
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
    primary = _paired_power(units["diff"], paper_effect, unit_boards(units))
    rho = Power(n=int((sweeps["sweep"] == "top-p").sum()), mean=float("nan"), std=float("nan"), needed=need_rho,
                effect=rho_bar, kind="rho")
    return Verdict(claim, {"primary": primary, "rho": rho})


POWER_COLUMNS = ("claim", "part", "kind", "units", "mean", "std", "board_se", "effect", "interval_width",
                 "units_for_interval", "units_for_80_power", "sized")
"""The power table: per deciding test, its units, the spread of their differences, the standard error the shared
evaluation boards add, the effect it judges, the width of its 95 % interval, the units an interval narrower than the effect needs, the units 80 % power needs, and whether the
test has them (``yes``, ``no``, or ``n/a`` where no effect size is fixed)."""
POWER_CAPTION = ("Power of each deciding test on the units it was decided on (success as a fraction, MI in nats): "
                 "units, mean and std of the paired differences (for a rho: the rho), the standard error the shared "
                 "validation boards add (board_se; more units do not shrink it), the effect it judges (the "
                 "paper's, or the smallest effect of interest), the width of its 95 % t-interval, the units an interval "
                 "narrower than that effect needs (a test that size decides whatever the mean comes out), the units "
                 "a two-sided test needs for 80 % power; sized = it has the units an interval narrower than the effect "
                 "needs (for a rho: those 80 % power needs).")


def power_table(verdicts: Mapping[str, Verdict]) -> pd.DataFrame:
    """The :data:`POWER_COLUMNS` rows of every part of every verdict's power numbers, in claim order."""
    rows = []
    for claim in sorted(verdicts):
        for part, power in verdicts[claim].power.items():
            target = power.for_interval
            sized = "n/a" if not math.isfinite(target) else ("yes" if power.n >= target else "no")
            rows.append({"claim": claim, "part": part, "kind": power.kind, "units": power.n, "mean": power.mean,
                         "std": power.std, "board_se": power.board_se, "effect": power.effect,
                         "interval_width": power.width,
                         "units_for_interval": target, "units_for_80_power": power.needed, "sized": sized})
    return pd.DataFrame(rows, columns=list(POWER_COLUMNS))
