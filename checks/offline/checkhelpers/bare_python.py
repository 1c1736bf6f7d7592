"""A Python with the standard library and the named packages only, for tests that prove a package needs
nothing else (no nvidia-ml-py, no third-party module): `python -S` (no site-packages) run in a folder that
holds copies of the packages as this interpreter imports them (editable from the checkout in CI's venv,
built in the flake check's Python). `-c` and `-m` put the working directory first on the import path, so
the process finds exactly these packages, and no PYTHONPATH names the repository."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path


def stage_packages(dest: Path, names: Iterable[str]) -> Path:
    """Copy each installed package `name` into `dest` (created); return `dest`, the folder to run in."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        spec = importlib.util.find_spec(name)
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        if len(locations) != 1:
            raise LookupError(
                f"{name} is not one installed package folder for {sys.executable} (found {locations}): "
                "install the repository's projects first (checks/offline/run.sh does)"
            )
        shutil.copytree(locations[0], dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def run_bare(
    folder: Path, args: list[str], env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`python -S ARGS` in `folder` (see stage_packages), under `env` less any PYTHONPATH."""
    clean = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-S", *args], cwd=folder, env=clean, capture_output=True, text=True, timeout=timeout
    )
