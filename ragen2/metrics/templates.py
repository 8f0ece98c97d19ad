"""Behavioural signs of template reasoning, read from the texts themselves (docs/method.md §5.7).

The MI proxies say *whether* reasoning depends on its input; these two counts say *how* it fails to, so
that a template can be told from noise:

- **ungrounded share**: reasonings that name nothing of their own input. The input's *atoms* are the
  ``(row,col)`` coordinates of its state block, or, for states without coordinates (Countdown, MetaMathQA,
  ...), its integers; a reasoning is grounded when it contains at least one of them. Exact template strings,
  mutated templates and noise are all ungrounded.
- **shared-prefix share**: reasonings whose first :data:`PREFIX_WORDS` words also open reasonings of at
  least :data:`PREFIX_GROUPS` different prompts in the batch. A template's fixed preamble is shared across
  prompts; grounded reasoning (it names the board early) and noise are not.

A template collapse raises both; an entropy blow-up into noise raises the first only.

>>> names_its_input("State:\\nPlayer: (0,1)\\nGoal: (1,2)\\nYou have 3 actions left.", "player (0,1) goal (1,2). go down")
True
>>> names_its_input("State:\\nPlayer: (0,1)\\nYou have 3 actions left.", "i will think step by step")
False
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

COORDINATE = re.compile(r"\(\s*(\d+)\s*,\s*(\d+)\s*\)")
INTEGER = re.compile(r"(?<![\d.])\d+(?![\d.])")
STATE_START = "State:\n"
STATE_END = "\nYou have "
PREFIX_WORDS = 5
"""Words that make a reasoning's opening (the template sentences of the warm start are 7-9 words)."""
PREFIX_GROUPS = 3
"""Distinct prompts an opening must appear in to count as shared."""


def state_text(prompt_text: str) -> str:
    """The state block of a turn's prompt: after the last ``State:`` up to the action budget line
    (the whole text when the markers are missing)."""
    start = prompt_text.rfind(STATE_START)
    text = prompt_text if start < 0 else prompt_text[start + len(STATE_START):]
    end = text.find(STATE_END)
    return text if end < 0 else text[:end]


def input_atoms(prompt_text: str) -> frozenset[str]:
    """The coordinates of the state as ``r,c`` strings, or its integers when it has no coordinates."""
    state = state_text(prompt_text)
    coords = frozenset(f"{r},{c}" for r, c in COORDINATE.findall(state))
    return coords if coords else frozenset(INTEGER.findall(state))


def names_its_input(prompt_text: str, think: str) -> bool:
    """Whether ``think`` contains at least one atom of its prompt's state (:func:`input_atoms`)."""
    atoms = input_atoms(prompt_text)
    if not atoms:
        return False
    coordinate_atoms = "," in next(iter(atoms))
    named = ({f"{r},{c}" for r, c in COORDINATE.findall(think)} if coordinate_atoms
             else set(INTEGER.findall(think)))
    return bool(named & atoms)


def opening(think: str, words: int = PREFIX_WORDS) -> str:
    """The first ``words`` words of a reasoning, lower-cased (its opening)."""
    return " ".join(think.lower().split()[:words])


def shared_prefix_flags(thinks: Sequence[str], prompts: Sequence[int], *, words: int = PREFIX_WORDS,
                        min_prompts: int = PREFIX_GROUPS) -> np.ndarray:
    """Per reasoning: whether its opening also opens reasonings of at least ``min_prompts`` distinct prompts
    (``prompts[i]`` identifies reasoning ``i``'s prompt; empty reasonings are never shared)."""
    if len(thinks) != len(prompts):
        raise ValueError(f"{len(thinks)} reasonings but {len(prompts)} prompt ids")
    openings = [opening(t, words) for t in thinks]
    seen: dict[str, set] = defaultdict(set)
    for text, prompt in zip(openings, prompts):
        if text:
            seen[text].add(prompt)
    return np.array([bool(text) and len(seen[text]) >= min_prompts for text in openings], dtype=bool)


def template_metrics(prompt_texts: Sequence[str], thinks: Sequence[str], prompts: Sequence[int]) -> dict[str, float]:
    """``ungrounded_share``, ``shared_prefix_share`` and ``reasoning_words_mean`` of a set of reasonings.

    Args:
        prompt_texts: each reasoning's prompt (the turn's chat-templated context).
        thinks: the reasoning texts ("" where the response did not parse: ungrounded, not shared).
        prompts: an id of each reasoning's prompt (e.g. its group), for the shared-prefix count.
    """
    if not thinks:
        return {"ungrounded_share": float("nan"), "shared_prefix_share": float("nan"),
                "reasoning_words_mean": float("nan")}
    grounded = np.array([names_its_input(p, t) for p, t in zip(prompt_texts, thinks)], dtype=bool)
    shared = shared_prefix_flags(thinks, prompts)
    return {"ungrounded_share": float(1.0 - grounded.mean()), "shared_prefix_share": float(shared.mean()),
            "reasoning_words_mean": float(np.mean([len(t.split()) for t in thinks]))}


def first_turn_template_metrics(batch) -> dict[str, float]:
    """:func:`template_metrics` of the first turns of a rollout batch (prompt ids = the trajectories' groups)."""
    firsts = [(t.turns[0], t.group) for t in batch.trajectories if t.turns]
    return template_metrics([turn.prompt_text for turn, _ in firsts], [turn.think for turn, _ in firsts],
                            [group for _, group in firsts])
