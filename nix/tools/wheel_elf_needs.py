"""Which shared libraries the locked wheels need from each other, from nixpkgs, or from the driver.

Each wheel is its own store path in the uv2nix set, so a library that one wheel loads from another
(torch -> nvidia-cublas, ...) must be put on autoPatchelf's search path, and a library nobody ships
(libcuda.so.1: the driver) must be ignored. autoPatchelf rebuilds every RUNPATH from the DT_NEEDED
hits alone (nixpkgs' auto-patchelf.py: `patchelf --set-rpath` with the found directories plus
`appendRunpaths`), so what a library dlopens through its original `$ORIGIN` RUNPATH (cuDNN's
sub-libraries, nvrtc's builtins, ...) is lost unless it is appended again, and a library that dlopens
the driver (libcudart dlopens libcuda.so.1) needs the driver's directory on its RUNPATH.

This tool downloads every binary wheel of pkgs/server-env/uv.lock (checked against the lock's sha256,
kept in --cache), reads each ELF file's DT_NEEDED, DT_SONAME and original RUNPATH, and the sonames
named in its bytes (the candidates for dlopen), and writes two files:

- pkgs/server-env/elf-needs.json, which pkgs/server-env/fixups.nix reads through nix/lib/wheel-fixups.nix:
  per wheel, the sibling wheels' library directories for autoPatchelf's search path (`needs`), the
  sonames nobody in the set ships (`unresolved`), the directories its libraries dlopen from
  (`dlopens`), and whether it loads the driver (`driver`);
- pkgs/server-env/elf-dlopen.json, the audit those two come from: per library, its original RUNPATH,
  the candidate sonames its bytes name, and where each candidate its RUNPATH reached in pip's single
  site-packages lives (checks/offline/test_nix_elfneeds.py checks the Nix plan reaches every one).

Rerun after every change of uv.lock:

    python3 nix/tools/wheel_elf_needs.py pkgs/server-env/uv.lock pkgs/server-env/elf-needs.json \\
        --audit pkgs/server-env/elf-dlopen.json
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import posixpath
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
DT_NEEDED, DT_STRTAB, DT_SONAME, DT_RPATH, DT_RUNPATH = 1, 5, 14, 15, 29
# Libraries autoPatchelf treats as found without a search path: glibc's (it checks glibc's lib
# directory) and the compiler runtime that pythonManylinuxPackages puts in every wheel's buildInputs.
SYSTEM = re.compile(
    r"^(?:(?:libc|libm|libmvec|libdl|libpthread|librt|libutil|libresolv|libcrypt|libanl|libnsl)\.so(?:\.\d+)?"
    r"|ld-linux-x86-64\.so\.2|libstdc\+\+\.so\.6|libgcc_s\.so\.1)$"
)
# The NVIDIA driver's user-space libraries: never in a wheel, found at run time through the driver
# runpath (/run/opengl-driver/lib, autoAddDriverRunpath) or the discovery the launcher does.
DRIVER = re.compile(r"^(?:libcuda|libcudadebugger|libnvcuvid|libnvidia-[a-z0-9-]+)\.so(?:\.\d+)*$")
SHARED_OBJECT = re.compile(r"\.so(?:\.\d+)*$")
# A soname as it appears inside a binary (paths and format strings are fine: "/usr/lib/libcuda.so.1",
# "%s/libnvrtc.so.13"). The pattern starts with a literal so the regex engine can scan for it; a match
# preceded by a name character is part of a longer name and is dropped by mentioned_sonames.
MENTION = re.compile(rb"lib[A-Za-z0-9_+-]+(?:\.[A-Za-z0-9_+-]+)*?\.so(?:\.[0-9]+)*")
NAME_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_+.-")


@dataclass
class Elf:
    machine: int
    needed: list[str] = field(default_factory=list)
    soname: str | None = None
    runpath: list[str] = field(default_factory=list)
    mentions: set[str] = field(default_factory=set)


def read_elf(stream: IO[bytes]) -> Elf | None:
    """DT_NEEDED, DT_SONAME and DT_RUNPATH (or DT_RPATH) of a 64-bit little-endian ELF read from the
    start of `stream`; only as much of the stream is read as the dynamic section needs."""
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
    offsets: dict[int, list[int]] = {DT_NEEDED: [], DT_SONAME: [], DT_RPATH: [], DT_RUNPATH: []}
    strtab = 0
    for index in range(dynamic[1] // 16):
        tag, val = struct.unpack_from("<qQ", data, dynamic[0] + 16 * index)
        if tag == 0:
            break
        if tag == DT_STRTAB:
            strtab = val
        elif tag in offsets:
            offsets[tag].append(val)
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

    # The loader reads DT_RUNPATH and ignores DT_RPATH when both are present.
    paths = offsets[DT_RUNPATH] or offsets[DT_RPATH]
    return Elf(
        machine=machine,
        needed=[string(o) for o in offsets[DT_NEEDED]],
        soname=string(offsets[DT_SONAME][0]) if offsets[DT_SONAME] else None,
        runpath=[p for o in paths for p in string(o).split(":") if p],
    )


def mentioned_sonames(data: bytes) -> set[str]:
    """Every soname-shaped string in a binary: the libraries it may dlopen (and some it only names)."""
    return {
        m.group().decode()
        for m in MENTION.finditer(data)
        if m.start() == 0 or data[m.start() - 1] not in NAME_BYTES
    }


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


def download(url: str, sha256: str, cache: Path) -> Path:
    """The wheel at `url` in `cache`, downloaded once and checked against uv.lock's sha256."""
    path = cache / url.rsplit("/", 1)[1]
    if path.is_file() and _sha256(path) == sha256:
        return path
    part = path.with_name(path.name + ".part")
    cache.mkdir(parents=True, exist_ok=True)
    with urllib.request.urlopen(url, timeout=300) as reply, part.open("wb") as out:
        while chunk := reply.read(1 << 20):
            out.write(chunk)
    got = _sha256(part)
    if got != sha256:
        part.unlink()
        raise ValueError(f"{url}: sha256 {got}, uv.lock says {sha256}")
    os.replace(part, path)
    return path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def scan_wheel(path: Path) -> dict[str, Elf]:
    """Every ELF file of a wheel (by its path in site-packages) with its dynamic entries and mentions."""
    elfs: dict[str, Elf] = {}
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            name = info.filename
            if name.endswith("/") or info.file_size < 64 or ".dist-info/" in name:
                continue
            if not (SHARED_OBJECT.search(name) or "/bin/" in name):
                continue
            with archive.open(info) as member:
                head = member.read(4)
                if head != b"\x7fELF":
                    continue
                data = head + member.read()
            elf = read_elf(io.BytesIO(data))
            if elf is not None:
                elf.mentions = mentioned_sonames(data) if elf.machine == EM_X86_64 else set()
                elfs[name] = elf
    return elfs


