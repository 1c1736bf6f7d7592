"""lab/kernels/ptx_resources.py compiles patch 0003's rows kernel for a card on this CPU with the released
Triton 3.6.0 wheel's own ptxas (the H200 host's Triton): the verify rows as shipped and the free draft
plan and plain decode's one-row launch compile for sm_90 (the H200) and sm_120 (the recipe's RTX PRO 6000
Blackwell, ptxas-blackwell), and the tool reads their registers and spills from the cubin and counts the
PTX's async copies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from checkhelpers.engine_trees import released_tree
from checkhelpers.released_wheels import unpacked_wheel
from checkhelpers.sglang_series import SERIES

FIXTURE_NEEDS = {"compile_env": ("network",)}
TOOL = ["-m", "lab.kernels.ptx_resources"]
PLANS = [
    "verify shipped: 32 rows, 8 warps",
    "decode: one row, 16-row tile, 4 warps",
    "decode: one row, 16-row tile, 4 warps, tile loop at 3 stages (H200)",
    "draft free: 32 rows, KV 32, 8 warps",
]
STAGED = "decode: one row, 16-row tile, 4 warps, tile loop at 3 stages (H200)"


@pytest.fixture(scope="module")
def compile_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("ptx-resources")
    # PYTHONPATH: the released numpy and triton the SGLang kernels run under (unpacked wheels, under test)
    paths = [str(unpacked_wheel("numpy", "2.2.6")), str(unpacked_wheel("triton", "3.6.0"))]
    tools = ("TRITON_INTERPRET", "TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH")
    env = {k: v for k, v in os.environ.items() if k not in tools}
    return {
        **env,
        "PYTHONPATH": os.pathsep.join([*paths, *filter(None, [os.environ.get("PYTHONPATH")])]),
        "TRITON_CACHE_DIR": str(tmp / "triton-cache"),
        "BITEXACT_SGLANG_TREE": str(released_tree(tmp / "patched", SERIES)),
    }


@pytest.mark.parametrize("arch", [90, 120])
def test_the_rows_kernel_compiles_for_the_card(
    compile_env: dict[str, str], arch: int, tmp_path: Path
) -> None:  # noqa: E501
    out = tmp_path / "found.json"
    args = [sys.executable, *TOOL, "--arch", str(arch), "--json", str(out)]
    for plan in PLANS:
        args += ["--plan", plan]
    result = subprocess.run(args, env=compile_env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    found = json.loads(out.read_text())
    assert found["arch"] == arch and found["triton"] == "3.6.0"
    assert list(found["plans"]) == PLANS
    for got in found["plans"].values():
        assert 0 < got["registers"] <= 255 and got["stack_bytes"] >= 0
        assert got["mma_sync"] > 0 or got["wgmma"]  # the products run on tensor cores
    # the loop at Triton's default is not software-pipelined; at 3 stages it prefetches the KV indices
    # (i64) by async copies, K and V (bf16) not (docs/evidence/ptx-resources-2026-12-03)
    for name, got in found["plans"].items():
        if name == STAGED:
            assert got["async_copies"] > 0 and got["async_copy_loads"] == {"i64": 6}, got
        else:
            assert got["async_copies"] == 0 and got["async_copy_loads"] == {}, (name, got)


def test_an_interpreter_environment_is_refused(compile_env: dict[str, str]) -> None:
    env = {**compile_env, "TRITON_INTERPRET": "1"}
    result = subprocess.run([sys.executable, *TOOL], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "unset TRITON_INTERPRET" in result.stderr
