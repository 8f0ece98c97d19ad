"""The core library never imports the reproduction layer (``ragen2.repro``); only the CLI uses both."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "ragen2"
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
