"""triton's `libcuda_dirs()` behaves the same in the lock's 3.7.1 and the lent H200's 3.6.0, so the GPU
run of the driver discovery under 3.6 stands for 3.7.1 (docs/gpu-runtime.md): read from the real
wheels, the function is the same text, it takes TRITON_LIBCUDA_PATH before anything else and runs
/sbin/ldconfig otherwise, the knob reads that variable, and launchers link against libcuda.so.1 with
the same build code."""

from __future__ import annotations

import ast

import pytest
from checkhelpers.wheel_members import locked_member, pypi_member

pytestmark = pytest.mark.network
DRIVER = "triton/backends/nvidia/driver.py"


def function(source: str, name: str) -> str:
    (node,) = [n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name]
    return ast.get_source_segment(source, node) or ""


def test_libcuda_dirs_is_the_same_in_3_6_and_3_7() -> None:
    version, locked = locked_member("triton", DRIVER)
    assert version == "3.7.1"
    lent = pypi_member("triton", "3.6.0", DRIVER)
    body = function(locked, "libcuda_dirs")
    assert body == function(lent, "libcuda_dirs")
    lines = body.splitlines()
    assert lines[1:3] == [
        "    if env_libcuda_path := knobs.nvidia.libcuda_path:",
        "        return [env_libcuda_path]",
    ]
    assert '    libs = subprocess.check_output(["/sbin/ldconfig", "-p"]).decode(errors="ignore")' in lines
    assert function(locked, "library_dirs") == function(lent, "library_dirs")
    for source in (locked, lent):
        assert "libraries = ['libcuda.so.1']" in source.splitlines()


def test_the_knob_and_the_link_step_are_the_same() -> None:
    knob = '    libcuda_path: env_opt_str = env_opt_str("TRITON_LIBCUDA_PATH")'
    for knobs in (
        locked_member("triton", "triton/knobs.py")[1],
        pypi_member("triton", "3.6.0", "triton/knobs.py"),
    ):
        assert knob in knobs.splitlines()
    build = locked_member("triton", "triton/runtime/build.py")[1]
    assert build == pypi_member("triton", "3.6.0", "triton/runtime/build.py")
    assert 'return f"-l:{lib}"' in function(build, "_library_flag")
