"""Parsing of a model response into reasoning and actions (docs/method.md §2.4).

>>> p = parse_response("<think> go down </think><answer>Down || Right || Up</answer> bye", 2)
>>> p.think, p.actions, p.matched
('go down', ['Down', 'Right'], True)
>>> p.stored_response
'<think>go down</think><answer>Down || Right</answer>'
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ACTION_SEP = "||"
"""Separator between actions inside ``<answer>``."""
JOIN_SEP = " || "
"""Separator used when a stored response is rebuilt."""
TAG_STRINGS = ("<think>", "</think>", "<answer>", "</answer>", "<|im_start|>", "<|im_end|>")
"""Strings removed from the reasoning and the answer before they are used."""

_PATTERN = re.compile(r"<think>(.*?)</think>\s*<answer>(.*?)</answer>", re.DOTALL)


@dataclass(frozen=True)
class Parsed:
    """A parsed response."""

    think: str
    """Reasoning text between the think tags, tags removed and trimmed ("" when unmatched)."""
    actions: list[str]
    """Actions from the answer, trimmed, empties dropped, at most ``max_actions``."""
    matched: bool
    """Whether the response had the ``<think>...</think><answer>...</answer>`` structure."""
    stored_response: str
    """What is trained on: the rebuilt response on a match, else the raw text."""


def _strip_tags(text: str) -> str:
    for tag in TAG_STRINGS:
        text = text.replace(tag, "")
    return text.strip()


def parse_response(text: str, max_actions: int) -> Parsed:
    """Parse ``text`` (a response that already starts with ``<think>``).

    Args:
        text: The decoded response, prefixed with the generation prompt's ``<think>``.
        max_actions: Actions kept per response; extra ones are dropped silently.

    Returns:
        A :class:`Parsed`; on no match ``actions`` is empty and ``stored_response`` is ``text``.
    """
    if max_actions < 1:
        raise ValueError(f"max_actions must be >= 1, got {max_actions!r}")
    match = _PATTERN.search(text)
    if match is None:
        return Parsed(think="", actions=[], matched=False, stored_response=text)
    think = _strip_tags(match.group(1))
    answer = _strip_tags(match.group(2))
    actions = [a.strip() for a in answer.split(ACTION_SEP)]
    actions = [a for a in actions if a][:max_actions]
    stored = f"<think>{think}</think><answer>{JOIN_SEP.join(actions)}</answer>"
    return Parsed(think=think, actions=actions, matched=True, stored_response=stored)
