"""Collapse diagnostics: MI proxies (docs/method.md §5), the cross log-prob scorer, toy policies.

- :func:`mi_proxies` and :class:`CollapseMonitor` (``ragen2.metrics.mi``): the metrics of docs/method.md §5.5.
- :func:`cross_logprobs` / :func:`naive_cross_logprobs` (``ragen2.metrics.scoring``): the
  ``log p(z_i | x_j)`` matrix from a causal LM (docs/method.md §5.4).
- ``ragen2.metrics.collapse``: sampling (prompt, reasoning) pairs from a rollout batch (docs/method.md §5.3)
  and the per-step ``collapse_*`` metrics.
- ``ragen2.metrics.toy``: mixture policies with known I(X;Z), H(Z|X), H(Z) for teaching and tests.

The scorers are loaded on first use (they import torch); the rest is numpy only.
"""

from ragen2.metrics.mi import CollapseMonitor, CollapseWarning, MIRows, mi_proxies

__all__ = ["mi_proxies", "CollapseMonitor", "CollapseWarning", "MIRows", "cross_logprobs",
           "naive_cross_logprobs"]


def __getattr__(name: str):
    """The scorers load torch and transformers: imported on first use, so the MI proxies stay numpy-only."""
    if name in ("cross_logprobs", "naive_cross_logprobs"):
        from ragen2.metrics import scoring

        return getattr(scoring, name)
    raise AttributeError(f"module 'ragen2.metrics' has no attribute {name!r}")
