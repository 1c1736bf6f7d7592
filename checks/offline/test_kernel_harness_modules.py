"""The kernel checks' harness (checks/gpu/pyproject.toml, project bitexact-kernel-harness) installs every
non-test module of checks/gpu as a flat module: its py-modules list is exactly the folder's modules other
than conftest.py and test_*.py, so a new harness module cannot be left out of the install, and each listed
module is found by import here (installed: `pip install -e checks/gpu`, or the offline flake check's
package), without importing it (the harnesses import torch and sglang)."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

import pytest

GPU = Path(__file__).resolve().parents[1] / "gpu"


def listed() -> list[str]:
    project = tomllib.loads((GPU / "pyproject.toml").read_text())
    assert project["project"]["name"] == "bitexact-kernel-harness"
    return project["tool"]["setuptools"]["py-modules"]


def harness_modules(folder: Path) -> list[str]:
    """The folder's modules that are neither a test file nor pytest's conftest."""
    names = (p.stem for p in folder.glob("*.py"))
    return sorted(n for n in names if n != "conftest" and not n.startswith("test_"))


def test_the_harness_lists_every_non_test_module_of_the_folder() -> None:
    modules = harness_modules(GPU)
    assert {"sglang_tree", "series", "smallm_table", "exact_gemm_table"} <= set(modules)
    assert listed() == modules, (
        "checks/gpu/pyproject.toml's py-modules and the folder's non-test modules differ"
    )


def test_the_rule_sees_a_new_module_and_passes_over_tests(tmp_path: Path) -> None:
    for name in ("conftest.py", "test_kernel.py", "harness.py", "new_plan.py"):
        (tmp_path / name).write_text("")
    assert harness_modules(tmp_path) == ["harness", "new_plan"]


@pytest.mark.parametrize("module", listed())
def test_the_harness_module_is_installed(module: str) -> None:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, (
        f"{module} is not importable: install the kernel harness (pip install -e checks/gpu)"
    )
    assert Path(spec.origin).name == f"{module}.py"
