"""The command line's rules, for every verb at once: options are spelled out (no abbreviations, which
would let `--max-new 3 --max-new-tokens 4` mean two things), each option is given once (argparse would
let the last one win silently, also across spellings such as `-n 2 --repeats 3`), and every number
is bounded (a count that no run can mean, `1e20` new tokens or an infinite length, is a usage error,
not an overflow deep inside a run)."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

GIVEN = "_options_given"  # namespace attribute: dest -> the option string that set it
LENGTH = re.compile(r"[0-9]+(\.[0-9]+)?")  # a length, before its "k"
WHOLE = re.compile(r"-?[0-9]+")  # a whole number as the command line writes one: ASCII digits only

# The bounds of every count on the command line: far above any real run, below what overflows a
# timeout, a thread pool or an engine's int32 token ids.
MAX_TOKENS = 1 << 20  # new tokens per answer, and tokens per long prompt
MAX_TOP_LOGPROBS = 1024
MAX_PROMPTS = 10**9
MAX_IN_FLIGHT = 4096  # one thread per request in flight
MAX_REPEATS = 100_000
MAX_RUNS = 10_000  # bench: timed runs and warm-ups
MAX_VOCAB = 2**31  # token ids are int32
MAX_SEED = 2**63 - 1


def _once(base: type[argparse.Action]) -> type[argparse.Action]:
    """`base` that refuses to act twice on one destination within a parse."""

    class Once(base):  # type: ignore[misc,valid-type]
        def __call__(
            self,
            parser: argparse.ArgumentParser,
            namespace: argparse.Namespace,
            values: str | Sequence[Any] | None,
            option_string: str | None = None,
        ) -> None:
            given: dict[str, str] = namespace.__dict__.setdefault(GIVEN, {})
            if self.option_strings and self.dest in given:
                first = given[self.dest]
                also = f" (first as {first})" if first != option_string else ""
                parser.error(f"{option_string} given more than once{also}; give each option once")
            given[self.dest] = option_string or self.dest
            super().__call__(parser, namespace, values, option_string)

    Once.__name__ = f"Once{base.__name__}"
    return Once


# argparse's registry names for its actions; the defaults are replaced by their Once forms.
ONCE_ACTIONS = {
    None: _once(argparse._StoreAction),
    "store": _once(argparse._StoreAction),
    "store_true": _once(argparse._StoreTrueAction),
    "store_false": _once(argparse._StoreFalseAction),
    "store_const": _once(argparse._StoreConstAction),
}


class StrictParser(argparse.ArgumentParser):
    """An ArgumentParser without abbreviations whose options may each be given once. Subparsers are of
    the same class (argparse makes them of the parent's type), so every verb follows the rules."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)
        for name, action in ONCE_ACTIONS.items():
            self.register("action", name, action)

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        parsed = super().parse_args(args, namespace)
        parsed.__dict__.pop(GIVEN, None)
        return parsed


def count(minimum: int, maximum: int = MAX_PROMPTS) -> Callable[[str], int]:
    """An argparse type: a whole number from minimum to maximum (else a usage error, exit 2); a count
    without a bound of its own is still bounded (by a billion)."""

    def parse(text: str) -> int:
        # Digits only: int() would also read "1_0" as 10, "+3" and non-ASCII digits.
        value = int(text.strip()) if WHOLE.fullmatch(text.strip()) else None
        if value is None:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {minimum} or more, not {value}")
        if value > maximum:
            raise argparse.ArgumentTypeError(f"must be {maximum} or less, not {value}")
        return value

    parse.__name__ = f"number from {minimum} to {maximum}"
    return parse


def parse_lengths(text: str, maximum: int = MAX_TOKENS) -> list[int]:
    """Comma-separated prompt lengths in tokens ("640,2200,128k"; k = 1024): each a whole number from 1 to
    `maximum`. A fraction of a token, an infinity or a NaN is not a length (UsageError)."""
    from bitexact.errors import UsageError

    out = []
    for part in text.split(","):
        part = part.strip().lower()
        scale = 1024 if part.endswith("k") else 1
        digits = part.removesuffix("k")
        # "1.5k" is 1536 tokens; float() would also read "1_0", "1e3", "+5" and "inf"
        value = float(digits) * scale if LENGTH.fullmatch(digits) else math.nan
        if not math.isfinite(value) or value != int(value):
            raise UsageError(f"lengths {text!r}: use numbers like 640,2200,128k (whole tokens)")
        if not 1 <= value <= maximum:
            raise UsageError(f"lengths {text!r}: every length must be 1 token or more and {maximum} or less")
        out.append(int(value))
    return out
