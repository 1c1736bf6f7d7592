"""Where the host's NVIDIA driver libraries are, found by reading directories: no host binary is run and
no ld.so.cache is read (Nix-built programs never read the host's cache, and a Nix rootfs has none).

The driver's user-space libraries (libcuda.so.1 and the libnvidia-*.so it dlopens: ptxjitcompiler,
nvvm, gpucomp, ml) must be on the library search path of a process BEFORE it starts: glibc reads
LD_LIBRARY_PATH once, at start-up, and torch caches `torch.cuda.is_available()` after libcudart's
first dlopen of libcuda.so.1. So the launcher puts the directory found here into its child's
environment, the image entrypoint and the GPU checks do the same, and NVML users in this process load
libnvidia-ml.so.1 by its full path (`gpuhost.nvml`).

A directory that holds other libraries too (a distribution's /usr/lib/x86_64-linux-gnu) is never put
on LD_LIBRARY_PATH as is: its libc.so.6 would then be loaded into Nix-built programs, whose loader
belongs to another glibc. The driver's files are linked into a private directory instead.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import exactformats

OVERRIDE_VAR = "BITEXACT_DRIVER_LIB"
LIBCUDA = "libcuda.so.1"
LIBNVML = "libnvidia-ml.so.1"
NIXOS_DIR = "/run/opengl-driver/lib"

# Searched after BITEXACT_DRIVER_LIB, the caller's LD_LIBRARY_PATH, /run/opengl-driver/lib and the
# directories /etc/ld.so.conf names (read as text), in this order.
STANDARD_DIRS: tuple[tuple[str, str], ...] = (
    # The NVIDIA container toolkit (legacy mode) mounts the driver here in an image that has
    # /etc/debian_version (libnvidia-container src/common.h, USR_LIB_MULTIARCH_DIR; choice in
    # src/nvc_container.c copy_config); CDI mode mounts at the host's own paths. Debian/Ubuntu hosts.
    ("/usr/lib/x86_64-linux-gnu", "Debian/Ubuntu host, or the container toolkit in a Debian-like image"),
    ("/lib/x86_64-linux-gnu", "Debian/Ubuntu host without merged /usr"),
    # The toolkit's target in every other image, ours included (USR_LIB_DIR); Fedora/RHEL/SUSE hosts.
    (
        "/usr/lib64",
        "the container toolkit in a non-Debian image (this project's), or a Fedora/RHEL/SUSE host",
    ),
    ("/lib64", "Fedora/RHEL/SUSE host without merged /usr"),
    # Arch Linux puts 64-bit libraries in /usr/lib.
    ("/usr/lib", "Arch Linux host"),
    # GKE's and other Kubernetes driver installers (and nvidia-docker 1) mount the driver here.
    ("/usr/local/nvidia/lib64", "Kubernetes driver installer (GKE) or nvidia-docker 1 volume"),
    # WSL2 exposes the Windows driver's libcuda here.
    ("/usr/lib/wsl/lib", "WSL2"),
)

# The files of the NVIDIA driver's user-space part (compute, utility, video and graphics libraries).
DRIVER_FILE = re.compile(
    r"^lib(?:cuda|cudadebugger|nvcuvid|nvoptix|nvidia-[\w+-]+|"
    r"(?:GLX|EGL|GLESv1_CM|GLESv2)_nvidia|vdpau_nvidia)\.so(?:\.\d+)*$"
)

FIX = (
    f"run under the NVIDIA container toolkit (`docker run --gpus all`), on NixOS enable "
    f"hardware.graphics with the NVIDIA driver ({NIXOS_DIR}), or set {OVERRIDE_VAR}=DIR to the "
    "directory that holds the driver's libcuda.so.1 and libnvidia-*.so"
)


class DriverNotFound(Exception):
    """No usable libcuda.so.1; the message lists where it looked and names the fix."""


@dataclass(frozen=True)
class DriverLibs:
    """The driver's libraries: `directory` goes on LD_LIBRARY_PATH and into TRITON_LIBCUDA_PATH (the
    private link directory when `found_in` holds other libraries too)."""

    directory: Path
    found_in: Path
    origin: str
    libcuda: Path
    nvml: Path | None
    companions: tuple[str, ...] = ()
    passed_over: tuple[str, ...] = field(default=(), compare=False)

    def to_json(self) -> dict[str, object]:
        return {
            "directory": str(self.directory),
            "found_in": str(self.found_in),
            "origin": self.origin,
            "libcuda": str(self.libcuda),
            "nvml": str(self.nvml) if self.nvml else None,
            "companions": list(self.companions),
        }


def _own_elf_kind() -> bytes | None:
    """ELF class, data encoding and machine of this interpreter: a driver library must match them."""
    import sys

    try:
        with open(os.path.realpath(sys.executable), "rb") as f:
            head = f.read(20)
    except OSError:
        return None
    return _kind(head)


def _kind(head: bytes) -> bytes | None:
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return None
    return head[4:6] + head[18:20]


def elf_problem(path: Path, want: bytes | None) -> str | None:
    """Why `path` cannot be this process's library (None when it can)."""
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except OSError as error:
        return f"cannot read {path} ({error.strerror})"
    kind = _kind(head)
    if kind is None:
        return f"{path} is not an ELF file"
    if want is not None and kind != want:
        return f"{path} is built for another machine or word size than this Python"
    return None


