"""Driver discovery (gpuhost.driver) on directory trees laid out as NixOS, the NVIDIA container toolkit
and FHS distributions lay out the driver, with real ELF libraries (the stand-ins of driver_standins.py,
compiled here, and a copy of this machine's libc); and the mechanism it relies on, in a real process:
a child started with the exported LD_LIBRARY_PATH dlopens libcuda.so.1 by its soname, as libcudart
does, where the same child without it cannot (this machine's ld.so.cache has no libcuda)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from checkhelpers.driver_standins import DRIVER_VERSION, install_driver
from gpuhost.driver import (
    NIXOS_DIR,
    OVERRIDE_VAR,
    DriverNotFound,
    driver_environment,
    find_driver,
    ld_so_conf_dirs,
)

# This process's libc (a distribution's, or Nix's in the python-offline-tests sandbox).
LIBC = Path(
    next(line.split()[-1] for line in open("/proc/self/maps") if line.rstrip().endswith("/libc.so.6"))
)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stand-in driver, compiled once."""
    return install_driver(tmp_path_factory.mktemp("built"))


def layout(root: Path, directory: str, built: Path, **kwargs: bool) -> Path:
    return install_driver(root / directory.lstrip("/"), built=built, **kwargs)


def test_nixos_directory_is_used_as_is(tmp_path: Path, built: Path) -> None:
    layout(tmp_path, NIXOS_DIR, built)
    (tmp_path / NIXOS_DIR.lstrip("/") / "libGL.so.1").symlink_to(LIBC)  # NixOS puts mesa there too
    layout(tmp_path, "/usr/lib64", built)  # later in the order
    libs = find_driver({"HOME": str(tmp_path / "home")}, tmp_path)
    assert libs.directory == libs.found_in == tmp_path / NIXOS_DIR.lstrip("/")
    assert "NixOS" in libs.origin
    assert libs.libcuda == libs.directory / "libcuda.so.1"
    assert libs.nvml == libs.directory / "libnvidia-ml.so.1"
    assert f"libcuda.so.{DRIVER_VERSION}" in libs.companions
    assert "libnvidia-ptxjitcompiler.so.1" in libs.companions


def test_toolkit_mount_in_our_image_is_used_as_is(tmp_path: Path, built: Path) -> None:
    """The toolkit mounts into /usr/lib64 of an image without /etc/debian_version; nothing else is
    there, so the directory itself goes on LD_LIBRARY_PATH."""
    layout(tmp_path, "/usr/lib64", built)
    libs = find_driver({}, tmp_path)
    assert libs.directory == tmp_path / "usr/lib64"
    env, notes = driver_environment(libs, {})
    assert env == {"LD_LIBRARY_PATH": str(libs.directory), "TRITON_LIBCUDA_PATH": str(libs.directory)}
    assert notes == []


def test_a_distributions_lib_directory_is_never_put_on_the_path(tmp_path: Path, built: Path) -> None:
    """A Debian host: the driver sits among the distribution's libraries (libc.so.6 among them). The
    exported directory holds links to the driver's files only."""
    system = layout(tmp_path, "/usr/lib/x86_64-linux-gnu", built)
    shutil.copy(LIBC, system / "libc.so.6")
    (system / "libz.so.1").symlink_to(LIBC)
    home = tmp_path / "home"
    libs = find_driver({"HOME": str(home)}, tmp_path)
    assert libs.found_in == system
    assert libs.directory.parent == home / ".cache" / "bitexact" / "driver-libs"
    linked = sorted(p.name for p in libs.directory.iterdir())
    assert "libc.so.6" not in linked and "libz.so.1" not in linked
    assert {"libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1"} <= set(linked)
    for name in linked:
        assert os.readlink(libs.directory / name) == str(system / name)
    # The same driver gives the same directory; XDG_CACHE_HOME moves it.
    assert find_driver({"HOME": str(home)}, tmp_path).directory == libs.directory
    moved = find_driver({"XDG_CACHE_HOME": str(tmp_path / "xdg")}, tmp_path).directory
    assert moved.parent == tmp_path / "xdg" / "bitexact" / "driver-libs"


def test_a_directory_that_cannot_take_the_links_names_the_override(tmp_path: Path, built: Path) -> None:
    system = layout(tmp_path, "/usr/lib/x86_64-linux-gnu", built)
    shutil.copy(LIBC, system / "libc.so.6")
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(DriverNotFound, match=f"holds other libraries too.*{OVERRIDE_VAR}=DIR"):
        find_driver({"XDG_CACHE_HOME": str(blocker / "cache")}, tmp_path)


def test_search_order(tmp_path: Path, built: Path) -> None:
    for directory in ("/usr/lib64", "/usr/local/nvidia/lib64", "/opt/mine", NIXOS_DIR):
        layout(tmp_path, directory, built)
    mine = str(tmp_path / "opt/mine")
    # The override alone decides; then the caller's LD_LIBRARY_PATH; then NixOS; then the FHS dirs.
    assert find_driver({OVERRIDE_VAR: "/opt/mine"}, tmp_path).origin == OVERRIDE_VAR
    assert find_driver({"LD_LIBRARY_PATH": "/opt/mine:/x"}, tmp_path).found_in == Path(mine)
    assert find_driver({}, tmp_path).found_in == tmp_path / NIXOS_DIR.lstrip("/")
    shutil.rmtree(tmp_path / NIXOS_DIR.lstrip("/"))
    assert find_driver({}, tmp_path).found_in == tmp_path / "usr/lib64"
    shutil.rmtree(tmp_path / "usr/lib64")
    found = find_driver({}, tmp_path)
    assert found.found_in == tmp_path / "usr/local/nvidia/lib64" and "Kubernetes" in found.origin


