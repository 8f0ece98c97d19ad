"""The update-count control (docs/preregistrations.md §7.18): each filter under the paper's mini-batch rule and the
reference code's, with the optimiser updates each made, so the effect of the update count shows as its own number.

Under the reference code's fixed mini-batch (``filter.loss_scaling: none``) a step that keeps a share rho of the groups
makes about rho times the optimiser updates of an unfiltered one; under the paper's rule (``keep_rate``) the
mini-batch shrinks with rho and every step makes the same number. A filter's difference from no filter under the
reference's rule therefore mixes what the filter keeps with how often the optimiser steps; under the paper's rule it
does not, and the paper-minus-reference difference of one filter (same seeds, same kept groups at the first step) is
the update count's own effect.
"""

from __future__ import annotations

import pandas as pd

from ragen2.repro.claim_tests import paired_boards, paired_rows
from ragen2.repro.stats import paired_test

RULES = {"keep_rate": "paper's rule", "none": "reference's fixed mini-batch"}
"""``filter.loss_scaling`` -> the rule's name in the table (the variants shrink the mini-batch as ``keep_rate``)."""
FILTER_NAMES = {"none": "no filter", "top_p": "Top-p", "top_k": "Top-k"}
COLUMNS = ("filter", "rule", "runs", "updates_per_run", "final_success", "vs_no_filter", "vs_other_rule")


def rule_of(runs: pd.DataFrame) -> pd.Series:
    """Each run's mini-batch rule in words; a no-filter run trains alike under both (``either``)."""
    rule = runs["filter.loss_scaling"].map(lambda v: RULES.get(v, RULES["keep_rate"]))
    return rule.where(runs["condition"] != "none", "either").rename("rule")


def _difference(runs: pd.DataFrame, a: str, b: str) -> str:
    """``a - b`` in points, paired by seed, with its 95 % t-interval including the evaluation's noise."""
    pairs = paired_rows(runs, "final_success", a, b, condition="arm")
    if len(pairs) < 2:
        return f"{len(pairs)} pair(s)"
    result = paired_test(pairs[a].to_numpy(), pairs[b].to_numpy(),
                         boards=paired_boards(runs, "final_success", a, b, condition="arm"))
    return (f"{100 * result.mean_diff:+.1f} [{100 * result.t_ci_low:+.1f}, {100 * result.t_ci_high:+.1f}] "
            f"({result.n} pairs)")


def update_control_table(runs: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Per filter and rule (:data:`COLUMNS`): the runs, optimiser updates per run (mean), final success in % (mean
    ± std), the paired difference from no filter and from the same filter under the other rule (points, 95 %
    t-intervals with the evaluation's noise, pairs of equal seed), for the runs of one warm start."""
    updates = steps[steps["metric"] == "actor/optimizer_steps"].groupby("run_id")["value"].sum()
    table = runs.assign(rule=rule_of(runs), updates=runs["run_id"].map(updates))
    table = table.assign(arm=table["condition"] + "|" + table["rule"])
    rows = []
    for cond in ("none", "top_p", "top_k"):
        for rule in ("either", *RULES.values()):
            part = table[table["arm"] == f"{cond}|{rule}"]
            if part.empty:
                continue
            other = [f"{cond}|{r}" for r in RULES.values() if r != rule and cond != "none"]
            success = 100 * part["final_success"]
            rows.append({
                "filter": FILTER_NAMES.get(cond, cond), "rule": rule, "runs": len(part),
                "updates_per_run": float(part["updates"].mean()),
                "final_success": f"{success.mean():.1f} ± {success.std(ddof=1):.1f}" if len(part) > 1
                else f"{success.mean():.1f}",
                "vs_no_filter": "" if cond == "none" else _difference(table, f"{cond}|{rule}", "none|either"),
                "vs_other_rule": ("" if not other or not (table["arm"] == other[0]).any()
                                  else _difference(table, f"{cond}|{rule}", other[0])),
            })
    return pd.DataFrame(rows, columns=list(COLUMNS))

