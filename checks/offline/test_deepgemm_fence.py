"""patches/deep-gemm: the sm120 fence applies to the released 0.2.0 wheel and yields 0.2.3's code."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from checkhelpers.released_wheels import unpacked_wheel

REPO = Path(__file__).resolve().parents[2]
PATCH_DIR = REPO / "patches" / "deep-gemm"
RECIPE = json.loads((REPO / "nix" / "recipes" / "qwen3.8-27b-exact.json").read_text())
HEADER = RECIPE["deepGemm"]["fencedHeader"]
FENCE = "cutlass::arch::fence_view_async_shared();"
# Tests using these fixtures get the markers (checkhelpers.markers).
FIXTURE_NEEDS = {"patched_020": ("network",)}


def code_lines(text: str) -> list[str]:
    """Lines that are code: comments (// and /* */) and blank lines removed, whitespace kept."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.DOTALL)
    lines = [re.sub(r"\s*//.*$", "", line) for line in text.splitlines()]
    return [line for line in lines if line.strip()]


def _apply(tree: Path, patch: Path) -> subprocess.CompletedProcess[str]:
    with patch.open() as stdin:
        return subprocess.run(
            ["patch", "-p1", "--fuzz=0", "--forward", "--batch", "-d", str(tree)],
            stdin=stdin,
            capture_output=True,
            text=True,
        )


@pytest.fixture
def patched_020(tmp_path: Path) -> Path:
    tree = tmp_path / "site-packages"
    shutil.copytree(unpacked_wheel(RECIPE["deepGemm"]["dist"], RECIPE["deepGemm"]["version"]), tree)
    for name in RECIPE["deepGemm"]["patches"]:
        result = _apply(tree, PATCH_DIR / name)
        assert result.returncode == 0, result.stdout + result.stderr
        # Exactly where written: no offset, no fuzz, nothing rejected.
        assert re.search(r"offset|fuzz|FAILED|reject", result.stdout + result.stderr, re.I) is None, (
            result.stdout
        )
    return tree


def test_series_is_the_recipes() -> None:
    assert sorted(p.name for p in PATCH_DIR.glob("*.patch")) == RECIPE["deepGemm"]["patches"]


def test_patch_touches_only_the_fenced_header() -> None:
    text = (PATCH_DIR / "0001-sm120-fence.patch").read_text()
    targets = re.findall(r"^(?:---|\+\+\+) (\S+)", text, flags=re.M)
    assert targets == [f"a/{HEADER}", f"b/{HEADER}"]
    assert HEADER.startswith("deep_gemm/include/")


def test_fence_patch_gives_the_0_2_3_code(patched_020: Path) -> None:
    released = (unpacked_wheel(RECIPE["deepGemm"]["dist"], "0.2.3") / HEADER).read_text()
    patched = (patched_020 / HEADER).read_text()
    assert code_lines(patched) == code_lines(released)
    assert patched.count(FENCE) == 1


@pytest.mark.network
def test_unpatched_0_2_0_differs_from_0_2_3() -> None:
    dist = RECIPE["deepGemm"]["dist"]
    original = (unpacked_wheel(dist, RECIPE["deepGemm"]["version"]) / HEADER).read_text()
    released = (unpacked_wheel(dist, "0.2.3") / HEADER).read_text()
    assert FENCE not in original
    assert code_lines(original) != code_lines(released)
    # The only code difference is the fence line itself.
    assert [line for line in code_lines(released) if line not in code_lines(original)] == [
        line for line in code_lines(released) if FENCE in line
    ]


def test_patch_does_not_apply_twice(patched_020: Path) -> None:
    result = _apply(patched_020, PATCH_DIR / "0001-sm120-fence.patch")
    assert result.returncode != 0


def test_code_lines_drops_comments_only() -> None:
    text = "a();\n  // note\n\nb(); // tail\n/* block\n still */ c();\n"
    assert code_lines(text) == ["a();", "b();", " c();"]