def test_ld_so_conf_is_read_as_text(tmp_path: Path, built: Path) -> None:
    etc = tmp_path / "etc"
    (etc / "ld.so.conf.d").mkdir(parents=True)
    (etc / "ld.so.conf").write_text("# comment\ninclude /etc/ld.so.conf.d/*.conf\n/usr/local/lib\n")
    (etc / "ld.so.conf.d" / "nvidia.conf").write_text("/usr/lib/nvidia-580 # the driver\n")
    (etc / "ld.so.conf.d" / "loop.conf").write_text("include /etc/ld.so.conf\n")
    assert ld_so_conf_dirs(tmp_path) == ["/usr/lib/nvidia-580", "/usr/local/lib"]
    layout(tmp_path, "/usr/lib/nvidia-580", built)
    layout(tmp_path, "/usr/lib64", built)
    found = find_driver({}, tmp_path)
    assert found.found_in == tmp_path / "usr/lib/nvidia-580" and found.origin == "/etc/ld.so.conf"


def test_files_that_are_not_this_machines_libraries_are_passed_over(tmp_path: Path, built: Path) -> None:
    bad = tmp_path / "usr/lib/x86_64-linux-gnu"
    bad.mkdir(parents=True)
    (bad / "libcuda.so.1").write_text("/* GNU ld script */\n")
    layout(tmp_path, "/usr/lib64", built)
    libs = find_driver({}, tmp_path)
    assert libs.found_in == tmp_path / "usr/lib64"
    assert libs.passed_over == (f"{bad / 'libcuda.so.1'} is not an ELF file",)


def test_no_driver_names_every_place_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(DriverNotFound) as caught:
        find_driver({"LD_LIBRARY_PATH": "/a:relative"}, tmp_path)
    message = str(caught.value)
    for place in ("/a", NIXOS_DIR, "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/nvidia/lib64"):
        assert place in message
    assert "relative" not in message.split(";")[0]
    assert "--gpus all" in message and f"{OVERRIDE_VAR}=DIR" in message
    with pytest.raises(DriverNotFound, match=f"{OVERRIDE_VAR}=/nowhere"):
        find_driver({OVERRIDE_VAR: "/nowhere"}, tmp_path)
    with pytest.raises(DriverNotFound, match="is not an absolute path"):
        find_driver({OVERRIDE_VAR: "lib"}, tmp_path)


def test_environment_puts_the_driver_first_once(tmp_path: Path, built: Path) -> None:
    layout(tmp_path, "/usr/lib64", built)
    libs = find_driver({}, tmp_path)
    caller = {"LD_LIBRARY_PATH": f"/x:{libs.directory}:/y", "TRITON_LIBCUDA_PATH": "/elsewhere"}
    env, notes = driver_environment(libs, caller)
    assert env["LD_LIBRARY_PATH"] == f"{libs.directory}:/x:/y"
    assert env["TRITON_LIBCUDA_PATH"] == str(libs.directory)
    (note,) = notes
    assert "TRITON_LIBCUDA_PATH=/elsewhere from the caller is replaced" in note


PROBE = (
    "import ctypes, json, sys\n"
    "try:\n"
    "    lib = ctypes.CDLL('libcuda.so.1')\n"
    "except OSError as error:\n"
    "    print(json.dumps({'error': str(error)})); sys.exit(0)\n"
    "v = ctypes.c_int(); lib.cuDriverGetVersion(ctypes.byref(v))\n"
    "maps = [line.split()[-1] for line in open('/proc/self/maps') if 'libcuda' in line]\n"
    "print(json.dumps({'version': v.value, 'mapped': sorted(set(maps))}))\n"
)


def test_a_child_finds_libcuda_by_soname_only_through_the_exported_path(tmp_path: Path, built: Path) -> None:
    """What libcudart does (dlopen("libcuda.so.1")), in a fresh process: no ld.so.cache entry and no
    RUNPATH help it; the LD_LIBRARY_PATH discovery exports, set before the process starts, does."""
    system = layout(tmp_path, "/usr/lib/x86_64-linux-gnu", built)
    shutil.copy(LIBC, system / "libc.so.6")
    libs = find_driver({"HOME": str(tmp_path / "home")}, tmp_path)
    bare = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    without = json.loads(subprocess.run([sys.executable, "-c", PROBE], env=bare, capture_output=True).stdout)
    if "error" in without:
        assert "libcuda.so.1: cannot open shared object file" in without["error"]
    else:  # a machine with a real driver in its cache or default directories: that one is loaded
        assert without["mapped"] != [str(system / f"libcuda.so.{DRIVER_VERSION}")]
    env, _ = driver_environment(libs, bare)
    with_it = subprocess.run(
        [sys.executable, "-c", PROBE], env={**bare, **env}, capture_output=True, text=True
    )
    result = json.loads(with_it.stdout)
    assert result["version"] == 13000
    assert result["mapped"] == [str(system / f"libcuda.so.{DRIVER_VERSION}")]
