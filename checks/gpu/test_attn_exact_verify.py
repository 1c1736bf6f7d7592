"""Patch 0003: verify rows give decode's bits, decode through the patch keeps them, draft rows are fast
and repeatable; eager and under CUDA-graph replay.

Every check calls the patched TritonAttnBackend methods (init_forward_metadata, forward_extend,
forward_decode, init_cuda_graph_state, init_forward_metadata_out_graph) on SGLang's own pools, layers,
batches and DFLASH verify input, with SGLang's Triton kernels. Reference: the same tokens decoded one
step at a time by SGLang's own decode (the stock backend's forward_decode). Equality is bitwise
(torch.equal on the bf16 outputs).
"""

from __future__ import annotations

import os

import attn_plans
import pytest

WIDTH = 8  # --speculative-num-draft-tokens 8
QWEN = (24, 4, 256)  # the 27B shape's full-attention layers (query heads, KV heads, head dim)
OTHER = (32, 8, 128)  # a common GQA shape nothing else in the series assumes

# Around the split tile (256): the last draft row crosses into a new split where prefix + j + 1 passes a
# multiple of 256; below 1793 tokens rows of one request get different split sizes. Plus the recipe's
# reference prompts (640, 2.2k) and prefixes no earlier check listed (4097, 33333).
SHORT_PREFIXES = [
    1,
    7,
    248,
    249,
    255,
    256,
    257,
    504,
    511,
    512,
    513,
    640,
    767,
    1023,
    1024,
    1785,
    1793,
    2200,
    4097,
]
LONG_PREFIXES = [8191, 32768, 33333, 65533, 131072]
OTHER_PREFIXES = [1, 257, 1000, 4097, 33333, 131072]
MIXED = [[3, 255, 256, 640, 1000, 2200, 4097, 9000], [1, 257, 4097, 33333], [131072, 1, 2200]]


@pytest.fixture(scope="module")
def harness(sglang_root):
    import attn_harness

    return attn_harness


def _first_difference(a, b):
    import torch

    diff = (a.float() - b.float()).abs()
    rows = torch.nonzero(diff.amax(dim=1)).flatten().tolist()
    return rows[:5], float(diff.max())


def assert_bitwise(got, want, what: str) -> None:
    import torch

    assert torch.equal(got.view(torch.int16), want.view(torch.int16)), (
        f"{what}: rows differing (first 5, max abs diff) {_first_difference(got, want)}"
    )


def _verify_equals_decode(harness, prefixes: list[int], geometry: tuple[int, int, int], seed: int) -> None:
    case = harness.make_case(prefixes, WIDTH, seed=seed, geometry=geometry)
    decoded = case.run_decode()
    assert_bitwise(case.run_verify(case.backend), decoded, f"verify rows vs decode {prefixes} {geometry}")
    assert_bitwise(case.run_decode(case.backend), decoded, f"patched decode vs decode {prefixes} {geometry}")


@pytest.mark.parametrize("prefix", SHORT_PREFIXES)
def test_verify_rows_equal_decode(harness, prefix: int) -> None:
    _verify_equals_decode(harness, [prefix], QWEN, seed=prefix)


@pytest.mark.parametrize("prefix", LONG_PREFIXES)
def test_verify_rows_equal_decode_long(harness, prefix: int) -> None:
    _verify_equals_decode(harness, [prefix], QWEN, seed=prefix)


@pytest.mark.parametrize("prefix", OTHER_PREFIXES)
def test_verify_rows_equal_decode_other_geometry(harness, prefix: int) -> None:
    _verify_equals_decode(harness, [prefix], OTHER, seed=prefix + 1)


@pytest.mark.parametrize("geometry", [QWEN, OTHER], ids=["24-4x256", "32-8x128"])
@pytest.mark.parametrize("prefixes", MIXED, ids=["eight", "four", "three-long"])
def test_verify_mixed_batch_equal_decode(harness, prefixes: list[int], geometry) -> None:
    """Several requests in flight (the recipe allows 8), mixed lengths, one verify batch."""
    _verify_equals_decode(harness, prefixes, geometry, seed=len(prefixes))


# The tile plans the kernel bench times (attn_plans.py), each set as listed (this card's own plan,
# _CARD_PLANS, emptied): a plan may ship, for any card, only once its rows equal decode's here.
TILE_PLANS = attn_plans.TILE_PLANS


@pytest.fixture
def tile_plan(request, sglang_root, monkeypatch):
    from sglang.srt.layers.attention import exact_verify_attention as rows_module

    monkeypatch.setattr(rows_module, "_CARD_PLANS", {})  # the plan as listed, not this card's own
    for name, value in zip(attn_plans.TILE_NAMES, request.param, strict=True):
        assert hasattr(rows_module, name), f"patch 0003 has no {name}: the tile plans need updating"
        monkeypatch.setattr(rows_module, name, value)
    return request.param


