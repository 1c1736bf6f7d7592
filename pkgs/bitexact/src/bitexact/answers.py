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
  alternative twice; a row longer than asked is cut to the k asked (`as_asked`, before the gate), so
  that alternatives nobody asked for never make equal answers DIFFERENT;
- self-reports that agree with what the client knows (`misreported`): the prompt tokens the server says
  it computed are not fewer than the token ids sent (SGLang's `--allow-auto-truncate` cuts a prompt
  past its context and answers the rest: a "128k" golden would hold answers to a shorter prompt), the
  prompt tokens it says came from its cache are not more than the prompt's, and where `--tokenizer`
  gives a vocabulary every chosen token id is one of its entries. (Alternatives are not held to it: a
  model's logits cover its padded vocabulary, and an alternative there is a value the engine computed.)"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import replace

from bitexact.engines.base import Settings
from bitexact.generation import Generation
from bitexact.prefixcache import prompt_tokens, reported_cached
from bitexact.prompts import MAX_TOKEN_ID, Prompt

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


def not_argmax(gen: Generation) -> list[dict[str, object]]:
    """The positions where `gen`'s chosen token is not the argmax its own top-k reports there, and how:

    - "below": another token has a higher logprob. Greedy decoding chooses the argmax, so the engine
      chose by other bits than those it reports (a speculative server's verify step against a one-token
      decode), a difference in its numerics;
    - "tie": another token has the same logprob and the row lists it first (a tie broken the other way);
    - "ignored": the higher one is a token the request kept from being chosen (`meta.ignored_ids`: the
      end-of-sequence token under `ignore_eos`, which llama.cpp masks before sampling while its raw
      probabilities still hold it): expected, shown so that nothing is hidden.

    Never a reason to refuse an answer, which is compared as it is: the runner records the positions
    in the answer's meta (`not_argmax`), and the summary and the reports show them."""
    ignored = gen.meta.get("ignored_ids") or []
    found: list[dict[str, object]] = []
    rows = zip(gen.token_ids, gen.logprobs, gen.top_logprobs, strict=False)
    for position, (token, chosen, row) in enumerate(rows):
        if not row:
            continue
        best_key, best = max(row, key=lambda entry: entry[1])
        if best > chosen:
            allowed = [entry for entry in row if entry[0] not in ignored]
            kind = (
                "ignored"
                if best_key in ignored and max((v for _, v in allowed), default=chosen) <= chosen
                else "below"
            )
            if kind == "below" and best_key in ignored:
                best_key, best = max(allowed, key=lambda entry: entry[1])
        elif not isinstance(row[0][0], str) and row[0][0] != token and row[0][1] == chosen:
            # (an alternative named by its text may be the chosen token itself: no tie can be told)
            kind, best_key, best = "tie", row[0][0], row[0][1]
        else:
            continue
        found.append(
            {
                "position": position,
                "kind": kind,
                "chosen": token,
                "chosen_logprob": chosen,
                "argmax": best_key,
                "argmax_logprob": best,
            }
        )
    return found


def as_asked(gen: Generation, settings: Settings) -> Generation:
    """`gen` with every top-k row cut to the k alternatives asked: the k of highest logprob, in the
    server's order where two are equal (rows no longer than k are left as they are)."""
    k = settings.top_logprobs
    if all(len(row) <= k for row in gen.top_logprobs):
        return gen
    rows = [
        row
        if len(row) <= k
        else [entry for _, entry in sorted(enumerate(row), key=lambda e: (-e[1][1], e[0]))][:k]
        for row in gen.top_logprobs
    ]
    return replace(gen, top_logprobs=rows)


def misreported(
    gen: Generation, prompt: Prompt | None, vocabulary: Collection[int] | None = None
) -> str | None:
    """Where what `gen` says it computed contradicts what the client sent or knows, in words; None when
    nothing does. `prompt`: the prompt sent (its ids are what the server was given); `vocabulary`: the
    ids of the tokenizer given with --tokenizer (None: none given)."""
    sent = len(prompt.input_ids) if prompt is not None and prompt.input_ids is not None else None
    counted = prompt_tokens(gen)
    if sent is not None and counted is not None and counted < sent:
        return (
            f"the server says it computed {counted} prompt tokens, but {sent} were sent: it cut the prompt "
            "(SGLang does with --allow-auto-truncate when a prompt is longer than its context) and answered "
            "another prompt than the one sent; start the server with a context that holds the prompt, "
            "without --allow-auto-truncate"
        )
    cached = reported_cached(gen)
    if cached is not None and (isinstance(cached, bool) or not isinstance(cached, int) or cached < 0):
        return (
            f"the server reports {str(cached)[:40]!r} cached prompt tokens: not a count (a whole number >= 0)"
        )
    known = [n for n in (sent, counted) if n is not None]
    if cached is not None and known and cached > min(known):
        return (
            f"the server says {cached} prompt tokens came from its cache, more than the prompt's "
            f"{min(known)}: a count of nothing it computed, so no pass can count on it"
        )
    if vocabulary is not None:
        for position, token in enumerate(gen.token_ids):
            if token not in vocabulary:
                return (
                    f"position {position}: the token id {token} is not in the vocabulary of --tokenizer "
                    f"({len(vocabulary)} entries): the server's model is not the tokenizer's, or the id is "
                    "made up; give the served model's tokenizer"
                )
    return None


def problem(
    gen: Generation,
    settings: Settings,
    prompt: Prompt | None = None,
    vocabulary: Collection[int] | None = None,
) -> str | None:
    """The first reason `gen` cannot be compared (non-finite values first), or None. `prompt` and
    `vocabulary` (what the client sent and knows) hold its self-reports to them (`misreported`)."""
    return non_finite(gen) or incomplete(gen, settings) or misreported(gen, prompt, vocabulary)
