"""A root filesystem laid out as nix2container lays out the image (images/image.nix): every program and
library under /nix/store/<hash>-<name>, nothing in /lib64, /usr or /bin, no /etc/ld.so.cache and no
/etc/debian_version (so the NVIDIA container toolkit mounts the driver into /usr/lib64).

The Python in it is this machine's interpreter relocated as Nix relocates programs: copied into a
store path with its standard library, its ELF interpreter set to the glibc store path's
ld-linux-x86-64.so.2 and its RUNPATH to store paths (patchelf), its shared libraries copied beside it.
The glibc is this machine's, copied into a store path; unlike Nix's it would read /etc/ld.so.cache, which
the rootfs does not have. Store path hashes are names in the store's shape (sha256 of the name in Nix's
base-32 alphabet); nothing checks them.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

NIX_BASE32 = "0123456789abcdfghijklmnpqrsvwxyz"
# glibc's own libraries: they go into the glibc store path, everything else beside the program.
GLIBC = re.compile(r"^(ld-linux-x86-64\.so\.2|lib(c|m|pthread|dl|rt|util|resolv|anl|nsl|crypt)\.so\.\d+)$")
# Standard library parts the entrypoint, the launcher and gpuhost do not use (tests, GUI, docs).
STDLIB_SKIP = {
    "site-packages",
    "test",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "lib2to3",
    "pydoc_data",
    "__pycache__",
}


def store_path(name: str) -> str:
    digest = hashlib.sha256(name.encode()).digest()
    return "/nix/store/" + "".join(NIX_BASE32[b % 32] for b in digest[:32]) + "-" + name


def _elf(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def shared_libraries(paths: list[Path]) -> set[Path]:
    """The resolved shared libraries `paths` load (ldd, run here on the host that builds the tree)."""
    found: set[Path] = set()
    for path in paths:
        out = subprocess.run(["ldd", str(path)], capture_output=True, text=True).stdout
        for line in out.splitlines():
            match = re.search(r"=> (/\S+)", line) or re.match(r"\s*(/\S+ld-linux\S*)", line)
            if match:
                found.add(Path(match.group(1)))
    return found


def patchelf(*args: str) -> None:
    subprocess.run(["patchelf", *args], check=True, capture_output=True)


class Rootfs:
    """The tree under `root`; `python` is the relocated interpreter's path inside it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.glibc = store_path("glibc-2.36")
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        self.python_store = store_path(f"python3-{sys.version.split()[0]}")
        self.python = f"{self.python_store}/bin/python{version}"
        self.site_packages = f"{self.python_store}/lib/python{version}/site-packages"
        for d in ("etc", "tmp", "nix/store"):
            (root / d).mkdir(parents=True, exist_ok=True)
        (root / "etc/passwd").write_text(
            "root:x:0:0:root:/root:/noshell\nbitexact:x:1000:1000:bitexact:/var/cache/bitexact/home:/noshell\n"
        )
        (root / "etc/group").write_text("root:x:0:\nbitexact:x:1000:\n")

    def inside(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def add_python(self) -> None:
        """This interpreter, its standard library and shared libraries, relocated into the store."""
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        prefix = Path(sys.base_prefix)
        exe = Path(os.path.realpath(sys._base_executable))  # type: ignore[attr-defined]
        store = self.inside(self.python_store)
        (store / "bin").mkdir(parents=True)
        shutil.copy2(exe, store / "bin" / f"python{version}")
        stdlib = Path(sysconfig.get_paths()["stdlib"])
        shutil.copytree(
            stdlib,
            store / "lib" / f"python{version}",
            symlinks=True,
            ignore=lambda d, names: [
                n for n in names if n in STDLIB_SKIP or n.startswith("config-") or n.startswith("_tkinter")
            ],
        )
        (store / "lib" / f"python{version}" / "site-packages").mkdir()
        libpython = sysconfig.get_config_var("INSTSONAME")
        elves = [store / "bin" / f"python{version}"]
        if libpython and (prefix / "lib" / libpython).exists():
            shutil.copy2(prefix / "lib" / libpython, store / "lib" / libpython)
            elves.append(store / "lib" / libpython)
        elves += sorted((store / "lib" / f"python{version}" / "lib-dynload").glob("*.so"))
        glibc = self.inside(self.glibc) / "lib"
        glibc.mkdir(parents=True)
        for lib in shared_libraries([exe, *elves]):
            target = glibc if GLIBC.match(lib.name) else store / "lib"
            if not (target / lib.name).exists():
                shutil.copy2(os.path.realpath(lib), target / lib.name)
                if target != glibc:
                    elves.append(target / lib.name)
        rpath = f"{self.python_store}/lib:{self.glibc}/lib"
        patchelf("--set-interpreter", f"{self.glibc}/lib/ld-linux-x86-64.so.2", str(elves[0]))
        for elf in elves:
            if _elf(elf):
                os.chmod(elf, 0o755)
                patchelf("--set-rpath", rpath, str(elf))

    def add_tree(self, name: str, files: dict[str, Path | bytes | str]) -> str:
        """A store path `name` holding `files` (relative path -> file, directory or content)."""
        base = store_path(name)
        for rel, source in files.items():
            target = self.inside(base) / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(source, Path) and source.is_dir():
                shutil.copytree(source, target, symlinks=False, ignore=shutil.ignore_patterns("__pycache__"))
            elif isinstance(source, Path):
                shutil.copy2(source, target)
            else:
                target.write_bytes(source.encode() if isinstance(source, str) else source)
        return base

    def add_script(self, store: str, name: str, body: str) -> str:
        """An executable Python script in `store`/bin run by the relocated interpreter."""
        path = self.inside(store) / "bin" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"#!{self.python}\n{body}")
        path.chmod(0o755)
        return f"{store}/bin/{name}"

    def tar(self, writable: tuple[str, ...] = ()) -> bytes:
        """The tree as a tar for `docker import`, owned by root; `writable` directories by uid 1000."""

        def owner(info: tarfile.TarInfo) -> tarfile.TarInfo:
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            if "/" + info.name.removeprefix("./") in writable:
                info.uid = info.gid = 1000
            if info.name.removeprefix("./") == "tmp":
                info.mode = 0o1777
            return info

        for directory in writable:
            self.inside(directory).mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            archive.add(self.root, arcname=".", filter=owner)
        return buffer.getvalue()
