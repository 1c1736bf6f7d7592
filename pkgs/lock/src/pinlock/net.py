"""Everything that touches the network: resumable downloads with progress on stderr, JSON APIs with
Link-header pagination, and the Hugging Face token. The rest of pinlock is pure and tested offline."""

from __future__ import annotations

import json
import os
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

USER_AGENT = "pinlock/0.1 (bitexact-sglang lock tool)"
_LINK_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')


class NetError(RuntimeError):
    """A request failed; the message names the URL and what to do."""


def hf_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def hf_headers(url: str) -> dict[str, str]:
    """Authorization for the Hub only (gated repos); the token is read here and never stored."""
    token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    same_host = urllib.parse.urlsplit(url).hostname == urllib.parse.urlsplit(hf_endpoint()).hostname
    return {"Authorization": f"Bearer {token}"} if token and same_host else {}


def _size(count: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


class Progress:
    """`label  12.0 MiB of 340.5 MiB  8.1 MiB/s` on stderr: redrawn on a terminal, else a line every 10 s."""

    def __init__(self, label: str, total: int | None) -> None:
        self.label, self.total = label, total
        self.start = self.last = time.monotonic()
        self.tty = sys.stderr.isatty()

    def __call__(self, done: int, final: bool = False) -> None:
        now = time.monotonic()
        if not final and now - self.last < (0.5 if self.tty else 10.0):
            return
        self.last = now
        total = f" of {_size(self.total)}" if self.total else ""
        rate = done / max(now - self.start, 1e-6)
        line = f"{self.label}  {_size(done)}{total}  {_size(int(rate))}/s"
        end = "\n" if final or not self.tty else ""
        print(("\r\033[K" if self.tty else "") + line, end=end, file=sys.stderr, flush=True)


class _NoCredentialsAcrossHosts(urllib.request.HTTPRedirectHandler):
    """Follow redirects, but never carry the Authorization header to another host (urllib would;
    the Hub redirects file downloads to a CDN)."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: Any,
        code: int,
        msg: str,
        headers: Any,
        newurl: str,
    ) -> urllib.request.Request | None:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if (
            new is not None
            and urllib.parse.urlsplit(newurl).netloc != urllib.parse.urlsplit(req.full_url).netloc
        ):
            new.headers = {k: v for k, v in new.headers.items() if k.lower() != "authorization"}
            new.unredirected_hdrs = {
                k: v for k, v in new.unredirected_hdrs.items() if k.lower() != "authorization"
            }
        return new


_OPENER = urllib.request.build_opener(_NoCredentialsAcrossHosts)


def _open(request: urllib.request.Request, what: str) -> Any:
    try:
        return _OPENER.open(request, timeout=60)
    except urllib.error.HTTPError as error:
        hint = {
            401: "authentication required: for a gated Hugging Face repo set HF_TOKEN to a read token",
            403: "access denied: accept the repo's terms on its page and set HF_TOKEN",
            404: "not found: check the repo name and the revision",
            429: "rate limited: wait and run again (finished pins are kept)",
        }.get(error.code, "")
        raise NetError(f"{what}: HTTP {error.code} {error.reason}" + (f" ({hint})" if hint else "")) from None
    except urllib.error.URLError as error:
        raise NetError(f"{what}: {error.reason} (is this machine online?)") from None


def get_json_pages(url: str, headers: dict[str, str] | None = None) -> list[Any]:
    """All items of a JSON list API, following `Link: <...>; rel="next"` pages."""
    items: list[Any] = []
    next_url: str | None = url
    while next_url:
        request = urllib.request.Request(next_url, headers={"User-Agent": USER_AGENT, **(headers or {})})
        with _open(request, f"GET {next_url}") as response:
            page = json.load(response)
            link = response.headers.get("Link", "")
        if not isinstance(page, list):
            raise NetError(f"GET {next_url}: expected a JSON list, got {type(page).__name__}")
        items += page
        match = _LINK_NEXT.search(link)
        next_url = urllib.parse.urljoin(next_url, match.group(1)) if match else None
    return items


def get_text(url: str) -> str:
    """The body of a page (e.g. a PEP 503 simple index page)."""
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, "Accept": "text/html"})
    with _open(request, f"GET {url}") as response:
        body: bytes = response.read()
    return body.decode()


def download(url: str, dest: Path, label: str, headers: dict[str, str] | None = None) -> Path:
    """Download `url` to `dest` (atomic rename at the end); an interrupted download resumes from
    `dest.part` when the server honours Range. An existing `dest` is reused as is."""
    if dest.exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    have = part.stat().st_size if part.exists() else 0
    request_headers = {"User-Agent": USER_AGENT, **(headers or {})}
    if have:
        request_headers["Range"] = f"bytes={have}-"
    with _open(urllib.request.Request(url, headers=request_headers), f"download {url}") as response:
        resumed = response.status == 206
        if not resumed:
            have = 0
        length = response.headers.get("Content-Length")
        total = have + int(length) if length and length.isdigit() else None
        progress = Progress(label, total)
        with part.open("ab" if resumed else "wb") as out:
            done = have
            while chunk := response.read(1 << 20):
                out.write(chunk)
                done += len(chunk)
                progress(done)
        progress(done, final=True)
    if total is not None and part.stat().st_size != total:
        raise NetError(f"download {url}: got {part.stat().st_size} of {total} bytes; run again to resume")
    os.replace(part, dest)
    return dest


def github_tarball_url(owner: str, repo: str, rev: str) -> str:
    """The archive fetchFromGitHub downloads (`git archive` of the commit, gzip)."""
    return f"https://github.com/{owner}/{repo}/archive/{rev}.tar.gz"


def hf_tree_url(repo: str, revision: str) -> str:
    """huggingface_hub's list_repo_tree endpoint, recursive, without the expensive `expand`."""
    rev = urllib.parse.quote(revision, safe="")
    return f"{hf_endpoint()}/api/models/{repo}/tree/{rev}?recursive=true&expand=false"


def hf_file_url(repo: str, revision: str, path: str) -> str:
    return f"{hf_endpoint()}/{repo}/resolve/{revision}/{urllib.parse.quote(path)}"
