"""Downloads from GitHub and package indexes: resumed from the partial file and retried on transient
failures, with progress on stderr. (The Hub is reached through huggingface_hub, in pinlock.hub.)"""

from __future__ import annotations

import http.client
import os
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from pinlock.pins import write_problem

USER_AGENT = "pinlock/0.1 (bitexact-sglang lock tool)"
T = TypeVar("T")


class NetError(RuntimeError):
    """A request failed; the message names the URL and what to do."""


REACH_S = 5.0  # seconds for one look at whether a host answers at all


def unreachable(url: str, what: str, fix: str) -> NetError | None:
    """A NetError saying `what` at `url` cannot be reached from here (no route, no name, no answer within
    REACH_S), or None when a TCP connection opens. One look before work that would otherwise wait out
    every retry of a client that cannot know the machine is offline. Through the proxy the environment
    names for the URL's scheme, where one is set (a proxy is then all that must answer)."""
    parts = urlsplit(url)
    proxy = urllib.request.getproxies().get(parts.scheme or "https")
    if proxy and not urllib.request.proxy_bypass(parts.hostname or ""):
        parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=REACH_S):
            return None
    except socket.gaierror as error:
        reason = f"the name {host} does not resolve ({error.strerror or error})"
    except TimeoutError:
        reason = f"{host}:{port} did not answer within {REACH_S:.0f} s"
    except OSError as error:
        reason = f"{host}:{port}: {error.strerror or error}"
    return NetError(f"{what} at {url} cannot be reached from here: {reason}; is this machine online? {fix}")


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


class TransientError(NetError):
    """A failure that may pass: a connection error, a timeout, a cut body, HTTP 429 or 5xx."""


ATTEMPTS = 5
RETRY_DELAY = 2.0  # seconds, times the attempt number
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


def _open(request: urllib.request.Request, what: str) -> Any:
    try:
        return urllib.request.urlopen(request, timeout=60)
    except urllib.error.HTTPError as error:
        hint = {
            403: "access denied",
            404: "not found: check the URL's repo and revision",
            429: "rate limited: wait and run again (finished pins are kept)",
        }.get(error.code, "")
        kind = TransientError if error.code in RETRY_STATUS else NetError
        raise kind(f"{what}: HTTP {error.code} {error.reason}" + (f" ({hint})" if hint else "")) from None
    except urllib.error.URLError as error:
        raise TransientError(f"{what}: {error.reason} (is this machine online?)") from None
    except (ConnectionError, TimeoutError, http.client.HTTPException) as error:
        raise TransientError(f"{what}: {type(error).__name__}: {error}") from None


def backoff(
    call: Callable[[], T],
    transient: Callable[[Exception], bool],
    announce: Callable[[Exception, float, int], None],
    delay: float,
) -> T:
    """`call()`, retried up to ATTEMPTS times, `delay` x attempt seconds apart, while it fails with an
    error `transient` accepts (`announce` says so first); other failures and the last one propagate."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return call()
        except Exception as error:
            if attempt == ATTEMPTS or not transient(error):
                raise
            wait = delay * attempt
            announce(error, wait, attempt)
            time.sleep(wait)
    raise AssertionError("unreachable")


def _retrying(call: Callable[[], T], what: str) -> T:
    """`call()`, retried with backoff while it fails with a TransientError."""

    def announce(error: Exception, wait: float, attempt: int) -> None:
        print(f"pinlock: {error}; retrying in {wait:.0f} s", file=sys.stderr, flush=True)

    try:
        return backoff(call, lambda e: isinstance(e, TransientError), announce, RETRY_DELAY)
    except TransientError as error:
        raise TransientError(f"{error}; gave up after {ATTEMPTS} attempts") from None


def get_text(url: str) -> str:
    """The body of a page (e.g. a PEP 503 simple index page)."""

    def fetch() -> str:
        request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, "Accept": "text/html"})
        with _open(request, f"GET {url}") as response:
            try:
                body: bytes = response.read()
            except (ConnectionError, TimeoutError, http.client.HTTPException) as error:
                raise TransientError(f"GET {url}: {type(error).__name__}: {error}") from None
        return body.decode()

    return _retrying(fetch, f"GET {url}")


def download(url: str, dest: Path, label: str) -> Path:
    """Download `url` to `dest` (atomic rename at the end). A failed or interrupted transfer resumes from
    `dest.part` (when the server honours Range), within this run (retries) and in the next one. An
    existing `dest` is reused as is."""
    if dest.exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    _retrying(lambda: _fetch_part(url, part, label), f"download {url}")
    os.replace(part, dest)
    return dest


def _fetch_part(url: str, part: Path, label: str) -> None:
    have = part.stat().st_size if part.exists() else 0
    request_headers = {"User-Agent": USER_AGENT}
    if have:
        request_headers["Range"] = f"bytes={have}-"
    with _open(urllib.request.Request(url, headers=request_headers), f"download {url}") as response:
        resumed = response.status == 206
        if not resumed:
            have = 0
        length = response.headers.get("Content-Length")
        total = have + int(length) if length and length.isdigit() else None
        progress = Progress(label, total)
        done = have
        try:
            with part.open("ab" if resumed else "wb") as out:
                while chunk := response.read(1 << 20):
                    out.write(chunk)
                    done += len(chunk)
                    progress(done)
        except (ConnectionError, TimeoutError, http.client.HTTPException) as error:
            raise TransientError(
                f"download {url}: cut after {done} bytes ({type(error).__name__}), {done} kept in {part}"
            ) from None
        except OSError as error:  # the disk, not the network: a retry would meet it again
            kept = (
                f"the {done} bytes written are kept there, and a rerun resumes; or give --cache-dir elsewhere"
            )
            raise NetError(f"download {url}: {write_problem(error, part, kept)}") from None
        progress(done, final=True)
    if total is not None and done != total:
        raise TransientError(f"download {url}: got {done} of {total} bytes, kept in {part}")


def github_tarball_url(owner: str, repo: str, rev: str) -> str:
    """The archive fetchFromGitHub downloads (`git archive` of the commit, gzip)."""
    return f"https://github.com/{owner}/{repo}/archive/{rev}.tar.gz"
