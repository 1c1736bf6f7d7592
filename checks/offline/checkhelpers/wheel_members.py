"""Single files from released wheels, read with HTTP range requests (zipfile reads the wheel's directory
and the member; a 197 MB triton wheel costs a few hundred kB), cached under the artifacts directory.

`locked_member` takes the wheel uv.lock pins (pkgs/server-env/uv.lock); `pypi_member` asks PyPI's simple
index (PEP 691 JSON) for a release's wheel for CPython 3.12 on x86_64 Linux (the lent H200's triton 3.6.0
is not locked), and checks the member against the wheel's own RECORD.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tomllib
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

from wheel_elf_needs import chosen_wheel, wheel_rank

from checkhelpers.released_wheels import cache_dir
from checkhelpers.repo import REPO


class RangeReader(io.RawIOBase):
    """A seekable read-only file over HTTP range requests (zipfile reads only what it needs)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.pos = 0
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=120) as reply:
            self.size = int(reply.headers["Content-Length"])

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = base + offset
        return self.pos

    def readinto(self, buffer: Any) -> int:
        count = min(len(buffer), self.size - self.pos)
        if count <= 0:
            return 0
        headers = {"Range": f"bytes={self.pos}-{self.pos + count - 1}"}
        with urllib.request.urlopen(urllib.request.Request(self.url, headers=headers), timeout=300) as reply:
            data = reply.read()
        buffer[: len(data)] = data
        self.pos += len(data)
        return len(data)


def _member(url: str, member: str, cached: Path) -> str:
    if not cached.exists():
        with zipfile.ZipFile(RangeReader(url)) as wheel:
            data = wheel.read(member)
            (record,) = [n for n in wheel.namelist() if n.endswith(".dist-info/RECORD")]
            rows = [r.split(",") for r in wheel.read(record).decode().splitlines()]
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert [f"sha256={digest}"] == [r[1] for r in rows if r[0] == member], f"{member} differs from RECORD"
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_bytes(data)
    return cached.read_text()


def _cached(name: str, version: str, member: str) -> Path:
    return cache_dir() / "wheel-members" / f"{name}-{version}" / member


def locked_member(name: str, member: str) -> tuple[str, str]:
    """(version, text) of `member` in the wheel uv.lock pins for `name`."""
    lock = tomllib.loads((REPO / "pkgs" / "server-env" / "uv.lock").read_text())
    (package,) = [p for p in lock["package"] if p["name"] == name]
    wheel = chosen_wheel(package)
    assert wheel is not None, f"uv.lock has no usable wheel for {name}"
    return package["version"], _member(wheel["url"], member, _cached(name, package["version"], member))


def pypi_member(name: str, version: str, member: str) -> str:
    """`member` of `name==version`'s wheel for CPython 3.12 on x86_64 Linux, as PyPI serves it."""
    cached = _cached(name, version, member)
    if cached.exists():
        return cached.read_text()
    request = urllib.request.Request(
        f"https://pypi.org/simple/{name}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(request, timeout=120) as reply:
        files = [f for f in json.load(reply)["files"] if f["filename"].startswith(f"{name}-{version}-")]
    ranked = [(wheel_rank(f["filename"]), f) for f in files if f["filename"].endswith(".whl")]
    usable = [(rank, f) for rank, f in ranked if rank is not None]
    assert usable, f"PyPI has no wheel of {name}=={version} for CPython 3.12 on x86_64 Linux"
    return _member(max(usable, key=lambda item: item[0])[1]["url"], member, cached)
