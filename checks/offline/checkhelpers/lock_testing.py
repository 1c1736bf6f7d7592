"""Helpers for the pinlock tests: Debian's real Nix as the oracle, and real `git archive` tarballs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

NIX_ENV = {
    **os.environ,
    "NIX_CONFIG": "\n".join(
        [
            "experimental-features = nix-command flakes",
            "substituters =",
            "build-users-group =",
            "sandbox = false",
        ]
    ),
}


def nix(*args: str) -> str:
    """stdout of a Nix command (stripped); fails the test when Nix is missing."""
    if shutil.which(args[0]) is None:
        pytest.fail(f"{args[0]} is not installed: the offline suite needs Nix (.ci/run installs nix-bin)")
    return subprocess.run(args, check=True, capture_output=True, text=True, env=NIX_ENV).stdout.strip()


def nix_unpacked_sri(archive: Path) -> str:
    """The hash Nix's own fetchers (fetchzip/fetchFromGitHub/fetchTarball) give the unpacked archive."""
    base32 = nix("nix-prefetch-url", "--unpack", "--type", "sha256", archive.resolve().as_uri())
    return nix("nix", "hash", "to-sri", "--type", "sha256", base32)


def git_repo(root: Path, files: dict[str, str | bytes], executables: tuple[str, ...] = (),
             symlinks: dict[str, str] | None = None) -> str:  # fmt: skip
    """A git repository at `root` with one commit of `files`; returns the commit id."""
    root.mkdir(parents=True)
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    for name in executables:
        (root / name).chmod(0o755)
    for name, target in (symlinks or {}).items():
        (root / name).symlink_to(target)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "c"], check=True)
    return subprocess.run(
        git + ["rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


def git_archive(repo: Path, rev: str, prefix: str, out: Path) -> Path:
    """`git archive` as GitHub serves /archive/<rev>.tar.gz: one top-level directory, gzip."""
    subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar.gz", f"--prefix={prefix}/", "-o", str(out), rev],
        check=True,
    )
    return out
