"""Exact-mode preflight: the installed SGLang carries the recipe's patch series and DeepGEMM its fence.

SGLang: the marker's APPLIED must be the recipe's list, and every file the series touches must hash to
what the manifest written after applying it says (exactlaunch.manifest), so a partly applied,
hand-edited or stale tree is refused naming the file. DeepGEMM: the header's code must hold the fence.
Nothing here imports sglang or deep_gemm (their package __init__ loads CUDA); files are located with
importlib's finder and read. The image entrypoint reuses `preflight`.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from exactlaunch import manifest
from exactlaunch.recipe import Recipe

MARKER = Path("srt") / "bitexact_patches.py"
FENCE = "cutlass::arch::fence_view_async_shared();"
_RELEASE = re.compile(r"empty_barriers\[[^\]]*\]\s*->\s*arrive\(\s*\)")
SGLANG_FIX = (
    "run the Nix-built server (`nix run .#server`), or, on a fresh sglang install, apply "
    "patches/sglang/*.patch in name order with `patch -p2 --fuzz=0` in the site-packages directory that "
    "holds sglang/, then `python -m exactlaunch.manifest write SITE_PACKAGES --series patches/sglang`"
)
DEEP_GEMM_FIX = (
    "run the Nix-built server (`nix run .#server`), or apply patches/deep-gemm/0001-sm120-fence.patch "
    "with `patch -p1 --fuzz=0` in the site-packages directory that holds deep_gemm/, then empty "
    "SGLANG_DG_CACHE_DIR so no unfenced kernel is served from the JIT cache"
)


@dataclass(frozen=True)
class PreflightFailure:
    component: str
    problem: str
    fix: str

    def __str__(self) -> str:
        return f"{self.component}: {self.problem}\n  fix: {self.fix}"


def installed_package_dir(name: str) -> Path | None:
    """Directory of the importable top-level package `name`, without running its __init__."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def read_applied(marker: Path) -> tuple[str, ...]:
    """The APPLIED tuple of string literals in the marker module; ValueError when there is none."""
    tree = ast.parse(marker.read_text(), filename=str(marker))
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        if any(isinstance(t, ast.Name) and t.id == "APPLIED" for t in node.targets):
            value = ast.literal_eval(node.value)
            if isinstance(value, tuple | list) and all(isinstance(v, str) for v in value):
                return tuple(value)
            raise ValueError("APPLIED is not a tuple of patch file names")
    raise ValueError("no APPLIED assignment")


def check_sglang(package_dir: Path | None, expected: Sequence[str]) -> list[PreflightFailure]:
    """Failures of the SGLang tree at `package_dir` (the `sglang/` directory) against the patch list."""
    if package_dir is None:
        return [PreflightFailure("sglang", "sglang is not importable by this Python", SGLANG_FIX)]
    marker = package_dir / MARKER
    if not marker.is_file():
        problem = f"{package_dir} is not patched: {MARKER} is missing (a stock SGLang)"
        return [PreflightFailure("sglang", problem, SGLANG_FIX)]
    try:
        applied = read_applied(marker)
    except (ValueError, SyntaxError) as error:
        return [PreflightFailure("sglang", f"cannot read APPLIED from {marker}: {error}", SGLANG_FIX)]
    if applied != tuple(expected):
        missing = [p for p in expected if p not in applied]
        extra = [p for p in applied if p not in expected]
        order = ", order differs" if not missing and not extra else ""
        problem = (
            f"{marker} says APPLIED={list(applied)}, the recipe needs {list(expected)} "
            f"(missing {missing}, not in the recipe {extra}{order})"
        )
        return [PreflightFailure("sglang", problem, SGLANG_FIX)]
    return [
        PreflightFailure("sglang", problem, SGLANG_FIX)
        for problem in manifest.verify(package_dir.parent, expected)
    ]


def _code_lines(text: str) -> list[str]:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.DOTALL)
    lines = (re.sub(r"//.*$", "", line).strip() for line in text.splitlines())
    return [line for line in lines if line]


def header_is_fenced(text: str) -> bool:
    """Every release of a pipeline stage (`empty_barriers[...]->arrive()`) follows the proxy fence
    within the two code lines before it (the arrive sits under `if (lane_idx == 0)`)."""
    lines = _code_lines(text)
    releases = [i for i, line in enumerate(lines) if _RELEASE.search(line)]
    return bool(releases) and all(FENCE in "".join(lines[max(0, i - 2) : i + 1]) for i in releases)


def check_deep_gemm(site_root: Path | None, header: str) -> list[PreflightFailure]:
    """Failures of the DeepGEMM install under `site_root` (the directory holding `deep_gemm/`)."""
    if site_root is None:
        return [PreflightFailure("deep_gemm", "deep_gemm is not importable by this Python", DEEP_GEMM_FIX)]
    path = site_root / header
    try:
        text = path.read_text()
    except OSError as error:
        return [PreflightFailure("deep_gemm", f"cannot read {path}: {error.strerror}", DEEP_GEMM_FIX)]
    if not header_is_fenced(text):
        problem = f"{path} lacks the sm120 fence ({FENCE} before the stage's empty-barrier arrive)"
        return [PreflightFailure("deep_gemm", problem, DEEP_GEMM_FIX)]
    return []


def preflight(
    recipe: Recipe, *, sglang_dir: Path | None = None, deep_gemm_root: Path | None = None
) -> list[PreflightFailure]:
    """All failures (empty when ready). Defaults: the sglang and deep_gemm this Python would import."""
    if sglang_dir is None:
        sglang_dir = installed_package_dir("sglang")
    if deep_gemm_root is None:
        found = installed_package_dir("deep_gemm")
        deep_gemm_root = found.parent if found is not None else None
    return check_sglang(sglang_dir, recipe.engine_patches) + check_deep_gemm(
        deep_gemm_root, recipe.deep_gemm_header
    )
