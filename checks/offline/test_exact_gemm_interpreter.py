"""Patch 0005's exact GEMM kernels on a CPU under Triton 3.6's interpreter
(checkhelpers/exact_gemm_interpret.py): every config the rule can return, and a few grouped, flattened and
persistent ones beyond it, compute a @ w.T (+ bias) into exactly their output, in fp16 and fp32, with rows
that do not depend on M, and a TMA config falls back to pointer loads with the same result. The route's files
come straight out of the series."""

from __future__ import annotations

import pytest
from checkhelpers import route_interpreter

FIXTURE_NEEDS = {"interpreter_env": ("network",)}


@pytest.fixture(scope="module")
def interpreter_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return route_interpreter.interpreter_env(tmp_path_factory.mktemp("exact-gemm-interpreter"))


def test_every_config_computes_the_product(interpreter_env: dict[str, str]) -> None:
    result = route_interpreter.run(interpreter_env, "-m", "checkhelpers.exact_gemm_interpret")
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-4000:]
    assert " 0 failures" in result.stdout, log[-4000:]
