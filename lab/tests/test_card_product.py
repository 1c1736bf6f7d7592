"""lab/card/product.py, which makes the product importable on a GPU host without Nix or a build backend:
the product's packages copied into a deps folder (a fresh Python with only that folder on its path runs
them), copied afresh on every call, and the kernel checks' harness copied as checks/gpu's pyproject lists
it, with a clear refusal when that list is missing or names a module that is not there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab.card import product


def test_the_product_copied_into_deps_runs_from_there_alone(tmp_path: Path) -> None:
    deps = tmp_path / "deps"
    done = subprocess.run(
        [sys.executable, "-m", "lab.card.product", str(deps)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in deps.iterdir()) == sorted(product.PRODUCT)
    assert not list(deps.rglob("__pycache__"))
    # A Python that sees only deps (no site-packages, no editable installs) imports the launcher from it.
    probe = "import exactlaunch.manifest, gpuchecks, bitexact; print(exactlaunch.manifest.__file__)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(deps)}
    ran = subprocess.run([sys.executable, "-S", "-c", probe], env=env, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip().startswith(str(deps))


def test_a_second_call_replaces_a_stale_copy(tmp_path: Path) -> None:
    deps = tmp_path / "deps"
    product.install_product(deps)
    stale = deps / "exactlaunch" / "left_behind.py"
    stale.write_text("x = 1\n")
    product.install_product(deps)
    assert not stale.exists()


def plant_harness(root: Path, listed: list[str], present: list[str]) -> Path:
    root.mkdir()
    modules = ", ".join(f'"{m}"' for m in listed)
    (root / "pyproject.toml").write_text(f"[tool.setuptools]\npy-modules = [{modules}]\n")
    for name in present:
        (root / f"{name}.py").write_text(f"NAME = {name!r}\n")
    return root / "pyproject.toml"


def test_the_harness_modules_are_what_the_pyproject_lists(tmp_path: Path) -> None:
    pyproject = plant_harness(
        tmp_path / "gpu", ["sglang_tree", "series"], ["sglang_tree", "series", "test_x"]
    )
    assert product.harness_modules(pyproject) == ["sglang_tree", "series"]


def test_a_listed_module_that_is_missing_is_named(tmp_path: Path) -> None:
    pyproject = plant_harness(tmp_path / "gpu", ["sglang_tree", "series"], ["sglang_tree"])
    with pytest.raises(product.ProductError, match=r"lists series, which .*gpu does not hold"):
        product.harness_modules(pyproject)


def test_a_pyproject_without_the_list_is_refused_with_what_is_read(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    with pytest.raises(product.ProductError, match=r"no \[tool.setuptools\] py-modules to copy \(KeyError"):
        product.harness_modules(tmp_path / "pyproject.toml")
    with pytest.raises(product.ProductError, match=r"no \[tool.setuptools\] py-modules .*FileNotFoundError"):
        product.harness_modules(tmp_path / "absent" / "pyproject.toml")


def test_the_kernel_harness_is_copied_as_checks_gpu_lists_it(tmp_path: Path) -> None:
    """`--harness`: checks/gpu's own list, every module of it, and nothing else of that folder (its tests
    and conftest stay behind); a Python that sees only deps imports the harness from it."""
    deps = tmp_path / "deps"
    done = subprocess.run(
        [sys.executable, "-m", "lab.card.product", "--harness", str(deps)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    listed = product.harness_modules()
    assert "sglang_tree" in listed and "smallm_table" in listed
    copied = sorted(p.stem for p in deps.glob("*.py"))
    assert copied == sorted(listed) and not any(name.startswith("test_") for name in copied)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(deps)}
    probe = "import sglang_tree, smallm_table; print(sglang_tree.__file__)"
    ran = subprocess.run([sys.executable, "-S", "-c", probe], env=env, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip().startswith(str(deps))
