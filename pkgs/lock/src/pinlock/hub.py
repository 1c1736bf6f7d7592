"""Weights manifests from the Hub, through huggingface_hub.

`HfApi.list_repo_tree` (recursive) gives every file's size and git blob id and, for an LFS file, its
sha256 (the LFS oid) without downloading it; the other files are fetched with `hf_hub_download`, which
resumes an interrupted transfer and retries it, and are checked against the tree (size and git blob id)
before their sha256 is pinned. huggingface_hub retries some requests and not others (the first page of
a tree listing, for one), so every call is also retried here on transient failures (connection errors,
timeouts, HTTP 429 and 5xx), with backoff. HF_TOKEN and HF_ENDPOINT are huggingface_hub's own settings.
"""

from __future__ import annotations

import json
import os
import re
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.hf_api import RepoFile
from huggingface_hub.utils import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from pinlock.hf import HEX64, ManifestError, check_path, content_ids, manifest
from pinlock.net import ATTEMPTS, RETRY_STATUS, backoff, unreachable
from pinlock.pins import PinError

T = TypeVar("T")
RETRY_DELAY = 2.0  # seconds, times the attempt number (its own, so tests can shorten either)
# Transport failures by class name: huggingface_hub raises its HTTP client's own (requests in 0.x, httpx
# in 1.x, httpx2 later), and a check by name holds across them.
_TRANSPORT = frozenset(
    {"TransportError", "ConnectionError", "Timeout", "TimeoutException", "ChunkedEncodingError"}
)


def endpoint() -> str | None:
    """HF_ENDPOINT as set now (huggingface_hub reads it once, at import)."""
    return os.environ.get("HF_ENDPOINT") or None


