"""The SGLang patch series applied as every script here applies it: GNU patch, `-p2 --fuzz=0`, in name
order, then the content manifest written with exactlaunch.manifest, as pkgs/sglang's build does."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from exactlaunch import manifest

from checkhelpers.repo import REPO

SERIES = sorted((REPO / "patches" / "sglang").glob("*.patch"))


def apply_patch(root: Path, patch: Path, strip: int = 2, reverse: bool = False) -> str:
    """Apply (or reverse) one patch in `root` with no fuzz; returns patch's output, fails on error."""
    cmd = ["patch", f"-p{strip}", "--fuzz=0", "--no-backup-if-mismatch"]
    # Forward: refuse a patch that looks applied already; reverse: never guess the direction.
    cmd += ["-R", "-f"] if reverse else ["--batch", "--forward"]
    done = subprocess.run([*cmd, "-i", str(patch)], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, f"{patch.name}: {done.stdout}{done.stderr}"
    return done.stdout + done.stderr


def touched_files(patches: Sequence[Path] = SERIES) -> list[str]:
    """Paths under the site-packages directory that the series names (what the manifest covers)."""
    return sorted({rel for p in patches for rel in manifest.touched_files(p.read_text(), p.name)})


def copy_touched(release: Path, site: Path, patches: Sequence[Path] = SERIES) -> None:
    """Copy only the release's files that the series touches (and sglang/__init__.py) into `site`: a
    small real tree the series applies to, for tests that need no other SGLang file."""
    for rel in ["sglang/__init__.py", *touched_files(patches)]:
        if (release / rel).is_file():
            (site / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(release / rel, site / rel)


def apply_series(site: Path, patches: Sequence[Path] = SERIES, write_manifest: bool = True) -> None:
    """Apply `patches` in order to the tree under `site`, then write the manifest for them."""
    for patch in patches:
        apply_patch(site, patch)
    if write_manifest:
        manifest.write(site, patches)
