"""The SGLang patch series as the kernel checks read it: from the runner's inputs ($BITEXACT_SGLANG_SERIES,
which `bitexact-gpu-checks run --series` and the flake's check set), never from a path beside this file
(in the flake's sandbox only a copy of checks/gpu is there).

`released_source` gives a tree's file as SGLang released it: every patch of the series that touches the
file taken off again with GNU patch (`-R`, no fuzz), last patch first, so a stock path under test is the
unpatched code whatever later patches of the series did to the same file."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

from exactlaunch import manifest

SERIES_ENV = "BITEXACT_SGLANG_SERIES"


def series_dir() -> Path:
    """The series folder the runner named; RuntimeError naming the fix when it names none."""
    value = os.environ.get(SERIES_ENV)
    if not value:
        raise RuntimeError(
            f"${SERIES_ENV} is not set: the kernel checks read the patch series from the runner's inputs "
            "(bitexact-gpu-checks run --series patches/sglang)"
        )
    path = Path(value)
    if not any(path.glob("*.patch")):
        raise RuntimeError(f"${SERIES_ENV}={path} holds no *.patch")
    return path


def series(directory: Path | None = None) -> list[Path]:
    return sorted((directory or series_dir()).glob("*.patch"))


def patch_named(prefix: str, directory: Path | None = None) -> Path:
    """The series' patch whose name starts with `prefix` (e.g. '0006-')."""
    found = [p for p in series(directory) if p.name.startswith(prefix)]
    if len(found) != 1:
        raise RuntimeError(f"the series has {len(found)} patches named {prefix}*")
    return found[0]


def section(patch_text: str, rel: str) -> str:
    """The part of a git-format diff that changes `rel` (a path under site-packages, sglang/...)."""
    parts = re.split(r"(?m)^(?=diff --git )", patch_text)
    for part in parts:
        if part.startswith(f"diff --git a/python/{rel} "):
            return part
    raise RuntimeError(f"the patch does not touch python/{rel}")


def released_source(tree: Path, rel: str, directory: Path | None = None) -> str:
    """`tree`/`rel` (tree: the site-packages folder holding sglang/) with every patch of the series that
    touches it reversed, in reverse name order."""
    touching = [p for p in series(directory) if rel in manifest.touched_files(p.read_text(), p.name)]
    if not touching:
        raise RuntimeError(f"no patch of the series touches {rel}")
    work = Path(tempfile.mkdtemp(prefix="released-"))
    copy = work / "python" / rel
    copy.parent.mkdir(parents=True)
    copy.write_bytes((tree / rel).read_bytes())
    for patch in reversed(touching):
        one = work / f"{patch.name}.{rel.replace('/', '_')}"
        one.write_text(section(patch.read_text(), rel))
        done = subprocess.run(
            [
                "patch",
                "-R",
                "-f",
                "--fuzz=0",
                "--no-backup-if-mismatch",
                "-p1",
                "-d",
                str(work),
                "-i",
                str(one),
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{patch.name} does not come off {rel}: {done.stdout}{done.stderr}")
    return copy.read_text()
