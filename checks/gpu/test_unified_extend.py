"""Patch 0006: the deterministic unified extend kernel, stopped after each causal block's last visible
key and (on sm_90, head dims 129-256) launched with a 128-row query tile, gives the bits of the kernel as
released, chunk by chunk, and stays independent of chunking.

Reference: the same tree's extend_attention.py with 0006 taken off (prefill_harness.stock_unified_module),
on the same inputs in the same process. Equality is bitwise (int16 view of the bf16 outputs).
"""

from __future__ import annotations

import pytest

QWEN = (24, 4, 256)
OTHER = (32, 8, 128)
# (prefix, chunk) per sequence: whole short prompts, the recipe's 8192-token chunks of a 32k and a 128k
# prompt, lengths aligned to no block, and several sequences of mixed lengths in one batch.
CASES = [
    ([0], [640]),
    ([0], [2200]),
    ([0], [8192]),
    ([24576], [8192]),
    ([122880], [8192]),
    ([1], [4097]),
    ([8192, 0, 5000, 77], [8192, 300, 1, 129]),
]


@pytest.fixture(scope="module")
def kernels(sglang_root):
    import inspect

    import prefill_harness
    from sglang.kernels.ops.attention import extend_attention

    stock = prefill_harness.stock_unified_module(sglang_root / "sglang")
    assert "kv_loop_end" in inspect.getsource(extend_attention._fwd_kernel_unified.fn), "the tree lacks 0006"
    assert "kv_loop_end" not in inspect.getsource(stock._fwd_kernel_unified.fn), (
        "0006 was not taken off the reference"
    )
    return prefill_harness, extend_attention, stock


def _bitwise(a, b) -> bool:
    import torch

    return torch.equal(a.view(torch.int16), b.view(torch.int16))


@pytest.mark.parametrize("geometry", [QWEN, OTHER], ids=["24-4x256", "32-8x128"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "+".join(f"{p}:{e}" for p, e in zip(*c, strict=True)))
def test_unified_patch_keeps_the_released_bits(kernels, case, geometry) -> None:
    harness, patched, stock = kernels
    prefill = harness.make_prefill(*case, geometry=geometry, seed=sum(case[1]))
    got = prefill.unified(patched.extend_attention_fwd_unified)
    want = prefill.unified(stock.extend_attention_fwd_unified)
    assert not got.isnan().any(), "a row was left unwritten"
    assert _bitwise(got, want), (
        f"0006 changed bits: max abs diff {float((got.float() - want.float()).abs().max())}"
    )


def test_non_causal_is_untouched(kernels) -> None:
    harness, patched, stock = kernels
    prefill = harness.make_prefill([3000], [64], geometry=QWEN, seed=3)
    assert _bitwise(
        prefill.unified(patched.extend_attention_fwd_unified, causal=False),
        prefill.unified(stock.extend_attention_fwd_unified, causal=False),
    )


@pytest.mark.parametrize("geometry", [QWEN, OTHER], ids=["24-4x256", "32-8x128"])
def test_chunking_does_not_move_bits(kernels, geometry) -> None:
    """A 20000-token prompt in one chunk and in chunks of 8192 (the recipe's --chunked-prefill-size)."""
    import torch

    harness, patched, _ = kernels
    whole = harness.make_prefill([0], [20000], geometry=geometry, seed=9)
    full = whole.unified(patched.extend_attention_fwd_unified)
    pieces = []
    for start in range(0, 20000, 8192):
        end = min(start + 8192, 20000)
        chunk = harness.make_prefill([start], [end - start], geometry=geometry, seed=9)
        # the same prompt: reuse the whole prompt's pool, indices and queries for this chunk
        chunk.k_buffer, chunk.v_buffer = whole.k_buffer, whole.v_buffer
        chunk.unified_indices = whole.unified_indices[:end].clone()
        chunk.q = whole.q[start:end].contiguous()
        pieces.append(chunk.unified(patched.extend_attention_fwd_unified))
    assert _bitwise(torch.cat(pieces), full), "chunked prefill differs from the whole prompt"
