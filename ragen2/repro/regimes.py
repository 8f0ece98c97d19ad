"""The four-regime plane of notebook 01: points of toy policies and of real runs on (H(Z|X), I(X;Z)).

RAGEN-2 sorts policies by conditional entropy and mutual information into diverse reasoning, compressed
reasoning, low-entropy collapse and template collapse (docs/method.md §5.5). The toy policies of
:mod:`ragen2.metrics.toy` have both numbers exactly, so they show the regimes and check the sampled
estimator (:func:`toy_estimates`); a run's first and last MI estimates place it on the same plane
(:func:`regime_points_from_steps`). :func:`show_toy_policy` is the callback of notebook 01's sliders.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ragen2.repro.runs import MI_METRIC


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


def regime_points_from_toy(
    policies: Mapping[str, Any] | None = None, source: str = "toy policy"
) -> pd.DataFrame:
    """Exact ``(H(Z|X), I(X;Z))`` of toy policies (default: :data:`ragen2.metrics.toy.REGIMES`).

    Returns:
        Columns ``label, cond_entropy, mi, source``.
    """
    if policies is None:
        from ragen2.metrics.toy import REGIMES as policies
    rows = [
        {
            "label": name,
            "cond_entropy": p.conditional_entropy(),
            "mi": p.mutual_information(),
            "source": source,
        }
        for name, p in policies.items()
    ]
    return pd.DataFrame(rows, columns=["label", "cond_entropy", "mi", "source"])


def regime_points_from_steps(steps: pd.DataFrame, x: str = "collapse_first_turn/conditional_entropy_est",
                             y: str = MI_METRIC) -> pd.DataFrame:
    """First and last (H(Z|X), MI) estimate of each run as points for :func:`ragen2.repro.figures.fig_four_regimes`.

    Returns:
        ``label`` (``<condition> s<seed> start|end``), ``cond_entropy``, ``mi``, ``source`` (``start`` /
        ``end`` checkpoints), ``run_id``, ``condition`` (the run's filter).
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
                         "mi": row[y], "source": f"checkpoint ({tag})", "run_id": rid,
                         "condition": info["condition"]})
    return pd.DataFrame(rows)


def show_toy_policy(dependence: float = 0.5, diversity: int = 4, template_size: int = 4):
    """The toy regimes plus one movable policy on the (H(Z|X), MI) plane, as a displayable PNG image.

    Used as the callback of the notebook-01 sliders (``ipywidgets.interact``); also callable directly.
    """
    from IPython.display import Image

    from ragen2.repro.artifacts import figure_bytes
    from ragen2.repro.figures import fig_four_regimes

    toy = regime_points_from_toy()
    point = toy_point(dependence, diversity, template_size)
    mine = pd.DataFrame([{"label": f"d={dependence:g}, D={diversity}, T={template_size}",
                          "cond_entropy": point["cond_entropy"], "mi": point["mi"], "source": "your policy"}])
    fig = fig_four_regimes(pd.concat([toy, mine], ignore_index=True))
    return Image(figure_bytes(fig, "png", 100))
