"""Sampled reasonings of a run's policy at the start, middle and end of training, side by side.

What a learner reads to see template collapse: the same few boards, the same sampling seed, each run's policy at
its warm start (``start``), its kept mid-run checkpoint (``mid``) and its final one (``end``)
(:data:`ragen2.repro.prompt_tables.PHASE_CHECKPOINTS`). Used by notebook 07 (the mechanism study) and notebook 09
(the regime map).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

FIRST_BOARD = 900_000
"""The env seed of the first board shown (far from the training and validation seeds)."""


def sample_reasonings(run_dir: str | Path, phases: Sequence[str] = ("start", "mid", "end"), *, boards: int = 3,
                      samples: int = 2, cache_dir: str | Path = "data/cache", first_seed: int = FIRST_BOARD,
                      seed: int = 0, products_dir: str | Path | None = None,
                      write_products: bool = False) -> pd.DataFrame:
    """First-turn reasonings of a run's policy at ``phases`` on ``boards`` fixed boards (env seeds from ``first_seed``).

    The same boards and sampling seed for every phase and run, so texts can be compared side by side. A bundled run
    (no checkpoints) gets the texts kept in ``products_dir``; ``write_products`` keeps computed ones there
    (:mod:`ragen2.repro.products`).

    Returns:
        ``run_id, phase, board, sample, reasoning, actions, success`` (one row per sampled episode).
    """
    from ragen2.repro.products import computed_or_kept, has_checkpoints
    from ragen2.repro.prompt_tables import PHASE_CHECKPOINTS

    bad = [phase for phase in phases if phase not in PHASE_CHECKPOINTS]
    if bad:
        raise ValueError(f"phase must be one of {sorted(PHASE_CHECKPOINTS)}, got {bad[0]!r}")
    run_dir = Path(run_dir)
    key = {"run_id": run_dir.name, "phases": list(phases), "boards": boards, "samples": samples,
           "first_seed": first_seed, "seed": seed}
    return computed_or_kept("reasonings", key, lambda: _sample(run_dir, phases, boards, samples, cache_dir,
                                                                first_seed, seed),
                            can_compute=has_checkpoints(run_dir), products_dir=products_dir, write=write_products)


def _sample(run_dir: Path, phases: Sequence[str], boards: int, samples: int, cache_dir: str | Path, first_seed: int,
            seed: int) -> pd.DataFrame:
    import torch

    from ragen2.evaluate import load_run_policy
    from ragen2.repro.prompt_tables import PHASE_CHECKPOINTS
    from ragen2.rollout.collect import collect_rollouts

    rows = []
    for phase in phases:
        cfg, model, tokenizer = load_run_policy(run_dir, PHASE_CHECKPOINTS[phase], cache_dir)
        seeds = [first_seed + i for i in range(boards)]
        with torch.no_grad():
            batch = collect_rollouts(model, tokenizer, cfg.env, cfg.rollout, seeds, group_size=samples,
                                     temperature=cfg.rollout.temperature, seed=seed)
        for i, traj in enumerate(batch.trajectories):
            turn = traj.turns[0] if traj.turns else None
            rows.append({"run_id": run_dir.name, "phase": phase, "board": traj.env_seed, "sample": i % samples,
                         "reasoning": turn.think if turn else "", "actions": " ".join(turn.actions) if turn else "",
                         "success": bool(traj.success)})
    return pd.DataFrame(rows)


def template_counts(texts: pd.DataFrame) -> pd.DataFrame:
    """How much of :func:`sample_reasonings`' texts is template: per run and phase, the sampled reasonings, how many
    are template phrases (:func:`ragen2.rollout.expert.is_template`: the generic reasonings of the warm start's corpus,
    which ignore the board) and on how many of the boards one appeared.

    Returns:
        ``run_id, phase, samples, template, boards, template_boards`` (runs and phases in ``texts``' order).
    """
    from ragen2.rollout.expert import is_template

    marked = texts.assign(template=texts["reasoning"].fillna("").astype(str).map(is_template))
    keys = ["run_id", "phase"]
    out = marked.groupby(keys, sort=False).agg(samples=("template", "size"), template=("template", "sum"),
                                               boards=("board", "nunique"))
    on = marked[marked["template"]].groupby(keys, sort=False)["board"].nunique()
    out["template_boards"] = on.reindex(out.index, fill_value=0)
    return out.reset_index().astype({"template": int, "template_boards": int})


def template_summary(counts: pd.DataFrame) -> str:
    """:func:`template_counts` in one line per run: ``<run>: start 0/6 template (0/3 boards), mid ..., end ...``."""
    lines = []
    for run_id, part in counts.groupby("run_id", sort=False):
        phases = ", ".join(f"{r.phase} {r.template}/{r.samples} template ({r.template_boards}/{r.boards} boards)"
                           for r in part.itertuples())
        lines.append(f"{run_id}: {phases}")
    return "; ".join(lines)


def board_texts(env_cfg: Any, boards: int = 3, first_seed: int = FIRST_BOARD) -> dict[int, str]:
    """The first observation of each board (env seed) :func:`sample_reasonings` uses."""
    from ragen2.envs import make

    out = {}
    for i in range(boards):
        env = make(env_cfg.name, **copy.deepcopy(env_cfg.kwargs))
        obs, _ = env.reset(seed=first_seed + i)
        out[first_seed + i] = str(obs)
    return out


def texts_markdown(texts: pd.DataFrame, boards: dict[int, str], width: int = 160) -> str:
    """Sampled reasonings as Markdown: per board its first observation, then a row per (phase, sample) with one
    column per run (texts cut at ``width`` characters)."""
    lines = []
    runs = list(dict.fromkeys(texts["run_id"]))
    for board, frame in texts.groupby("board", sort=True):
        lines.append(f"**Board {board}**\n\n```\n{boards.get(board, '').strip()}\n```\n")
        lines.append("| phase | sample | " + " | ".join(runs) + " |")
        lines.append("|---|---|" + "---|" * len(runs))
        for (phase, sample), part in frame.groupby(["phase", "sample"], sort=False):
            cells = []
            for rid in runs:
                hit = part[part["run_id"] == rid]
                if hit.empty:
                    cells.append("")
                    continue
                r = hit.iloc[0]
                text = " ".join(str(r["reasoning"]).split()) or "(no reasoning)"
                text = text if len(text) <= width else text[: width - 1] + "…"
                cells.append(f"{text} → `{r['actions']}` ({'success' if r['success'] else 'fail'})".replace("|", "/"))
            lines.append(f"| {phase} | {sample} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def collapse_example(table: pd.DataFrame) -> list[str]:
    """The runs whose texts show a collapse: a no-filter run and its filtered twins (the same seed), no filter first.

    ``table`` is :func:`ragen2.repro.collapse_criteria.run_regimes` of one study. The no-filter run is the one in
    template collapse whose smoothed MI fell furthest from its peak; without any, the largest fall of all (ties: the
    lowest seed). Its twins follow in the order of ``table``.

    Raises:
        ValueError: ``table`` has no no-filter run.
    """
    none = table[table["condition"] == "none"]
    if none.empty:
        raise ValueError("no no-filter run to show (table has conditions "
                         f"{sorted(table['condition'].unique().tolist())})")
    collapsed = none[none["regime"] == "template_collapse"]
    pick = (collapsed if len(collapsed) else none).sort_values(["mi_drop", "seed"], ascending=[False, True]).iloc[0]
    twins = table[(table["seed"] == pick["seed"]) & (table["condition"] != "none")]["run_id"].tolist()
    return [str(pick["run_id"]), *map(str, twins)]


def fall_note(table: pd.DataFrame, run_id: str) -> str:
    """When the MI of ``run_id`` fell, in words, from its row of ``table``
    (:func:`ragen2.repro.collapse_criteria.run_regimes`): the step at which the collapse definition's first rule
    began to hold, so a reader knows which of the sampled points come after it."""
    from ragen2.repro.collapse_criteria import CRITERIA

    step = table.set_index("run_id").loc[run_id, "mi_fall_step"]
    if pd.isna(step):
        return f"the smoothed MI of {run_id} never stood {CRITERIA.mi_drop:g} nats below its peak"
    return f"the smoothed MI of {run_id} first stood {CRITERIA.mi_drop:g} nats below its peak at step {int(step)}"
