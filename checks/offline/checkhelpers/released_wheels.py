"""Real released wheels from PyPI, downloaded once into a cache and unpacked for tests.

Tests that check our patches against what upstream actually shipped (the DeepGEMM fence against the
0.2.0/0.2.3 headers, the SGLang series against the 0.5.20/0.5.21 trees) get the files from here, so
nothing upstream is vendored into the repository.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from checkhelpers.repo import REPO as REPO_ROOT


def cache_dir() -> Path:
    """Where wheels and unpacked trees live; `BITEXACT_ARTIFACTS` overrides the default."""
    root = Path(os.environ.get("BITEXACT_ARTIFACTS", REPO_ROOT / ".cache" / "artifacts"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def released_wheel(dist: str, version: str) -> Path:
    """Path of the released wheel `dist==version`, downloaded with pip on first use."""
    wheel_dir = cache_dir() / "wheels" / f"{dist}-{version}"
    found = sorted(wheel_dir.glob("*.whl")) if wheel_dir.is_dir() else []
    if found:
        return found[0]
    wheel_dir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
    cmd += ["--dest", str(wheel_dir), f"{dist}=={version}"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    found = sorted(wheel_dir.glob("*.whl"))
    if result.returncode != 0 or not found:
        raise RuntimeError(
            f"could not download {dist}=={version} from PyPI (pip said: {result.stderr.strip()[-500:]}); "
            f"put the wheel into {wheel_dir} by hand to run offline"
        )
    return found[0]


def unpacked_wheel(dist: str, version: str) -> Path:
    """A pristine unpacked copy of the wheel (site-packages layout); callers must not modify it."""
    target = cache_dir() / "trees" / f"{dist}-{version}"
    stamp = target / ".complete"
    if not stamp.exists():
        wheel = released_wheel(dist, version)
        target.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(target)
        stamp.write_text(wheel.name + "\n")
    return target
