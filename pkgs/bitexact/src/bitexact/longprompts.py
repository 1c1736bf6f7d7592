"""Long prompts (up to 128k tokens and beyond) made offline, deterministically from a seed."""

from __future__ import annotations

import random

from bitexact.argv import MAX_TOKENS
from bitexact.errors import UsageError
from bitexact.prompts import Prompt, Tokenizer, default_battery


def _corpus(seed: int) -> str:
    """Paragraphs of the shipped battery in a seeded order, repeated by the caller as needed."""
    texts = [p.text or "" for p in default_battery()]
    random.Random(seed).shuffle(texts)
    return "\n\n".join(texts) + "\n\n"


def long_prompt(
    n_tokens: int,
    *,
    seed: int = 0,
    tokenizer: Tokenizer | None = None,
    vocab_size: int | None = None,
    low_id: int = 3,
    prompt_id: str | None = None,
) -> Prompt:
    """Exactly `n_tokens` input ids.

    With a tokenizer, the ids are real text (the battery's paragraphs, shuffled per pass by the seed);
    without one, they are drawn uniformly from [low_id, vocab_size) by a seeded generator.
    """
    if not 1 <= n_tokens <= MAX_TOKENS:
        raise UsageError(f"long prompt length {n_tokens}: must be between 1 and {MAX_TOKENS}")
    pid = prompt_id or f"long-{n_tokens}-s{seed}"
    if tokenizer is not None:
        ids: list[int] = []
        rounds = 0
        while len(ids) < n_tokens:
            ids.extend(tokenizer.encode(_corpus(seed * 1_000_003 + rounds)))
            rounds += 1
        return Prompt(id=pid, input_ids=tuple(ids[:n_tokens]))
    if vocab_size is None or vocab_size <= low_id:
        raise UsageError(
            "long prompts need --tokenizer MODEL_DIR (real text) or --vocab-size N (random ids below N, "
            f"N > {low_id})"
        )
    rng = random.Random(seed)
    return Prompt(id=pid, input_ids=tuple(rng.randrange(low_id, vocab_size) for _ in range(n_tokens)))


def long_battery(
    lengths: list[int], *, seed: int = 0, tokenizer: Tokenizer | None = None, vocab_size: int | None = None
) -> list[Prompt]:
    return [
        long_prompt(n, seed=seed + i, tokenizer=tokenizer, vocab_size=vocab_size)
        for i, n in enumerate(lengths)
    ]
