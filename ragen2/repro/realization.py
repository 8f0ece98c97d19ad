"""The realization check: every claim decided twice, on two equivalent realizations of the same study.

A verdict that rests on one warm start can flip when the warm start is rebuilt from another seed, although
nothing the claim is about has changed (docs/preregistrations.md §7.10). So the pipeline trains every run a second
time from a second, independent warm start (the same SFT recipe with another ``warm_start.seed``: another
expert corpus, another SFT order and initialisation of its sampling), runs the claim notebooks on those
runs, and compares the two verdicts per claim:

- both realizations agree on a verdict: that verdict stands;
- they differ: the claim is **fragile** and is reported ``inconclusive``, with both verdicts and both
  evidence lines, never as agree or disagree.

The claims stage also decides every claim on both realizations' units together (:mod:`ragen2.repro.pooled`: the
warm start as a random factor, pairs within each warm start, the effect averaged over both). With that pooled
verdict the rule is: the verdict stands only where the first realization, the second and the pooled units all give
it, and the evidence is then the pooled test's (twice the pairs: the estimate to report); any difference among the
three makes the claim fragile, ``inconclusive``, with all three verdicts.

Where things live (``params.yaml``'s ``pipeline.realization``, written by :mod:`ragen2.repro.profiles`):

- ``set``: the config overrides that make the second realization (``--set`` syntax);
- ``runs_root``: its run directories (DVC stages ``train_realization@<run id>``);
- its warm starts (``warmstart_realization@<key>``), its notebook inputs and executed notebooks, and each
  notebook's figures, tables and claims under ``figures_root/<notebook>/``;
- ``paper_figures/realization_check.csv``: per claim, the two verdicts and whether the verdict holds
  (:func:`compare_claims`); ``paper_figures/claims.csv`` carries the final verdict.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragen2.config import RunConfig, load_config, read_params
from ragen2.errors import ConfigError
from ragen2.fileio import write_text_atomic
from ragen2.repro.claims import CLAIM_IDS, Claim, merged_rows, write_merged

OVERRIDES = ("warm_start.seed=1",)
"""What makes the second realization of runs that start from a warm start: its SFT seed (the first's is 0)."""
LABEL = "second warm start (warm_start.seed=1)"
NO_WARM_START_OVERRIDES = ("rollout.train_seed=20000000",)
"""The second realization of runs without a warm start (the paper profile starts from the base model): another,
disjoint set of training prompts (env seeds from 20,000,000 on; the first realization's start at 10,000, DAPO's
refills 1,000,000 above either, the warm-start corpus at 50,000,000)."""
NO_WARM_START_LABEL = "second set of training prompts (rollout.train_seed=20000000)"


def overrides_for(warm_start_steps: int) -> tuple[tuple[str, ...], str]:
    """The second realization's overrides and label for a profile whose runs have ``warm_start_steps`` SFT steps."""
    return (OVERRIDES, LABEL) if warm_start_steps > 0 else (NO_WARM_START_OVERRIDES, NO_WARM_START_LABEL)
RUNS_ROOT = "data/realization/runs"
FIGURES_ROOT = "data/realization/figures"
INPUTS_DIR = "data/realization/inputs"
EXECUTED_DIR = "data/realization/executed"
CHECK_FILE = "realization_check.csv"
TRAIN_STAGE = "train_realization"
"""The DVC stage (``foreach`` over run ids) that trains the second realization's runs."""
COLUMNS = ("claim", "verdict", "first", "second", "pooled", "holds", "first_evidence", "second_evidence")
"""``realization_check.csv``: the final verdict, the first and second realization's verdicts and the pooled one
(empty when not computed), whether they all match, and each realization's own evidence (the pooled evidence is
``claims.csv``'s)."""


@dataclass(frozen=True)
class Realization:
    """The second realization of a params file's runs."""

    overrides: tuple[str, ...]
    label: str
    runs_root: str

    def config(self, run_id: str, params_path: str | Path = "params.yaml") -> RunConfig:
        """``run_id``'s config in the second realization (its params entry with :attr:`overrides` applied)."""
        return load_config(run_id, params_path=params_path, overrides=list(self.overrides))


def read_realization(params_path: str | Path = "params.yaml") -> Realization:
    """The ``pipeline.realization`` entry of a params file.

    Raises:
        ConfigError: the file has no such entry (a params file written before the check existed).
    """
    entry = (read_params(params_path).get("pipeline") or {}).get("realization")
    if not isinstance(entry, Mapping) or "set" not in entry:
        raise ConfigError(f"pipeline.realization={entry!r} in {params_path}: no realization check declared; "
                          "regenerate the file with `python -m ragen2 profile <name> --write params.yaml`")
    return Realization(overrides=tuple(entry["set"]), label=str(entry.get("label", "")),
                       runs_root=str(entry.get("runs_root", RUNS_ROOT)))


def pipeline_entry(overrides: Sequence[str], label: str, warm_starts: dict[str, dict[str, str]],
                   train: dict[str, dict[str, str]], notebooks: dict[str, dict[str, str]]) -> dict[str, Any]:
    """The ``pipeline.realization`` entry of a profile's params (the second realization's warm starts and runs)."""
    return {"label": label, "set": list(overrides), "runs_root": RUNS_ROOT, "figures_root": FIGURES_ROOT,
            "warm_starts": warm_starts, "train": train, "notebooks": notebooks}


def compare_claims(first: Iterable[Claim], second: Iterable[Claim], label: str = LABEL,
                   pooled: Iterable[Claim] | None = None) -> tuple[list[Claim], list[dict[str, str]]]:
    """The final claims and the comparison rows of two realizations' merged claims (and, when given, the claims
    decided on both realizations' units together, :mod:`ragen2.repro.pooled`).

    A claim decided in only one realization is left undecided (``inconclusive``): its verdict was not
    checked. Evidence of a fragile claim names every verdict and keeps every evidence line. With ``pooled``, a
    verdict stands only where all three give it, with the pooled evidence first.

    Returns:
        ``(claims, rows)``: the final :class:`Claim` s in C1..C7 order, and one row per claim with the
        :data:`COLUMNS`.
    """
    a = {c.claim: c for c in first}
    b = {c.claim: c for c in second}
    p = {c.claim: c for c in pooled} if pooled is not None else {}
    claims, rows = [], []
    for claim_id in sorted(set(a) | set(b), key=CLAIM_IDS.index):
        one, two, both = a.get(claim_id), b.get(claim_id), p.get(claim_id)
        if one is not None and two is not None:
            verdicts = [one.verdict, two.verdict] + ([both.verdict] if both is not None else [])
            holds = len(set(verdicts)) == 1
            if holds and both is not None:
                final = Claim(claim_id, one.verdict, f"pooled over both warm starts: {both.evidence} || holds in the "
                                                     f"first realization and in the {label}")
            elif holds:
                final = Claim(claim_id, one.verdict, f"{one.evidence} || holds in the {label}")
            else:
                pooled_text = (f", {both.verdict} pooled over both || pooled: {both.evidence}"
                               if both is not None else "")
                final = Claim(claim_id, "inconclusive",
                              f"fragile: {one.verdict} in the first realization, {two.verdict} in the {label}"
                              f"{pooled_text} || first: {one.evidence} || second: {two.evidence}")
        else:
            holds = False
            present = one or two
            which = "first" if one is not None else "second"
            final = Claim(claim_id, "inconclusive",
                          f"unchecked: decided in the {which} realization only ({present.verdict}) || {present.evidence}")
        claims.append(final)
        rows.append({"claim": claim_id, "verdict": final.verdict,
                     "first": one.verdict if one else "", "second": two.verdict if two else "",
                     "pooled": both.verdict if both else "", "holds": str(holds).lower(),
                     "first_evidence": one.evidence if one else "", "second_evidence": two.evidence if two else ""})
    return claims, rows


def write_comparison(rows: Sequence[Mapping[str, str]], path: str | Path) -> Path:
    """Write the comparison rows as CSV, atomically."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return write_text_atomic(Path(path), buf.getvalue())


def merge_with_realization(out_dir: str | Path, second_root: str | Path, label: str = LABEL,
                           pooled: Iterable[Claim] | None = None,
                           gate: Callable[[Claim], Claim] | None = None) -> tuple[Path, Path, list[Claim]]:
    """``claims.csv`` from both realizations: the first's section files in ``out_dir``, the second's in
    ``second_root/<notebook>/``, and the pooled claims where given (:func:`compare_claims`); also
    ``out_dir/realization_check.csv``. ``gate``, when given, maps each final claim once more (the preconditions:
    ``untested`` where one failed in either realization, :func:`ragen2.repro.preconditions.gate`).

    Raises:
        FileNotFoundError: either realization has no section file.
    """
    out_dir, second_root = Path(out_dir), Path(second_root)
    first_files = sorted(out_dir.glob("claims_*.csv"))
    second_files = sorted(second_root.glob("*/claims_*.csv"), key=lambda p: p.name)
    for files, where in ((first_files, out_dir), (second_files, second_root / "*")):
        if not files:
            raise FileNotFoundError(f"no claims_<section>.csv under {str(where)!r}")
    first, _ = merged_rows(first_files)
    second, _ = merged_rows(second_files)
    claims, rows = compare_claims(first, second, label, pooled)
    if gate is not None:
        claims = [gate(c) for c in claims]
        for row, claim in zip(rows, claims, strict=True):
            row["verdict"] = claim.verdict
    return write_merged(out_dir / "claims.csv", claims), write_comparison(rows, out_dir / CHECK_FILE), claims
