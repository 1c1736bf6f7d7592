"""Site-packages trees the exact-mode preflight accepts or refuses, from the real released wheels:
`patched` (the files of sglang 0.5.20 that our series touches, with the whole series and its content
manifest, sglang_series.py; the sgl-deep-gemm 0.2.0 header with our fence)
and `stock` (sglang 0.5.20 and sgl-deep-gemm 0.2.0 as shipped). Used by the entrypoint tests, in a
process here and in a container."""

from __future__ import annotations

import shutil
from pathlib import Path

from checkhelpers.released_wheels import unpacked_wheel
from checkhelpers.repo import REPO
from checkhelpers.sglang_series import apply_patch, apply_series, copy_touched

FENCED_HEADER = "deep_gemm/include/deep_gemm/impls/sm120_bf16_gemm.cuh"


def patched_tree(root: Path) -> Path:
    """`root` (created) as a site-packages directory whose sglang and deep_gemm pass the preflight."""
    root.mkdir(parents=True, exist_ok=True)
    copy_touched(unpacked_wheel("sglang", "0.5.20"), root)
    apply_series(root)
    # Only the series' files are here; the release's package __init__ imports the rest of SGLang, so the
    # tree gets an empty one (the series does not touch it, so the manifest does not cover it).
    (root / "sglang" / "__init__.py").write_text("")
    header = root / FENCED_HEADER
    header.parent.mkdir(parents=True)
    (root / "deep_gemm" / "__init__.py").write_text("")
    shutil.copy(unpacked_wheel("sgl-deep-gemm", "0.2.0") / FENCED_HEADER, header)
    apply_patch(root, REPO / "patches" / "deep-gemm" / "0001-sm120-fence.patch", 1)
    return root


def stock_tree(root: Path) -> Path:
    """`root` (created) linking the released sglang 0.5.20 and sgl-deep-gemm 0.2.0 packages."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "sglang").symlink_to(unpacked_wheel("sglang", "0.5.20") / "sglang")
    (root / "deep_gemm").symlink_to(unpacked_wheel("sgl-deep-gemm", "0.2.0") / "deep_gemm")
    return root


def released_tree(root: Path, patches: list[Path]) -> Path:
    """`root` holding the released sglang 0.5.20 package, whole (fla's kernels import its utilities), with
    `patches` applied."""
    shutil.copytree(unpacked_wheel("sglang", "0.5.20") / "sglang", root / "sglang", symlinks=True)
    apply_series(root, patches)
    (root / "sglang" / "__init__.py").write_text("")  # the release's imports all of SGLang
    return root
