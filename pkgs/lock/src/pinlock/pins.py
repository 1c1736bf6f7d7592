"""Where pins live in the repository and how they are written (atomically, so an interrupted run never
leaves half a file; finished pins survive a failure later in the same run)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

SRC_PIN = Path("nix/pins/sglang-src.json")
CARGO_PIN = Path("nix/pins/sglang-cargo.json")
CARGO_LOCKS = Path("nix/pins/sglang-cargo-locks")
STUBS_PIN = Path("nix/pins/wheel-stubs.json")
MANIFESTS = Path("pkgs/weights/manifests")
SERVER_ENV = Path("pkgs/server-env")
RECIPES = Path("nix/recipes")
DEFAULT_RECIPE = RECIPES / "qwen3.8-27b-exact.json"
RECIPE_SCHEMAS = (1,)  # the recipe file formats pinlock reads (nix/recipes/*.json "schema")


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


def read_json(path: Path) -> Any | None:
    """The parsed file, or None when it does not exist."""
    if path.is_dir():
        raise UsageError(f"{path} is a directory, where a JSON file belongs")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise PinError(
            f"{path}: not UTF-8 text (byte {error.start}: {data[error.start : error.start + 1]!r}); "
            "save it as UTF-8, or delete it and run again"
        ) from None
    except json.JSONDecodeError as error:
        raise PinError(f"{path}: not valid JSON ({error}); fix or delete it and run again") from None


def write_json(path: Path, data: Any) -> None:
    """Write `data` as indented JSON with a final newline, atomically (temp file + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w") as out:
            json.dump(data, out, indent=2)
            out.write("\n")
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
