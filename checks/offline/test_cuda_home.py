"""FlashInfer's JIT link line against the merged CUDA home (pkgs/server/cuda-home.nix): the flags come from
the real flashinfer-python 0.6.18 (the ldflags list of jit/cpp_ext.py's generate_ninja_build_for_op,
read with ast), the tree from the real nvidia-cuda-runtime 13.0.96 wheel laid out as cuda-home.nix lays
it out, and pkgs/server/cuda-home-links.sh is the step cuda-home.nix runs on it. Without that step the
link fails; with it the op links, needs libcudart.so.13 and libcuda.so.1, and loads and calls into the
driver (the stand-in libcuda) through the path driver discovery exports."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from checkhelpers.driver_standins import install_driver
from checkhelpers.released_wheels import unpacked_wheel
from gpuhost.driver import driver_environment, find_driver

REPO = Path(__file__).resolve().parents[2]
LINKS = REPO / "pkgs" / "server" / "cuda-home-links.sh"
pytestmark = pytest.mark.network
# An op that calls into the CUDA runtime and the driver, as FlashInfer's ops do.
OP = """
int cudaRuntimeGetVersion(int *);
int cuDriverGetVersion(int *);
int op_runtime_version(void) { int v = 0; cudaRuntimeGetVersion(&v); return v; }
int op_driver_version(void) { int v = 0; cuDriverGetVersion(&v); return v; }
"""


def flashinfer_ldflags() -> list[str]:
    """The ldflags list FlashInfer 0.6.18 writes into each JIT op's ninja file."""
    source = unpacked_wheel("flashinfer-python", "0.6.18") / "flashinfer" / "jit" / "cpp_ext.py"
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.FunctionDef) and node.name == "generate_ninja_build_for_op":
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and getattr(stmt.targets[0], "id", None) == "ldflags":
                    return list(ast.literal_eval(stmt.value))
    raise AssertionError(f"no ldflags list in {source}")


@pytest.fixture()
def cuda_home(tmp_path: Path) -> Path:
    """nvidia/cu13 of the runtime wheel, copied as cuda-home.nix's `cp -rs` merges the wheels' trees."""
    home = tmp_path / "cuda-home"
    shutil.copytree(unpacked_wheel("nvidia-cuda-runtime", "13.0.96") / "nvidia" / "cu13", home, symlinks=True)
    return home


def link(home: Path, tmp: Path) -> subprocess.CompletedProcess[str]:
    flags = [f.replace("$cuda_home", str(home)) for f in flashinfer_ldflags()]
    assert flags[:3] == ["-shared", f"-L{home}/lib64", f"-L{home}/lib64/stubs"]
    src = tmp / "op.c"
    src.write_text(OP)
    obj = tmp / "op.o"
    subprocess.run(["cc", "-fPIC", "-c", str(src), "-o", str(obj)], check=True)
    return subprocess.run(["cc", str(obj), *flags, "-o", str(tmp / "op.so")], capture_output=True, text=True)


def needed(path: Path) -> list[str]:
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True).stdout
    return [line.split("[")[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]


def test_the_wheels_tree_alone_cannot_link_a_flashinfer_op(cuda_home: Path, tmp_path: Path) -> None:
    done = link(cuda_home, tmp_path)
    assert done.returncode != 0 and "cannot find -lcudart" in done.stderr


def test_the_links_make_it_link_against_the_runtime_and_the_driver(cuda_home: Path, tmp_path: Path) -> None:
    subprocess.run(["bash", str(LINKS), str(cuda_home)], check=True)
    subprocess.run(["bash", str(LINKS), str(cuda_home)], check=True)  # a second run changes nothing
    assert os.readlink(cuda_home / "lib64") == "lib"
    assert os.readlink(cuda_home / "lib" / "libcudart.so") == "libcudart.so.13"
    done = link(cuda_home, tmp_path)
    assert done.returncode == 0, done.stderr
    assert needed(tmp_path / "op.so") == ["libcudart.so.13", "libcuda.so.1"]

    # Loaded as a JIT op is: the runtime from the CUDA home, the driver from discovery's path.
    driver = install_driver(tmp_path / "driver")
    env, _ = driver_environment(find_driver({"BITEXACT_DRIVER_LIB": str(driver)}), {})
    env["LD_LIBRARY_PATH"] += f":{cuda_home}/lib"
    code = (
        f"import ctypes; op = ctypes.CDLL({str(tmp_path / 'op.so')!r}); "
        "print(op.op_runtime_version(), op.op_driver_version())"
    )
    run = subprocess.run(["python3", "-c", code], env={**os.environ, **env}, capture_output=True, text=True)
    assert run.stdout.split() == ["13000", "13000"], run.stderr
