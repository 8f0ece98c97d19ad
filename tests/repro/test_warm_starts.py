"""The warm-start table: one row per distinct warm start of a set of runs, with its weights hash."""

import json

import pytest

from ragen2.config import RunConfig, apply_overrides, read_params, to_dict
from ragen2.errors import MissingPathError
from ragen2.fileio import write_json_atomic
from ragen2.repro.profiles import build
from ragen2.repro.warm_starts import (
    COLUMNS,
    PIPELINE_COLUMNS,
    main,
    pipeline_warm_starts,
    warm_start_table,
    weights_sha256,
)
from ragen2.warmstart import warm_start_key


def _run(root, name, cfg):
    write_json_atomic(root / "runs" / name / "config.json", to_dict(cfg))
    return root / "runs" / name


def _warm_start(root, cfg, greedy, weights=b"w"):
    path = root / "cache" / "warm_start" / warm_start_key(cfg)
    path.mkdir(parents=True)
    (path / "model.safetensors").write_bytes(weights)
    (path / "warm_start.json").write_text(json.dumps({"greedy_success": greedy, "greedy_template_share": 0.25,
                                                      "final_loss": 0.3}))
    return path


def test_one_row_per_warm_start_counting_its_runs(tmp_path):
    a = apply_overrides(RunConfig(), ["warm_start.steps=10"])
    b = apply_overrides(RunConfig(), ["warm_start.steps=10", "warm_start.seed=1"])
    _warm_start(tmp_path, a, 0.5, b"a")
    _warm_start(tmp_path, b, 0.75, b"b")
    dirs = [_run(tmp_path, "r0", a), _run(tmp_path, "r1", apply_overrides(a, ["seed=3"])), _run(tmp_path, "r2", b),
            _run(tmp_path, "r3", apply_overrides(a, ["warm_start.steps=0"]))]  # no warm start: left out
    table = warm_start_table(dirs, tmp_path / "cache")
    assert list(table.columns) == list(COLUMNS)
    assert table["runs"].tolist() == [2, 1] and table["greedy_success"].tolist() == [0.5, 0.75]
    assert table["sft_seed"].tolist() == [0, 1] and table["weights_sha256"].nunique() == 2
    assert table["warm_start"].tolist() == [warm_start_key(a), warm_start_key(b)]


def test_weights_hash_follows_the_bytes_and_a_missing_warm_start_is_named(tmp_path):
    cfg = apply_overrides(RunConfig(), ["warm_start.steps=10"])
    path = _warm_start(tmp_path, cfg, 0.5)
    first = weights_sha256(path)
    (path / "model.safetensors").write_bytes(b"changed")
    assert weights_sha256(path) != first
    run = _run(tmp_path, "r", apply_overrides(cfg, ["warm_start.seed=7"]))
    with pytest.raises(MissingPathError, match="warm_start.json"):
        warm_start_table([run], tmp_path / "cache")


def test_the_pipeline_table_lists_every_warm_start_of_both_realizations(tmp_path):
    (tmp_path / "params.yaml").write_text(build("smoke").yaml())
    pipeline = read_params(tmp_path / "params.yaml")["pipeline"]
    specs = [("first", k, v) for k, v in pipeline["warm_starts"].items()]
    specs += [("second", k, v) for k, v in pipeline["realization"]["warm_starts"].items()]
    for i, (_, _, spec) in enumerate(specs):
        path = tmp_path / spec["path"]
        path.mkdir(parents=True)
        (path / "model.safetensors").write_bytes(bytes([i]))
        report = {"greedy_success": i / 10, "greedy_template_share": 0.25, "final_loss": 0.3, "torch_threads": 1,
                  "cpu_model": "Some CPU", "cpu_flags": {"avx2": True, "avx512f": i == 0, "amx_tile": False},
                  "torch_capability": "AVX2", "kernels": "avx2", "blas": "MKL 2024.2"}
        (path / "warm_start.json").write_text(json.dumps(report))
    table = pipeline_warm_starts(tmp_path / "params.yaml")
    assert list(table.columns) == list(PIPELINE_COLUMNS)
    assert [tuple(r) for r in table[["realization", "warm_start"]].itertuples(index=False)] == [s[:2] for s in specs]
    assert table["greedy_success"].tolist() == [i / 10 for i in range(len(specs))]
    assert table["weights_sha256"].nunique() == len(specs) and set(table["cpu_model"]) == {"Some CPU"}
    assert table["cpu_flags"].tolist() == ["avx2 avx512f"] + ["avx2"] * (len(specs) - 1)
    assert set(table["torch_capability"]) == {"AVX2"} and set(table["kernels"]) == {"avx2"}
    assert set(table.loc[table["realization"] == "first", "sft_seed"]) == {0}
    assert set(table.loc[table["realization"] == "second", "sft_seed"]) == {1}
    first_train = pipeline["train"]
    assert table.loc[table["realization"] == "first", "runs"].sum() == len(first_train)
    assert "main" in " ".join(table["studies"])
    out = tmp_path / "figs"
    assert main(["--params", str(tmp_path / "params.yaml"), "--out-dir", str(out)]) == 0
    assert (out / "table_warm_starts.csv").exists() and "Some CPU" in (out / "table_warm_starts.md").read_text()


def test_the_pipeline_table_names_a_warm_start_not_built_yet(tmp_path):
    (tmp_path / "params.yaml").write_text(build("smoke").yaml())
    with pytest.raises(MissingPathError, match="warm_start.json"):
        pipeline_warm_starts(tmp_path / "params.yaml")
