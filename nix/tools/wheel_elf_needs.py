"""Which shared libraries the locked wheels need from each other, from nixpkgs, or from the driver.

Each wheel is its own store path in the uv2nix set, so a library that one wheel loads from another
(torch -> nvidia-cublas, ...) must be put on autoPatchelf's search path, and a library nobody ships
(libcuda.so.1: the driver) must be ignored. This tool reads DT_NEEDED/DT_SONAME of every ELF file in
the wheels of pkgs/server-env/uv.lock (HTTP range requests: only the zip directory and each ELF's
start up to its dynamic section are downloaded) and writes pkgs/server-env/elf-needs.json, which
pkgs/server-env/fixups.nix reads. Rerun after every change of uv.lock:

    python3 nix/tools/wheel_elf_needs.py pkgs/server-env/uv.lock pkgs/server-env/elf-needs.json
"""

from __future__ import annotations

import argparse
import io
import json
import re
import struct
import sys
import tomllib
import urllib.request
import zipfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

PYTHON_TAG = "cp312"  # the Nix set's interpreter (pkgs/server-env/default.nix: python312)
EM_X86_64 = 62
# Libraries autoPatchelf treats as found without a search path: glibc's (it checks glibc's lib
# directory) and the compiler runtime that pythonManylinuxPackages puts in every wheel's buildInputs.
SYSTEM = re.compile(
    r"^(?:(?:libc|libm|libmvec|libdl|libpthread|librt|libutil|libresolv|libcrypt|libanl|libnsl)\.so(?:\.\d+)?"
    r"|ld-linux-x86-64\.so\.2|libstdc\+\+\.so\.6|libgcc_s\.so\.1)$"
)
SHARED_OBJECT = re.compile(r"\.so(?:\.\d+)*$")


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


@dataclass
class Elf:
    machine: int
    needed: list[str] = field(default_factory=list)
    soname: str | None = None


