"""Wheel stubs: PyPI sdists whose build only downloads the real wheel from another index (NVIDIA's
`wheel-stub` build backend, e.g. cuda-tile). A sandboxed Nix build cannot do that download, so the real
wheel is pinned by URL and hash in nix/pins/wheel-stubs.json.
"""

from __future__ import annotations

import html.parser
import re
import tarfile
import tomllib
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

STUB_BACKEND = "wheel_stub.buildapi"
_WHEEL = re.compile(
    r"(?P<dist>[^-]+)-(?P<version>[^-]+)(?:-(?P<build>\d[^-]*))?-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl"
)


@dataclass(frozen=True)
class SdistOnly:
    """A locked package that uv.lock can fetch only as an sdist."""

    name: str
    version: str
    url: str
    sha256: str


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    sha256: str | None


def normalize(name: str) -> str:
    """PEP 503 normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def sdist_only(uv_lock_text: str) -> list[SdistOnly]:
    """Packages of a uv.lock that have an sdist and no wheel; ValueError naming the package for a lock
    that is not TOML or not of uv's shape (a hand edit, a merge left half done)."""
    try:
        packages = tomllib.loads(uv_lock_text).get("package", [])
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"uv.lock is not TOML ({error}): `nix run .#lock -- uv` writes it again") from None
    if not isinstance(packages, list):
        raise ValueError("uv.lock: `package` must be a list of [[package]] tables")
    out = []
    for package in packages:
        if not isinstance(package, dict) or not all(
            isinstance(package.get(k), str) for k in ("name", "version")
        ):
            raise ValueError(f"uv.lock: a [[package]] without a string name and version: {package!r:.80}")
        sdist = package.get("sdist")
        if sdist and not package.get("wheels"):
            where = f"uv.lock: {package['name']} {package['version']}"
            if not isinstance(sdist, dict) or not all(isinstance(sdist.get(k), str) for k in ("url", "hash")):
                raise ValueError(f"{where}: its sdist needs a url and a hash")
            algo, _, digest = sdist["hash"].partition(":")
            if algo != "sha256":
                raise ValueError(f"{where}: sdist hash is not sha256")
            out.append(SdistOnly(package["name"], package["version"], sdist["url"], digest))
    return out


def stub_index(pyproject_text: str) -> str | None:
    """The index a wheel-stub sdist downloads from, or None when the sdist is a real one."""
    data = tomllib.loads(pyproject_text)
    if data.get("build-system", {}).get("build-backend") != STUB_BACKEND:
        return None
    index = data.get("tool", {}).get("wheel_stub", {}).get("index_url")
    if not isinstance(index, str) or not index.startswith(("https://", "http://")):
        raise ValueError("a wheel-stub sdist without [tool.wheel_stub] index_url")
    return index


def sdist_pyproject(archive: Path) -> str:
    """pyproject.toml at the top of an sdist (`<name>-<version>/pyproject.toml`)."""
    with tarfile.open(archive, "r:*") as tar:
        for member in tar:
            parts = member.name.split("/")
            if len(parts) == 2 and parts[1] == "pyproject.toml" and member.isreg():
                extracted = tar.extractfile(member)
                if extracted is not None:
                    return extracted.read().decode()
    raise ValueError(f"{archive.name} has no top-level pyproject.toml")


class _Anchors(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href")
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.links.append((self._href, "".join(self._text).strip()))
            self._href = None


def parse_simple_index(page: str, page_url: str) -> list[IndexFile]:
    """Files of a PEP 503 project page: absolute URLs, sha256 from the `#sha256=` fragment when given."""
    parser = _Anchors()
    parser.feed(page)
    files = []
    for href, text in parser.links:
        absolute = urllib.parse.urljoin(page_url, href)
        base, _, fragment = absolute.partition("#")
        filename = urllib.parse.unquote(base.rsplit("/", 1)[-1]) or text
        sha256 = fragment[len("sha256=") :] if fragment.startswith("sha256=") else None
        files.append(IndexFile(filename, base, sha256))
    return files


def _rank(py: str, abi: str, python: str) -> int | None:
    """How well a wheel's tags suit CPython `python` (e.g. cp312); None when they do not."""
    pys, abis = py.split("."), abi.split(".")
    if python in pys and python in abis:
        return 3
    if python in pys and "none" in abis:
        return 2
    if "abi3" in abis and any(
        p.startswith("cp3") and int(p[3:]) <= int(python[3:]) for p in pys if p[3:].isdigit()
    ):
        return 1
    if ("py3" in pys or "py2.py3" in py) and "none" in abis:
        return 0
    return None


_LEGACY_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


def _glibc(platform: str) -> tuple[int, int]:
    """The glibc a platform tag needs; like pip, the newest one wins among equally ranked wheels
    (Nix's glibc is recent). A plain `linux_*` tag ranks lowest."""
    legacy = _LEGACY_MANYLINUX.get(platform.split("_")[0])
    if legacy is not None:
        return legacy
    match = re.match(r"manylinux_(\d+)_(\d+)_", platform)
    return (int(match[1]), int(match[2])) if match else (0, 0)


def select_wheel(files: list[IndexFile], name: str, version: str, python: str, arch: str) -> IndexFile:
    """The wheel of `name==version` for Linux `arch` and CPython `python`: most specific Python tags
    first, then the newest manylinux; two wheels still tied are an error."""
    ranked: list[tuple[tuple[int, tuple[int, int]], IndexFile]] = []
    for item in files:
        match = _WHEEL.fullmatch(item.filename)
        if not match or normalize(match["dist"]) != normalize(name) or match["version"] != version:
            continue
        plats = match["plat"].split(".")
        plats = [
            p for p in plats if p == f"linux_{arch}" or (p.startswith("manylinux") and p.endswith(f"_{arch}"))
        ]
        if not plats:
            continue
        rank = _rank(match["py"], match["abi"], python)
        if rank is not None:
            ranked.append(((rank, max(_glibc(p) for p in plats)), item))
    if not ranked:
        names = sorted(f.filename for f in files)[:10]
        raise ValueError(f"no {name}=={version} wheel for {python} on linux {arch} among {names}")
    best = max(rank for rank, _ in ranked)
    top = [item for rank, item in ranked if rank == best]
    if len(top) > 1:
        raise ValueError(f"{name}=={version}: several equally suitable wheels {[f.filename for f in top]}")
    return top[0]
