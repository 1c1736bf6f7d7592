"""Patch 0007: the GDN chunk kernel snapshots the prefix cache's state at an unaligned prompt's last
64-token boundary in fp32, so a warm extend (a radix hit) ends bit for bit where the cold prompt does.

SGLang's own `chunk_gated_delta_rule` and `TritonGDNKernel` from the patched tree, on the card, against
the contract in gdn_snapshot_harness.py (the same the CPU interpreter check runs): the snapshot is the
state of a prompt stopped at A, a warm extend from it equals the cold outputs and final state, the stock
path's bf16 state does not, a varlen batch changes nothing, and TritonGDNKernel.extend passes the request
on. Lengths: L - A from 1 to 63, one chunk to many (8229 = 8192 + 37, past the recipe's prefill chunk),
in the tiny model's and the 27B shape's GDN heads.
"""

from __future__ import annotations

import inspect

import pytest

TINY = (4, 12, 128)  # lab/card/tiny_model.py: key heads, value heads, head dim
QWEN = (16, 48, 128)  # Qwen3.8-27B's GDN layers
LENGTHS = [65, 67, 68, 71, 79, 95, 127, 131, 137, 549, 1237, 8229]


@pytest.fixture(scope="module")
def chunk(sglang_root):
    from sglang.kernels.ops.attention.fla import chunk

    assert "track_state" in inspect.signature(chunk.chunk_gated_delta_rule).parameters, "the tree lacks 0007"
    return chunk


@pytest.mark.parametrize("geometry", [TINY, QWEN], ids=["tiny-4-12x128", "27b-16-48x128"])
@pytest.mark.parametrize("length", LENGTHS)
def test_warm_extend_from_the_snapshot_equals_cold(chunk, length: int, geometry) -> None:
    import gdn_snapshot_harness

    hk, hv, dim = geometry
    from sglang.srt.layers.attention.linear.kernels.gdn_triton import TritonGDNKernel

    problems = gdn_snapshot_harness.check(
        chunk, TritonGDNKernel(), length, hk, hv, dim, seed=length, device="cuda"
    )
    assert not problems, f"L={length} A={gdn_snapshot_harness.boundary(length)} {geometry}: {problems}"
