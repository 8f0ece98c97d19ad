"""The core library never imports the reproduction layer (``ragen2.repro``), only the CLI uses both; and every
document the code cites is in the repository."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "ragen2"
REPRO = "ragen2.repro"
BOTH_LAYERS = {PACKAGE / "__main__.py"}
"""The command line dispatches to both layers."""


def core_modules() -> list[Path]:
    """Every module of ``ragen2`` outside ``ragen2/repro`` and except the CLI."""
    return sorted(p for p in PACKAGE.rglob("*.py")
                  if (PACKAGE / "repro") not in p.parents and p not in BOTH_LAYERS)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_repro(name: str) -> bool:
    return name == REPRO or name.startswith(REPRO + ".")


def repro_imports(source: str, module: str, is_package: bool = False) -> list[str]:
    """``line: import`` of every import of ``ragen2.repro`` in ``source`` (the code of ``module``), at any depth:
    module level or inside functions, ``import ragen2.repro...``, ``from ragen2.repro... import`` and
    ``from ragen2 import repro``, relative forms resolved against ``module``."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if _is_repro(a.name)]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package[: len(package) - (node.level - 1)]
                base = ".".join(parent + ([node.module] if node.module else []))
            if _is_repro(base):
                found.append(f"{node.lineno}: from {base} import ...")
            else:
                found += [f"{node.lineno}: from {base} import {a.name}" for a in node.names
                          if _is_repro(f"{base}.{a.name}")]
    return found


def test_the_walk_covers_the_core_and_skips_the_reproduction_layer():
    names = {module_name(p) for p in core_modules()}
    assert {"ragen2.config", "ragen2.filter", "ragen2.trainer.loop", "ragen2.metrics", "ragen2.rundir"} <= names
    assert not any(_is_repro(n) for n in names) and "ragen2.__main__" not in names


def test_every_form_of_import_is_found():
    source = ("import ragen2.repro.stats\nfrom ragen2.repro import figures\nfrom ragen2 import repro\n"
              "from . import repro as r\nfrom .repro.claims import Claim\nimport ragen2.reproduction\n"
              "from ragen2 import rundir\ndef f():\n    from ragen2.repro.tables import main_table\n")
    found = [line.split(": ", 1)[0] for line in repro_imports(source, "ragen2.sample")]
    assert found == ["1", "2", "3", "4", "5", "9"]
    assert repro_imports("from .. import repro\n", "ragen2.trainer.loop") == ["1: from ragen2 import repro"]
    assert repro_imports("from . import repro\n", "ragen2", is_package=True) == ["1: from ragen2 import repro"]


@pytest.mark.parametrize("path", core_modules(), ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_core_module_does_not_import_the_reproduction_layer(path):
    found = repro_imports(path.read_text(), module_name(path), path.name == "__init__.py")
    assert found == [], f"{path.relative_to(PACKAGE.parent)} imports the reproduction layer: {found}"


OUTSIDE_DOCUMENTS = re.compile(r"\bspec(?: section)? \d|\(spec\)|the spec's|shared/reference|\.\./shared|"
                               r"stack-notes|cpu-scale-probe|ragen2-spec|paper_claims\.md")
"""Citations of documents that are not in the repository (the method is docs/method.md)."""


def test_no_reference_points_at_a_document_outside_the_repository():
    files = [*PACKAGE.rglob("*.py"), *(REPO / "notebooks").glob("*.ipynb"), *(REPO / "docs").glob("*.md"),
             REPO / "README.md"]
    hits = [f"{p.relative_to(REPO)}:{n}: {line.strip()[:80]}" for p in files
            for n, line in enumerate(p.read_text().splitlines(), 1) if OUTSIDE_DOCUMENTS.search(line)]
    assert not hits, "\n".join(hits)


def test_the_method_sections_the_code_cites_exist():
    headings = {m.group(1) for m in re.finditer(r"^#{2,3} (\d+(?:\.\d+)?)[ .]", (REPO / "docs" / "method.md").read_text(), re.M)}
    files = [*PACKAGE.rglob("*.py"), *(REPO / "notebooks").glob("*.ipynb"), *(REPO / "docs").glob("*.md"), REPO / "README.md"]
    cited = {(p.relative_to(REPO), m.group(1)) for p in files
             for m in re.finditer(r"§(\d+(?:\.\d+)?)", p.read_text())}
    missing = sorted(f"{p}: §{sec}" for p, sec in cited if sec not in headings)
    assert not missing, missing
