"""Statistics for judging the paper's claims on a few seeds: paired tests, rank correlation, verdicts.

- :func:`paired_test`: ``a`` and ``b`` measured on the same seeds (e.g. top-p vs no filter). The
  difference ``d = a - b`` is summarised by its mean, std, wins/losses/ties, a two-sided sign test,
  a two-sided Wilcoxon signed-rank test and a percentile bootstrap CI of the mean.
- :func:`spearman`: Spearman's rho with its two-sided p-value and a percentile bootstrap CI
  (resampling runs).
- :func:`decide`: the verdict rule used by every claims table (see its docstring); paired
  comparisons decide on the paired t-test and its t-CI (:meth:`PairedResult.verdict`): with 4-6
  seeds the rank tests cannot reach p < 0.05 (see :func:`paired_test`), so they are reported beside
  it, not used to decide.
- :func:`pair_by_seed`: turns a runs table into the paired arrays the tests take.

All bootstraps use their own seeded generator, so results are the same on every call.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps

VERDICTS = ("agree", "disagree", "inconclusive")
DIRECTIONS = ("greater", "less")


@dataclass(frozen=True)
class PairedResult:
    """Summary of ``d = a - b`` over paired seeds."""

    mean_diff: float
    std_diff: float
    """Sample std (ddof 1); NaN for a single pair."""
    n: int
    wins: int
    """Pairs with ``a > b``."""
    losses: int
    ties: int
    sign_p: float
    """Two-sided exact binomial test of wins vs losses (ties dropped); 1.0 when all pairs tie."""
    wilcoxon_p: float
    """Two-sided Wilcoxon signed-rank p (zero differences dropped); 1.0 when all pairs tie."""
    t_p: float
    """Two-sided paired t-test p; NaN for one pair; 0 when every difference is the same non-zero value
    (the limit of t -> infinity), 1 when they are all 0."""
    ci_low: float
    """Percentile bootstrap CI of the mean difference (too narrow for very small n)."""
    ci_high: float
    ci_level: float
    t_ci_low: float = math.nan
    """Student-t CI of the mean difference at ``ci_level`` (NaN for one pair); the verdicts use it. With per-board
    outcomes (``boards`` of :func:`paired_test`) it includes the evaluation's noise."""
    t_ci_high: float = math.nan
    boards: int = 0
    """Evaluation boards whose resampling the intervals and ``t_p`` include (0: none given)."""
    board_se: float = 0.0
    """The standard error the boards add to the mean difference (:func:`board_variance`'s root)."""

    def as_dict(self) -> dict[str, float]:
        return asdict(self)

    def summary(self, scale: float = 1.0, unit: str = "") -> str:
        """One-line evidence text, e.g. ``diff +3.1 [+0.4, +5.9] (95% t-CI), wins 5/6, t p=0.03, ...``."""
        u = f" {unit}" if unit else ""
        noise = f" with the evaluation noise of {self.boards} boards" if self.boards else ""
        return (
            f"diff {self.mean_diff * scale:+.3g}{u} "
            f"[{self.t_ci_low * scale:+.3g}, {self.t_ci_high * scale:+.3g}] "
            f"({self.ci_level:.0%} t-CI{noise}), wins {self.wins}/{self.n} (ties {self.ties}), "
            f"paired t p={self.t_p:.3g}, Wilcoxon p={self.wilcoxon_p:.3g}, sign p={self.sign_p:.3g}, "
            f"n={self.n} pairs"
        )

    def verdict(self, direction: str, paper_effect: float | None = None, alpha: float = 0.05) -> str:
        """:func:`decide` on the paired t-test and its t-CI (the stated test of every paired verdict)."""
        return decide(self.mean_diff, self.t_p, direction, alpha, ci=(self.t_ci_low, self.t_ci_high),
                      paper_effect=paper_effect)


@dataclass(frozen=True)
class SpearmanResult:
    rho: float
    p: float
    n: int
    ci_low: float
    ci_high: float
    ci_level: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)

    def summary(self) -> str:
        """One-line evidence text, e.g. ``rho +0.41 [+0.05, +0.70] (95% CI), p=0.031, n=24 runs``."""
        return (
            f"rho {self.rho:+.2f} [{self.ci_low:+.2f}, {self.ci_high:+.2f}] ({self.ci_level:.0%} CI), "
            f"p={self.p:.3g}, n={self.n} runs"
        )


