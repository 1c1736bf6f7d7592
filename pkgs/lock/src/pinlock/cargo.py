"""Git dependencies of Cargo.lock files and the `outputHashes` that nixpkgs' importCargoLock needs.

importCargoLock keys outputHashes by `<name>-<version>` and fetches each git source with
`fetchgit { url; rev = <the commit after #>; }`; the hash is the NAR hash of that checkout. A key that
names no git dependency of the lock file makes it throw, so hashes are kept per lock file too.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass

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
