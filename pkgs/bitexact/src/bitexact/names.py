"""Names that become paths (a card slug, a recipe name, a variant, a preset, a report's stem): one
pattern, checked where the name enters (an option, a recipe file), and the path built from it proven
inside its root. `../other/x` as a recipe name would otherwise write a golden and a history line into
another card's folder, or outside the golden directory."""

from __future__ import annotations

import os
import re
from pathlib import Path

from bitexact.errors import UsageError

NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,99}")
RULE = "lowercase letters, digits, '.', '_' or '-', starting with a letter or digit (at most 100)"


def checked_name(name: object, what: str) -> str:
    """`name` if it is one (UsageError otherwise); `what` says where it came from (`--card`, `recipe
    r.json's name`)."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise UsageError(f"{what} {name!r}: a name that becomes a file or folder name is {RULE}")
    return name


def inside(root: Path, path: Path, what: str) -> Path:
    """`path` after proving that it lies inside `root` once both are resolved (symbolic links followed),
    so that no name or link leads a write elsewhere."""
    real_root, real = Path(os.path.realpath(root)), Path(os.path.realpath(path))  # no crash on a loop
    if real != real_root and real_root not in real.parents:
        raise UsageError(
            f"{what} {path} resolves to {real}, outside {real_root}: a symbolic link leads elsewhere; "
            "remove it or give the path itself"
        )
    return path


def name_option(text: str) -> str:
    """An argparse type for options whose value becomes a file or folder name."""
    import argparse

    if not NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r}: a name that becomes a file or folder name is {RULE}")
    return text
