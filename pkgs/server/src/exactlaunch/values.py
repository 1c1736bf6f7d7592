"""Every kind of value the launcher appends to or edits in the recipe's argv and environment, each checked
by one function here: flag names and values of a variant's edits, environment names and values, the
serving flags (`--host`, `--port`), counts, GPU ids, memory fractions and paths below a root.

The recipe reader, the variant edits, the serving flags and the fleet plan all call these, and all of
them run before `--print` prints and before a start, so what `--print` shows is what a start accepts.
Each function returns the value (normalised only where it says so) or raises BadValue, whose message says
what is wrong and what is accepted; the caller adds where the value came from.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable
from pathlib import Path, PurePosixPath

# The recipe reader's pattern and its words: one for every reader of a recipe or variant name.
from exactformats.recipe import NAME as RECIPE_NAME
from exactformats.recipe import NAME_RULE

FLAG = re.compile(r"--[A-Za-z0-9][A-Za-z0-9_-]*")
# POSIX names of environment variables (portable: letters, digits, underscore; no leading digit).
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PORT = re.compile(r"[1-9][0-9]{0,4}")
_COUNT = re.compile(r"[1-9][0-9]*")
_GPU = re.compile(r"0|[1-9][0-9]{0,2}")
_DECIMAL = re.compile(r"[0-9]*\.[0-9]+|[0-9]+\.?")
# A name that becomes a file or folder name (a log, a tree, a step): no separators, no leading dot.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,99}")
# A recipe's or a variant's name: bitexact turns both into golden and report paths (bitexact.names.NAME,
# the same pattern: checks/offline/test_launcher_recipe_checks.py holds them equal), so the launcher,
# which reads the recipe first, refuses what bitexact would.
_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
# What argparse reads as a value although it starts with `-`: a negative number (its own pattern), `-`.
_NEGATIVE = re.compile(r"-[0-9]+|-[0-9]*\.[0-9]+")


class BadValue(ValueError):
    """A value the launcher would append or edit is not of its kind; the message says what is accepted."""


def _no_nul(text: str, what: str) -> str:
    if "\0" in text:
        raise BadValue(f"{what} {text!r} holds a NUL character, which no command line or environment carries")
    return text


def flag(text: str) -> str:
    """A command-line flag of SGLang's form, `--name` (letters, digits, `-`, `_`; no `=`, no value)."""
    if not FLAG.fullmatch(text):
        raise BadValue(f"{text!r} is not a flag: write it as SGLang's argv does, `--name` (no `=VALUE`)")
    return text


def flag_value(text: str) -> str:
    """A flag's value: anything argparse reads as a value (not `-x`/`--x`, which it reads as an option)."""
    _no_nul(text, "value")
    if text.startswith("-") and text != "-" and not _NEGATIVE.fullmatch(text):
        raise BadValue(f"value {text!r} starts with - and would be read as another flag")
    return text


def argv_item(text: str) -> str:
    """An element of the recipe's verbatim argv: any string a command line can carry."""
    return _no_nul(text, "argv element")


def env_name(text: str) -> str:
    if not ENV_NAME.fullmatch(text):
        raise BadValue(
            f"{text!r} is not an environment variable name (letters, digits and _, not starting with a digit)"
        )
    return text


def env_value(text: str) -> str:
    return _no_nul(text, "environment value")


def host(text: str) -> str:
    """An address to bind: an IPv4 or IPv6 address, or a host name (RFC 1123 labels)."""
    try:
        ipaddress.ip_address(text)
        return text
    except ValueError:
        pass
    labels = text.removesuffix(".").split(".")
    # A last label of digits alone is an IP address gone wrong (`300.1.1.1`, `1.2.3.4.5`, `30000`), never
    # a host name (RFC 3696 section 2): the resolver would read `123` as 0.0.0.123.
    if text and len(text) <= 253 and all(_LABEL.fullmatch(label) for label in labels):
        if not labels[-1].isascii() or not labels[-1].isdigit():
            return text
    raise BadValue(f"not an address to bind: {text!r} (an IP address such as 0.0.0.0, or a host name)")


def port(text: str) -> int:
    """A TCP port, 1 to 65535, in ASCII digits without a leading zero."""
    if not _PORT.fullmatch(text) or int(text) > 65535:
        raise BadValue(f"not a TCP port: {text!r} (a whole number from 1 to 65535, in ASCII digits)")
    return int(text)


def port_text(text: str) -> str:
    return str(port(text))


# The serving flags the launcher appends from its own options, each with its check.
SERVING: dict[str, Callable[[str], str]] = {"--host": host, "--port": port_text}