def _first_line(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__


def _transient(error: BaseException) -> bool:
    if isinstance(error, OfflineModeIsEnabled):
        return False
    if isinstance(error, HfHubHTTPError):
        response = getattr(error, "response", None)
        return getattr(response, "status_code", None) in RETRY_STATUS
    if isinstance(error, LocalEntryNotFoundError):
        return True  # hf_hub_download's answer when the Hub cannot be reached and nothing is cached
    names = {cls.__name__ for cls in type(error).__mro__}
    return bool(names & _TRANSPORT) or isinstance(error, (ConnectionError, TimeoutError))


def with_retries(call: Callable[[], T], what: str) -> T:
    """`call()`, retried on transient failures; other failures and the last one propagate."""

    def announce(error: Exception, wait: float, attempt: int) -> None:
        print(
            f"pinlock: {what}: {_first_line(error)}; "
            f"retrying in {wait:.0f} s ({attempt} of {ATTEMPTS - 1} retries)",
            file=sys.stderr,
            flush=True,
        )

    return backoff(call, _transient, announce, RETRY_DELAY)


def explain(error: Exception, repo: str, revision: str) -> PinError:
    """One line naming what failed and what to do, for huggingface_hub's errors."""
    where = f"{repo}@{revision}"
    if isinstance(error, OfflineModeIsEnabled):
        return PinError(
            f"{where}: HF_HUB_OFFLINE is set; unset it to read the Hub, or pin from a cache with --snapshot"
        )
    if isinstance(error, GatedRepoError):
        return PinError(
            f"{where}: a gated repo: accept its terms on the Hub and set HF_TOKEN to a read token"
        )
    if isinstance(error, RevisionNotFoundError):
        return PinError(f"{where}: the Hub has no such revision: check the commit")
    if isinstance(error, RepositoryNotFoundError):
        return PinError(f"{where}: the Hub has no such repo (or it is private: set HF_TOKEN): check the name")
    if isinstance(error, EntryNotFoundError):
        return PinError(f"{where}: a file the tree lists cannot be downloaded ({error})")
    if _transient(error):
        return PinError(
            f"{where}: {_first_line(error)}, {ATTEMPTS} attempts: is this machine online? "
            "Run again; finished pins are kept"
        )
    return PinError(f"{where}: {_first_line(error)}")


def tree(repo: str, revision: str) -> list[RepoFile]:
    """The files of repo@revision, as list_repo_tree gives them (folders dropped)."""
    api = HfApi(endpoint=endpoint())
    entries: list[Any] = with_retries(
        lambda: list(api.list_repo_tree(repo, revision=revision, recursive=True, expand=False)),
        f"list {repo}@{revision[:12]}",
    )
    return [entry for entry in entries if isinstance(entry, RepoFile)]


def listing_once(repo: str, revision: str) -> tuple[dict[str, int] | None, str]:
    """({path: size} of repo@revision, "") from one try at the Hub's tree API, or (None, why) when it cannot
    be had. A snapshot check asks once and goes on without it: it neither waits out huggingface_hub's
    retries offline nor asks when HF_HUB_OFFLINE is set. The API as hub_standin.py documents it:
    GET /api/models/{repo}/tree/{rev}?recursive=true, pages chained by `Link: <url>; rel="next"`."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return None, "HF_HUB_OFFLINE is set"
    base = (endpoint() or "https://huggingface.co").rstrip("/")
    url: str | None = f"{base}/api/models/{repo}/tree/{revision}?recursive=true&expand=false"
    headers = {"User-Agent": "pinlock"}
    token = os.environ.get("HF_TOKEN")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    sizes: dict[str, int] = {}
    try:
        while url:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=20) as answer:
                for entry in json.loads(answer.read().decode("utf-8")):
                    if entry.get("type") == "file":
                        sizes[entry["path"]] = int(entry["size"])
                found = re.search(r'<([^>]+)>;\s*rel="next"', answer.headers.get("Link") or "")
                url = found.group(1) if found else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:  # no route, HTTP, bad JSON
        return None, _first_line(error)
    return sizes, ""


def _lfs_sha256(item: RepoFile) -> str | None:
    lfs = item.lfs
    if lfs is None:
        return None
    sha256 = (
        lfs.sha256 if hasattr(lfs, "sha256") else lfs["sha256"]
    )  # a dataclass, or a dict in older versions
    size = lfs.size if hasattr(lfs, "size") else lfs["size"]
    if not isinstance(sha256, str) or not HEX64.fullmatch(sha256):
        raise ManifestError(f"{item.path}: LFS oid is not a sha256: {sha256!r}")
    if size != item.size:
        raise ManifestError(f"{item.path}: LFS size {size} differs from file size {item.size}")
    return sha256


def manifest_from_hub(repo: str, revision: str, cache_dir: Path) -> dict[str, Any]:
    """The manifest of repo@revision: LFS files from the tree, the others downloaded into `cache_dir`
    (a hub cache, so a rerun reuses them) and checked against the tree before they are hashed. Offline,
    it says so within seconds (one look at the Hub first), not after every retry of every request."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() not in ("1", "true", "yes", "on"):
        away = unreachable(
            endpoint() or "https://huggingface.co",
            "the Hub",
            "Run where the Hub is reachable, or pin from a local hub cache: "
            f"pinlock weights {repo}@{revision} --snapshot ~/.cache/huggingface/hub",
        )
        if away is not None:
            raise PinError(f"{repo}@{revision}: {away}")
    try:
        files = tree(repo, revision)
    except Exception as error:  # huggingface_hub's and its HTTP client's, said in one line
        raise explain(error, repo, revision) from None
    if not files:
        raise PinError(f"{repo}@{revision}: the Hub lists no files")
    out = []
    for item in files:
        check_path(item.path)
        if not isinstance(item.size, int) or item.size < 0:
            raise ManifestError(f"{item.path}: bad size {item.size!r}")
        sha256 = _lfs_sha256(item)
        if sha256 is None:
            sha256 = _small_file_sha256(repo, revision, item, cache_dir)
        out.append({"path": item.path, "size": item.size, "sha256": sha256, "lfs": item.lfs is not None})
    return manifest(repo, revision, out, f"{repo}@{revision}")


def _small_file_sha256(repo: str, revision: str, item: RepoFile, cache_dir: Path) -> str:
    def download() -> str:
        return hf_hub_download(
            repo, item.path, revision=revision, cache_dir=str(cache_dir), endpoint=endpoint()
        )

    try:
        path = Path(with_retries(download, f"download {repo}/{item.path}"))
    except Exception as error:
        raise explain(error, repo, revision) from None
    sha256, blob_id, size = content_ids(path)
    if (size, blob_id) != (item.size, item.blob_id):
        blob = path.resolve()
        blob.unlink(missing_ok=True)  # huggingface_hub would serve the bad copy again
        raise PinError(
            f"{repo}/{item.path}: downloaded {size} bytes with git blob id {blob_id}, the Hub's tree lists "
            f"{item.size} bytes, {item.blob_id}; the cached copy was removed: run again"
        )
    return sha256
