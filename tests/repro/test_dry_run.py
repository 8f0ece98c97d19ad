"""The paper profile's dry run: what it changes, and the tiny Qwen2 whose tokenizer survives transformers' rebuild."""

from __future__ import annotations

import json

import pytest

from ragen2.config import to_dict
from ragen2.repro.dry_run import ENVS, MODEL_DIR, make_tiny_qwen2, paper_dry_run
from ragen2.repro.profiles import ALGOS, build
from ragen2.repro.run_ids import parse_run_id

CHANGED = {"policy.name_or_path", "policy.device", "rollout.backend", "rollout.env_groups", "rollout.group_size",
           "rollout.val_groups", "rollout.max_new_tokens", "rollout.max_context_tokens", "trainer.steps",
           "trainer.save_freq", "trainer.keep_every", "collapse.compute_freq", "collapse.num_samples",
           "grad_analysis.every", "grad_analysis.num_buckets"}
"""What the dry run may change in a run's config."""


def _flat(d, prefix=""):
    out = {}
    for key, value in d.items():
        if isinstance(value, dict) and key != "kwargs":
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def test_the_dry_run_keeps_the_paper_settings_on_a_cut_grid():
    paper, dry = build("paper"), paper_dry_run()
    assert set(dry.runs) <= set(paper.runs) and len(dry.runs) == 37
    parts = [parse_run_id(r) for r in dry.runs]
    for key in ("env", "algo"):  # every environment and algorithm is trained
        assert {p[key] for p in parts} == {parse_run_id(r)[key] for r in paper.runs}, key
    assert {p["filter_tag"][:4] for p in parts} == {"none", "topp", "topk"}
    assert {p["study"] for p in parts} == {parse_run_id(r)["study"] for r in paper.runs}
    main = {(p["env"], p["algo"], p["filter_tag"]) for p in parts if p["study"] == "main"}
    assert {(a, f) for e, a, f in main if e == "frozenlake"} >= {(a, f) for a in ALGOS for f in ("none", "topp0p9")}
    assert all({(e, f) for f in ("none", "topp0p9")} <= {(m[0], m[2]) for m in main} for e in ENVS)
    mech = [p for p in parts if p["study"] == "mech"]
    assert sorted((p["study_value"], p["filter_tag"], p["seed"]) for p in mech) == sorted(
        [(v, f, seed) for f in ("none", "topp0p9") for v, seed in ((0.02, 0), (0.02, 1), (0.0, 0))])
    for rid in dry.runs:
        a, b = _flat(to_dict(paper.config(rid))), _flat(to_dict(dry.config(rid)))
        changed = {k for k in a if a[k] != b[k]}
        assert changed <= CHANGED, (rid, changed - CHANGED)
        cfg = dry.config(rid)
        assert cfg.trainer.steps == 2 and cfg.policy.name_or_path == MODEL_DIR and cfg.rollout.backend == "hf"
        assert cfg.warm_start.steps == 0 and cfg.policy.device == "cpu"
        assert dry.warm_start_keys[rid] == paper.warm_start_keys[rid].rsplit("/", 1)[0] + "/" + \
            dry.warm_start_keys[rid].rsplit("/", 1)[1]  # a marker of the base policy, as in the paper profile
    assert dry.notebooks == build("smoke").notebooks
    assert dry.yaml().startswith("# ragen2 parameters, written by `python -m ragen2.repro.dry_run prepare --root .`")


def test_scratch_copy_takes_the_code_notebooks_and_dvc_yaml_into_a_fresh_folder(tmp_path):
    from ragen2.repro.dry_run import COPIED, scratch_copy
    from tests.repro.dvcyaml import REPO

    root = scratch_copy(REPO, tmp_path / "copy")
    assert sorted(p.name for p in root.iterdir()) == sorted(COPIED)
    assert not list(root.rglob("__pycache__")) and (root / "notebooks" / "03_main_results.ipynb").is_file()
    with pytest.raises(FileExistsError, match="not empty"):
        scratch_copy(REPO, root)


def test_tiny_qwen2_loads_with_the_tokenizer_it_was_trained_with(tmp_path):
    from transformers import AutoConfig

    from ragen2.policy import load_policy

    out = make_tiny_qwen2(tmp_path / "qwen2", ["frozenlake"])  # raises if the rebuilt tokenizer differs
    assert AutoConfig.from_pretrained(out).model_type == "qwen2"
    model, tokenizer = load_policy(out, device="cpu")
    assert type(tokenizer).__name__ == "Qwen2Tokenizer" and type(model).__name__ == "Qwen2ForCausalLM"
    assert model.config.num_key_value_heads == 2 and model.config.max_position_embeddings == 4096
    text = tokenizer.apply_chat_template([{"role": "user", "content": "Start: (1,3)\n__OP"},
                                          {"role": "assistant", "content": "<think> go </think><answer>Up</answer>"}],
                                         tokenize=False)
    ids = tokenizer(text)["input_ids"]
    assert tokenizer.decode(ids) == text
    for token in ("<|im_start|>", "<|im_end|>", "<think>", "</think>", "<answer>", "</answer>"):
        assert len(tokenizer(token)["input_ids"]) == 1, token
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"
    assert json.loads((out / "config.json").read_text())["eos_token_id"] == tokenizer.convert_tokens_to_ids("<|im_end|>")


def test_a_bad_vocabulary_size_is_refused():
    from ragen2.repro.dry_run import train_qwen2_tokenizer

    with pytest.raises(ValueError, match="vocab_size must be >= 263"):
        train_qwen2_tokenizer(["a b c"], 100)


@pytest.mark.slow
def test_the_paper_profiles_whole_pipeline_runs_in_a_scratch_copy(tmp_path):
    """``make dry-run-paper``: the cut paper grid trained with the tiny Qwen2, then ``dvc repro``: every run,
    every notebook (none of them skipped: each study has its runs), every declared output and all seven claims."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    from ragen2.repro.claims import CLAIM_IDS, read_claims
    from ragen2.repro.dry_run import prepare, run_pipeline, scratch_copy
    from ragen2.repro.notebook_stages import NOTEBOOK_STUDIES
    from tests.repro.dvcyaml import REPO, paths, resolved

    start = time.perf_counter()
    root = scratch_copy(REPO, tmp_path / "repo")
    profile = prepare(root)
    report = json.loads((root / MODEL_DIR / "format_sft.json").read_text())
    print(f"format SFT: {report}")
    run_pipeline(root, workers=2)
    print(f"paper dry run: {len(profile.runs)} runs, {(time.perf_counter() - start) / 60:.1f} min")
    for rid in profile.runs:
        summary = json.loads((root / "data" / "runs" / rid / "summary.json").read_text())
        assert summary["steps_completed"] == 2, rid
    stages = resolved(root)["stages"]
    for nb in NOTEBOOK_STUDIES:
        assert (root / "data" / "executed" / f"{nb}.ipynb").is_file()
        for out in paths(stages[f"nb_{nb}"]["outs"]):
            assert (root / out).is_file(), out
            if out.endswith(".md"):
                assert "Study missing" not in (root / out).read_text(), out
    assert {c.claim for c in read_claims(root / "paper_figures" / "claims.csv")} == set(CLAIM_IDS)
    dvc = str(Path(sys.executable).with_name("dvc"))
    status = subprocess.run([dvc, "status"], cwd=root, capture_output=True, text=True, check=True)
    assert "up to date" in status.stdout, status.stdout