def lib_dir(path: str) -> str:
    return str(PurePosixPath(path).parent)


def names_of(path: str, elf: Elf) -> set[str]:
    return {PurePosixPath(path).name} | ({elf.soname} if elf.soname else set())


def origin_dirs(path: str, runpath: list[str]) -> list[str]:
    """The site-packages directories a RUNPATH names in pip's single site-packages ($ORIGIN entries;
    absolute entries name host directories, which no wheel provides)."""
    out = []
    for entry in runpath:
        if entry.startswith(("$ORIGIN", "${ORIGIN}")):
            rest = entry.split("}", 1)[1] if entry.startswith("${") else entry[len("$ORIGIN") :]
            joined = posixpath.normpath(posixpath.join(lib_dir(path), "./" + rest.lstrip("/")))
            if not joined.startswith(".."):
                out.append(joined)
    return out


@dataclass
class Plan:
    """What one wheel needs in the store: elf-needs.json's entry and elf-dlopen.json's libraries."""

    needs: dict[str, set[str]] = field(default_factory=dict)
    unresolved: set[str] = field(default_factory=set)
    dlopens: dict[str, set[str]] = field(default_factory=dict)
    driver: bool = False
    libraries: dict[str, dict[str, Any]] = field(default_factory=dict)


def resolve(scans: dict[str, dict[str, Elf]]) -> dict[str, Plan]:
    """Per package, from every wheel's ELF files: DT_NEEDED providers and unresolved sonames, dlopen
    targets its original RUNPATH reached in pip's site-packages, and whether it loads the driver."""
    providers: dict[str, set[tuple[str, str]]] = {}
    # pip's one site-packages: directory -> soname -> packages with a file of that name there.
    site: dict[str, dict[str, set[str]]] = {}
    for package, elfs in scans.items():
        for path, elf in elfs.items():
            if elf.machine != EM_X86_64:
                continue
            for name in names_of(path, elf):
                site.setdefault(lib_dir(path), {}).setdefault(name, set()).add(package)
                # auditwheel's private copies (<dist>.libs/) serve only their own wheel.
                if ".libs/" not in path:
                    providers.setdefault(name, set()).add((package, lib_dir(path)))
    plans: dict[str, Plan] = {}
    for package, elfs in sorted(scans.items()):
        plan = Plan()
        own = {n for p, e in elfs.items() for n in names_of(p, e)}
        for path, elf in sorted(elfs.items()):
            if elf.machine != EM_X86_64:
                continue
            for soname in elf.needed:
                if DRIVER.match(soname):
                    plan.driver = True
                if SYSTEM.match(soname) or soname in own:
                    continue
                found = sorted(providers.get(soname, set()))
                if not found:
                    plan.unresolved.add(soname)
                # Several wheels can ship one soname (libcute_dsl_runtime.so: cu12 and cu13 libs);
                # every candidate is recorded and the Nix side chooses.
                for provider, directory in found:
                    plan.needs.setdefault(provider, set()).add(directory)
            audit = _dlopen_audit(package, path, elf, site, providers)
            if audit is None:
                continue
            plan.libraries[path] = audit
            plan.driver = plan.driver or bool(audit["driver"])
            for locations in audit["reached"].values():
                for provider, directory in locations:
                    plan.dlopens.setdefault(provider, set()).add(directory)
        plans[package] = plan
    return plans


