"""Command lines read strictly, the same way in the launcher, the image entrypoint and the end-to-end
runners: no abbreviations (`--var` never means `--variant`), an option given twice is a usage error
(argparse's default lets the last one win silently), and values checked by their kind (exactlaunch.values)
with the check's own message."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from exactlaunch import values

T = TypeVar("T")


class Once(argparse.Action):
    """Store the option's value; giving it twice is a usage error (argparse's default: the last wins)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        value: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        if self.nargs is None and value == []:
            # `--port=--`: argparse drops the `--` and hands over an empty list instead of a value.
            parser.error(f"{option_string} needs a value (given {value!r})")
        seen = given(namespace)
        if self.dest in seen:
            parser.error(
                f"{option_string} given twice ({getattr(namespace, self.dest)} and {value}): give it once"
            )
        seen.add(self.dest)
        namespace._given = seen
        setattr(namespace, self.dest, value)


def given(namespace: argparse.Namespace) -> set[str]:
    """The destinations of the Once options the command line gave."""
    seen: set[str] = getattr(namespace, "_given", set())
    return seen


def strict_parser(**kwargs: Any) -> argparse.ArgumentParser:
    """An ArgumentParser that takes no abbreviations; give its options `action=Once`."""
    return argparse.ArgumentParser(allow_abbrev=False, **kwargs)


def typed(kind: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse `type=` for a check of exactlaunch.values, keeping the check's message."""

    def convert(text: str) -> T:
        try:
            return kind(text)
        except values.BadValue as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    convert.__name__ = kind.__name__
    return convert
