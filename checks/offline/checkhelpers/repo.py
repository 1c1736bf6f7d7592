"""The repository the offline suite runs over. Installed editable (checks/offline/run.sh), checkhelpers
lives in it: the checkout three folders above this file. Installed as a plain package (the flake check's
Python, the sandbox selection's throwaway environment), it does not: then the tests run from the
repository root (run.sh and the selection both do), and the current directory is the repository."""

from __future__ import annotations

from pathlib import Path


def find_repository(here: Path, cwd: Path) -> Path:
    checkout = here.resolve().parents[2]
    for candidate in (checkout, cwd):
        if (candidate / "checks" / "offline" / "pyproject.toml").is_file():
            return candidate
    raise RuntimeError(
        f"checkhelpers: {here} is not in a checkout and {cwd} is not the repository root "
        "(no checks/offline/pyproject.toml): run the tests from the repository root"
    )


REPO = find_repository(Path(__file__).parent, Path.cwd())
