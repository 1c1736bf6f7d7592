"""The one way pinlock writes a pin: a pin that a recipe of the checkout names is never replaced by another
one without --force, whichever recipe the run read (`--recipe` may point at a scratch copy naming another
revision; the checkout's own recipes would then find their pin gone), and a pin file never lands outside
the checkout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pinlock import recipe
from pinlock.pins import PinError, UsageError, file_problem, write_json


def _short(identity: str) -> str:
    name, _, rev = identity.partition("@")
    return f"{name}@{rev[:12]}"


def check_replace(root: Path, rel: Path, old: str | None, new: str, force: bool) -> None:
    """Refuse to replace the pin `old` (repo@rev, None when there is none) in `rel` with `new` while a
    recipe of the checkout names `old`, unless forced; and refuse a target that cannot be written (a
    folder in its place, a dangling link, a read-only file system), before any download or hashing."""
    check_target(root, rel)
    if old is None or old == new or force:
        return
    users = [r for r in recipe.checkout_recipes(root) if old in r.names()]
    if users:
        names = ", ".join(str(r.path.relative_to(root)) for r in users)
        raise UsageError(
            f"{rel} already pins {_short(old)}; pinning {_short(new)} would replace it, and the recipe "
            f"{names}, which names @{old.partition('@')[2][:12]}, would then find its pin absent: update "
            "the recipe first (docs/bumping.md), or pass --force to replace the pin anyway"
        )


def check_target(root: Path, rel: Path) -> None:
    """PinError (a failed step, exit 1) when the pin file `rel` cannot be written where it belongs."""
    path = root / rel
    if not path.parent.resolve().is_relative_to(root.resolve()):
        raise UsageError(f"{rel} leads out of the checkout {root} (a link?); pins are written inside it")
    problem = file_problem(path)
    if problem:
        raise PinError(f"cannot write the pin {rel}: {problem}")


def write(root: Path, rel: Path, data: Any, *, old: str | None, new: str, force: bool) -> None:
    """Write the pin file `rel` of the checkout `root` through the replace check."""
    check_replace(root, rel, old, new, force)
    write_json(root / rel, data)
