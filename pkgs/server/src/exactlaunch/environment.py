"""The server's environment: the recipe's variables plus what the launcher pins (CUDA, JIT cache, weights).

The Nix wrapper passes its store paths in BITEXACT_* variables; without them (a non-Nix install) the
launcher keeps the caller's settings and says so on stderr.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import exactformats
from gpuhost.driver import cache_home

RECIPE_VAR = "BITEXACT_RECIPE"
DEEP_GEMM_VAR = "BITEXACT_DEEP_GEMM"
CUDA_HOME_VAR = "BITEXACT_CUDA_HOME"
HF_CACHE_VAR = "BITEXACT_HF_HUB_CACHE"
# The variables the launcher decides itself (build_env below; LD_LIBRARY_PATH and TRITON_LIBCUDA_PATH from
# gpuhost.driver.driver_environment at start). A recipe or variant setting one would have --print show its
# value and a start replace it, so the recipe reader refuses them, as it refuses serving flags in the argv.
DECIDED_VARS = frozenset(
    {"HF_HUB_OFFLINE", "HF_HUB_CACHE", "CUDA_HOME", "SGLANG_DG_CACHE_DIR"}
    | {"LD_LIBRARY_PATH", "TRITON_LIBCUDA_PATH"}
)


class EnvError(ValueError):
    """A value the launcher reads from its environment that cannot be used; the message names it and the
    fix."""


def check_caller(caller: Mapping[str, str]) -> list[str]:
    """The caller's environment values the launcher acts on, checked before anything is planned: notes for
    stderr (an XDG_CACHE_HOME that is ignored), EnvError for one that cannot be used (a
    BITEXACT_HF_HUB_CACHE that names no folder: the server, offline, would find no weights there)."""
    notes = []
    note = exactformats.cache_home_note(caller)
    if note is not None:
        notes.append(note)
    value = caller.get(HF_CACHE_VAR)
    if value and not os.path.isdir(value):
        if os.path.islink(value):
            state = f"a symbolic link to {os.readlink(value)}, which is no folder"
        elif os.path.exists(value):
            state = "a file"
        else:
            state = "nothing: no such folder"
        raise EnvError(
            f"${HF_CACHE_VAR}={value!r} names no folder (it is {state}): it names the hub cache the server "
            f"loads the pinned weights from; build one (`nix build .#weights -o weights`, then export "
            f"{HF_CACHE_VAR}=$PWD/weights) or unset it to use HF_HUB_CACHE"
        )
    return notes


@dataclass
class LaunchEnv:
    """The child's full environment, the part the launcher decided, and notes for stderr."""

    full: dict[str, str]
    decided: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def deep_gemm_cache_key(deep_gemm: str, header: bytes | None = None) -> str:
    """The JIT cache key: a store path names immutable files, so the path alone suffices; a path outside
    the store can change in place, so its fenced header's content is folded in when given."""
    digest = hashlib.sha256(deep_gemm.encode())
    if header is not None:
        digest.update(b"\0" + hashlib.sha256(header).digest())
    return digest.hexdigest()[:32]


def deep_gemm_cache_dir(environ: Mapping[str, str], key: str) -> Path:
    return cache_home(environ) / "bitexact" / "deep-gemm" / key


def build_env(
    caller: Mapping[str, str],
    recipe_env: Mapping[str, str],
    *,
    installed_deep_gemm: Path | None = None,
    installed_header: bytes | None = None,
) -> LaunchEnv:
    """The server's environment from the caller's, the recipe/variant env and the BITEXACT_* pins.

    `installed_deep_gemm` (the site-packages root that holds deep_gemm) keys the JIT cache when the
    Nix wrapper did not name the store path; `installed_header` is its fenced header's bytes.
    """
    out = LaunchEnv(full=dict(caller))

    def decide(key: str, value: str) -> None:
        out.full[key] = value
        out.decided[key] = value

    for key, value in recipe_env.items():
        if key in caller and caller[key] != value:
            out.notes.append(f"{key}={caller[key]!r} from the caller is replaced by the recipe's {value!r}")
        decide(key, value)

    if caller.get("HF_HUB_OFFLINE", "1") != "1":
        # The weights are pinned by content; a download at start would serve whatever the Hub has now.
        out.notes.append(
            f"HF_HUB_OFFLINE={caller['HF_HUB_OFFLINE']!r} from the caller is replaced by '1': the server "
            "loads the pinned weights from the cache and never downloads"
        )
    decide("HF_HUB_OFFLINE", "1")
    if caller.get(HF_CACHE_VAR):
        decide("HF_HUB_CACHE", os.path.abspath(caller[HF_CACHE_VAR]))  # the server may change folder
    elif caller.get("HF_HUB_CACHE"):
        out.notes.append(
            f"no baked weights ({HF_CACHE_VAR} unset): "
            f"using the caller's HF_HUB_CACHE={caller['HF_HUB_CACHE']}"
        )
        decide("HF_HUB_CACHE", caller["HF_HUB_CACHE"])
    else:
        out.notes.append(
            f"no baked weights ({HF_CACHE_VAR} unset) and HF_HUB_CACHE unset: "
            "huggingface_hub's default cache (under HF_HOME) must hold the model and drafter"
        )

    if caller.get(CUDA_HOME_VAR):
        decide("CUDA_HOME", caller[CUDA_HOME_VAR])
    elif caller.get("CUDA_HOME"):
        out.notes.append(
            f"{CUDA_HOME_VAR} unset: DeepGEMM/FlashInfer JIT compile with the caller's "
            f"CUDA_HOME={caller['CUDA_HOME']}"
        )
    else:
        out.notes.append(f"{CUDA_HOME_VAR} and CUDA_HOME unset: the JIT compilers look for nvcc themselves")

    if caller.get("SGLANG_DG_CACHE_DIR"):
        out.notes.append(f"SGLANG_DG_CACHE_DIR set by the caller is kept: {caller['SGLANG_DG_CACHE_DIR']}")
    elif caller.get(DEEP_GEMM_VAR):
        decide(
            "SGLANG_DG_CACHE_DIR",
            str(deep_gemm_cache_dir(caller, deep_gemm_cache_key(caller[DEEP_GEMM_VAR]))),
        )
    elif installed_deep_gemm is not None:
        key = deep_gemm_cache_key(str(installed_deep_gemm), installed_header)
        decide("SGLANG_DG_CACHE_DIR", str(deep_gemm_cache_dir(caller, key)))
    else:
        out.notes.append("deep_gemm not found: SGLANG_DG_CACHE_DIR left to SGLang's default")
    return out
