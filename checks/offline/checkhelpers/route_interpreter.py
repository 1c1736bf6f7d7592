"""Running the series' GEMM route kernels under Triton's interpreter on a CPU (the released triton 3.6.0
wheel): a tree holding only the route files as the series creates them, and the environment for it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from exactlaunch import manifest

from checkhelpers.released_wheels import REPO_ROOT, unpacked_wheel

SERIES = REPO_ROOT / "patches" / "sglang"
ROUTE_FILES = {
    "python/sglang/srt/bitexact_patches.py": "0001-bitexact-marker.patch",
    "python/sglang/srt/batch_invariant_ops/small_m_route.py": "0004-small-m-triton-route.patch",
    "python/sglang/srt/batch_invariant_ops/small_m_tiles.py": "0004-small-m-triton-route.patch",
    "python/sglang/srt/batch_invariant_ops/exact_gemm.py": "0005-exact-gemm-route.patch",
    "python/sglang/srt/batch_invariant_ops/exact_gemm_tiles.py": "0005-exact-gemm-route.patch",
}


def route_tree(root: Path) -> Path:
    """A tree holding only the files the routes need, as the series creates them (empty package inits)."""
    import smallm_table

    for path, patch in ROUTE_FILES.items():
        dest = root / path.removeprefix("python/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(smallm_table.new_file_from_patch((SERIES / patch).read_text(), path))
    for package in ("sglang/srt", "sglang/srt/batch_invariant_ops"):
        (root / package / "__init__.py").touch()
    # checks/gpu takes a tree only with a content manifest; this one holds 0001's whole output (the marker)
    # and the routes' new files alone, so its manifest covers 0001 (a subset, as sglang_tree.py allows).
    manifest.write(root, [SERIES / "0001-bitexact-marker.patch"])
    return root


def interpreter_env(tmp: Path) -> dict[str, str]:
    triton = unpacked_wheel("triton", "3.6.0")
    numpy = unpacked_wheel("numpy", "2.2.6")
    # PYTHONPATH: the released numpy and triton the SGLang kernels run under (unpacked wheels, under test)
    paths = [str(numpy), str(triton), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(paths),
        "TRITON_INTERPRET": "1",
        "TRITON_CACHE_DIR": str(tmp / "triton-cache"),
        "BITEXACT_SGLANG_TREE": str(route_tree(tmp / "tree")),
    }


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=900)
