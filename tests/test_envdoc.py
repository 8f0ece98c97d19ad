"""docs/environments.md is generated from the environments' docstrings and must not drift from them."""

from __future__ import annotations

from pathlib import Path

from ragen2 import envdoc
from ragen2.envs import REGISTRY

REPO = Path(__file__).resolve().parents[1]


def test_the_committed_page_is_the_generated_one():
    assert (REPO / "docs" / "environments.md").read_text() == envdoc.page(), \
        "docs/environments.md is stale: run `make docs` (python -m ragen2.envdoc --write docs/environments.md)"


def test_every_registered_environment_has_a_section_with_the_spec_headings():
    text = envdoc.page()
    for name in REGISTRY:
        section = text.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
        for heading in ("### Description", "### Actions", "### Observation", "### Rewards", "### Episode end",
                        "### Arguments"):
            assert heading in section, f"{name}: no {heading!r} in its docstring"


def test_markdown_turns_literals_and_literal_blocks_into_markdown():
    doc = """First line with ``code`` and :func:`solve`.

    ## Observation

    The text::

        a
          b

    After the block.
    """
    assert envdoc.markdown(doc) == ("First line with `code` and `solve`.\n\n### Observation\n\nThe text:\n\n```\na\n  b\n```\n\n"
                                    "After the block.\n")


def test_main_writes_the_page(tmp_path, capsys):
    out = tmp_path / "environments.md"
    assert envdoc.main(["--write", str(out)]) == 0
    assert out.read_text() == envdoc.page() and "wrote" in capsys.readouterr().out


def test_a_literal_code_fence_keeps_its_backticks():
    assert envdoc.markdown("In a `````python`` or bare `````\nblock.") == \
        "In a `` ```python `` or bare `` ``` ``\nblock.\n"
