"""Weights manifests: `{"repo", "revision", "files": [{"path", "size", "sha256", "lfs"}]}`, the contract's
schema, and the identifiers Hugging Face uses for file content: the sha256 (an LFS file's oid, and the name
huggingface_hub gives its blob in the cache) and the git blob id (a non-LFS file's oid and blob name).
The manifests come from the Hub (pinlock.hub) or from a local hub cache (pinlock.snapshot)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

HEX40 = re.compile(r"[0-9a-f]{40}")
HEX64 = re.compile(r"[0-9a-f]{64}")
_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")
_CHUNK = 1 << 20


class ManifestError(ValueError):
    """A manifest, an API answer or a snapshot does not have the shape or the content we rely on."""


def check_source_repo(repo: str) -> str:
    """An owner/name of a source repository (GitHub's characters)."""
    if not _REPO.fullmatch(repo):
        raise ManifestError(f"not a repository (owner/name): {repo!r}; give it as GitHub does, e.g. org/name")
    return repo


def check_repo(repo: str) -> str:
    """A Hugging Face repo id (org/name), with the Hub's own rules: no `--` and no `..` (the cache folder
    `models--ORG--NAME` and the manifest `ORG--NAME.json` of `a--b/c` and `a/b--c` would be one and the
    same, so pinning one would replace the other's pin), not ending in `.git`."""
    if not _REPO.fullmatch(repo):
        raise ManifestError(
            f"not a Hugging Face repo id (org/name): {repo!r}; give it as on the Hub, e.g. Qwen/Qwen3-0.6B"
        )
    if "--" in repo or ".." in repo or repo.endswith(".git"):
        raise ManifestError(
            f"not a Hugging Face repo id: {repo!r} holds -- or .. or ends in .git, which the Hub refuses "
            "(its cache folder and its manifest would be another repo's)"
        )
    return repo


def is_revision(text: str) -> bool:
    return HEX40.fullmatch(text) is not None


def revision_problem(text: str) -> str | None:
    """Why `text` is not a commit id as pins hold it, or None. Upper case is refused, not folded: git and
    the Hub print commits in lower case, nix/lib/pins.nix matches only that, and one spelling per commit
    keeps pin files comparable with the recipe's."""
    if is_revision(text):
        return None
    if is_revision(text.lower()):
        return f"{text!r} is in upper case; write the commit in lower case, as git prints it: {text.lower()}"
    if is_revision(text.strip().lower()):
        return f"{text!r} has white space around it; give the 40 hex digits alone: {text.strip().lower()}"
    if text and re.fullmatch(r"[0-9a-fA-F]+", text) and len(text) > 40:
        return f"{text!r} is {len(text)} hex digits; a commit is 40"
    return f"a commit is 40 lower-case hex digits, not {text!r} (a branch, a tag or a short id)"


def check_revision(revision: str) -> str:
    problem = revision_problem(revision)
    if problem:
        raise ManifestError(problem)
    return revision


def manifest_filename(repo: str) -> str:
    """`<org>--<name>.json`, the contract's file name."""
    org, name = check_repo(repo).split("/")
    return f"{org}--{name}.json"


def check_path(path: str) -> str:
    parts = PurePosixPath(path).parts
    if not path or path.startswith("/") or ".." in parts or "." in parts or "\\" in path:
        raise ManifestError(f"unsafe file path in repo tree: {path!r}")
    return path


def manifest(repo: str, revision: str, files: list[dict[str, Any]], where: str) -> dict[str, Any]:
    """The manifest of `files` (sorted here), checked against the schema."""
    files = sorted(files, key=lambda item: item["path"])
    return validate_manifest(
        {"repo": check_repo(repo), "revision": check_revision(revision), "files": files}, where
    )


def validate_manifest(data: Any, where: str) -> dict[str, Any]:
    """Check the contract's schema; returns the manifest or raises ManifestError naming `where`."""
    if not isinstance(data, dict) or set(data) != {"repo", "revision", "files"}:
        raise ManifestError(f"{where}: a manifest is an object with exactly repo, revision, files")
    for key in ("repo", "revision"):
        if not isinstance(data[key], str):
            raise ManifestError(f"{where}: {key} must be a string, not {json.dumps(data[key])}")
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
        if not isinstance(item["path"], str):
            raise ManifestError(f"{where}: a path must be a string: {item!r}")
        check_path(item["path"])
        if item["path"] in seen:
            raise ManifestError(f"{where}: {item['path']} listed twice")
        seen.add(item["path"])
        if not isinstance(item["size"], int) or isinstance(item["size"], bool) or item["size"] < 0:
            raise ManifestError(f"{where}: {item['path']}: bad size")
        if not isinstance(item["sha256"], str) or not HEX64.fullmatch(item["sha256"]):
            raise ManifestError(f"{where}: {item['path']}: sha256 must be 64 lowercase hex digits")
        if not isinstance(item["lfs"], bool):
            raise ManifestError(f"{where}: {item['path']}: lfs must be true or false")
    if [f["path"] for f in files] != sorted(seen):
        raise ManifestError(f"{where}: files must be sorted by path")
    return data


def sha256_file(path: Path, progress: Callable[[int], None] | None = None) -> str:
    return content_ids(path, progress)[0]


def content_ids(path: Path, progress: Callable[[int], None] | None = None) -> tuple[str, str, int]:
    """(sha256, git blob id, size) of a file, read once: the two ids the Hub and its cache name content by."""
    size = path.stat().st_size
    sha256 = hashlib.sha256()
    blob = hashlib.sha1(b"blob %d\0" % size)  # git's object header: the id git and the Hub give the file
    done = 0
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            sha256.update(chunk)
            blob.update(chunk)
            done += len(chunk)
            if progress is not None:
                progress(done)
    if done != size:
        raise ManifestError(f"{path} changed size while it was read ({size} then {done} bytes)")
    return sha256.hexdigest(), blob.hexdigest(), size