@pytest.mark.parametrize("tile_plan", TILE_PLANS, ids=lambda p: "-".join(map(str, p)), indirect=True)
@pytest.mark.parametrize(
    ("prefixes", "geometry"),
    [([257], QWEN), ([2200], QWEN), ([131072], QWEN), ([1, 257, 4097, 33333], QWEN), ([4097, 1000], OTHER)],
    ids=["257", "2200", "131072", "mixed", "32-8x128"],
)
def test_verify_tile_plans_equal_decode(harness, tile_plan, prefixes: list[int], geometry) -> None:
    _verify_equals_decode(harness, prefixes, geometry, seed=sum(prefixes))


def test_stock_verify_differs_from_decode(harness) -> None:
    """Without the patch the check would fail: the stock unified kernel is not decode's arithmetic."""
    import torch

    differing = []
    for prefix in (640, 2200, 8191):
        case = harness.make_case([prefix], WIDTH, seed=prefix)
        decoded = case.run_decode()
        stock = case.run_verify(case.stock)
        assert case.stock.__dict__.get("_bitexact_exact_verify", "unset") is None
        if not torch.equal(stock, decoded):
            differing.append((prefix, _first_difference(stock, decoded)))
    print(f"stock verify vs decode, differing (prefix, (rows, max abs diff)): {differing}")
    assert differing, "stock verify equalled decode at every prefix: the check could not catch a regression"


def _relative_error(got, want) -> float:
    return float((got.float() - want.float()).norm() / want.float().norm())


@pytest.fixture(params=["verify-rows", "free", "card"])
def draft_plan(request, sglang_root, monkeypatch):
    """The drafter's plan: the verify rows' plan (patch 0003's constants, free plan off), the free draft
    plan with the constants' tiles, and this card's own plan (_CARD_PLANS: the H200 ships the free plan
    with 64-row tiles)."""
    from sglang.srt.layers.attention import exact_verify_attention as rows_module

    assert hasattr(rows_module, "_DRAFT_FREE"), "patch 0003 has no free draft plan"
    assert hasattr(rows_module, "_CARD_PLANS"), "patch 0003 has no per-card plans"
    if request.param != "card":
        monkeypatch.setattr(rows_module, "_CARD_PLANS", {})
        monkeypatch.setattr(rows_module, "_DRAFT_FREE", request.param == "free")
    else:
        import torch

        device = torch.device("cuda", torch.cuda.current_device())
        if torch.cuda.get_device_capability(device) == (9, 0):  # the H200's entry: the free plan, 64 rows
            assert rows_module.plan_value("_DRAFT_FREE", device) is True
            assert rows_module.plan_value("_DRAFT_TILE_MAX", device) == 64
    return request.param


@pytest.mark.parametrize("geometry", [QWEN, OTHER], ids=["24-4x256", "32-8x128"])
@pytest.mark.parametrize("prefix", [1, 257, 2200, 33333, 131072])
def test_draft_rows_compute_the_drafters_attention(harness, draft_plan, prefix: int, geometry) -> None:
    """The drafter's non-causal block: the stock unified kernel's function (bf16 rounding apart), the
    same bits run to run, and a request's rows alone equal its rows in a batch."""
    case = harness.make_case([prefix, 640, 5], WIDTH, seed=prefix + 7, geometry=geometry)
    got = case.run_draft(case.backend)
    want = case.run_draft(case.stock)
    error = _relative_error(got, want)
    assert error < 1e-2, f"draft rows vs the stock unified kernel: relative error {error}"
    assert_bitwise(case.run_draft(case.backend), got, "draft rows, second run")
    alone = case.subset([0])
    assert_bitwise(alone.run_draft(alone.backend), got[:WIDTH], "draft rows alone vs in a batch")


@pytest.mark.parametrize("prefixes", [[640], [255, 257, 2200, 1]], ids=["bs1", "bs4"])
def test_verify_cuda_graph_replay_equals_decode(harness, draft_plan, prefixes: list[int]) -> None:
    """Captured with the graph runner's fill lengths, replayed with the real ones: verify rows equal
    decode and draft rows equal their eager selves."""
    import torch

    max_bs = 4
    case = harness.make_case(prefixes, WIDTH, seed=len(prefixes), max_bs=max_bs)
    backend = case.backend
    decoded = case.run_decode()
    eager_draft = case.run_draft(backend)
    case.run_verify(backend)  # eager first: compiles the kernels outside the capture
    backend.init_cuda_graph_state(max_bs, max_bs * WIDTH)
    fill = backend.get_cuda_graph_seq_len_fill_value()
    capture_batch = case.verify_batch([fill] * case.bs)
    backend.init_forward_metadata_out_graph(capture_batch, in_capture=True)
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        out = backend.forward_extend(case.q, case.k_draft, case.v_draft, case.layer, capture_batch)
        draft = backend.forward_extend(case.q, case.k_draft, case.v_draft, case.draft_layer, capture_batch)
    torch.cuda.current_stream().wait_stream(stream)
    for _ in range(2):
        out.zero_()
        draft.zero_()
        backend.init_forward_metadata_out_graph(case.verify_batch(), in_capture=False)
        graph.replay()
        torch.cuda.synchronize()
        assert_bitwise(out, decoded, "replayed rows vs decode")
        assert_bitwise(draft, eager_draft, "replayed draft rows vs eager draft rows")


