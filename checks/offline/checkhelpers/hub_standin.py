"""A stand-in for the Hugging Face Hub on 127.0.0.1, serving real git repositories (LFS files committed as
git-lfs pointers, as the Hub stores them), so that huggingface_hub itself can list, download and write its
cache offline.

It answers what huggingface_hub 1.32.0 (the server lock's version) asks, read from its source:
- `HfApi.list_repo_tree` (hf_api.py): GET /api/models/{repo}/tree/{rev}[/{path}]?recursive=&expand=,
  pages chained by `Link: <url>; rel="next"` (utils/_pagination.py); entries as `RepoFile(**entry)` and
  `RepoFolder(**entry)` read them: type, path, oid, size, lfs {oid, size, pointerSize}.
- `HfApi.repo_info` (hf_api.py, `ModelInfo(**data)`): GET /api/models/{repo}/revision/{rev} -> id, sha,
  siblings; snapshot_download calls it for a branch name and records refs/<branch>.
- `get_hf_file_metadata` (file_download.py): HEAD /{repo}/resolve/{rev}/{path}, reading X-Repo-Commit,
  X-Linked-Etag or ETag, X-Linked-Size or Content-Length, and Location; it follows redirects on the Hub's
  own host only (utils/_http.py `_httpx_follow_hub_redirects_with_backoff`), so an LFS file answers 302 to a
  CDN on another host (here 127.0.0.2), as the Hub does. `http_get` then GETs the Location, resuming with
  `Range: bytes=N-` after a cut connection.
- errors (utils/_http.py `hf_raise_for_status`): X-Error-Code RevisionNotFound, EntryNotFound, GatedRepo,
  RepoNotFound.
Object ids and sizes come from git itself (`git ls-tree -r -t -l`), not from our own hashing.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import subprocess
import threading
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkhelpers.lock_testing import git_repo


def lfs_pointer(data: bytes) -> bytes:
    """The git-lfs pointer committed in place of an LFS file (git-lfs spec v1)."""
    sha = hashlib.sha256(data).hexdigest()
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha}\nsize {len(data)}\n".encode()


@dataclass
class HubRepo:
    """A repository as the Hub holds it: a git commit, plus the content of its LFS files."""

    repo_id: str
    git_dir: Path
    commit: str
    contents: dict[str, bytes]
    lfs: frozenset[str]
    refs: dict[str, str] = field(default_factory=dict)

    @classmethod
    def create(cls, root: Path, repo_id: str, files: dict[str, bytes], lfs: set[str]) -> HubRepo:
        committed = {path: (lfs_pointer(data) if path in lfs else data) for path, data in files.items()}
        commit = git_repo(root / repo_id.replace("/", "--"), committed)
        repo = cls(repo_id, root / repo_id.replace("/", "--"), commit, dict(files), frozenset(lfs))
        repo.refs["main"] = commit
        return repo

    def entries(self) -> list[dict[str, Any]]:
        """The tree API's entries for the commit, from git's own listing."""
        listing = subprocess.run(
            ["git", "-C", str(self.git_dir), "ls-tree", "-r", "-t", "-l", self.commit],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        out: list[dict[str, Any]] = []
        for line in listing.splitlines():
            meta, path = line.split("\t", 1)
            _, kind, oid, size = meta.split()
            if kind == "tree":
                out.append({"type": "directory", "oid": oid, "size": 0, "path": path})
                continue
            entry: dict[str, Any] = {"type": "file", "oid": oid, "size": int(size), "path": path}
            if path in self.lfs:
                data = self.contents[path]
                entry["size"] = len(data)
                entry["lfs"] = {
                    "oid": hashlib.sha256(data).hexdigest(),
                    "size": len(data),
                    "pointerSize": int(size),
                }
            out.append(entry)
        return out


class _Handler(http.server.BaseHTTPRequestHandler):
    hub: HubStandIn
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_HEAD(self) -> None:  # noqa: N802 (http.server's name)
        self._answer(body=False)

    def do_GET(self) -> None:  # noqa: N802
        self._answer(body=True)

    def _send(self, status: int, headers: dict[str, str], data: bytes = b"", body: bool = True) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        if "Content-Length" not in headers:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body and data:
            self.wfile.write(data)

    def _error(self, status: int, code: str, body: bool) -> None:
        message = json.dumps({"error": code}).encode()
        self._send(status, {"X-Error-Code": code, "Content-Type": "application/json"}, message, body)

    def _answer(self, body: bool) -> None:
        hub = self.hub
        url = urllib.parse.urlsplit(self.path)
        hub.requests.append(
            (self.command, url.path, self.headers.get("Authorization"), self.headers.get("Range"))
        )
        status = hub.fail_once.pop(url.path, None)
        if status is not None:
            self._error(status, "Injected", body)
            return
        if url.path.startswith("/cdn/"):
            self._content(hub.blobs.get(url.path[len("/cdn/") :]), url.path, body)
            return
        parts = url.path.strip("/").split("/")
        api = parts[:2] == ["api", "models"]
        repo_id = "/".join(parts[2:4] if api else parts[0:2])
        repo = hub.repos.get(repo_id)
        if repo is None:
            self._error(401, "RepoNotFound", body)
            return
        if hub.gated_token and self.headers.get("Authorization") != f"Bearer {hub.gated_token}":
            self._error(401, "GatedRepo", body)
            return
        rest = parts[4:] if api else parts[2:]
        if len(rest) < 2 or rest[0] not in ("tree", "revision", "resolve"):
            self._error(404, "NotFound", body)
            return
        rev = urllib.parse.unquote(rest[1])
        commit = repo.refs.get(rev, rev)
        if commit != repo.commit:
            self._error(404, "RevisionNotFound", body)
            return
        if rest[0] == "revision":
            siblings = [{"rfilename": e["path"]} for e in repo.entries() if e["type"] == "file"]
            info = {"id": repo.repo_id, "sha": commit, "siblings": siblings}
            self._send(200, {"Content-Type": "application/json"}, json.dumps(info).encode(), body)
        elif rest[0] == "tree":
            self._tree(repo, "/".join(rest[2:]), urllib.parse.parse_qs(url.query), body)
        else:
            self._resolve(repo, urllib.parse.unquote("/".join(rest[2:])), body)

    def _tree(self, repo: HubRepo, under: str, query: dict[str, list[str]], body: bool) -> None:
        recursive = query.get("recursive", ["false"])[0].lower() == "true"
        entries = [
            e
            for e in repo.entries()
            if (not under or e["path"].startswith(under + "/"))
            and (recursive or "/" not in e["path"][len(under) + 1 if under else 0 :])
        ]
        start = int(query.get("cursor", ["0"])[0])
        page = entries[start : start + self.hub.page_size]
        headers = {"Content-Type": "application/json"}
        if start + self.hub.page_size < len(entries):
            params = {k: v[0] for k, v in query.items()} | {"cursor": str(start + self.hub.page_size)}
            path = self.path.split("?")[0]
            headers["Link"] = f'<{self.hub.url}{path}?{urllib.parse.urlencode(params)}>; rel="next"'
        self._send(200, headers, json.dumps(page).encode(), body)

    def _resolve(self, repo: HubRepo, path: str, body: bool) -> None:
        entry = next((e for e in repo.entries() if e["path"] == path and e["type"] == "file"), None)
        if entry is None:
            self._error(404, "EntryNotFound", body)
            return
        data = repo.contents[path]
        common = {"X-Repo-Commit": repo.commit}
        if "lfs" in entry:
            sha = entry["lfs"]["oid"]
            redirect = common | {
                "Location": f"{self.hub.cdn_url}/cdn/{sha}",
                "X-Linked-Etag": f'"{sha}"',
                "X-Linked-Size": str(len(data)),
                "ETag": f'"{entry["oid"]}"',
            }
            self._send(302, redirect, b"", body)
            return
        self._content(
            data,
            f"/{repo.repo_id}/resolve/{repo.commit}/{path}",
            body,
            common | {"ETag": f'"{entry["oid"]}"'},
        )

    def _content(
        self, data: bytes | None, key: str, body: bool, headers: dict[str, str] | None = None
    ) -> None:
        if data is None:
            self._error(404, "EntryNotFound", body)
            return
        headers = dict(headers or {})
        start = 0
        wanted = self.headers.get("Range")
        if wanted and wanted.startswith("bytes="):
            start = int(wanted[len("bytes=") :].split("-")[0])
        status = 206 if start else 200
        if start:
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        headers["Content-Length"] = str(len(data) - start)
        if body and key in self.hub.cut_once:
            # Announce the whole body, send half of it, drop the connection: a transfer cut mid-way.
            self.hub.cut_once.discard(key)
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data[start : start + (len(data) - start) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self._send(status, headers, data[start:], body)


class HubStandIn:
    """The server; `url` is its endpoint (HF_ENDPOINT). Injected faults apply once each."""

    def __init__(self, repos: list[HubRepo], page_size: int = 3) -> None:
        self.repos = {r.repo_id: r for r in repos}
        self.page_size = page_size
        self.requests: list[tuple[str, str, str | None, str | None]] = []
        self.fail_once: dict[str, int] = {}  # URL path -> HTTP status answered once
        self.cut_once: set[str] = set()  # content path (/cdn/<sha> or /{repo}/resolve/{commit}/{path})
        self.gated_token: str | None = None
        self.blobs = {
            hashlib.sha256(data).hexdigest(): data
            for repo in repos
            for path, data in repo.contents.items()
            if path in repo.lfs
        }
        handler = type("Handler", (_Handler,), {"hub": self})
        # The Hub on 127.0.0.1, its CDN on another loopback address (another host to huggingface_hub).
        self.servers = [
            http.server.ThreadingHTTPServer((host, 0), handler) for host in ("127.0.0.1", "127.0.0.2")
        ]
        self.url, self.cdn_url = (f"http://{s.server_address[0]}:{s.server_address[1]}" for s in self.servers)

    def __enter__(self) -> HubStandIn:
        for server in self.servers:
            threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()
