"""The tokens that end a response, shared by every generation backend (Hugging Face and vLLM)."""

from __future__ import annotations


def stop_token_ids(tokenizer) -> list[int]:
    """Ids that end a response: ``<|im_end|>`` and EOS where the vocabulary has them."""
    vocab = tokenizer.get_vocab()
    ids = [vocab[t] for t in ("<|im_end|>", "<|endoftext|>") if t in vocab]
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    if not ids:
        raise ValueError("tokenizer has no stop token (<|im_end|>, <|endoftext|> or EOS)")
    return ids
