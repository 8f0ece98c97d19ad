"""Every Python block of README.md and docs/*.md runs as written, and prints what the text says it prints.

A block runs in a fresh interpreter in an empty directory (what a reader who copies it gets). A ```text block right
after it (only a short line of prose between) is its expected standard output, compared exactly. A block that cannot
run here says why in an HTML comment on the line before it: ``<!-- not run: REASON -->``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOT_RUN = re.compile(r"<!-- not run: (?P<why>.+?) -->")
FENCE = re.compile(r"^```(?P<lang>\w*)\s*$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    code: str
    expected: str | None
    not_run: str | None

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def python_blocks(path: Path) -> list[Block]:
    """The ```python blocks of a Markdown file, each with its expected output and its not-run reason, if any."""
    lines = path.read_text().splitlines()
    fences = []  # (language, first line, closing line)
    i = 0
    while i < len(lines):
        if m := FENCE.match(lines[i]):  # an opening fence: its block runs to the next fence
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            fences.append((m["lang"], i, end))
            i = end + 1
        else:
            i += 1
    blocks = []
    for k, (lang, start, end) in enumerate(fences):
        if lang != "python":
            continue
        before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        not_run = m["why"] if (m := NOT_RUN.fullmatch(before.strip())) else None
        expected = None
        if k + 1 < len(fences) and fences[k + 1][0] == "text":
            between = [x for x in lines[end + 1:fences[k + 1][1]] if x.strip()]
            if len(between) <= 1:
                nxt = fences[k + 1]
                expected = "\n".join(lines[nxt[1] + 1:nxt[2]]) + "\n"
        blocks.append(Block(path, start + 1, "\n".join(lines[start + 1:end]) + "\n", expected, not_run))
    return blocks


BLOCKS = [b for path in DOCS for b in python_blocks(path)]


def test_every_python_fence_is_collected():
    fences = sum(line.strip() == "```python" for path in DOCS for line in path.read_text().splitlines())
    assert len(BLOCKS) == fences and fences >= 4


@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_the_block_runs_as_written(block: Block, tmp_path):
    if block.not_run is not None:
        assert len(block.not_run.split()) >= 3, f"{block.name}: say why the block is not run"
        pytest.skip(f"not run: {block.not_run}")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", block.code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, f"{block.name} failed:\n{proc.stderr[-3000:]}"
    if block.expected is not None:
        assert proc.stdout == block.expected, f"{block.name} printed:\n{proc.stdout}"


def test_the_collector_reads_outputs_and_reasons(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("a\n```python\nprint(1)\n```\n\nprints\n\n```text\n1\n```\n"
                   "<!-- not run: needs a GPU box -->\n```python\nimport vllm\n```\n```bash\nls\n```\n")
    first, second = python_blocks(doc)
    assert (first.code, first.expected, first.not_run, first.line) == ("print(1)\n", "1\n", None, 2)
    assert (second.expected, second.not_run) == (None, "needs a GPU box")
