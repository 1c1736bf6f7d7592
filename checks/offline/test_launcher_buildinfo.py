"""`bitexact-server --build-info` against the REAL released sglang 0.5.20 tree (stock, and with our series
and its manifest applied) and this machine's real packages, and read back by bitexact's --build-info."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from bitexact.history import read_build_info
from checkhelpers.released_wheels import unpacked_wheel
from checkhelpers.sglang_series import apply_series, copy_touched
from exactlaunch.buildinfo import _TORCH_CUDA, build_info, torch_cuda, tree_digest
from exactlaunch.manifest import MANIFEST

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "nix" / "recipes" / "qwen3.8-27b-exact.json"
SERIES = sorted((REPO / "patches" / "sglang").glob("*.patch"))
FIXTURE_NEEDS = {"patched": ("network",), "stock": ("network",)}  # markers (checkhelpers.markers)


@pytest.fixture(scope="module")
def stock() -> Path:
    return unpacked_wheel("sglang", "0.5.20") / "sglang"


@pytest.fixture
def patched(tmp_path: Path, stock: Path) -> Path:
    """The files of the real 0.5.20 tree our series touches, with the series and its manifest applied."""
    copy_touched(stock.parent, tmp_path)
    apply_series(tmp_path, SERIES)
    return tmp_path / "sglang"


def test_the_patched_tree_names_its_series_and_manifest(patched: Path) -> None:
    info = build_info("r", RECIPE, {}, sglang=patched, with_driver=False)
    assert info["sglang.patches"] == " ".join(p.name for p in SERIES)
    manifest = patched.parent / MANIFEST
    assert info["sglang.patched_files"] == hashlib.sha256(manifest.read_bytes()).hexdigest()
    assert info["recipe.sha256"] == hashlib.sha256(RECIPE.read_bytes()).hexdigest()


def test_an_edit_anywhere_in_the_tree_changes_its_digest(patched: Path) -> None:
    before = tree_digest(patched)
    target = next(p for p in sorted(patched.rglob("*.py")) if p.name != "bitexact_patches.py")
    target.write_text(target.read_text() + "\n# edited\n")
    edited = tree_digest(patched)
    assert edited != before
    (patched / "srt" / "__pycache__").mkdir(exist_ok=True)
    (patched / "srt" / "__pycache__" / "x.pyc").write_bytes(b"cache")
    assert tree_digest(patched) == edited  # caches do not count


def test_a_tree_without_its_manifest_does_not_vouch_for_the_series(patched: Path) -> None:
    """The H200's tree built without 0003 still carried the marker naming all five patches."""
    (patched.parent / MANIFEST).unlink()
    info = build_info("r", RECIPE, {}, sglang=patched, with_driver=False)
    assert info["sglang.patches"].endswith("(named by the marker; no manifest: unverified)")
    assert "sglang.patched_files" not in info


def test_the_stock_tree_says_so(stock: Path) -> None:
    info = build_info("r", RECIPE, {}, sglang=stock, with_driver=False)
    assert info["sglang.patches"] == "none (stock)" and "sglang.patched_files" not in info


def test_the_cli_prints_what_bitexact_reads(tmp_path: Path) -> None:
    """The launcher as a program on this machine's Python (real torch, transformers), its output read by
    bitexact's --build-info."""
    env = {
        **os.environ,
        "BITEXACT_SERVER_OUT": "/nix/store/x",
    }
    done = subprocess.run(
        [sys.executable, "-m", "exactlaunch.cli", "--recipe", str(RECIPE), "--build-info"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    path = tmp_path / "build.json"
    path.write_text(done.stdout)
    info = read_build_info(path)
    assert info["recipe"] == "qwen3.8-27b-exact" and info["server"] == "/nix/store/x"
    assert info["torch"] == importlib.metadata.version("torch")
    assert info["python"] == sys.version.split()[0]
    assert json.loads(done.stdout) == info


def test_torch_cuda_is_read_without_importing_torch() -> None:
    # The CPU wheel here says `cuda: Optional[str] = None`: no CUDA, nothing recorded.
    assert torch_cuda() is None
    # A CUDA build's line, as torch's tools/generate_torch_version.py writes it.
    assert (
        _TORCH_CUDA.search("__version__ = '2.11.0+cu130'\ncuda: Optional[str] = '13.0'\n").group(1) == "13.0"
    )
