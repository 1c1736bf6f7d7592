"""What an answer must hold to be compared: the one gate every answer passes before it is stored, recorded
in a golden or compared (the runner for engines' answers, the golden reader for recorded ones, the
result store on resume). A verdict of EQUAL or REPEATABLE is only as good as what was compared: an
answer of 0 tokens, or one cut short, or positions without a logprob or without the top-k alternatives
asked, would compare equal on what little is there. So an answer is refused unless it holds

- as many tokens as asked, or fewer with a stop reason (the engine stopped at a stop token or string);
- token ids that can be token ids: whole numbers from 0 to MAX_TOKEN_ID (int32 in every engine), the
  chosen ones and the alternatives';
- one logprob per token, each a finite number <= 0 (a logprob above 0 is a probability above 1);
- one row of at least the requested top-k alternatives per token, each a finite number <= 0, no
  alternative twice."""

from __future__ import annotations

import math

from bitexact.engines.base import Settings
from bitexact.generation import Generation
from bitexact.prompts import MAX_TOKEN_ID

# Finish reasons that mean the engine stopped on its own at a stop token or string: SGLang's and the
# OpenAI API's "stop", llama.cpp's `stop_type` "eos" and "word". "length" with fewer tokens than asked
# is a cap of the server's (its context length), and "abort" an abort: neither is a stop.
STOP_REASONS = frozenset({"stop", "eos", "word"})


def stopped(gen: Generation) -> bool:
    reason = gen.meta.get("finish_reason")
    return isinstance(reason, str) and reason.lower() in STOP_REASONS


def non_finite(gen: Generation) -> str | None:
    """Where `gen` holds a logprob that is not a finite number (NaN or an infinity), in words; None when
    every value is finite. Such a value cannot be compared bitwise with meaning, nor written as JSON."""
    for position, value in enumerate(gen.logprobs):
        if not math.isfinite(value):
            token = gen.token_ids[position] if position < len(gen.token_ids) else "?"
            return f"position {position}: the logprob of token {token} is {value!r}"
    for position, row in enumerate(gen.top_logprobs):
        for key, value in row:
            if not math.isfinite(value):
                return f"position {position}: the top-k logprob of alternative {key!r} is {value!r}"
    return None


def _not_a_token(value: object) -> bool:
    return isinstance(value, int) and not 0 <= value <= MAX_TOKEN_ID


def impossible_id(gen: Generation) -> str | None:
    """Where `gen` holds a token id no engine can produce (negative, or above int32), in words; None
    when every id, chosen or alternative, is one. Two servers sending the same impossible id would
    otherwise compare equal on it."""
    rule = f"not a token id (a token id is a whole number from 0 to {MAX_TOKEN_ID})"
    for position, token in enumerate(gen.token_ids):
        if _not_a_token(token):
            return f"position {position}: the token id {token} is {rule}"
    for position, row in enumerate(gen.top_logprobs):
        bad = next((key for key, _ in row if _not_a_token(key)), None)
        if bad is not None:
            return f"position {position}: the top-k alternative {bad} is {rule}"
    return None


def incomplete(gen: Generation, settings: Settings) -> str | None:
    """Why `gen` cannot be compared in full under `settings`, in words; None when it can. (Non-finite
    values are `non_finite`'s to name.)"""
    n, asked, k = len(gen.token_ids), settings.max_new_tokens, settings.top_logprobs
    if n == 0:
        return "the answer holds no tokens"
    if n > asked:
        return f"the answer holds {n} tokens, more than the {asked} asked"
    if n < asked and not stopped(gen):
        reason = gen.meta.get("finish_reason")
        return (
            f"the answer holds {n} of the {asked} tokens asked, without a stop reason (finish reason "
            f"{reason!r}): the server cut it short (a cap on new tokens, its context length, an abort)"
        )
    if len(gen.logprobs) != n:
        return f"the answer holds {n} tokens but {len(gen.logprobs)} logprobs"
    bad_id = impossible_id(gen)
    if bad_id is not None:
        return bad_id
    for position, value in enumerate(gen.logprobs):
        if value > 0:
            return (
                f"position {position}: the logprob of token {gen.token_ids[position]} is {value!r}, above 0 "
                "(a probability above 1)"
            )
    if len(gen.top_logprobs) != n:
        return (
            f"the answer holds {n} tokens but top-k alternatives for {len(gen.top_logprobs)} positions "
            f"(the top {k} were asked at every position)"
        )
    for position, row in enumerate(gen.top_logprobs):
        if len(row) < k:
            return f"position {position}: {len(row)} top-k alternatives, not the {k} asked"
        keys = [key for key, _ in row]
        if len(set(keys)) != len(keys):
            return f"position {position}: an alternative is listed twice among the top-k"
        above = next((value for _, value in row if value > 0), None)
        if above is not None:
            return f"position {position}: a top-k logprob is {above!r}, above 0 (a probability above 1)"
    return None


def problem(gen: Generation, settings: Settings) -> str | None:
    """The first reason `gen` cannot be compared (non-finite values first), or None."""
    return non_finite(gen) or incomplete(gen, settings)
