"""Tests for the plot_data stage: two runs' curves copied and drawn as images (ragen2/repro/plot_data.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragen2.repro import plot_data


def _metrics_dir(root, steps):
    for name in plot_data.CURVES:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("step\tvalue\n" + "".join(f"{s}\t{s / 10}\n" for s in steps))
    return root


def test_copies_each_curve_under_its_condition(tmp_path):
    none, top_p = _metrics_dir(tmp_path / "a", [0, 25]), _metrics_dir(tmp_path / "b", [0, 25, 50])
    out = tmp_path / "plots"
    assert plot_data.main(["--out-dir", str(out), f"none={none}", f"top_p={top_p}"]) == 0
    for name in plot_data.CURVES:
        assert (out / "none" / name).read_text() == (none / name).read_text()
        assert (out / "top_p" / name).read_text() == (top_p / name).read_text()
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.tsv")) == sorted(
        f"{c}/{n}" for c in ("none", "top_p") for n in plot_data.CURVES)
    # each plot drawn beside them as a PNG, the same bytes when drawn again
    pngs = {p.name: p.read_bytes() for p in out.glob("*.png")}
    assert sorted(pngs) == sorted(f"{name}.png" for name in plot_data.PLOTS)
    assert all(data.startswith(b"\x89PNG") for data in pngs.values())
    plot_data.main(["--out-dir", str(out), f"none={none}", f"top_p={top_p}"])
    assert {p.name: p.read_bytes() for p in out.glob("*.png")} == pngs


def test_a_missing_curve_names_the_file(tmp_path):
    run = _metrics_dir(tmp_path / "a", [0])
    (run / "filter/kept_ratio.tsv").unlink()
    with pytest.raises(FileNotFoundError, match="kept_ratio.tsv is missing"):
        plot_data.copy_curves({"none": run}, tmp_path / "plots")


def test_a_source_without_condition_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        plot_data.main(["--out-dir", str(tmp_path), str(tmp_path)])
    assert "is not CONDITION=DIR" in capsys.readouterr().err


def plots_page(root: Path) -> Path:
    """``dvc plots show``'s page, made in ``root`` from what a clone has (dvc.yaml, params.yaml, .dvc/config and
    paper_figures/; no data/runs); its index.html (the command must succeed without a failure note)."""
    import shutil
    import subprocess
    import sys

    from tests.repro.dvcyaml import REPO

    for name in ("dvc.yaml", "params.yaml"):
        shutil.copy(REPO / name, root / name)
    shutil.copytree(REPO / "paper_figures", root / "paper_figures")
    (root / ".dvc").mkdir()
    shutil.copy(REPO / ".dvc" / "config", root / ".dvc" / "config")
    proc = subprocess.run([sys.executable, "-m", "dvc", "plots", "show", "-o", "out"], cwd=root,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "failed to load" not in proc.stdout + proc.stderr, proc.stderr[-2000:]
    return root / "out" / "index.html"


def test_dvc_plots_show_draws_every_plot_in_a_clone_without_runs(tmp_path):
    """Every plot loads in a clone without runs, the curves and each figure as an image, without a failure note, and
    the page needs no network (tests/test_browser.py opens it in Chromium cut off the network)."""
    import re

    from tests.repro.dvcyaml import resolved

    index = plots_page(tmp_path)
    page = index.read_text()
    images = [p for p in resolved()["plots"] if isinstance(p, str)]
    assert page.count("<img") == len(images) and len(list((tmp_path / "out" / "static").glob("*.png"))) == len(images)
    for name in ("validation_success", "mi_proxy", "kept_ratio"):
        assert name in page
    # offline: the page loads no script, and every image it shows is a local file that exists
    assert "<script" not in page
    sources = re.findall(r'<img[^>]*src="([^"]+)"', page)
    assert len(sources) == len(images) and all((tmp_path / "out" / src).is_file() for src in sources), sources