def count(text: str) -> int:
    """A positive whole number in ASCII digits."""
    if not _COUNT.fullmatch(text):
        raise BadValue(f"not a positive whole number: {text!r} (ASCII digits, no leading zero)")
    return int(text)


def gpu_ids(text: str) -> list[str]:
    """A comma-separated list of distinct GPU indices (`0`, `0,1`)."""
    ids = text.split(",")
    if not any(i.strip() for i in ids):
        raise BadValue(f"{text!r} names no GPU; give indices such as 0 or 0,1")
    for gpu in ids:
        if not _GPU.fullmatch(gpu):
            raise BadValue(f"{text!r}: {gpu!r} is not a GPU index (0, 1, ...; ASCII digits, no spaces)")
    twice = sorted({gpu for gpu in ids if ids.count(gpu) > 1}, key=int)
    if twice:
        raise BadValue(
            f"{text!r} names GPU {', '.join(twice)} more than once; replicas beyond the GPUs given take "
            "them in turn"
        )
    return ids


def fraction(text: str) -> float:
    """A decimal strictly between 0 and 1, as SGLang's `--mem-fraction-static` takes it."""
    if not _DECIMAL.fullmatch(text) or not 0 < float(text) < 1:
        raise BadValue(f"{text!r} is not a fraction between 0 and 1 (a decimal such as 0.88)")
    return float(text)


def name(text: str) -> str:
    """A name that becomes one file or folder name: letters, digits, `.`, `_`, `+`, `-`, not starting with
    a dot or a dash (so never `..`, never a path)."""
    if not NAME.fullmatch(text):
        raise BadValue(
            f"{text!r} is not a name: letters, digits, . _ + - (up to 100, starting with a letter or a digit)"
        )
    return text


def recipe_name(text: str) -> str:
    """A recipe's or a variant's name, which bitexact makes file names of (goldens, reports)."""
    if not RECIPE_NAME.fullmatch(text):
        raise BadValue(f"{text!r} is not a recipe or variant name: {NAME_RULE}")
    return text


def path_text(text: str) -> str:
    """A path as given in an environment variable or an option: no control characters (a carriage return
    from a file saved on Windows, a newline), no white space around it; either would name another file
    while the message shows the name that looks right."""
    odd = [c for c in text if ord(c) < 32 or ord(c) == 127]
    if odd or text != text.strip():
        shown = ", ".join(repr(c) for c in odd) if odd else "white space around it"
        raise BadValue(f"{text!r} holds {shown}: remove it (a path ends where its name does)")
    return text


def folder_to_make(path: Path) -> Path:
    """A folder that exists, or can be made by this user: nothing in the way, its nearest existing
    parent a folder it may write in."""
    try:
        for part in [path, *path.parents]:
            if part.is_symlink() and not part.exists():  # dangling, or a loop: mkdir says "File exists"
                try:
                    target = os.readlink(part)
                except OSError:
                    target = "?"
                raise BadValue(
                    f"{path}: {part} is a symbolic link that leads nowhere (to {target}, missing or a loop); "
                    "remove it or point it at a folder"
                )
        if path.exists() and not path.is_dir():
            raise BadValue(f"{path} exists and is not a folder")
        parent = next((p for p in [path, *path.parents] if p.exists()), Path("."))
        if not parent.is_dir():
            raise BadValue(f"{path}: {parent} is not a folder")
        if parent != path and not os.access(parent, os.W_OK | os.X_OK):
            try:
                read_only = bool(os.statvfs(parent).f_flag & os.ST_RDONLY)
            except OSError:
                read_only = False
            # root may write anywhere but on a read-only file system: say which it is
            why = (
                f"{parent} is on a read-only file system"
                if read_only
                else f"this user may not write in {parent}"
            )
            raise BadValue(f"{path} cannot be made: {why}")
    except OSError as error:
        raise BadValue(f"{path}: {error.strerror or error}") from None
    return path


def relative_path(text: str) -> PurePosixPath:
    """A relative POSIX path that stays below the directory it is taken from (no `..`, not absolute)."""
    _no_nul(text, "path")
    path = PurePosixPath(text)
    if not text or path.is_absolute() or ".." in path.parts or "\\" in text:
        raise BadValue(f"{text!r} is not a relative path below its folder (no leading /, no ..)")
    return path


def below(root: Path, text: str) -> Path:
    """`root / text`, proven to stay inside `root` once links are resolved."""
    path = root / relative_path(text)
    if not path.resolve().is_relative_to(root.resolve()):
        raise BadValue(f"{text!r} leads out of {root} through a link")
    return path
