"""No import cycles in ragen2: neither between modules nor between packages (a subpackage such as ``ragen2.trainer``
counts as one, a top-level module as its own). Imports inside functions count too: a lazy import still ties two
modules together, it only hides the loop from the interpreter."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "ragen2"


def module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The ragen2 modules ``name`` imports, at any depth, relative forms resolved; ``from a import b`` names the
    module ``a.b`` where it is one, else ``a``."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    targets = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - (node.level - 1)] + ([base] if base else []))
            targets += [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
    found = set()
    for target in targets:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)
    return found


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def package_of(name: str) -> str:
    """``ragen2.trainer.loop`` -> ``ragen2.trainer``; a top-level module is its own package."""
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or (PACKAGE / parts[-1]).is_dir() else name


def module_graph() -> dict[str, set[str]]:
    names = module_names()
    return {name: imports_of(name, path, set(names)) for name, path in names.items()}


def test_cycles_are_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    assert package_of("ragen2.trainer.loop") == "ragen2.trainer" and package_of("ragen2.filter") == "ragen2.filter"
    assert "ragen2.model.prefix" in module_graph()["ragen2.trainer.actor"]


def test_no_module_imports_itself_back():
    assert cycles(module_graph()) == []


def test_no_package_imports_itself_back():
    packages: dict[str, set[str]] = {}
    for name, targets in module_graph().items():
        packages.setdefault(package_of(name), set()).update(
            package_of(t) for t in targets if package_of(t) != package_of(name))
    assert cycles(packages) == []
