"""Weights manifests: `{"repo", "revision", "files": [{"path", "size", "sha256", "lfs"}]}`.

From the Hub: the tree API (`GET /api/models/<repo>/tree/<rev>?recursive=true`, as huggingface_hub's
`list_repo_tree` calls it) lists entries `{"type": "file"|"directory", "path", "oid", "size",
"lfs": {"oid", "size", "pointerSize"}?, "xetHash"?}` (huggingface_hub's `RepoFile`: `blob_id = oid`,
`lfs.sha256 = lfs["oid"]`). An LFS file's sha256 is its LFS oid; other files must be downloaded and
hashed. From disk: a snapshot directory the user already holds, hashed here.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

_HEX40 = re.compile(r"[0-9a-f]{40}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")
_CHUNK = 1 << 20


class ManifestError(ValueError):
    """A manifest, an API answer or a snapshot does not have the shape we rely on."""


@dataclass(frozen=True)
class TreeFile:
    """One file of the tree API's answer."""

    path: str
    size: int
    git_oid: str
    lfs_sha256: str | None


def check_repo(repo: str) -> str:
    if not _REPO.fullmatch(repo):
        raise ManifestError(f"not a Hugging Face repo id (org/name): {repo!r}")
    return repo


def is_revision(text: str) -> bool:
    return _HEX40.fullmatch(text) is not None


def check_revision(revision: str) -> str:
    if not is_revision(revision):
        raise ManifestError(f"a manifest pins a commit (40 hex digits), not {revision!r}")
    return revision


def manifest_filename(repo: str) -> str:
    """`<org>--<name>.json`, the contract's file name."""
    org, name = check_repo(repo).split("/")
    return f"{org}--{name}.json"


def _check_path(path: str) -> str:
    parts = PurePosixPath(path).parts
    if not path or path.startswith("/") or ".." in parts or "." in parts or "\\" in path:
        raise ManifestError(f"unsafe file path in repo tree: {path!r}")
    return path


def parse_tree(entries: Iterable[Mapping[str, Any]]) -> list[TreeFile]:
    """Files of a (recursive) tree API answer, sorted by path; directories are skipped."""
    files: dict[str, TreeFile] = {}
    for entry in entries:
        kind = entry.get("type")
        if kind == "directory":
            continue
        if kind != "file":
            raise ManifestError(f"tree entry of unknown type {kind!r}: {dict(entry)}")
        try:
            path, size, oid = entry["path"], entry["size"], entry["oid"]
        except KeyError as missing:
            raise ManifestError(f"tree entry lacks {missing}: {dict(entry)}") from None
        lfs = entry.get("lfs")
        lfs_sha256: str | None = None
        if lfs is not None:
            lfs_sha256 = lfs.get("oid")
            if not isinstance(lfs_sha256, str) or not _HEX64.fullmatch(lfs_sha256):
                raise ManifestError(f"{path}: LFS oid is not a sha256: {lfs_sha256!r}")
            if lfs.get("size") != size:
                raise ManifestError(f"{path}: LFS size {lfs.get('size')} differs from file size {size}")
        if not isinstance(size, int) or size < 0:
            raise ManifestError(f"{path}: bad size {size!r}")
        if path in files:
            raise ManifestError(f"{path} listed twice")
        files[path] = TreeFile(_check_path(path), size, oid, lfs_sha256)
    return [files[p] for p in sorted(files)]


def manifest_from_tree(
    repo: str, revision: str, files: Iterable[TreeFile], small_file_sha256: Callable[[TreeFile], str]
) -> dict[str, Any]:
    """The manifest; `small_file_sha256` hashes a non-LFS file (downloads it, in the networked caller)."""
    out = []
    for item in files:
        sha256 = item.lfs_sha256 if item.lfs_sha256 is not None else small_file_sha256(item)
        out.append(
            {"path": item.path, "size": item.size, "sha256": sha256, "lfs": item.lfs_sha256 is not None}
        )
    return validate_manifest(
        {"repo": check_repo(repo), "revision": check_revision(revision), "files": out}, "manifest"
    )


