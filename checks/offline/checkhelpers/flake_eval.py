"""The flake's outputs evaluated offline with the real `nix eval` (flakes on, no binary cache, the lock
file as committed): the attribute names under an output."""

from __future__ import annotations

import os
import subprocess

from checkhelpers.repo import REPO

SYSTEM = "x86_64-linux"


def flake_eval(attr: str) -> subprocess.CompletedProcess[str]:
    config = "\n".join(
        [
            os.environ.get("NIX_CONFIG", ""),
            "experimental-features = nix-command flakes",
            "substituters =",
            "build-users-group =",
            "sandbox = false",
        ]
    )
    return subprocess.run(
        ["nix", "eval", "--no-update-lock-file", "--json", f".#{attr}", "--apply", "builtins.attrNames"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NIX_CONFIG": config},
    )