def ld_so_conf_dirs(root: Path, conf: str = "/etc/ld.so.conf", _seen: set[str] | None = None) -> list[str]:
    """The directories /etc/ld.so.conf lists (its `include` globs followed), as ldconfig reads it."""
    seen = _seen if _seen is not None else set()
    if conf in seen:
        return []
    seen.add(conf)
    try:
        text = (root / conf.lstrip("/")).read_text(errors="replace")
    except OSError:
        return []
    out: list[str] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("hwcap "):
            continue
        if line.startswith("include"):
            for pattern in line.split()[1:]:
                pattern = pattern if pattern.startswith("/") else str(Path(conf).parent / pattern)
                base = str(root).rstrip("/")
                for match in sorted(glob.glob(base + pattern)):
                    out += ld_so_conf_dirs(root, "/" + os.path.relpath(match, str(root)), seen)
            continue
        out += [d for d in re.split(r"[\s,:]+", line) if d.startswith("/")]
    return out


def candidates(environ: Mapping[str, str], root: Path) -> Iterator[tuple[str, str]]:
    """(directory, why it is searched) in search order, without the override; relative entries of
    LD_LIBRARY_PATH are left out (they depend on the working directory)."""
    for entry in environ.get("LD_LIBRARY_PATH", "").split(":"):
        if entry:
            yield entry, "LD_LIBRARY_PATH"
    yield NIXOS_DIR, "NixOS (hardware.graphics), or a Nix build sandbox that offers `cuda`"
    for entry in ld_so_conf_dirs(root):
        yield entry, "/etc/ld.so.conf"
    yield from STANDARD_DIRS


def _under(root: Path, directory: str) -> Path:
    return root / directory.lstrip("/")


def find_library(
    name: str, environ: Mapping[str, str], root: Path = Path("/")
) -> tuple[Path, str, list[str]]:
    """The first searched directory holding a loadable `name`: (directory, why, passed over)."""
    want = _own_elf_kind()
    passed: list[str] = []
    override = environ.get(OVERRIDE_VAR)
    if override and not override.startswith("/"):
        raise DriverNotFound(f"{OVERRIDE_VAR}={override} is not an absolute path; {FIX}")
    searched: dict[str, str] = {}
    for directory, why in [(override, OVERRIDE_VAR)] if override else candidates(environ, root):
        if directory.startswith("/"):
            searched.setdefault(directory, why)
    for directory, why in searched.items():
        path = _under(root, directory) / name
        if not os.path.lexists(path):
            continue
        problem = elf_problem(path, want)
        if problem is None:
            return _under(root, directory), why, passed
        passed.append(problem)
    where = f"{OVERRIDE_VAR}={override}" if override else ", ".join(searched)
    detail = f" (passed over: {'; '.join(passed)})" if passed else ""
    raise DriverNotFound(f"no NVIDIA driver library {name} in {where}{detail}; {FIX}")


