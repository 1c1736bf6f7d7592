"""pkgs/server-env/elf-needs.json (autoPatchelf search paths between wheels, dlopen directories, the
driver runpath) agrees with uv.lock and with the audit of the real wheels (elf-dlopen.json); the plan
nix/lib/wheel-fixups.nix makes from it reaches every dlopen target; and the ELF reader of
nix/tools/wheel_elf_needs.py reads what readelf reads."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import wheel_elf_needs  # nix/tools, installed as bitexact-nix-tools

ROOT = Path(__file__).resolve().parents[2]
NEEDS = ROOT / "pkgs" / "server-env" / "elf-needs.json"
AUDIT = ROOT / "pkgs" / "server-env" / "elf-dlopen.json"
LOCK = ROOT / "pkgs" / "server-env" / "uv.lock"


def locked_312() -> dict[str, str]:
    lock = tomllib.loads(LOCK.read_text())
    mod = wheel_elf_needs
    return {p["name"]: p["version"] for p in lock["package"] if mod.for_python312(p)}


def test_every_entry_is_a_locked_package_at_its_locked_version() -> None:
    packages = json.loads(NEEDS.read_text())["packages"]
    locked = locked_312()
    stale = {n: (e["version"], locked.get(n)) for n, e in packages.items() if locked.get(n) != e["version"]}
    assert not stale, f"elf-needs.json is stale (rerun nix/tools/wheel_elf_needs.py): {stale}"
    for name, entry in packages.items():
        for provider in [*entry["needs"], *entry["dlopens"]]:
            assert provider in locked, f"{name} needs {provider}, which uv.lock does not hold"
    audited = json.loads(AUDIT.read_text())["packages"]
    stale = {n: (e["version"], locked.get(n)) for n, e in audited.items() if locked.get(n) != e["version"]}
    assert not stale, f"elf-dlopen.json is stale (rerun nix/tools/wheel_elf_needs.py): {stale}"


def test_only_known_sdist_only_packages() -> None:
    # pkgs/server-env/fixups.nix handles these (cuda-tile: a wheel stub, pinned to its real wheel);
    # any other package without a CPython 3.12 x86_64 wheel needs its build system added there.
    lock = tomllib.loads(LOCK.read_text())
    mod = wheel_elf_needs
    sdist_only = {
        p["name"]
        for p in lock["package"]
        if mod.for_python312(p) and "sdist" in p and mod.chosen_wheel(p) is None
    }
    assert sdist_only == {"cuda-tile"}


def test_provider_graph_is_acyclic() -> None:
    # Each edge becomes a build input of the dependent wheel's derivation: a cycle cannot build.
    packages = json.loads(NEEDS.read_text())["packages"]
    # A wheel's own directories come through the `out` placeholder, not as an input.
    edges = {n: (set(e["needs"]) | set(e["dlopens"])) - {n} for n, e in packages.items()}
    done: set[str] = set()

    def visit(node: str, path: tuple[str, ...]) -> None:
        assert node not in path, f"cycle: {' -> '.join((*path, node))}"
        if node in done:
            return
        for dep in edges.get(node, ()):
            visit(dep, (*path, node))
        done.add(node)

    for name in edges:
        visit(name, ())


def plan() -> dict[str, Any]:
    """nix/lib/wheel-fixups.nix's plan over elf-needs.json, evaluated by the real Nix."""
    expr = f"(import {ROOT}/nix/lib/wheel-fixups.nix).plan (builtins.fromJSON (builtins.readFile {NEEDS}))"
    done = subprocess.run(
        ["nix-instantiate", "--eval", "--strict", "--json", "--expr", expr],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.nix
def test_every_dlopen_target_is_on_the_planned_runpath() -> None:
    """Each soname a locked wheel's library names and its original RUNPATH reached in pip's site-packages
    (the audit of the real wheels) lies in a directory the plan appends to that wheel's RUNPATH:
    autoPatchelf keeps only DT_NEEDED hits, so anything else is lost unless appended."""
    planned = plan()
    audit = json.loads(AUDIT.read_text())["packages"]
    unreachable = []
    checked = 0
    for package, entry in audit.items():
        appended = {
            ("(own)" if d["own"] else d["provider"], d["dir"])
            for d in planned.get(package, {}).get("appendRunpaths", [])
        }
        for library, info in entry["libraries"].items():
            for soname, locations in info["reached"].items():
                checked += 1
                wanted = {("(own)" if p == package else p, d) for p, d in locations}
                if not appended & wanted:
                    unreachable.append(f"{package}: {library} -> {soname} (in {sorted(wanted)})")
    assert checked > 0
    assert not unreachable, "dlopen targets off the planned RUNPATH:\n" + "\n".join(unreachable)


@pytest.mark.nix
def test_every_wheel_that_loads_the_driver_gets_the_driver_runpath() -> None:
    """A wheel whose libraries need or name a driver library (libcudart dlopens libcuda.so.1 and has no
    RUNPATH) gets autoAddDriverRunpath: the plan's `driver`."""
    planned = plan()
    mod = wheel_elf_needs
    audit = json.loads(AUDIT.read_text())["packages"]
    loads_driver = {n for n, e in audit.items() if any(i["driver"] for i in e["libraries"].values())}
    needs_driver = {
        n
        for n, e in json.loads(NEEDS.read_text())["packages"].items()
        if any(map(mod.DRIVER.match, e["unresolved"]))
    }
    assert {"nvidia-cuda-runtime", "torch", "nvidia-cudnn-cu13"} <= loads_driver
    without = sorted(n for n in loads_driver | needs_driver if not planned.get(n, {}).get("driver"))
    assert not without, f"wheels that load the driver without the driver runpath: {without}"
    # libcudart in particular: no RUNPATH of its own, a dlopen of libcuda.so.1.
    cudart = audit["nvidia-cuda-runtime"]["libraries"]["nvidia/cu13/lib/libcudart.so.13"]
    assert cudart["runpath"] == [] and cudart["driver"] == ["libcuda.so.1"]


def test_unversioned_mentions_name_the_versioned_files() -> None:
    mod = wheel_elf_needs
    data = b"\0libcudnn_ops.so\0%s/libnvrtc.so.13\0xlibnot.so.1\0/usr/lib/libcuda.so.1\0"
    assert mod.mentioned_sonames(data) == {"libcudnn_ops.so", "libnvrtc.so.13", "libcuda.so.1"}
    assert mod._names("libcudnn_ops.so", "libcudnn_ops.so.9")
    assert not mod._names("libcudnn_ops.so", "libcudnn_ops_train.so.9")
    assert not mod._names("libnvrtc.so.13", "libnvrtc.so.13.0")
    assert mod.origin_dirs(
        "nvidia/cudnn/lib/libcudnn.so.9", ["$ORIGIN", "$ORIGIN/../../cu13/lib", "/usr/lib"]
    ) == [
        "nvidia/cudnn/lib",
        "nvidia/cu13/lib",
    ]


def test_the_cuda_wheels_that_need_siblings_are_covered() -> None:
    packages = json.loads(NEEDS.read_text())["packages"]
    assert "nvidia-cublas" in packages["torch"]["needs"]
    assert "torch" in packages["sgl-deep-gemm"]["needs"]
    assert "libcuda.so.1" in packages["torch"]["unresolved"]


@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl", 3),
        ("torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl", None),
        ("sglang_kernel-0.4.7-cp310-abi3-manylinux2014_x86_64.whl", 2),
        ("six-1.17.0-py2.py3-none-any.whl", 1),
        ("cryptography-46.0.0-cp311-abi3-musllinux_1_2_x86_64.whl", None),
        ("x-1.0-cp312-cp312-manylinux_2_28_aarch64.whl", None),
    ],
)
def test_wheel_choice_is_cpython312_glibc_x86_64(name: str, rank: int | None) -> None:
    assert wheel_elf_needs.wheel_rank(name) == rank


@pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf (binutils) not installed")
def test_elf_reader_agrees_with_readelf() -> None:
    mod = wheel_elf_needs
    candidates = [
        Path(sys.executable).resolve(),
        Path(shutil.which("nix-instantiate") or shutil.which("ls") or "/bin/ls").resolve(),
    ]
    checked = 0
    for path in candidates:
        dump = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True).stdout
        expected = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", dump)
        with path.open("rb") as stream:
            elf = mod.read_elf(stream)
        assert elf is not None and elf.machine == mod.EM_X86_64
        assert elf.needed == expected
        runpath = re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[(.+?)\]", dump)
        assert elf.runpath == (runpath[0].split(":") if runpath else [])
        checked += bool(expected)
    assert checked, "no dynamically linked binary to compare"
