"""Folders named by the environment, read the one way the XDG Base Directory specification gives: a
relative `$XDG_CACHE_HOME` is invalid and ignored ("If an implementation encounters a relative path in
any of these variables it should consider the path invalid and ignore it"), so a cache never depends on
the working directory a program was started from."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

XDG_CACHE = "XDG_CACHE_HOME"


def cache_home(environ: Mapping[str, str]) -> Path:
    """${XDG_CACHE_HOME:-~/.cache}, an XDG_CACHE_HOME that is not absolute ignored."""
    value = environ.get(XDG_CACHE) or ""
    if os.path.isabs(value):
        return Path(value)
    return Path(environ.get("HOME") or os.path.expanduser("~")) / ".cache"


def cache_home_note(environ: Mapping[str, str]) -> str | None:
    """What a program says when it ignores $XDG_CACHE_HOME (set, and not absolute); None otherwise."""
    value = environ.get(XDG_CACHE) or ""
    if not value or os.path.isabs(value):
        return None
    return (
        f"{XDG_CACHE}={value!r} is not an absolute path, and the XDG specification says to ignore it: caches "
        f"go to {cache_home(environ)}; set it to an absolute path (e.g. $PWD/{value}) to use that folder"
    )
