"""Which GPUs the container sees, from nvidia-smi, and whether they are the recipe's card.

nvidia-smi is what the NVIDIA container toolkit mounts (with the `utility` driver capability) next to
libcuda, so asking it is the same path in tests (a recorded output behind a stand-in executable) and in
production. The query and its output format:

    nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader
    NVIDIA H200, 9.0
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from image_entrypoint.checks import PreflightError

QUERY = ("--query-gpu=name,compute_cap", "--format=csv,noheader")
GPU_HINT = (
    "run the container with the NVIDIA container toolkit (`docker run --gpus all ...`, or "
    "NVIDIA_VISIBLE_DEVICES=<ids> with the nvidia runtime)"
)


@dataclass(frozen=True)
class Gpu:
    name: str
    compute_cap: str


@dataclass(frozen=True)
class Card:
    """The recipe's `card` entry."""

    slug: str
    name: str
    compute_cap: str


def parse_query(text: str) -> list[Gpu]:
    """GPUs from the CSV nvidia-smi prints for QUERY (one line per GPU, `name, compute_cap`)."""
    gpus: list[Gpu] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        name, sep, cap = line.rpartition(",")
        if not sep or not name.strip() or not cap.strip():
            raise PreflightError(f"cannot read nvidia-smi's line {line!r} (expected `name, compute_cap`)")
        gpus.append(Gpu(name=name.strip(), compute_cap=cap.strip()))
    return gpus


def query_gpus(nvidia_smi: str = "nvidia-smi") -> list[Gpu]:
    """Ask nvidia-smi (a path or a name on PATH) which GPUs are visible."""
    exe = shutil.which(nvidia_smi)
    if exe is None:
        raise PreflightError(f"no GPU visible: `{nvidia_smi}` is not in the container; {GPU_HINT}")
    try:
        done = subprocess.run([exe, *QUERY], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise PreflightError(f"no GPU visible: running {exe} failed ({error}); {GPU_HINT}") from error
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()[-400:]
        raise PreflightError(f"no GPU visible: {exe} exited {done.returncode} ({said}); {GPU_HINT}")
    gpus = parse_query(done.stdout)
    if not gpus:
        raise PreflightError(f"no GPU visible: nvidia-smi lists none; {GPU_HINT}")
    return gpus


def check_driver_library(name: str = "libcuda.so.1") -> None:
    """The CUDA driver library must load: the toolkit mounts it under /usr/lib*, which the image's
    LD_LIBRARY_PATH names next to /run/opengl-driver/lib (where Nix-built binaries look)."""
    try:
        ctypes.CDLL(name)
    except OSError as error:
        raise PreflightError(
            f"the CUDA driver library {name} does not load ({error}); {GPU_HINT}, and keep "
            "NVIDIA_DRIVER_CAPABILITIES=compute,utility (set in the image)"
        ) from error


def check_card(gpus: Sequence[Gpu], card: Card, *, allow_other: bool) -> list[str]:
    """Every visible GPU must be the recipe's card (name and compute capability): the bits depend on
    the card (kernels choose tiles by SM count and architecture). Returns warnings when allowed."""
    wrong = [g for g in gpus if g.name != card.name or g.compute_cap != card.compute_cap]
    if not wrong:
        return []
    seen = "; ".join(f"{g.name} (compute capability {g.compute_cap})" for g in wrong)
    message = (
        f"wrong card: the recipe is for {card.name} (compute capability {card.compute_cap}, slug "
        f"{card.slug}) but the container sees {seen}"
    )
    if allow_other:
        return [
            f"{message}; going on because BITEXACT_ALLOW_OTHER_CARD=1 "
            "(outputs will not match the recipe's card)"
        ]
    raise PreflightError(
        f"{message}. Pick the card with NVIDIA_VISIBLE_DEVICES, or set BITEXACT_ALLOW_OTHER_CARD=1 to "
        "serve anyway (exact within this card, not equal to the recipe's card)"
    )
