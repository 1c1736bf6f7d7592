"""The end-to-end runners' command lines, read as the launcher reads its own (exactlaunch.options): no
abbreviations, an option given twice refused, and each value checked by its kind before anything starts:
ports, counts and memory fractions by exactlaunch.values (the launcher's own checks), timeouts as finite
positive seconds, and every name that becomes a folder (a tree, a step) by the one name pattern."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from pathlib import Path

from exactformats.crash import one_line
from exactlaunch import values
from exactlaunch.options import Once, strict_parser, typed

REPO = Path(__file__).resolve().parents[2]

_SECONDS = re.compile(r"[0-9]+(\.[0-9]*)?|\.[0-9]+")

port = typed(values.port)
count = typed(values.count)
fraction = typed(values.fraction)
name = typed(values.name)


def seconds(text: str) -> float:
    """A finite, positive number of seconds in ASCII digits (not inf, nan, 1e9 or -1)."""
    if not _SECONDS.fullmatch(text) or not 0 < float(text) < math.inf or float(text) > 7 * 86400:
        raise argparse.ArgumentTypeError(f"not a number of seconds from 0 to a week: {text!r}")
    return float(text)


def names(known: list[str], option: str) -> Callable[[str], list[str]]:
    """A comma-separated list of names from `known`; an unknown one is refused (it would run nothing)."""

    def convert(text: str) -> list[str]:
        given = text.split(",")
        unknown = [n for n in given if n not in known]
        if unknown:
            raise argparse.ArgumentTypeError(f"{option} names {unknown}, which are not among {known}")
        return given

    return convert


__all__ = [
    "Once",
    "REPO",
    "count",
    "fraction",
    "name",
    "names",
    "one_line",
    "port",
    "seconds",
    "strict_parser",
]
