"""Where pins live in the repository and how they are written (atomically, so an interrupted run never
leaves half a file; finished pins survive a failure later in the same run)."""

from __future__ import annotations

import errno
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import exactformats

SRC_PIN = Path("nix/pins/sglang-src.json")
CARGO_PIN = Path("nix/pins/sglang-cargo.json")
CARGO_LOCKS = Path("nix/pins/sglang-cargo-locks")
STUBS_PIN = Path("nix/pins/wheel-stubs.json")
MANIFESTS = Path("pkgs/weights/manifests")
SERVER_ENV = Path("pkgs/server-env")
RECIPES = Path("nix/recipes")
DEFAULT_RECIPE = RECIPES / "qwen3.8-27b-exact.json"
SRI_SHA256 = re.compile(r"sha256-[A-Za-z0-9+/]{43}=")


class PinError(RuntimeError):
    """A pin cannot be read, computed or written; the message says which and what to do."""


class UsageError(PinError):
    """The command line asks for something that cannot be (a missing path, a snapshot of another repo):
    exit status 2, like argparse's own usage errors."""


def find_root(start: Path) -> Path:
    """The repository root: the nearest directory at or above `start` holding nix/recipes/."""
    for candidate in [start, *start.parents]:
        if (candidate / RECIPES).is_dir():
            return candidate
    raise PinError(f"no nix/recipes/ at or above {start}: run pinlock in the flake's checkout or pass --root")


def _link_nowhere(path: Path) -> str | None:
    """Why `path` or a folder above it is a symbolic link that leads nowhere (missing, or a loop)."""
    for part in [path, *path.parents]:
        if part.is_symlink() and not part.exists():
            try:
                target = os.readlink(part)
            except OSError:
                target = "?"
            return f"{part} is a symbolic link that leads nowhere (to {target}: missing, or a loop)"
    return None


def folder_problem(path: Path) -> str | None:
    """Why `path` is not a folder that exists or can be made and written in by this user, or None: a
    dangling link or a loop (mkdir says only "File exists"), a file in its place or above it, a read-only
    file system or a folder this user may not write in."""
    try:
        nowhere = _link_nowhere(path)
        if nowhere:
            return nowhere
        if path.exists() and not path.is_dir():
            return f"{path} is a file, where a folder belongs"
        parent = next((p for p in [path, *path.parents] if p.exists()), Path("."))
        if not parent.is_dir():
            return f"{parent} is a file, where a folder belongs (above {path})"
        if not os.access(parent, os.W_OK | os.X_OK):
            try:
                read_only = bool(os.statvfs(parent).f_flag & os.ST_RDONLY)
            except OSError:
                read_only = False
            why = "the file system is mounted read-only" if read_only else "this user may not write there"
            return f"{parent} cannot be written ({why})"
    except OSError as error:
        return f"{path}: {error.strerror or error}"
    return None


def file_problem(path: Path) -> str | None:
    """Why the file `path` cannot be written in place (atomically, next to itself), or None."""
    nowhere = _link_nowhere(path)
    if nowhere:
        return nowhere
    if path.exists() and not path.is_file():
        kind = "a directory" if path.is_dir() else "not a regular file"
        return f"{path} is {kind}, where a JSON file belongs: remove it"
    return folder_problem(path.parent)


def is_sri(text: object) -> bool:
    """An SRI sha256 (`sha256-` and 44 base64 characters), the form nix/lib/pins.nix accepts."""
    return isinstance(text, str) and SRI_SHA256.fullmatch(text) is not None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        raise ValueError(f"key {json.dumps(twice[0])} is given twice in one object")
    return dict(pairs)


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def read_json(
    path: Path, what: str = "file", expect: str = "a JSON file (or delete what is there and run again)"
) -> Any | None:
    """The parsed file, or None when it does not exist. Read strictly (RFC 8259): a key given twice in one
    object, which Python's json would resolve silently by keeping the last, is refused, and so are NaN and
    Infinity. The file is read by the reader bitexact and the launcher share (exactformats): a FIFO or a
    device is refused before it is opened, a byte-order mark is taken off."""
    try:
        text = exactformats.read_text(path, what, expect)
    except exactformats.FormatError as error:
        if error.kind == "missing" and not path.is_symlink():
            return None
        if error.kind in ("directory", "special"):
            raise UsageError(str(error)) from None
        raise PinError(str(error)) from None
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_not_json)
    except RecursionError:
        raise PinError(f"{what} {path}: not readable JSON (nested too deeply); fix or delete it") from None
    except ValueError as error:  # json.JSONDecodeError, a repeated key, NaN
        raise PinError(f"{what} {path}: not valid JSON ({error}); fix or delete it and run again") from None


def write_problem(error: OSError, path: Path, kept: str = "") -> str:
    """What a failed write says: the path, the system's reason and, for a fault a user can fix, how."""
    hints = {
        errno.ENOSPC: "the file system is full: free space on it",
        errno.EDQUOT: "the disk quota is used up: free space",
        errno.EROFS: "the file system is read-only",
        errno.EACCES: "no permission to write there",
        errno.EPERM: "no permission to write there",
        errno.EFBIG: "the file is larger than this process may write (ulimit -f)",
    }
    hint = hints.get(error.errno or 0)
    reason = error.strerror or str(error)
    return f"cannot write {path}: {reason}" + (f" ({hint})" if hint else "") + (f"; {kept}" if kept else "")


def write_json(path: Path, data: Any) -> None:
    """Write `data` as indented JSON with a final newline, atomically (temp file + rename): a failure (a
    full disk) leaves the old file and no temporary one, and says which file it was (PinError)."""
    temp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(handle, "w") as out:
            json.dump(data, out, indent=2)
            out.write("\n")
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except OSError as error:
        if temp is not None:
            Path(temp).unlink(missing_ok=True)
        raise PinError(write_problem(error, path, "the file as it was is kept")) from None
    except BaseException:
        if temp is not None:
            Path(temp).unlink(missing_ok=True)
        raise
