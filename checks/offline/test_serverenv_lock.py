"""pkgs/server-env: the uv lock agrees with its pyproject and pins what the recipe's pip gave."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
import zipfile
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from checkhelpers.released_wheels import released_wheel
from packaging.markers import Marker
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
ENV_DIR = REPO / "pkgs" / "server-env"
RECIPE = REPO / "nix" / "recipes" / "qwen3.8-27b-exact.json"
EXCLUDE_NEWER = "2026-09-24T00:00:00Z"
# What the recipe's environment ran (DESIGN.md): the lock must hold exactly these.
KEY_PINS = {
    "sglang": "0.5.20",
    "torch": "2.13.0",
    "sgl-deep-gemm": "0.2.0",
    "sglang-kernel": "0.4.7",
    "flashinfer-python": "0.6.18",
}
LINUX_X86_64 = {"sys_platform": "linux", "platform_machine": "x86_64", "platform_system": "Linux"}


def _lock() -> dict[str, Any]:
    with (ENV_DIR / "uv.lock").open("rb") as handle:
        return tomllib.load(handle)


def _packages() -> dict[str, list[dict[str, Any]]]:
    by_name: dict[str, list[dict[str, Any]]] = {}
    for package in _lock()["package"]:
        by_name.setdefault(package["name"], []).append(package)
    return by_name


def _uv() -> str:
    beside = Path(sys.executable).with_name("uv")
    found = str(beside) if beside.exists() else shutil.which("uv")
    if found is None:
        pytest.fail("uv is not installed (checks/requirements-offline.txt lists it)")
    return found


@pytest.mark.network
def test_lock_agrees_with_pyproject() -> None:
    # Needs PyPI (uv re-resolves against the index's metadata); .ci/run has it.
    result = subprocess.run(
        [_uv(), "lock", "--check", "--project", str(ENV_DIR)], capture_output=True, text=True
    )
    assert result.returncode == 0, f"uv.lock is stale; run `nix run .#lock -- uv` (uv said: {result.stderr})"


def test_lock_options_fix_date_and_platform() -> None:
    lock = _lock()
    assert lock["options"]["exclude-newer"] == EXCLUDE_NEWER
    assert lock["supported-markers"] == ["platform_machine == 'x86_64' and sys_platform == 'linux'"]
    cutoff = datetime.fromisoformat(EXCLUDE_NEWER.replace("Z", "+00:00"))
    for package in lock["package"]:
        for artifact in package.get("wheels", []) + ([package["sdist"]] if "sdist" in package else []):
            uploaded = artifact.get("upload-time")
            if uploaded is not None:
                assert datetime.fromisoformat(uploaded.replace("Z", "+00:00")) < cutoff, package["name"]


@pytest.mark.parametrize(("name", "version"), sorted(KEY_PINS.items()))
def test_key_pins(name: str, version: str) -> None:
    versions = [p["version"] for p in _packages().get(name, [])]
    assert versions == [version], f"{name}: lock holds {versions}, the recipe ran {version}"


def test_one_nvcc_with_a_linux_wheel() -> None:
    nvcc = _packages()["nvidia-cuda-nvcc"]
    assert len(nvcc) == 1, "the launcher exports exactly one nvcc as CUDA_HOME"
    wheels = [w["url"].rsplit("/", 1)[1] for w in nvcc[0]["wheels"]]
    assert any("x86_64" in name for name in wheels), wheels


def test_deep_gemm_version_matches_recipe() -> None:
    recipe = json.loads(RECIPE.read_text())
    assert [p["version"] for p in _packages()[recipe["deepGemm"]["dist"]]] == [recipe["deepGemm"]["version"]]
    assert recipe["engine"]["lockedRelease"] == KEY_PINS["sglang"]


def test_every_artifact_has_a_sha256() -> None:
    for package in _lock()["package"]:
        if package["source"].get("virtual") or package["source"].get("editable"):
            continue
        artifacts = package.get("wheels", []) + ([package["sdist"]] if "sdist" in package else [])
        assert artifacts, f"{package['name']} has nothing to fetch"
        for artifact in artifacts:
            assert artifact["hash"].startswith("sha256:") and len(artifact["hash"]) == 7 + 64, artifact


@pytest.mark.parametrize("name", ["sglang", "torch", "triton", "sglang-kernel", "sgl-deep-gemm"])
def test_binary_wheel_for_the_nix_python(name: str) -> None:
    # Nix builds the set with CPython 3.12: each compiled package needs a wheel that interpreter takes.
    (package,) = _packages()[name]
    tags = [w["url"].rsplit("/", 1)[1].split("-")[-3:] for w in package["wheels"]]
    usable = [t for t in tags if t[0] in ("cp312", "py3", "cp310", "cp39") and "x86_64" in t[2]]
    assert usable, f"{name}: no wheel for cp312 on x86_64 among {tags}"


def _sglang_requirements() -> list[Requirement]:
    wheel = released_wheel("sglang", KEY_PINS["sglang"])
    with zipfile.ZipFile(wheel) as archive:
        (meta_name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = archive.read(meta_name).decode()
    prefix = "Requires-Dist: "
    return [Requirement(line[len(prefix) :]) for line in metadata.splitlines() if line.startswith(prefix)]


@pytest.mark.network
def test_lock_satisfies_every_sglang_requirement() -> None:
    packages = _packages()
    checked = 0
    for requirement in _sglang_requirements():
        environment = dict(LINUX_X86_64, python_version="3.12", python_full_version="3.12.0", extra="")
        if requirement.marker is not None and not requirement.marker.evaluate(environment):
            continue
        name = requirement.name.lower().replace("_", "-")
        entries = packages.get(name)
        assert entries, f"sglang needs {requirement}, the lock lacks {name}"
        for entry in entries:
            assert requirement.specifier.contains(entry["version"], prereleases=True), (requirement, entry)
        checked += 1
    assert checked > 60


def test_environment_marker_is_linux_x86_64_only() -> None:
    pyproject = tomllib.loads((ENV_DIR / "pyproject.toml").read_text())
    (marker,) = pyproject["tool"]["uv"]["environments"]
    assert Marker(marker).evaluate(dict(LINUX_X86_64))
    assert not Marker(marker).evaluate({"sys_platform": "darwin", "platform_machine": "x86_64"})
    assert not Marker(marker).evaluate({"sys_platform": "linux", "platform_machine": "aarch64"})
