"""One conversation -> one token sequence with its loss and reasoning masks (docs/method.md §2.6, §2.9).

The rendered conversation is tokenised **once**, exactly as the trainer will score it; the masks are
found from the tokenizer's character offsets, so they fit any fast tokenizer and chat template that
embeds message contents verbatim (ChatML, Qwen).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragen2.rollout.backends import Generation
from ragen2.rollout.prompt import THINK_OPEN, render

THINK_CLOSE = "</think>"


@dataclass
class TokenizedConversation:
    input_ids: list[int]
    loss_mask: list[int]
    """1 on assistant content tokens and the end-of-turn token after each assistant message."""
    reasoning_mask: list[int]
    """1 on assistant tokens between ``<think>`` and ``</think>`` (tags excluded)."""
    text: str


def end_of_turn_text(tokenizer) -> str:
    """The string that closes a chat message: ``<|im_end|>`` when the vocabulary has it, else EOS."""
    if "<|im_end|>" in tokenizer.get_vocab():
        return "<|im_end|>"
    if tokenizer.eos_token is None:
        raise ValueError("tokenizer has neither <|im_end|> nor an EOS token to end a turn")
    return tokenizer.eos_token


def _assistant_spans(text: str, messages: list[dict[str, Any]], eot: str):
    """Character spans ``(start, end_with_eot, think_start, think_end)`` of each assistant message."""
    spans = []
    cursor = 0
    for message in messages:
        content = message["content"]
        pos = text.find(content, cursor)
        if pos < 0:
            raise ValueError(f"the chat template does not embed the {message['role']} content verbatim: "
                             f"{content[:80]!r}")
        end = pos + len(content)
        cursor = end
        if message["role"] != "assistant":
            continue
        if not text.startswith(eot, end):
            raise ValueError(f"assistant message is not followed by the end-of-turn text {eot!r}")
        think_start = pos + len(THINK_OPEN) if content.startswith(THINK_OPEN) else pos
        close = content.find(THINK_CLOSE, think_start - pos)
        think_end = pos + close if close >= 0 else end
        spans.append((pos, end + len(eot), think_start, think_end))
        cursor = end + len(eot)
    return spans


def _overlap_mask(offsets: np.ndarray, spans: list[tuple[int, int]]) -> np.ndarray:
    mask = np.zeros(len(offsets), dtype=np.int64)
    if len(offsets) == 0:
        return mask
    starts, ends = offsets[:, 0], offsets[:, 1]
    for lo, hi in spans:
        if hi > lo:
            mask[(starts < hi) & (ends > lo)] = 1
    return mask


def tokenize_conversations(tokenizer, conversations: list[list[dict[str, Any]]]) -> list[TokenizedConversation]:
    """Render and tokenise whole conversations (no generation prompt) with their masks."""
    eot = end_of_turn_text(tokenizer)
    texts = [render(tokenizer, messages, generation=False) for messages in conversations]
    if not texts:
        return []
    enc = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
    out = []
    for text, messages, ids, offsets in zip(texts, conversations, enc["input_ids"], enc["offset_mapping"]):
        spans = _assistant_spans(text, messages, eot)
        offsets = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
        loss_mask = _overlap_mask(offsets, [(s[0], s[1]) for s in spans])
        reasoning_mask = _overlap_mask(offsets, [(s[2], s[3]) for s in spans]) * loss_mask
        out.append(TokenizedConversation(list(ids), loss_mask.tolist(), reasoning_mask.tolist(), text))
    return out


def fit_context(tokenizer, messages: list[dict[str, Any]], max_tokens: int, *, generation: bool,
                ids: list[int] | None = None) -> tuple[list[dict[str, Any]], str, list[int]]:
    """Drop the oldest user/assistant exchanges until the rendered conversation fits ``max_tokens``.

    At least the system message and the last exchange (or the last user message) are kept; if that is
    still too long a warning is issued (docs/method.md §2.9).

    Returns:
        The kept messages, their rendered text and its token ids.
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens!r}")
    text = render(tokenizer, messages, generation=generation)
    if ids is None:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    while len(ids) > max_tokens:
        if len(messages) <= 3:
            warnings.warn(f"conversation of {len(ids)} tokens exceeds the context cap {max_tokens} even "
                          "with only the last exchange left", stacklevel=2)
            break
        messages = [messages[0], *messages[3:]]
        text = render(tokenizer, messages, generation=generation)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return messages, text, list(ids)


def behaviour_scores(input_ids: list[int], loss_mask: list[int], generations: list[tuple[list[int], Generation]]
                     ) -> tuple[list[float], list[float], float] | None:
    """The sampling log-probs and entropies of a trained sequence, where it is exactly what was sampled.

    Args:
        input_ids, loss_mask: the trained sequence and its (unshifted) loss mask.
        generations: per turn, the generation prompt the model was given and what it sampled after it.

    Returns:
        ``(logprobs, entropies, temperature)`` aligned with ``input_ids`` (0 where no trained token needs one), or
        None unless every turn's prompt is a prefix of ``input_ids`` followed by its sampled tokens and stop token,
        every generation carries log-probs at one temperature, and every trained token is a sampled token, a
        stop token or a prompt's last token (``<think>`` opens each reply in the prompt).
    """
    logprobs = [0.0] * len(input_ids)
    entropies = [0.0] * len(input_ids)
    covered = [False] * len(input_ids)
    temperatures = set()
    for prompt, g in generations:
        if g.logprobs is None or g.entropies is None or g.stop is None:
            return None
        sampled = [*g.tokens, g.stop]
        end = len(prompt) + len(sampled)
        if input_ids[:len(prompt)] != prompt or input_ids[len(prompt):end] != sampled:
            return None
        for offset, (lp, ent) in enumerate(zip(g.logprobs, g.entropies)):
            logprobs[len(prompt) - 1 + offset], entropies[len(prompt) - 1 + offset] = lp, ent
            covered[len(prompt) - 1 + offset] = True
        temperatures.add(g.temperature)
    if len(temperatures) != 1 or not all(c for c, m in zip(covered, loss_mask) if m):
        return None
    return logprobs, entropies, temperatures.pop()