def driver_files(directory: Path) -> list[str]:
    """Names of the driver's files in `directory` (the pattern DRIVER_FILE)."""
    try:
        return sorted(e.name for e in os.scandir(directory) if DRIVER_FILE.match(e.name))
    except OSError:
        return []


def only_driver_files(directory: Path) -> bool:
    """Whether every file in `directory` (subdirectories aside) is the driver's."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return False
    return all(e.is_dir() or DRIVER_FILE.match(e.name) for e in entries)


def cache_home(environ: Mapping[str, str]) -> Path:
    """${XDG_CACHE_HOME:-~/.cache}, a relative XDG_CACHE_HOME ignored as the XDG specification says
    (exactformats.cache_home, which pinlock and the crash reports use too)."""
    return exactformats.cache_home(environ)


def link_directory(source: Path, names: list[str], environ: Mapping[str, str]) -> Path:
    """A directory of links to `names` in `source`, keyed by what they point to (a driver update
    makes a new one), under ${XDG_CACHE_HOME:-~/.cache}/bitexact/driver-libs."""
    digest = hashlib.sha256(str(source).encode())
    for name in names:
        path = source / name
        stat = path.stat()
        digest.update(f"\0{name}\0{os.path.realpath(path)}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
    parent = cache_home(environ) / "bitexact" / "driver-libs"
    final = parent / digest.hexdigest()[:24]
    if final.is_dir():
        return final
    parent.mkdir(parents=True, exist_ok=True)
    staging = parent / f".{final.name}.{os.getpid()}"
    staging.mkdir()
    for name in names:
        (staging / name).symlink_to(source / name)
    try:
        staging.rename(final)
    except OSError:
        # Another process made it first: theirs holds the same links.
        for name in names:
            (staging / name).unlink()
        staging.rmdir()
    return final


def find_driver(environ: Mapping[str, str] | None = None, root: Path = Path("/")) -> DriverLibs:
    """The driver's libraries for `environ` (default os.environ); DriverNotFound names the fix."""
    env = os.environ if environ is None else environ
    found_in, why, passed = find_library(LIBCUDA, env, root)
    names = driver_files(found_in)
    directory = found_in
    if str(found_in) != str(_under(root, NIXOS_DIR)) and not only_driver_files(found_in):
        try:
            directory = link_directory(found_in, names, env)
        except OSError as error:
            raise DriverNotFound(
                f"the driver's {LIBCUDA} is in {found_in}, which holds other libraries too (putting it "
                "on LD_LIBRARY_PATH would load them into Nix-built programs), and no private link "
                f"directory could be made under {cache_home(env)} ({error}); copy the driver's files "
                f"(cp -L {found_in}/libcuda.so* {found_in}/libnvidia-*.so* DIR) and set {OVERRIDE_VAR}=DIR"
            ) from error
    nvml = directory / LIBNVML if LIBNVML in names else None
    companions = tuple(n for n in names if n not in (LIBCUDA, LIBNVML))
    return DriverLibs(
        directory=directory,
        found_in=found_in,
        origin=why,
        libcuda=directory / LIBCUDA,
        nvml=nvml,
        companions=companions,
        passed_over=tuple(passed),
    )


def driver_environment(libs: DriverLibs, caller: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The variables a child needs (LD_LIBRARY_PATH with the driver first, TRITON_LIBCUDA_PATH) and
    notes for stderr.

    TRITON_LIBCUDA_PATH: triton's `libcuda_dirs()` otherwise runs `/sbin/ldconfig -p` (triton 3.6.0
    and 3.7.1 alike; docs/gpu-runtime.md), which a Nix rootfs or build sandbox does not have."""
    entries = [e for e in caller.get("LD_LIBRARY_PATH", "").split(":") if e and e != str(libs.directory)]
    out = {
        "LD_LIBRARY_PATH": ":".join([str(libs.directory), *entries]),
        "TRITON_LIBCUDA_PATH": str(libs.directory),
    }
    notes: list[str] = []
    given = caller.get("TRITON_LIBCUDA_PATH")
    if given and given != out["TRITON_LIBCUDA_PATH"]:
        notes.append(
            f"TRITON_LIBCUDA_PATH={given} from the caller is replaced by the driver found in "
            f"{libs.directory} (set {OVERRIDE_VAR} to choose the driver)"
        )
    return out, notes
