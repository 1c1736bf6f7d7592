"""Patch 0003's shared-rows kernels against SGLang's decode kernels on a CPU, under the released triton
3.6.0 wheel's interpreter (checkhelpers/attn_rows_interpret.py): indexing, masks, split walks and empty
splits, for causal verify rows, the drafter's block and decode rows. The bits are the H200's job
(checks/gpu/test_attn_exact_verify.py); here a wrong index or mask shows as a wrong partial."""

from __future__ import annotations

from pathlib import Path

import pytest
from checkhelpers import route_interpreter
from checkhelpers.released_wheels import REPO_ROOT, unpacked_wheel

FIXTURE_NEEDS = {"interpreter_env": ("network",)}
PATCH = REPO_ROOT / "patches" / "sglang" / "0003-exact-verify-attention.patch"
DECODE = Path("sglang") / "kernels" / "ops" / "attention" / "decode_attention.py"


@pytest.fixture(scope="module")
def interpreter_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return route_interpreter.interpreter_env(tmp_path_factory.mktemp("attn-rows-interpreter"))


def _run(env: dict[str, str], patch: Path, work: Path):  # noqa: ANN202
    decode = unpacked_wheel("sglang", "0.5.20") / DECODE
    args = ["--decode", str(decode), "--patch", str(patch), "--work", str(work)]
    return route_interpreter.run(env, "-m", "checkhelpers.attn_rows_interpret", *args)


def test_rows_equal_decode_under_the_interpreter(interpreter_env: dict[str, str], tmp_path: Path) -> None:
    result = _run(interpreter_env, PATCH, tmp_path / "modules")
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-4000:]
    assert "10 cases, 0 failures" in result.stdout, log[-4000:]


def test_a_row_that_ignores_its_split_start_is_caught(
    interpreter_env: dict[str, str], tmp_path: Path
) -> None:
    """The mutant folds tiles before a row's own split start (rows of different split sizes share a
    program below 1793 tokens): the check must fail there."""
    gate = "active = has_split & (start_n >= split_kv_start) & (start_n < split_kv_end)"
    text = PATCH.read_text()
    assert gate in text
    mutant = tmp_path / "mutant.patch"
    mutant.write_text(text.replace(gate, "active = has_split & (start_n < split_kv_end)"))
    result = _run(interpreter_env, mutant, tmp_path / "modules")
    assert result.returncode == 1, (result.stdout + result.stderr)[-4000:]
    assert " 0 failures" not in result.stdout