@pytest.mark.parametrize("prefixes", [[2200], [255, 257, 33333, 1]], ids=["bs1", "bs4"])
def test_decode_cuda_graph_replay_equals_decode(harness, prefixes: list[int]) -> None:
    """Decode through the patch, captured in a graph and replayed, equals SGLang's decode."""
    import torch

    max_bs = 4
    case = harness.make_case(prefixes, WIDTH, seed=11, max_bs=max_bs)
    backend = case.backend
    step = WIDTH - 1
    want = case.run_decode()[case.rows(step)]
    batch = case.decode_batch(step)
    idx = case.rows(step)
    q, k, v = (t[idx].contiguous() for t in (case.q, case.k_draft, case.v_draft))
    backend.init_forward_metadata(batch)
    backend.forward_decode(q, k, v, case.layer, batch)  # compile outside the capture
    backend.init_cuda_graph_state(max_bs, max_bs * WIDTH)
    fill = backend.get_cuda_graph_seq_len_fill_value()
    capture = case.decode_batch(step)
    capture.seq_lens = torch.full_like(capture.seq_lens, fill)
    backend.init_forward_metadata_out_graph(capture, in_capture=True)
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        out = backend.forward_decode(q, k, v, case.layer, capture)
    torch.cuda.current_stream().wait_stream(stream)
    for _ in range(2):
        out.zero_()
        backend.init_forward_metadata_out_graph(batch, in_capture=False)
        graph.replay()
        torch.cuda.synchronize()
        assert_bitwise(out, want, "replayed patched decode vs decode")


def test_exact_refill_is_device_only(harness) -> None:
    """The per-step row refill does no host copy and no sync: it captures into a CUDA graph (either
    would fail the capture), and a replay with the real lengths fills what the eager build fills."""
    import torch
    from sglang.srt.layers.attention.exact_verify_attention import (
        exact_verify_fill_graph,
        exact_verify_state,
    )

    case = harness.make_case([255, 257, 2200, 1], WIDTH, seed=5, max_bs=4)
    backend = case.backend
    backend.init_cuda_graph_state(4, 4 * WIDTH)
    batch = case.verify_batch()
    seq_lens = torch.ones_like(batch.seq_lens)  # the graph's input buffer, at the runner's fill value
    exact_verify_fill_graph(backend, case.bs, seq_lens, batch.spec_info, case.req_pool_indices)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        exact_verify_fill_graph(backend, case.bs, seq_lens, batch.spec_info, case.req_pool_indices)
    torch.cuda.current_stream().wait_stream(stream)
    filled = exact_verify_state(backend).current
    seq_lens.copy_(batch.seq_lens)
    graph.replay()
    torch.cuda.synchronize()
    backend.init_forward_metadata(batch)  # eager build of the same rows
    eager = exact_verify_state(backend).current
    assert filled.rows == eager.rows == case.bs * WIDTH
    assert torch.equal(filled.req_kv_indptr, eager.req_kv_indptr)
    for name in ("causal", "block"):
        assert torch.equal(getattr(filled, name).lens, getattr(eager, name).lens), name
        assert torch.equal(getattr(filled, name).splits, getattr(eager, name).splits), name
    total = int(eager.req_kv_indptr[-1])
    assert total == sum(p + WIDTH for p in case.prefix_lens)
    assert torch.equal(filled.kv_indices[:total], eager.kv_indices[:total])


def test_exact_path_only_in_deterministic_mode(harness) -> None:
    """The patch's state is created only under deterministic inference."""
    from sglang.srt.layers.attention.exact_verify_attention import exact_verify_state

    case = harness.make_case([16], WIDTH)
    assert exact_verify_state(case.backend) is not None
    plain = harness.make_backend(case.backend.token_to_kv_pool, case.backend.req_to_token_pool, WIDTH)
    plain.enable_deterministic = False
    assert exact_verify_state(plain) is None


def test_versions_recorded() -> None:
    import torch
    import triton

    print(f"torch {torch.__version__}, triton {triton.__version__}, {torch.cuda.get_device_name()}")
    print(f"tree {os.environ.get('BITEXACT_SGLANG_TREE')}")
