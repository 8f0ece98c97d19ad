"""Sampled reasonings side by side: the Markdown layout and the rule that picks the runs shown."""

from __future__ import annotations

import pandas as pd
import pytest

from ragen2.repro import collapse_criteria as cc
from ragen2.repro.reasoning_texts import collapse_example, fall_note, texts_markdown


def test_texts_markdown_puts_each_board_and_run_side_by_side():
    texts = pd.DataFrame([
        {"run_id": "a", "phase": "start", "board": 7, "sample": 0, "reasoning": "I am at (0,0) | go", "actions": "Right",
         "success": True},
        {"run_id": "b", "phase": "start", "board": 7, "sample": 0, "reasoning": "x" * 300, "actions": "Up",
         "success": False},
    ])
    md = texts_markdown(texts, {7: "P _ G"}, width=20)
    assert "**Board 7**" in md and "P _ G" in md and "| phase | sample | a | b |" in md
    assert "I am at (0,0) / go → `Right` (success)" in md and ("x" * 19 + "…") in md and "(fail)" in md


def _table(rows):
    return pd.DataFrame(rows, columns=["run_id", "seed", "condition", "regime", "mi_drop"])


def test_collapse_example_is_the_collapsed_no_filter_run_with_the_largest_fall_and_its_twins():
    table = _table([
        ("n0", 0, "none", "noise", 0.9),  # a larger fall, but not a template collapse
        ("n1", 1, "none", "template_collapse", 0.4),
        ("n2", 2, "none", "template_collapse", 0.6),
        ("p2", 2, "top_p", "stable", 0.1),
        ("k2", 2, "top_k", "template_collapse", 0.5),
        ("p1", 1, "top_p", "stable", 0.0),
    ])
    assert collapse_example(table) == ["n2", "p2", "k2"]
    no_collapse = table.assign(regime="stable")
    assert collapse_example(no_collapse) == ["n0"]  # no twin of seed 0 in the table
    with pytest.raises(ValueError, match="no no-filter run"):
        collapse_example(table[table["condition"] != "none"])


def test_fall_note_says_when_the_mi_fell_or_that_it_never_did():
    table = pd.DataFrame({"run_id": ["a", "b"], "mi_fall_step": [75.0, float("nan")]})
    assert fall_note(table, "a") == "the smoothed MI of a first stood 0.2 nats below its peak at step 75"
    assert fall_note(table, "b") == "the smoothed MI of b never stood 0.2 nats below its peak"


def test_plane_steps_smooths_each_runs_readings_in_step_order():
    rows = []
    for step, (mi, ent) in enumerate([(0.9, 0.3), (0.6, 0.4), (0.3, 0.5)]):
        rows += [{"run_id": "r", "condition": "none", "seed": 0, "step": 10 * step, "metric": cc.MI, "value": mi},
                 {"run_id": "r", "condition": "none", "seed": 0, "step": 10 * step, "metric": cc.ENTROPY, "value": ent}]
    plane = cc.plane_steps(pd.DataFrame(rows[::-1]), smooth=2)
    assert plane["step"].tolist() == [0, 10, 20]
    assert plane["mi"].tolist() == pytest.approx([0.9, 0.75, 0.45])
    assert plane["cond_entropy"].tolist() == pytest.approx([0.3, 0.35, 0.45])
    assert cc.plane_steps(pd.DataFrame(columns=["run_id", "condition", "seed", "step", "metric", "value"])).empty


def test_sampled_texts_of_a_bundled_run_are_the_ones_kept_when_it_was_trained(tmp_path, monkeypatch):
    from ragen2.repro import reasoning_texts

    run = tmp_path / "runs" / "frozenlake__grpo__none__main__s0"
    (run / "checkpoints").mkdir(parents=True)
    monkeypatch.setattr(reasoning_texts, "_sample", lambda run_dir, phases, *rest: pd.DataFrame(
        {"run_id": [run_dir.name] * len(phases), "phase": list(phases), "reasoning": ["go left"] * len(phases)}))
    computed = reasoning_texts.sample_reasonings(run, boards=2, products_dir=tmp_path / "kept", write_products=True)
    (run / "checkpoints").rmdir()
    monkeypatch.setattr(reasoning_texts, "_sample", None)  # nothing may be computed now
    pd.testing.assert_frame_equal(reasoning_texts.sample_reasonings(run, boards=2, products_dir=tmp_path / "kept"),
                                  computed)
    with pytest.raises(FileNotFoundError, match="no checkpoints to compute the reasonings"):
        reasoning_texts.sample_reasonings(run, boards=3, products_dir=tmp_path / "kept")
    with pytest.raises(ValueError, match="phase must be one of"):
        reasoning_texts.sample_reasonings(run, phases=("late",), products_dir=tmp_path / "kept")


def test_template_counts_say_how_many_reasonings_and_boards_are_template():
    from ragen2.repro.reasoning_texts import template_counts, template_summary

    texts = pd.DataFrame({
        "run_id": ["a"] * 6, "phase": ["start"] * 3 + ["end"] * 3, "board": [1, 1, 2, 1, 2, 2],
        "reasoning": ["player (0,1) goal (2,2)", None, "go right", "Let me think carefully and find the answer ",
                      "i will think step by step and solve it", "player (1,1) goal (0,0)"]})
    counts = template_counts(texts)
    assert counts.to_dict("records") == [
        {"run_id": "a", "phase": "start", "samples": 3, "template": 0, "boards": 2, "template_boards": 0},
        {"run_id": "a", "phase": "end", "samples": 3, "template": 2, "boards": 2, "template_boards": 2}]
    assert template_summary(counts) == "a: start 0/3 template (0/2 boards), end 2/3 template (2/2 boards)"