def read_elf(stream: IO[bytes]) -> Elf | None:
    """DT_NEEDED and DT_SONAME of a 64-bit little-endian ELF read from the start of `stream`."""
    data = bytearray(stream.read(64))
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    machine = struct.unpack_from("<H", data, 18)[0]
    if machine != EM_X86_64:
        return Elf(machine=machine)

    def have(end: int) -> bool:
        while len(data) < end:
            chunk = stream.read(max(1 << 20, end - len(data)))
            if not chunk:
                return False
            data.extend(chunk)
        return True

    (phoff,) = struct.unpack_from("<Q", data, 32)
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    have(phoff + phentsize * phnum)
    dynamic: tuple[int, int] | None = None
    loads: list[tuple[int, int, int]] = []
    for index in range(phnum):
        p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from(
            "<IIQQQQ", data, phoff + index * phentsize
        )
        if p_type == 1:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == 2:
            dynamic = (p_offset, p_filesz)
    if dynamic is None or not have(dynamic[0] + dynamic[1]):
        return Elf(machine=machine)
    needed_offsets: list[int] = []
    soname_offset: int | None = None
    strtab = 0
    for index in range(dynamic[1] // 16):
        tag, val = struct.unpack_from("<qQ", data, dynamic[0] + 16 * index)
        if tag == 0:
            break
        if tag == 1:
            needed_offsets.append(val)
        elif tag == 5:
            strtab = val
        elif tag == 14:
            soname_offset = val
    # DT_STRTAB is an address: map it to a file offset through the PT_LOAD segments.
    base = next((off + strtab - va for va, off, size in loads if va <= strtab < va + size), strtab)

    def string(offset: int) -> str:
        start = base + offset
        while True:
            end = data.find(b"\0", start)
            if end >= 0:
                return data[start:end].decode()
            if not have(len(data) + 4096):
                raise ValueError("ELF string table runs past the end of the file")

    return Elf(
        machine=machine,
        needed=[string(o) for o in needed_offsets],
        soname=None if soname_offset is None else string(soname_offset),
    )


def wheel_rank(filename: str) -> int | None:
    """Preference of a wheel for CPython 3.12 on glibc x86_64 (higher is better), None if unusable."""
    python, abi, platform = filename[: -len(".whl")].split("-")[-3:]
    platforms = platform.split(".")
    if not any(p == "any" or (p.startswith("manylinux") and p.endswith("x86_64")) for p in platforms):
        return None
    pythons = python.split(".")
    if PYTHON_TAG in pythons and abi == PYTHON_TAG:
        return 3
    if abi == "abi3" and any(p.startswith("cp3") and int(p[3:]) <= 12 for p in pythons):
        return 2
    if abi == "none" and any(p in ("py3", "py2.py3") or re.fullmatch(r"py3\d+", p) for p in pythons):
        return 1 if "any" in platforms else 2
    return None


def chosen_wheel(package: dict[str, Any]) -> dict[str, Any] | None:
    ranked = [(wheel_rank(w["url"].rsplit("/", 1)[1]), w) for w in package.get("wheels", [])]
    usable = [(rank, w) for rank, w in ranked if rank is not None]
    return max(usable, key=lambda item: item[0])[1] if usable else None


def scan_wheel(url: str) -> dict[str, Elf]:
    elfs: dict[str, Elf] = {}
    with zipfile.ZipFile(io.BufferedReader(RangeReader(url), buffer_size=1 << 20)) as archive:
        for info in archive.infolist():
            name = info.filename
            if name.endswith("/") or info.file_size < 64 or ".dist-info/" in name:
                continue
            if not (SHARED_OBJECT.search(name) or "/bin/" in name):
                continue
            with archive.open(info) as member:
                elf = read_elf(member)
            if elf is not None:
                elfs[name] = elf
    return elfs


def lib_dir(path: str) -> str:
    return str(PurePosixPath(path).parent)


def resolve(scans: dict[str, dict[str, Elf]]) -> dict[str, dict[str, Any]]:
    """Per package: {needs: {provider package: [lib dirs]}, unresolved: [sonames]}."""
    providers: dict[str, set[tuple[str, str]]] = {}
    for package, elfs in scans.items():
        for path, elf in elfs.items():
            # auditwheel's private copies (<dist>.libs/) serve only their own wheel.
            if elf.machine != EM_X86_64 or ".libs/" in path:
                continue
            for name in {PurePosixPath(path).name, elf.soname} - {None}:
                providers.setdefault(str(name), set()).add((package, lib_dir(path)))
    result: dict[str, dict[str, Any]] = {}
    for package, elfs in sorted(scans.items()):
        own = {PurePosixPath(p).name for p in elfs} | {e.soname for e in elfs.values() if e.soname}
        needs: dict[str, set[str]] = {}
        unresolved: set[str] = set()
        for elf in elfs.values():
            if elf.machine != EM_X86_64:
                continue
            for soname in elf.needed:
                if SYSTEM.match(soname) or soname in own:
                    continue
                found = sorted(providers.get(soname, set()))
                if not found:
                    unresolved.add(soname)
                    continue
                # Several wheels can ship one soname (libcute_dsl_runtime.so: cu12 and cu13 libs);
                # every candidate is recorded and the Nix side chooses.
                for provider, directory in found:
                    needs.setdefault(provider, set()).add(directory)
        if needs or unresolved:
            result[package] = {
                "needs": {p: sorted(d) for p, d in sorted(needs.items())},
                "unresolved": sorted(unresolved),
            }
    return result


def for_python312(package: dict[str, Any]) -> bool:
    """Whether the lock's entry is the one resolved for Python 3.12 (names can be locked per fork)."""
    markers = package.get("resolution-markers")
    return not markers or any("python_full_version == '3.12.*'" in m for m in markers)


def locked_packages(lock: dict[str, Any]) -> Iterable[tuple[str, str, dict[str, Any]]]:
    for package in lock["package"]:
        if not for_python312(package):
            continue
        wheel = chosen_wheel(package)
        if wheel is not None:
            yield package["name"], package["version"], wheel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lock", type=Path, help="uv.lock")
    parser.add_argument("output", type=Path, help="JSON file to write")
    parser.add_argument("--jobs", type=int, default=12)
    args = parser.parse_args(argv)

    lock = tomllib.loads(args.lock.read_text())
    wheels: dict[str, tuple[str, str]] = {}
    for name, version, wheel in locked_packages(lock):
        wheels[name] = (version, wheel["url"])

    def scan(item: tuple[str, tuple[str, str]]) -> tuple[str, dict[str, Elf]]:
        name, (_, url) = item
        print(f"scanning {url.rsplit('/', 1)[1]}", file=sys.stderr, flush=True)
        return name, scan_wheel(url)

    with ThreadPoolExecutor(args.jobs) as pool:
        scans = dict(pool.map(scan, sorted(wheels.items())))
    resolved = resolve(scans)
    document = {
        "comment": "Written by nix/tools/wheel_elf_needs.py from uv.lock; rerun after every uv.lock change.",
        "python": PYTHON_TAG,
        "packages": {
            name: {"version": wheels[name][0], "wheel": wheels[name][1].rsplit("/", 1)[1], **info}
            for name, info in resolved.items()
        },
    }
    args.output.write_text(json.dumps(document, indent=2, sort_keys=False) + "\n")
    print(f"wrote {args.output}: {len(resolved)} of {len(wheels)} wheels need a fix-up", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
