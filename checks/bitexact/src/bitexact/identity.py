"""Who ran this: GPU name, driver and CUDA version (nvidia-smi), and the card slug that keys goldens."""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

# Card names as nvidia-smi prints them -> the slugs that name golden directories (DESIGN.md).
KNOWN_CARDS = (
    ("RTX PRO 6000 Blackwell", "rtx-pro-6000-blackwell"),
    ("H200", "h200"),
    ("H100", "h100"),
)


def slug_for(gpu_name: str) -> str:
    for needle, slug in KNOWN_CARDS:
        if needle.lower() in gpu_name.lower():
            return slug
    return re.sub(r"[^a-z0-9]+", "-", gpu_name.lower().removeprefix("nvidia ")).strip("-") or "unknown"


def nvidia_smi() -> dict[str, Any]:
    """{} when there is no nvidia-smi (a CPU machine)."""
    if shutil.which("nvidia-smi") is None:
        return {}
    try:
        query = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        header = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30).stdout
    except (subprocess.SubprocessError, OSError):
        return {}
    gpus = [
        dict(
            zip(("name", "driver", "compute_capability"), (f.strip() for f in line.split(",")), strict=False)
        )
        for line in query.strip().splitlines()
    ]
    cuda = re.search(r"CUDA Version:\s*([0-9.]+)", header)
    return {
        "gpus": gpus,
        "driver": gpus[0]["driver"] if gpus else None,
        "cuda_driver_api": cuda.group(1) if cuda else None,
    }


def detect_card() -> str:
    info = nvidia_smi()
    gpus = info.get("gpus") or []
    return slug_for(gpus[0]["name"]) if gpus else "cpu"
