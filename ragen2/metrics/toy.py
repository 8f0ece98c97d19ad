"""Toy reasoning policies whose I(X;Z), H(Z|X) and H(Z) are known exactly (for teaching and tests).

A :class:`MixturePolicy` sees one of ``num_inputs`` equally likely inputs x and emits one reasoning
"string" z (an integer id) as follows:

- with probability ``dependence`` (d), z is drawn uniformly from a set of ``diversity`` (D)
  strings that belong to x alone (input-grounded reasoning);
- otherwise z is drawn uniformly from ``template_size`` (T) template strings shared by all inputs.

The sets are disjoint, so with ``H_b(d) = -d log d - (1 - d) log(1 - d)``:

- ``H(Z | X) = H_b(d) + d log D + (1 - d) log T``
- ``H(Z)     = H_b(d) + d log(n D) + (1 - d) log T``
- ``I(X; Z)  = H(Z) - H(Z | X) = d log n``

Input dependence sets the MI; D and T set the entropy. The four regimes of docs/method.md §5.5 are the
corners (see :data:`REGIMES`): diverse reasoning (d = 1, large D), template collapse (d = 0,
large T), compressed reasoning (d = 1, D = 1) and low-entropy collapse (d = 0, T = 1).

A reasoning counts as ``length`` tokens whose log-probability is the string's, so the ``_seq``
estimates of :func:`ragen2.metrics.mi_proxies` target the formulas above. The per-token
conditional entropy is the seq one divided by ``length``; the per-token MI and H(Z) are not (their
marginal mixes length-normalised scores, ``logmeanexp(L / length)``, a tempered mixture), which the
toy makes visible: every row's finite entries are equal here, so the per-token MI equals the seq
one, not ``I(X;Z) / length``.

>>> policy = REGIMES["template_collapse"]
>>> round(policy.mutual_information(), 6), round(policy.conditional_entropy(), 3)
(0.0, 2.773)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def _plogp(p: float) -> float:
    return p * math.log(p) if p > 0 else 0.0


@dataclass(frozen=True)
class MixturePolicy:
    """p(z | x) = d * Uniform(input x's D strings) + (1 - d) * Uniform(T shared templates)."""

    num_inputs: int = 8
    """n: number of distinct inputs, drawn uniformly."""
    dependence: float = 1.0
    """d: probability of an input-specific reasoning."""
    diversity: int = 4
    """D: input-specific strings per input."""
    template_size: int = 4
    """T: shared template strings."""
    length: int = 1
    """Tokens per reasoning (for the per-token view)."""

    def __post_init__(self) -> None:
        if self.num_inputs < 1:
            raise ValueError(f"num_inputs must be >= 1, got {self.num_inputs}")
        if not 0 <= self.dependence <= 1:
            raise ValueError(f"dependence must be in [0, 1], got {self.dependence}")
        if self.diversity < 1 or self.template_size < 1 or self.length < 1:
            raise ValueError(f"diversity, template_size and length must be >= 1, got "
                             f"{self.diversity}, {self.template_size}, {self.length}")

    # Reasoning ids: templates are 0 .. T-1; input x owns T + x*D .. T + (x+1)*D - 1.
    def owner(self, z: np.ndarray) -> np.ndarray:
        """The input a reasoning id belongs to, or -1 for a template."""
        z = np.asarray(z)
        return np.where(z < self.template_size, -1, (z - self.template_size) // self.diversity)

    def log_prob_matrix(self, reasonings: np.ndarray, inputs: np.ndarray) -> np.ndarray:
        """Exact ``log p(z_i | x_j)`` as an ``[M, N]`` matrix (``-inf`` where impossible)."""
        owner = self.owner(np.asarray(reasonings))[:, None]
        inputs = np.asarray(inputs)[None, :]
        template_lp = math.log(1 - self.dependence) - math.log(self.template_size) \
            if self.dependence < 1 else -math.inf
        specific_lp = math.log(self.dependence) - math.log(self.diversity) if self.dependence > 0 else -math.inf
        return np.where(owner == -1, template_lp, np.where(owner == inputs, specific_lp, -math.inf))

    def sample(self, inputs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One reasoning id per entry of ``inputs``."""
        inputs = np.asarray(inputs)
        specific = rng.random(inputs.shape) < self.dependence
        templates = rng.integers(0, self.template_size, inputs.shape)
        own = self.template_size + inputs * self.diversity + rng.integers(0, self.diversity, inputs.shape)
        return np.where(specific, own, templates)

    def conditional_entropy(self) -> float:
        """H(Z | X) in nats."""
        d = self.dependence
        return -_plogp(d) - _plogp(1 - d) + d * math.log(self.diversity) + (1 - d) * math.log(self.template_size)

    def entropy(self) -> float:
        """H(Z) in nats."""
        return self.conditional_entropy() + self.mutual_information()

    def mutual_information(self) -> float:
        """I(X; Z) in nats (= d log n)."""
        return self.dependence * math.log(self.num_inputs)


def analytic_mi(policy: MixturePolicy) -> float:
    """I(X; Z) of a toy policy, in nats."""
    return policy.mutual_information()


def analytic_conditional_entropy(policy: MixturePolicy) -> float:
    """H(Z | X) of a toy policy, in nats."""
    return policy.conditional_entropy()


def analytic_entropy(policy: MixturePolicy) -> float:
    """H(Z) of a toy policy, in nats."""
    return policy.entropy()


REGIMES: dict[str, MixturePolicy] = {
    "diverse_reasoning": MixturePolicy(num_inputs=8, dependence=1.0, diversity=16, template_size=1),
    "template_collapse": MixturePolicy(num_inputs=8, dependence=0.0, diversity=1, template_size=16),
    "compressed_reasoning": MixturePolicy(num_inputs=8, dependence=1.0, diversity=1, template_size=1),
    "low_entropy_collapse": MixturePolicy(num_inputs=8, dependence=0.0, diversity=1, template_size=1),
}
"""The four regimes of docs/method.md §5.5 as corners of (H(Z|X), I(X;Z)), with n = 8 inputs (I <= log 8)."""


@dataclass(frozen=True)
class ToyBatch:
    """A batch ready for :func:`ragen2.metrics.mi_proxies`."""

    logp_sum: np.ndarray
    """[M, N] exact log p(z_i | x_j)."""
    lengths: np.ndarray
    """[M] tokens per reasoning (all ``policy.length``)."""
    prompt_index: np.ndarray
    """[M] true column of each row."""
    prompt_keys: list[int]
    """[N] the input shown in each column (equal keys = duplicate prompts)."""
    reasonings: np.ndarray
    """[M] sampled reasoning ids."""


def sample_batch(policy: MixturePolicy, rows_per_column: int, rng: np.random.Generator,
                 columns: np.ndarray | None = None) -> ToyBatch:
    """Sample ``rows_per_column`` reasonings for each column's input and score them against all columns.

    Args:
        policy: the toy policy.
        rows_per_column: reasonings sampled per column (M = N * rows_per_column).
        rng: random generator.
        columns: the input of each column; default every input once (then the batch mixture is the
            true marginal p(z) and the estimates are unbiased). Repeats make duplicate prompts.
    """
    if rows_per_column < 1:
        raise ValueError(f"rows_per_column must be >= 1, got {rows_per_column}")
    cols = np.arange(policy.num_inputs) if columns is None else np.asarray(columns, dtype=np.int64)
    if cols.ndim != 1 or cols.size == 0 or cols.min() < 0 or cols.max() >= policy.num_inputs:
        raise ValueError(f"columns must be inputs in [0, {policy.num_inputs}), got {cols.tolist()}")
    prompt_index = np.repeat(np.arange(cols.size), rows_per_column)
    reasonings = policy.sample(cols[prompt_index], rng)
    return ToyBatch(
        logp_sum=policy.log_prob_matrix(reasonings, cols),
        lengths=np.full(reasonings.size, policy.length),
        prompt_index=prompt_index,
        prompt_keys=cols.tolist(),
        reasonings=reasonings,
    )
