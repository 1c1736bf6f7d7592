"""The numbers an engine's answer holds, read strictly for every dialect: a token id is a whole number
(JSON `true` is not the id 1, `5.7` not the id 5, `"5"` not a number), a logprob is a number (NaN and
the infinities pass here and are named by answers.py, which refuses them). Anything else is an engine
error naming where it was, never a value made up by int() or float(). A count of the tokens generated
that the server sends beside them is held to the positions it sent (`generated_count`), in every
dialect.

The other fields of an answer that a verdict, a record or a report uses (speculation statistics,
latencies, the counts of prompt, generated and cached tokens) are read here too, by `count` and
`measure`: a count is a whole number >= 0 (JSON `true` is not 1, `"5"` not 5, `4.0` not a count), a
measure a finite number >= 0 (NaN, the infinities, text refused); either may be absent (None). What
is neither is an engine error naming the field and the server, never a value taken as it came, which
"proved" speculation from `"spec_verify_ct": true` and ended in an internal error at the results
writer for a NaN latency."""

from __future__ import annotations

import math
from typing import Any

from bitexact.errors import EngineError


def token_id(value: Any, what: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise EngineError(f"{where}: {what} is {str(value)[:40]!r}, not a token id (a whole number)")
    return value


def logprob(value: Any, what: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise EngineError(f"{where}: {what} is {str(value)[:40]!r}, not a logprob (a number)")
    return float(value)


def pair(entry: Any, what: str, where: str) -> tuple[float, int]:
    """SGLang's `(logprob, token_id, text_or_None)` entry."""
    if not isinstance(entry, list | tuple) or len(entry) not in (2, 3):
        raise EngineError(f"{where}: {what} is {str(entry)[:60]!r}, not (logprob, token_id, text)")
    return logprob(entry[0], f"{what}'s logprob", where), token_id(entry[1], f"{what}'s token id", where)


def generated_count(counted: Any, n: int, what: str, where: str, hint: str = "") -> None:
    """A count of generated tokens an answer carries beside its positions (SGLang's `completion_tokens`
    and the `length` of its FINISH_LENGTH, which is the max_new_tokens reached; the OpenAI API's
    `usage.completion_tokens`): where it is a whole number it must be the number of positions sent, or
    a position is missing or extra and positions cannot be matched to tokens. A count of another shape
    says nothing and is left to the reader of that field."""
    if isinstance(counted, int) and not isinstance(counted, bool) and counted != n:
        raise EngineError(
            f"{where}: {what}: the server generated {counted} tokens but gave logprobs for {n}; positions "
            f"cannot be matched to tokens, so the answer is refused{hint}"
        )


def count(value: Any, what: str, where: str) -> int | None:
    """A count the answer carries (verify steps, drafted tokens, prompt or cached tokens): a whole number
    >= 0, or None where the field is absent or null."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise EngineError(
            f"{where}: {what} is {str(value)[:40]!r}, not a count (a whole number >= 0); the server's "
            "answer cannot be taken as evidence of anything"
        )
    return value


def measure(value: Any, what: str, where: str) -> float | None:
    """A measure the answer carries (a latency in seconds, a mean accept length): a finite number >= 0,
    or None where the field is absent or null."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise EngineError(
            f"{where}: {what} is {str(value)[:40]!r}, not a measure (a finite number >= 0); the server's "
            "answer cannot be taken as evidence of anything"
        )
    return float(value)


def reason(value: Any) -> str | None:
    """A finish reason as an answer's record keeps it: text, else none. A reason of another kind (a
    number, NaN, a list) is no stop reason (answers.stopped), and is never stored as it came."""
    return value if isinstance(value, str) else None