def _dlopen_audit(
    package: str,
    path: str,
    elf: Elf,
    site: dict[str, dict[str, set[str]]],
    providers: dict[str, set[tuple[str, str]]],
) -> dict[str, Any] | None:
    """One library's dlopen candidates (named in its bytes, shipped by the set or the driver's, not its
    own names nor DT_NEEDED) and where those its original RUNPATH reached live; None if none."""
    skip = names_of(path, elf) | set(elf.needed)
    candidates = sorted(
        s for s in elf.mentions - skip if DRIVER.match(s) or s in providers or _in_site(s, site)
    )
    if not candidates:
        return None
    reached: dict[str, list[list[str]]] = {}
    for mention in candidates:
        for directory in origin_dirs(path, elf.runpath):
            for name, packages in sorted(site.get(directory, {}).items()):
                if name in skip or not _names(mention, name):
                    continue
                for provider in sorted(packages):
                    if ".libs" not in directory or provider == package:
                        reached.setdefault(name, []).append([provider, directory])
    driver = sorted(s for s in candidates if DRIVER.match(s))
    return {"runpath": elf.runpath, "candidates": candidates, "reached": reached, "driver": driver}


def _names(mention: str, name: str) -> bool:
    """Whether a soname named in a binary denotes file `name`: the same, or an unversioned `lib<x>.so`
    that the loader completes with a version at run time (libcudnn.so.9 names "libcudnn_ops.so" and
    loads libcudnn_ops.so.9)."""
    return name == mention or (mention.endswith(".so") and name.startswith(mention + "."))


def _in_site(mention: str, site: dict[str, dict[str, set[str]]]) -> bool:
    return any(_names(mention, name) for names in site.values() for name in names)


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


def documents(
    plans: dict[str, Plan], wheels: dict[str, tuple[str, str]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(elf-needs.json, elf-dlopen.json) for `plans` of the wheels {name: (version, filename)}."""
    needs = {
        "comment": "Written by nix/tools/wheel_elf_needs.py from uv.lock; rerun after every uv.lock change.",
        "python": PYTHON_TAG,
        "packages": {
            name: {
                "version": wheels[name][0],
                "wheel": wheels[name][1],
                "needs": {p: sorted(d) for p, d in sorted(plan.needs.items())},
                "unresolved": sorted(plan.unresolved),
                "dlopens": {p: sorted(d) for p, d in sorted(plan.dlopens.items())},
                "driver": plan.driver,
            }
            for name, plan in plans.items()
            if plan.needs or plan.unresolved or plan.dlopens or plan.driver
        },
    }
    audit = {
        "comment": (
            "Written by nix/tools/wheel_elf_needs.py: per library of a locked wheel, its original RUNPATH, "
            "the sonames its bytes name that the set or the driver ships (dlopen candidates), and where "
            "those its RUNPATH reached in pip's site-packages live ([wheel, directory])."
        ),
        "python": PYTHON_TAG,
        "packages": {
            name: {"version": wheels[name][0], "libraries": plan.libraries}
            for name, plan in plans.items()
            if plan.libraries
        },
    }
    return needs, audit


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lock", type=Path, help="uv.lock")
    parser.add_argument("output", type=Path, help="elf-needs.json to write")
    parser.add_argument("--audit", type=Path, required=True, help="elf-dlopen.json to write")
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "bitexact" / "wheels",
        help="where downloaded wheels are kept (default: $XDG_CACHE_HOME/bitexact/wheels)",
    )
    parser.add_argument("--jobs", type=int, default=4)
    args = parser.parse_args(argv)

    lock = tomllib.loads(args.lock.read_text())
    wheels: dict[str, tuple[str, str]] = {}
    urls: dict[str, tuple[str, str]] = {}
    for name, version, wheel in locked_packages(lock):
        filename = wheel["url"].rsplit("/", 1)[1]
        wheels[name] = (version, filename)
        # Pure-Python wheels hold no ELF file: no need to download them.
        if not filename.endswith("-any.whl"):
            urls[name] = (wheel["url"], wheel["hash"].removeprefix("sha256:"))

    def scan(item: tuple[str, tuple[str, str]]) -> tuple[str, dict[str, Elf]]:
        name, (url, sha256) = item
        print(f"scanning {url.rsplit('/', 1)[1]}", file=sys.stderr, flush=True)
        return name, scan_wheel(download(url, sha256, args.cache))

    with ThreadPoolExecutor(args.jobs) as pool:
        scans = dict(pool.map(scan, sorted(urls.items())))
    needs, audit = documents(resolve(scans), wheels)
    args.output.write_text(json.dumps(needs, indent=2) + "\n")
    args.audit.write_text(json.dumps(audit, indent=2) + "\n")
    print(
        f"wrote {args.output}: {len(needs['packages'])} of {len(wheels)} wheels need a fix-up; "
        f"{args.audit}: {sum(len(p['libraries']) for p in audit['packages'].values())} libraries audited",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
