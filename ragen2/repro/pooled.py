"""Verdicts pooled over the two realizations: each claim's own test on both warm starts' units together.

The realization check (:mod:`ragen2.repro.realization`) decides every claim once per warm start. Here every claim is
decided once more on the units of both (docs/preregistrations.md §7.10): the same verdict function
(:mod:`ragen2.repro.verdicts`), the same studies, the same pairing, with the second realization's seeds relabelled
``seed + SEED_OFFSET`` (and its run ids with them) so that a pair never joins runs of two warm starts. Paired tests
then average the within-warm-start differences over both warm starts (twice the pairs); correlations and trends run
over the runs of both.

What each claim loads is what its notebook loads (:data:`CLAIM_LOADERS`; the study lists are the notebooks' too,
through the constants of :mod:`ragen2.repro.verdicts`); C3's units, the per-run RV-quartile tables, are the ones
each realization's notebook 04 wrote (its prompt rollouts are not repeated).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path

import pandas as pd

from ragen2.repro import verdicts as v
from ragen2.repro.claim_tests import checkpoint_readings, correlation_table, within_correlation_table
from ragen2.repro.claims import CLAIM_IDS, Claim
from ragen2.repro.preconditions import c2_preconditions, pooled_untested
from ragen2.repro.studies import load_study, load_study_grad_tables, slip_runs, sweep_table
from ragen2.repro.tables import paper_reference_values

SEED_OFFSET = 1000
"""Added to the second realization's seeds (and run ids): its pairs stay apart from the first's."""
QUARTILES_TABLE = "table_rv_quartiles.csv"
"""C3's per-run quartile table, as notebook 04 writes it into a realization's figure folder."""
_SEED_SUFFIX = re.compile(r"__s(\d+)$")


def relabel(frame: pd.DataFrame, offset: int = SEED_OFFSET) -> pd.DataFrame:
    """``frame`` with ``seed`` (where present) raised by ``offset`` and every run id's ``__s<seed>`` with it; a run id
    of another shape (notebook 04's ``warm start`` row) gets `` (+<offset>)`` appended, so it stays distinct."""
    out = frame.copy()
    if "seed" in out:
        out["seed"] = out["seed"] + offset
    if "run_id" in out:
        def one(rid: str) -> str:
            m = _SEED_SUFFIX.search(rid)
            return rid[:m.start()] + f"__s{int(m[1]) + offset}" if m else f"{rid} (+{offset})"
        out["run_id"] = out["run_id"].astype(str).map(one)
    return out


def _both(load: Callable[[Path], pd.DataFrame], roots: tuple[Path, Path]) -> pd.DataFrame:
    return pd.concat([load(roots[0]), relabel(load(roots[1]))], ignore_index=True)


def _c1(roots, figs) -> v.Verdict:
    return v.c1_filter_gain(_both(lambda r: load_study(r, v.C1_STUDIES)[0], roots))


def _c2(roots, figs) -> v.Verdict:
    loaded = [load_study(r, v.C2_STUDIES, metrics=list(v.C2_METRICS)) for r in roots]
    runs = pd.concat([loaded[0][0], relabel(loaded[1][0])], ignore_index=True)
    steps = pd.concat([loaded[0][1], relabel(loaded[1][1])], ignore_index=True)
    paper = paper_reference_values()
    within = within_correlation_table(checkpoint_readings(runs, steps, list(v.C2_METRICS)), v.C2_METRICS, paper=paper)
    return v.c2_mi_predicts_success(within, pooled=correlation_table(runs, v.C2_METRICS, paper=paper),
                                    pooled_untested=pooled_untested(c2_preconditions(runs), "C2"))


def _c3(roots, figs) -> v.Verdict:
    return v.c3_rv_quartiles(_both(lambda f: pd.read_csv(f / QUARTILES_TABLE), figs))


def _c4(roots, figs) -> v.Verdict:
    grad = _both(lambda r: load_study_grad_tables(r, v.C4_STUDIES), roots)
    return v.c4_gradient_snr(grad[grad["algo"].isin(v.C4_ALGOS)])


def _c5(roots, figs) -> v.Verdict:
    return v.c5_stochasticity(_both(slip_runs, roots))


def _c6(roots, figs) -> v.Verdict:
    loaded = [load_study(r, v.C6_STUDIES, metrics=list(v.C6_METRICS)) for r in roots]
    runs = pd.concat([loaded[0][0], relabel(loaded[1][0])], ignore_index=True)
    steps = pd.concat([loaded[0][1], relabel(loaded[1][1])], ignore_index=True)
    return v.c6_collapse_dynamics(runs, steps)


def _c7(roots, figs) -> v.Verdict:
    studies = _both(lambda r: load_study(r, v.C7_STUDIES, metrics=list(v.C7_METRICS))[0], roots)
    main, swept = studies[studies["study"] == "main"], studies[studies["study"] != "main"]
    return v.c7_interventions(studies, sweep_table(swept, v.C7_SWEEPS, base=main))


CLAIM_LOADERS: dict[str, tuple[str, Callable]] = {
    "C1": ("03_main_results", _c1), "C2": ("06_diagnostics", _c2), "C3": ("04_rv_quartiles", _c3),
    "C4": ("02_snr_mechanism", _c4), "C5": ("05_stochasticity", _c5), "C6": ("07_training_dynamics", _c6),
    "C7": ("08_interventions", _c7),
}
"""Claim -> (the notebook that decides it, the loader that decides it on both realizations)."""


def pooled_verdicts(runs_roots: tuple[str | Path, str | Path], figure_dirs: tuple[str | Path, str | Path],
                    claims: tuple[str, ...] = CLAIM_IDS) -> dict[str, v.Verdict | Claim]:
    """Each claim decided on both realizations' units.

    ``runs_roots`` are the first and second realization's run folders; ``figure_dirs`` the folders holding each one's
    notebook 04 tables (``paper_figures`` and ``<realization figures_root>/04_rv_quartiles``). A claim whose runs or
    tables are missing in either realization is an ``untested`` :class:`Claim` that says so (as a notebook whose study
    is missing writes it: :mod:`ragen2.repro.missing`).

    Returns:
        Claim id -> its :class:`~ragen2.repro.verdicts.Verdict` (claim and power numbers), or a Claim where it could
        not be decided.
    """
    roots = (Path(runs_roots[0]), Path(runs_roots[1]))
    figs = (Path(figure_dirs[0]), Path(figure_dirs[1]))
    out: dict[str, v.Verdict | Claim] = {}
    for claim in claims:
        _, decide = CLAIM_LOADERS[claim]
        try:
            out[claim] = decide(roots, figs)
        except FileNotFoundError as e:
            out[claim] = Claim(claim, "untested", f"not pooled: {str(e).splitlines()[0]}")
    return out


def pooled_claims(verdicts: Mapping[str, v.Verdict | Claim]) -> list[Claim]:
    """The claims of :func:`pooled_verdicts`, in C1..C7 order."""
    return [x.claim if isinstance(x, v.Verdict) else x for _, x in sorted(verdicts.items(),
                                                                         key=lambda kv: CLAIM_IDS.index(kv[0]))]
