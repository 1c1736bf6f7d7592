"""`bitexact-server --build-info`: the build this launcher would serve, as flat `name: value` strings, for
bitexact's drift history (`golden check --build-info FILE`) to tell one build from another and list what
changed between two. Read from files only (no import of sglang, torch or deep_gemm: their package
__init__ loads CUDA), so it runs on a machine without a GPU.

What it holds: the recipe (name, sha256 of its file), the Nix store path of the server when the wrapper
names it, Python, the installed versions of SGLang and the packages that compute (torch, triton, ...),
SGLang's patch series (the marker's APPLIED), the sha256 of its content manifest (what the series
produced) and of the whole sglang tree (any other edit), DeepGEMM's version and store path, torch's
CUDA, and this host's driver where NVML answers."""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from exactlaunch.environment import DEEP_GEMM_VAR
from exactlaunch.manifest import MANIFEST, sha256_file
from exactlaunch.preflight import MARKER, installed_package_dir, read_applied

SERVER_VAR = "BITEXACT_SERVER_OUT"  # set by the Nix wrapper (pkgs/server): the server's store path
# Distributions whose version changes what the server computes (absent ones are left out).
PACKAGES = (
    "sglang",
    "sglang-kernel",
    "sgl-kernel",
    "sgl-deep-gemm",
    "torch",
    "triton",
    "transformers",
    "flashinfer-python",
    "flashinfer-cubin",
    "xgrammar",
)
_TORCH_CUDA = re.compile(r"^cuda(?::[^=]*)?\s*=\s*['\"]([^'\"]+)['\"]", re.MULTILINE)


def tree_digest(root: Path) -> str:
    """sha256 over every file under `root` (relative path and bytes, in path order), caches left out."""
    h = hashlib.sha256()
    files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for path in files:
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(sha256_file(path).encode())
    return h.hexdigest()


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def torch_cuda() -> str | None:
    """The CUDA torch was built for, from torch/version.py (read, not imported)."""
    torch = installed_package_dir("torch")
    if torch is None or not (torch / "version.py").is_file():
        return None
    found = _TORCH_CUDA.search((torch / "version.py").read_text())
    return found.group(1) if found else None


def _sglang(sglang: Path | None) -> dict[str, str]:
    if sglang is None:
        return {}
    marker = sglang / MARKER
    found = {"sglang.tree": tree_digest(sglang)}
    try:
        found["sglang.patches"] = " ".join(read_applied(marker)) if marker.is_file() else "none (stock)"
    except (ValueError, SyntaxError) as error:
        found["sglang.patches"] = f"unreadable marker: {error}"
    manifest = sglang.parent / MANIFEST
    if manifest.is_file():
        found["sglang.patched_files"] = sha256_file(manifest)
    elif marker.is_file():
        # The marker (patch 0001) names the whole series whatever else was applied: a tree built with a
        # patch left out still lists it (seen on the H200, the tree without 0003). Only the manifest,
        # written after the series applied, vouches for it; the tree digest still tells builds apart.
        found["sglang.patches"] += " (named by the marker; no manifest: unverified)"
    return found


def _driver() -> dict[str, str]:
    """This host's driver and the CUDA it supports, where NVML answers; nothing without a driver."""
    import gpuhost
    from gpuhost.nvml import local_cards

    try:
        cards = local_cards()
    except (gpuhost.NvmlError, gpuhost.DriverNotFound) as error:  # a driver is there but unreadable
        return {"driver": f"unknown: {str(error).splitlines()[0]}"}
    if not cards:  # no NVIDIA driver on this machine
        return {}
    return {"driver": str(cards[0].driver_version), "cuda_driver": str(cards[0].cuda_driver_version)}


def build_info(
    recipe_name: str,
    recipe_path: Path,
    environ: Mapping[str, str],
    *,
    sglang: Path | None = None,
    with_driver: bool = True,
) -> dict[str, str]:
    found: dict[str, str] = {
        "recipe": recipe_name,
        "recipe.sha256": sha256_file(recipe_path),
        "python": sys.version.split()[0],
    }
    if environ.get(SERVER_VAR):
        found["server"] = environ[SERVER_VAR]
    for dist in PACKAGES:
        version = _version(dist)
        if version is not None:
            found[dist] = version
    found.update(_sglang(sglang if sglang is not None else installed_package_dir("sglang")))
    if environ.get(DEEP_GEMM_VAR):
        found["sgl-deep-gemm.path"] = environ[DEEP_GEMM_VAR]
    cuda = torch_cuda()
    if cuda:
        found["torch.cuda"] = cuda
    if with_driver:
        found.update(_driver())
    return dict(sorted(found.items()))