def _vector(values, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    return arr


def _check_ci(ci: float, n_boot: int) -> None:
    if not 0 < ci < 1:
        raise ValueError(f"ci must be in (0, 1), got {ci!r}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot!r}")


def bootstrap_mean_ci(
    values, *, n_boot: int = 10_000, ci: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of ``values`` (resampled with replacement)."""
    x = _vector(values, "values")
    _check_ci(ci, n_boot)
    if x.size == 0:
        raise ValueError("values is empty")
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(axis=1)
    tail = (1 - ci) / 2
    return float(np.quantile(means, tail)), float(np.quantile(means, 1 - tail))


def board_variance(boards) -> float:
    """The variance that resampling the evaluation boards adds to a mean difference over units.

    ``boards[i, j]`` is unit ``i``'s difference on board ``j`` (e.g. a Top-p run's success on validation board ``j``
    minus its paired no-filter run's, or a run's final success there minus its warm start's). Every unit is scored on
    the same ``J`` boards, so which boards were drawn moves every unit's difference alike: that part of the error
    does not shrink with more units and never shows as spread between them. It is ``var_j(mean_i boards[i, j]) / J``
    (the squared standard error of a mean over ``J`` boards of the units' mean difference per board)."""
    d = np.asarray(boards, dtype=np.float64)
    if d.ndim != 2 or d.shape[1] < 2 or not np.all(np.isfinite(d)):
        raise ValueError(f"boards must be a finite [units, boards] matrix with >= 2 boards, got shape {d.shape}")
    return float(d.mean(axis=0).var(ddof=1) / d.shape[1])


def two_way_bootstrap_mean_ci(boards, *, n_boot: int = 10_000, ci: float = 0.95, seed: int = 0
                              ) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of ``boards[i, j]`` resampling units (rows) and boards (columns)
    independently: both the units' spread and the evaluation boards' noise."""
    d = np.asarray(boards, dtype=np.float64)
    _check_ci(ci, n_boot)
    if d.ndim != 2 or d.size == 0:
        raise ValueError(f"boards must be a non-empty [units, boards] matrix, got shape {d.shape}")
    rng = np.random.default_rng(seed)
    n, j = d.shape
    means = np.empty(n_boot)
    for k in range(n_boot):  # the row-then-column means of a resample: O(n * J) each
        rows = d[rng.integers(0, n, size=n)]
        means[k] = rows[:, rng.integers(0, j, size=j)].mean()
    tail = (1 - ci) / 2
    return float(np.quantile(means, tail)), float(np.quantile(means, 1 - tail))


def paired_test(a, b, *, boards=None, n_boot: int = 10_000, ci: float = 0.95, seed: int = 0) -> PairedResult:
    """Compare ``a`` with ``b`` measured on the same seeds (``a[i]`` pairs with ``b[i]``).

    Args:
        a, b: equal-length sequences of finite numbers (at least one pair).
        boards: optional ``[pairs, J]`` per-board differences behind ``a - b`` (each row's mean is ``a[i] - b[i]``),
            when ``a`` and ``b`` are means over the same ``J`` evaluation boards. The t-interval and ``t_p`` then
            use the standard error ``sqrt(s^2 / n + board_variance(boards))`` on ``n - 1`` degrees of freedom, and the
            bootstrap resamples boards as well as pairs (:func:`two_way_bootstrap_mean_ci`): the evaluation's noise
            is in every interval (docs/preregistrations.md §7.18).
        n_boot: bootstrap resamples for the CI of the mean difference.
        ci: CI level.
        seed: seed of the bootstrap generator.

    Returns:
        A :class:`PairedResult` for ``d = a - b``.

    Note:
        The rank tests cannot reach p < 0.05 with few pairs: with no ties the smallest two-sided
        p is ``2 / 2**n`` for both the sign test and the exact Wilcoxon test, i.e. 0.125 at n = 4,
        0.0625 at n = 5 and 0.031 at n = 6. Plan at least 6 paired seeds per cell for a rank-test
        verdict; the paired t-test (``t_p``) assumes roughly normal differences. The percentile
        bootstrap CI is too narrow for very small n (it cannot extend past the observed extremes).
    """
    x, y = _vector(a, "a"), _vector(b, "b")
    if x.size != y.size:
        raise ValueError(f"a and b must pair up: lengths {x.size} and {y.size}")
    if x.size == 0:
        raise ValueError("paired_test needs at least one pair, got none")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError(f"a and b must be finite; a={x.tolist()}, b={y.tolist()}")
    d = x - y
    v_board, n_boards = 0.0, 0
    if boards is not None:
        per_board = np.asarray(boards, dtype=np.float64)
        if per_board.ndim != 2 or per_board.shape[0] != d.size:
            raise ValueError(f"boards must have one row per pair ({d.size}), got shape {per_board.shape}")
        if not np.allclose(per_board.mean(axis=1), d, rtol=0, atol=1e-9):
            raise ValueError("each row of boards must average to its pair's difference a[i] - b[i]")
        v_board, n_boards = board_variance(per_board), per_board.shape[1]
    wins, losses = int((d > 0).sum()), int((d < 0).sum())
    ties = int(d.size - wins - losses)
    sign_p = float(sps.binomtest(wins, wins + losses, 0.5).pvalue) if wins + losses else 1.0
    nonzero = d[d != 0]
    if nonzero.size == 0:
        wilcoxon_p = 1.0
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # small-sample notes from scipy
            wilcoxon_p = float(sps.wilcoxon(nonzero, alternative="two-sided").pvalue)
    if d.size > 1 and np.ptp(d) > 0 and boards is None:
        t_p = float(sps.ttest_rel(x, y).pvalue)
        half = float(sps.t.ppf(0.5 + ci / 2, d.size - 1) * d.std(ddof=1) / math.sqrt(d.size))
        t_ci = (float(d.mean()) - half, float(d.mean()) + half)
    elif d.size > 1 and (np.ptp(d) > 0 or v_board > 0):  # the t-test with the boards' variance in its error
        se = math.sqrt(float(d.var(ddof=1)) / d.size + v_board)
        t_p = float(2 * sps.t.sf(abs(float(d.mean())) / se, d.size - 1))
        half = float(sps.t.ppf(0.5 + ci / 2, d.size - 1) * se)
        t_ci = (float(d.mean()) - half, float(d.mean()) + half)
    elif d.size > 1:  # every difference the same: t is infinite (p = 0) unless they are all 0 (p = 1)
        t_p, t_ci = (0.0 if d[0] != 0 else 1.0), (float(d[0]), float(d[0]))
    else:
        t_p, t_ci = math.nan, (math.nan, math.nan)
    low, high = (bootstrap_mean_ci(d, n_boot=n_boot, ci=ci, seed=seed) if boards is None
                 else two_way_bootstrap_mean_ci(per_board, n_boot=n_boot, ci=ci, seed=seed))
    return PairedResult(
        mean_diff=float(d.mean()),
        std_diff=float(d.std(ddof=1)) if d.size > 1 else math.nan,
        n=int(d.size),
        wins=wins,
        losses=losses,
        ties=ties,
        sign_p=sign_p,
        wilcoxon_p=wilcoxon_p,
        t_p=t_p,
        ci_low=low,
        ci_high=high,
        ci_level=ci,
        t_ci_low=t_ci[0],
        t_ci_high=t_ci[1],
        boards=n_boards,
        board_se=math.sqrt(v_board),
    )


def _rho(x: np.ndarray, y: np.ndarray) -> float:
    if np.all(x == x[0]) or np.all(y == y[0]):
        return math.nan
    rx, ry = sps.rankdata(x), sps.rankdata(y)
    return float(np.corrcoef(rx, ry)[0, 1])


def _rho_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho of each row pair of ``x`` and ``y`` (NaN where a row is constant)."""
    rx = sps.rankdata(x, axis=1)
    ry = sps.rankdata(y, axis=1)
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    denom = np.sqrt((rx**2).sum(axis=1) * (ry**2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, (rx * ry).sum(axis=1) / np.where(denom > 0, denom, 1.0), np.nan)


def spearman(
    x, y, *, nan_policy: str = "raise", n_boot: int = 10_000, ci: float = 0.95, seed: int = 0
) -> SpearmanResult:
    """Spearman's rank correlation of ``x`` and ``y`` with p-value and bootstrap CI.

    Args:
        x, y: equal-length sequences (one entry per run).
        nan_policy: ``raise`` (any non-finite value is an error) or ``omit`` (drop those pairs).
        n_boot, ci, seed: percentile bootstrap over runs; resamples whose rank correlation is
            undefined (a constant side) are skipped.

    Returns:
        :class:`SpearmanResult`; ``rho`` and ``p`` are NaN when either side is constant.
    """
    xs, ys = _vector(x, "x"), _vector(y, "y")
    if xs.size != ys.size:
        raise ValueError(f"x and y must have equal length: {xs.size} and {ys.size}")
    if nan_policy not in ("raise", "omit"):
        raise ValueError(f"nan_policy must be 'raise' or 'omit', got {nan_policy!r}")
    _check_ci(ci, n_boot)
    ok = np.isfinite(xs) & np.isfinite(ys)
    if not ok.all():
        if nan_policy == "raise":
            raise ValueError(
                f"{int((~ok).sum())} non-finite pair(s) at index {np.flatnonzero(~ok).tolist()}; "
                "pass nan_policy='omit' to drop them"
            )
        xs, ys = xs[ok], ys[ok]
    if xs.size < 3:
        raise ValueError(f"spearman needs at least 3 finite pairs, got {xs.size}")
    rho = _rho(xs, ys)
    if math.isnan(rho):
        p = math.nan
    else:
        p = float(sps.spearmanr(xs, ys).pvalue)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, xs.size, size=(n_boot, xs.size))
    boots = _rho_rows(xs[idx], ys[idx])
    boots = boots[np.isfinite(boots)]
    tail = (1 - ci) / 2
    low, high = (
        (float(np.quantile(boots, tail)), float(np.quantile(boots, 1 - tail)))
        if boots.size
        else (math.nan, math.nan)
    )
    return SpearmanResult(rho=rho, p=p, n=int(xs.size), ci_low=low, ci_high=high, ci_level=ci)


def decide(
    stat: float,
    p: float,
    direction: str,
    alpha: float = 0.05,
    *,
    ci: tuple[float, float] | None = None,
    paper_effect: float | None = None,
) -> str:
    """The verdict on one claim from one test.

    Rule (applied in this order):

    1. ``agree``: ``p < alpha`` and ``stat`` lies on the paper's side of 0 (``direction`` =
       ``"greater"`` means the paper reports a positive effect, ``"less"`` a negative one).
    2. ``disagree``: ``p < alpha`` with ``stat`` on the opposite side; or, when ``ci`` and
       ``paper_effect`` are both given, the CI excludes the paper's effect size (our data rule out
       an effect as large as the paper's, although no significant effect was found either way).
    3. ``inconclusive``: otherwise (including NaN ``stat``/``p`` and ``stat == 0``).

    A significant effect in the paper's direction counts as agreement even if its size differs
    from the paper's; the evidence text should give both numbers.

    Args:
        stat: the effect (mean paired difference, rho, ...); its sign is compared with ``direction``.
        p: two-sided p-value of the test of no effect.
        direction: ``greater`` | ``less``.
        alpha: significance level in (0, 1).
        ci: optional ``(low, high)`` interval for the effect.
        paper_effect: optional effect size the paper reports, on the same scale as ``stat``.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if not math.isnan(p) and not 0 <= p <= 1:
        raise ValueError(f"p must be in [0, 1], got {p!r}")
    sign = 1.0 if direction == "greater" else -1.0
    if not (math.isnan(stat) or math.isnan(p)) and p < alpha and stat != 0:
        return "agree" if stat * sign > 0 else "disagree"
    if ci is not None and paper_effect is not None:
        low, high = ci
        if low > high:
            raise ValueError(f"ci must be (low, high) with low <= high, got {ci!r}")
        if not (math.isnan(low) or math.isnan(high)) and not low <= paper_effect <= high:
            return "disagree"
    return "inconclusive"


def pair_by_seed(
    df: pd.DataFrame, value: str, condition_col: str, a: str, b: str, pair_on: str = "seed"
) -> pd.DataFrame:
    """Rows of ``df`` with condition ``a`` and ``b`` joined on ``pair_on``.

    Returns:
        A DataFrame indexed by ``pair_on`` with columns ``a`` and ``b`` (named by the condition
        values) and ``diff = a - b``, only for keys present in both conditions (sorted).

    Raises:
        ValueError: a missing column, or a key that occurs twice within one condition.
    """
    for col in (value, condition_col, pair_on):
        if col not in df.columns:
            raise ValueError(f"column {col!r} not in the table (columns: {list(df.columns)})")
    sides = {}
    for cond in (a, b):
        part = df[df[condition_col] == cond]
        dup = part[pair_on][part[pair_on].duplicated()].tolist()
        if dup:
            raise ValueError(f"{pair_on} value(s) {dup} occur twice under {condition_col}={cond!r}")
        sides[cond] = part.set_index(pair_on)[value]
    joined = pd.concat([sides[a].rename(a), sides[b].rename(b)], axis=1, join="inner").sort_index()
    joined["diff"] = joined[a] - joined[b]
    return joined


def pairs_needed(diff_std: float, effect: float, *, alpha: float = 0.05, power: float = 0.8,
                 max_pairs: int = 100_000, board_se: float = 0.0) -> int:
    """Pairs a two-sided paired t-test needs to detect a mean difference ``effect`` with ``power``,
    when the differences have standard deviation ``diff_std`` (exact, through the noncentral t).

    ``board_se``: the standard error the shared evaluation boards add (:func:`board_variance`'s root), which more
    pairs do not shrink; an effect within its reach may need ``max_pairs``. Used to say how many more seeds an
    inconclusive verdict would take.

    Raises:
        ValueError: a non-positive ``diff_std`` or ``effect``, or ``alpha`` / ``power`` outside (0, 1).
    """
    if not (diff_std > 0 and math.isfinite(diff_std)):
        raise ValueError(f"diff_std must be a positive number, got {diff_std!r}")
    if not (effect != 0 and math.isfinite(effect)):
        raise ValueError(f"effect must be a non-zero number, got {effect!r}")
    if not (0 < alpha < 1 and 0 < power < 1):
        raise ValueError(f"alpha and power must be in (0, 1), got {alpha!r}, {power!r}")
    n = 2
    while n <= max_pairs:
        crit = sps.t.ppf(1 - alpha / 2, n - 1)
        nc = abs(effect) / math.sqrt(diff_std ** 2 / n + board_se ** 2)
        achieved = sps.nct.sf(crit, n - 1, nc) + sps.nct.cdf(-crit, n - 1, nc)
        if achieved >= power:
            return n
        n = n + 1 if n < 200 else int(n * 1.05) + 1
    return max_pairs


def t_interval_width(diff_std: float, n: int, *, ci: float = 0.95, board_se: float = 0.0) -> float:
    """Width of the ``ci`` t-interval of a mean of ``n`` paired differences with standard deviation ``diff_std``
    (and the boards' standard error ``board_se``, :func:`paired_test`), NaN for fewer than 2 pairs or a non-finite
    spread."""
    if n < 2 or not math.isfinite(diff_std):
        return math.nan
    return 2 * float(sps.t.ppf(0.5 + ci / 2, n - 1)) * math.sqrt(diff_std ** 2 / n + board_se ** 2)


def pairs_for_interval(diff_std: float, effect: float, *, ci: float = 0.95, max_pairs: int = 100_000,
                       board_se: float = 0.0) -> int:
    """The fewest pairs whose ``ci`` t-interval (:func:`t_interval_width`) is narrower than ``|effect|``
    (``max_pairs`` where the boards' own noise keeps it wider at any size).

    An interval narrower than the effect cannot hold both 0 and the effect, so the test then decides whatever the
    mean comes out (significant, or ruling the effect out): the size a deciding test needs.

    Raises:
        ValueError: a non-positive ``diff_std`` or a zero ``effect``.
    """
    if not (diff_std > 0 and math.isfinite(diff_std)):
        raise ValueError(f"diff_std must be a positive number, got {diff_std!r}")
    if not (effect != 0 and math.isfinite(effect)):
        raise ValueError(f"effect must be a non-zero number, got {effect!r}")
    n = 2
    while n < max_pairs and not t_interval_width(diff_std, n, ci=ci, board_se=board_se) < abs(effect):
        n = n + 1 if n < 200 else int(n * 1.05) + 1
    return min(n, max_pairs)


def runs_needed_for_rho(rho: float, *, alpha: float = 0.05, power: float = 0.8) -> int:
    """Runs a two-sided test of Spearman's rho = 0 needs to detect ``rho`` with ``power`` (Fisher's z
    approximation, ``n = ((z_{1-alpha/2} + z_power) / atanh(rho))**2 + 3``)."""
    if not (0 < abs(rho) < 1):
        raise ValueError(f"rho must be in (-1, 1) and non-zero, got {rho!r}")
    if not (0 < alpha < 1 and 0 < power < 1):
        raise ValueError(f"alpha and power must be in (0, 1), got {alpha!r}, {power!r}")
    z = sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(power)
    return int(math.ceil((z / math.atanh(abs(rho))) ** 2 + 3))


def within_strata_spearman(x, y, strata, clusters, *, min_clusters: int = 3, n_boot: int = 10_000, ci: float = 0.95,
                           seed: int = 0) -> SpearmanResult:
    """Spearman's rho of ``x`` and ``y`` within strata, averaged over the strata weighted by their points, with a
    bootstrap that resamples clusters within each stratum (docs/preregistrations.md §7.18, C2 within conditions).

    A stratum is one setting (a filter arm), a cluster one run, a point one reading of a run (a checkpoint): a
    correlation over every run of every setting mixes the settings' differences in means into it; within strata it
    cannot. Strata with fewer than ``min_clusters`` clusters, or a constant side, add nothing. ``p`` is two-sided from
    the bootstrap (twice the smaller share of draws on either side of 0); ``n`` counts the points used.

    Raises:
        ValueError: unequal lengths, non-finite values, or no stratum with enough clusters.
    """
    xs, ys = _vector(x, "x"), _vector(y, "y")
    st, cl = np.asarray(strata, dtype=object), np.asarray(clusters, dtype=object)
    if not (xs.size == ys.size == st.size == cl.size):
        raise ValueError(f"x, y, strata and clusters must have equal length: {xs.size}, {ys.size}, {st.size}, {cl.size}")
    if not (np.all(np.isfinite(xs)) and np.all(np.isfinite(ys))):
        raise ValueError("x and y must be finite")
    _check_ci(ci, n_boot)
    rng = np.random.default_rng(seed)
    rhos, weights, boots = [], [], []
    for stratum in sorted(set(st.tolist()), key=str):
        members = st == stratum
        runs = sorted(set(cl[members].tolist()), key=str)
        if len(runs) < min_clusters:
            continue
        per_run = [(xs[members & (cl == r)], ys[members & (cl == r)]) for r in runs]
        rho = _rho(xs[members], ys[members])
        if math.isnan(rho):
            continue
        idx = rng.integers(0, len(runs), size=(n_boot, len(runs)))
        if len({len(px) for px, _ in per_run}) == 1:  # equal readings per run: one vectorised draw
            bx, by = np.stack([px for px, _ in per_run]), np.stack([py for _, py in per_run])
            boot = _rho_rows(bx[idx].reshape(n_boot, -1), by[idx].reshape(n_boot, -1))
        else:
            boot = np.array([_rho(np.concatenate([per_run[i][0] for i in row]),
                                  np.concatenate([per_run[i][1] for i in row])) for row in idx])
        rhos.append(rho)
        weights.append(int(members.sum()))
        boots.append(boot)
    if not rhos:
        raise ValueError(f"no stratum has {min_clusters} or more clusters with a non-constant x and y")
    w = np.array(weights, dtype=np.float64)
    rho = float(np.dot(w, rhos) / w.sum())
    draws = np.stack(boots, axis=1)  # [n_boot, strata]
    ok = np.isfinite(draws)
    boot = (np.where(ok, draws, 0.0) * w).sum(axis=1) / np.maximum((ok * w).sum(axis=1), 1e-300)
    boot = boot[ok.any(axis=1)]
    tail = (1 - ci) / 2
    p = float(min(1.0, 2 * min((boot <= 0).mean(), (boot >= 0).mean())))
    return SpearmanResult(rho=rho, p=p, n=int(w.sum()), ci_low=float(np.quantile(boot, tail)),
                          ci_high=float(np.quantile(boot, 1 - tail)), ci_level=ci)
