"""Patch 0007 on a CPU under Triton 3.6's interpreter (checkhelpers/gdn_snapshot_interpret.py): SGLang
0.5.20's own GDN chunk kernels, from the released wheel with the series applied, snapshot the state at a
prefix-cache boundary in fp32, and a warm extend from that snapshot ends where the cold prompt does,
while the bf16 state the stock path saves does not. Without 0007 the script refuses the tree."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from checkhelpers.engine_trees import released_tree
from checkhelpers.released_wheels import unpacked_wheel
from checkhelpers.sglang_series import SERIES

FIXTURE_NEEDS = {"interpreter_env": ("network",)}
SNAPSHOT_PATCH = "0007-exact-gdn-prefix-snapshot.patch"


@pytest.fixture(scope="module")
def interpreter_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("gdn-snapshot-interpreter")
    # PYTHONPATH: the released numpy and triton the SGLang kernels run under (unpacked wheels, under test)
    paths = [str(unpacked_wheel("numpy", "2.2.6")), str(unpacked_wheel("triton", "3.6.0"))]
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([*paths, *filter(None, [os.environ.get("PYTHONPATH")])]),
        "TRITON_INTERPRET": "1",
        "TRITON_CACHE_DIR": str(tmp / "triton-cache"),
        "BITEXACT_SGLANG_TREE": str(released_tree(tmp / "patched", SERIES)),
    }


def _run(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "checkhelpers.gdn_snapshot_interpret"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_the_fp32_snapshot_restores_the_cold_state(interpreter_env: dict[str, str]) -> None:
    result = _run(interpreter_env)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-4000:]
    assert "4 cases, 0 failures" in result.stdout, log[-4000:]


def test_a_tree_without_0007_is_refused(interpreter_env: dict[str, str], tmp_path: Path) -> None:
    without = [p for p in SERIES if p.name != SNAPSHOT_PATCH]
    assert len(without) == len(SERIES) - 1
    result = _run({**interpreter_env, "BITEXACT_SGLANG_TREE": str(released_tree(tmp_path, without))})
    assert result.returncode == 1, (result.stdout + result.stderr)[-4000:]
    assert f"the tree lacks {SNAPSHOT_PATCH}" in result.stdout
