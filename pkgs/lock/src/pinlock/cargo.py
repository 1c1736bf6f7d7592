"""Git dependencies of Cargo.lock files, the `outputHashes` that nixpkgs' importCargoLock needs, and the
copies of the lock files the flake evaluates from.

importCargoLock keys outputHashes by `<name>-<version>` and fetches each git source with
`fetchgit { url; rev = <the commit after #>; }`; the hash is the NAR hash of that checkout. A key that
names no git dependency of the lock file makes it throw, so the Nix side gives each lock its own subset.

The lock files themselves are committed beside the pins (nix/pins/sglang-cargo-locks/<path in the
source>), as nixpkgs' sglang commits its Cargo.lock beside the package: the flake then evaluates without
reading the fetched source (no import-from-derivation).
"""

from __future__ import annotations

import os
import re
import shutil
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# git+<url>[?rev=|tag=|branch=<value>]#<commit>, the shape importCargoLock's parser accepts.
_GIT_SOURCE = re.compile(r"git\+([^?#]+)(?:\?(rev|tag|branch)=([^#]*))?#([0-9a-f]{40})")
_GITHUB = re.compile(r"https://github\.com/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?/?")


@dataclass(frozen=True)
class GitDependency:
    name: str
    version: str
    url: str
    commit: str

    @property
    def key(self) -> str:
        """The outputHashes key importCargoLock looks up."""
        return f"{self.name}-{self.version}"

    def github(self) -> tuple[str, str] | None:
        """(owner, repo) when the source is a GitHub repository, else None."""
        match = _GITHUB.fullmatch(self.url)
        return (match.group(1), match.group(2)) if match else None


def git_dependencies(lock_text: str, where: str = "Cargo.lock") -> list[GitDependency]:
    """Every package of a Cargo.lock whose source is git, in file order."""
    try:
        data = tomllib.loads(lock_text)
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{where}: not valid TOML ({error})") from error
    deps: list[GitDependency] = []
    for package in data.get("package", []):
        source = package.get("source", "")
        if not source.startswith("git+"):
            continue
        match = _GIT_SOURCE.fullmatch(source)
        if match is None:
            raise ValueError(f"{where}: cannot parse git source {source!r} of {package.get('name')}")
        deps.append(GitDependency(package["name"], package["version"], match.group(1), match.group(4)))
    return deps


def output_hashes(deps: list[GitDependency], by_commit: Mapping[str, str]) -> dict[str, str]:
    """{name-version: hash} for `deps`, with the NAR hash of each commit's tree from `by_commit`."""
    out: dict[str, str] = {}
    for dep in deps:
        if dep.commit not in by_commit:
            raise KeyError(f"no hash for {dep.url}@{dep.commit} ({dep.key})")
        previous = out.get(dep.key)
        if previous is not None and previous != by_commit[dep.commit]:
            raise ValueError(f"{dep.key} comes from two different commits; importCargoLock cannot key it")
        out[dep.key] = by_commit[dep.commit]
    return dict(sorted(out.items()))


def commit_locks(tree: Path, locks: list[Path], dest: Path) -> list[str]:
    """Copy `locks` (files under `tree`) to `dest` at their paths relative to `tree`, replacing what an
    earlier run left there; returns those relative paths in order (the main workspace's first)."""
    relative = [lock.relative_to(tree).as_posix() for lock in locks]
    staging = dest.with_name(f".{dest.name}.new")
    shutil.rmtree(staging, ignore_errors=True)
    for lock, rel in zip(locks, relative, strict=True):
        (staging / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(lock, staging / rel)
        os.chmod(staging / rel, 0o644)
    old = dest.with_name(f".{dest.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if dest.exists():
        os.replace(dest, old)
    os.replace(staging, dest)
    shutil.rmtree(old, ignore_errors=True)
    return relative


def committed_locks_present(pin: Mapping[str, object], dest: Path) -> bool:
    """Whether a pin lists its lock files and every one of them is committed under `dest`."""
    locks = pin.get("locks")
    return isinstance(locks, list) and bool(locks) and all((dest / str(p)).is_file() for p in locks)