def validate_manifest(data: Any, where: str) -> dict[str, Any]:
    """Check the contract's schema; returns the manifest or raises ManifestError naming `where`."""
    if not isinstance(data, dict) or set(data) != {"repo", "revision", "files"}:
        raise ManifestError(f"{where}: a manifest is an object with exactly repo, revision, files")
    try:
        check_repo(data["repo"])
        check_revision(data["revision"])
    except ManifestError as error:
        raise ManifestError(f"{where}: {error}") from None
    files = data["files"]
    if not isinstance(files, list) or not files:
        raise ManifestError(f"{where}: files must be a non-empty list")
    seen: set[str] = set()
    for item in files:
        if not isinstance(item, dict) or set(item) != {"path", "size", "sha256", "lfs"}:
            raise ManifestError(f"{where}: each file has exactly path, size, sha256, lfs: {item!r}")
        _check_path(item["path"])
        if item["path"] in seen:
            raise ManifestError(f"{where}: {item['path']} listed twice")
        seen.add(item["path"])
        if not isinstance(item["size"], int) or isinstance(item["size"], bool) or item["size"] < 0:
            raise ManifestError(f"{where}: {item['path']}: bad size")
        if not isinstance(item["sha256"], str) or not _HEX64.fullmatch(item["sha256"]):
            raise ManifestError(f"{where}: {item['path']}: sha256 must be 64 lowercase hex digits")
        if not isinstance(item["lfs"], bool):
            raise ManifestError(f"{where}: {item['path']}: lfs must be true or false")
    if [f["path"] for f in files] != sorted(seen):
        raise ManifestError(f"{where}: files must be sorted by path")
    return data


def sha256_file(path: Path, progress: Callable[[int], None] | None = None) -> str:
    digest = hashlib.sha256()
    done = 0
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
            done += len(chunk)
            if progress is not None:
                progress(done)
    return digest.hexdigest()


def _lfs_patterns(gitattributes: Path) -> list[tuple[str, bool]]:
    """(pattern, is_lfs) from a .gitattributes, in file order (later lines win, as in git)."""
    rules: list[tuple[str, bool]] = []
    if not gitattributes.is_file():
        return rules
    for line in gitattributes.read_text(errors="replace").splitlines():
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        for attr in fields[1:]:
            if attr == "filter=lfs":
                rules.append((fields[0], True))
            elif attr in ("-filter", "!filter") or (attr.startswith("filter=") and attr != "filter=lfs"):
                rules.append((fields[0], False))
    return rules


def _matches(pattern: str, path: str) -> bool:
    if "/" not in pattern.rstrip("/"):
        return fnmatch.fnmatchcase(PurePosixPath(path).name, pattern)
    return fnmatch.fnmatchcase(path, pattern.lstrip("/"))


def _is_lfs(path: Path, rel: str, sha256: str, rules: list[tuple[str, bool]]) -> bool:
    # In an HF cache snapshot every file links to blobs/<etag>: the sha256 for LFS files, the git
    # blob id (40 hex) for the others. That is authoritative; otherwise .gitattributes decides.
    if path.is_symlink():
        blob = Path(path.readlink()).name
        if blob == sha256:
            return True
        if _HEX40.fullmatch(blob):
            return False
    verdict = False
    for pattern, lfs in rules:
        if _matches(pattern, rel):
            verdict = lfs
    return verdict


def snapshot_revision(snapshot: Path) -> str | None:
    """The commit of an HF cache snapshot directory (`.../snapshots/<rev>`), when it is one."""
    if snapshot.parent.name == "snapshots" and _HEX40.fullmatch(snapshot.name):
        return snapshot.name
    return None


def manifest_from_snapshot(
    repo: str, revision: str, snapshot: Path, progress: Callable[[str, int], None] | None = None
) -> dict[str, Any]:
    """A manifest of the files under `snapshot` (an HF cache snapshot or a plain download directory),
    every file hashed here. Skips `.git/` and huggingface_hub's `.cache/` metadata."""
    if not snapshot.is_dir():
        raise ManifestError(f"{snapshot} is not a directory")
    rules = _lfs_patterns(snapshot / ".gitattributes")
    files: list[dict[str, Any]] = []
    for path in sorted(p for p in snapshot.rglob("*") if not p.is_dir()):
        rel = path.relative_to(snapshot).as_posix()
        if rel.split("/")[0] in (".git", ".cache"):
            continue
        if not path.exists():
            raise ManifestError(f"{path} is a dangling link: the snapshot is incomplete")
        report = functools.partial(progress, rel) if progress is not None else None
        sha256 = sha256_file(path, report)
        lfs = _is_lfs(path, rel, sha256, rules)
        files.append({"path": rel, "size": path.stat().st_size, "sha256": sha256, "lfs": lfs})
    files.sort(key=lambda item: item["path"])
    return validate_manifest(
        {"repo": check_repo(repo), "revision": check_revision(revision), "files": files}, str(snapshot)
    )
