"""Patch 0007's contract for SGLang's GDN chunk kernel (`chunk_gated_delta_rule`, fla/chunk.py), on any
device: a prompt of L tokens runs cold, snapshotting its state at the 64-token boundary A where the radix
cache's extra buffer tracks it; a warm extend of [A, L) then starts from that snapshot, as a cache hit does.
- the fp32 snapshot equals, bit for bit, the final state of a prompt that stops at A (what it stands for);
- a warm extend from it gives the cold outputs of tokens A..L-1 and the cold final state, bit for bit;
- the state the stock path saves (the kernel's per-chunk h, in bf16) is not that state, and a warm extend
  from it ends in another final state (so a case can tell the two paths apart);
- the cold prompt inside a varlen batch of three snapshots the same bits as alone;
- `TritonGDNKernel.extend` (what GDN's backend calls) declares the snapshot and passes it on.
Used by checks/gpu/test_gdn_prefix_snapshot.py (the card's bits) and checkhelpers/gdn_snapshot_interpret.py
(Triton's interpreter on a CPU). Test code only.
"""

from __future__ import annotations

CHUNK = 64  # fla/chunk.py's CHUNK_SIZE and the extra buffer's state_chunk_size


def inputs(length: int, hk: int, hv: int, dim: int, seed: int, device: str = "cpu"):  # noqa: ANN201
    """A prompt's q, k, v (bf16), log-space gates g and beta (fp32), as GDN's extend takes them."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(1, length, hk, dim, generator=gen).to(torch.bfloat16)
    k = torch.randn(1, length, hk, dim, generator=gen).to(torch.bfloat16)
    v = torch.randn(1, length, hv, dim, generator=gen).to(torch.bfloat16)
    # log-space forget gates near the tiny model's (slow decay keeps the state's past visible)
    g = -torch.rand(1, length, hv, generator=gen) * 0.05
    beta = torch.rand(1, length, hv, generator=gen).sigmoid()
    return tuple(t.to(device) for t in (q, k, v, g, beta))


def run(chunk, pool, slot: int, parts, start: int, stop: int, track_chunk: int | None):  # noqa: ANN001, ANN201
    """Extend tokens [start, stop) of `parts` from pool[slot], in place; (o, h, snapshot or None)."""
    import torch

    q, k, v, g, beta = (t[:, start:stop].contiguous() for t in parts)
    track = {}
    if track_chunk is not None:
        snapshot = torch.full((1, *pool.shape[1:]), float("nan"), dtype=torch.float32, device=pool.device)
        index = torch.tensor([track_chunk], dtype=torch.int32, device=pool.device)
        track = {"track_state": snapshot, "track_chunk_idx": index}
    o, _, h = chunk.chunk_gated_delta_rule(
        q, k, v, g, beta,
        initial_state=pool, initial_state_indices=torch.tensor([slot], device=pool.device),
        cu_seqlens=torch.tensor([0, stop - start], dtype=torch.long, device=pool.device),
        use_qk_l2norm_in_kernel=True, **track,
    )  # fmt: skip
    return o, h, track.get("track_state")


def batched_snapshot(chunk, pool, parts, others, track_chunk: int):  # noqa: ANN001, ANN201
    """The cold prompt between two others in one varlen batch; its snapshot row."""
    import torch

    seqs = [others[0], parts, others[1]]
    cat = [torch.cat([s[i] for s in seqs], dim=1) for i in range(5)]
    lens = [s[0].shape[1] for s in seqs]
    device = pool.device
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.long, device=device)
    snapshot = torch.full((3, *pool.shape[1:]), float("nan"), dtype=torch.float32, device=device)
    pool[4:7] = 0
    chunk.chunk_gated_delta_rule(
        *cat, initial_state=pool, initial_state_indices=torch.tensor([4, 5, 6], device=device),
        cu_seqlens=cu, use_qk_l2norm_in_kernel=True, track_state=snapshot,
        track_chunk_idx=torch.tensor([-1, track_chunk, -1], dtype=torch.int32, device=device),
    )  # fmt: skip
    return snapshot[1]


def kernel_snapshot(kernel, pool, parts, track_chunk: int):  # noqa: ANN001, ANN201
    """The snapshot GDN's backend gets: its extend kernel (`TritonGDNKernel.extend`, as
    `GDNAttnBackend.forward_extend` calls it through the dispatcher) asked for track_state, from slot 7."""
    import torch

    device = pool.device
    q, k, v, g, beta = parts
    snapshot = torch.full((1, *pool.shape[1:]), float("nan"), dtype=torch.float32, device=device)
    pool[7] = 0
    kernel.extend(
        q, k, v, g, beta,
        ssm_states=pool, cache_indices=torch.tensor([7], device=device),
        query_start_loc=torch.tensor([0, q.shape[1]], dtype=torch.long, device=device),
        track_state=snapshot, track_chunk_idx=torch.tensor([track_chunk], dtype=torch.int32, device=device),
    )  # fmt: skip
    return snapshot[0]


def same_bits(a, b) -> bool:  # noqa: ANN001
    import torch

    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a.view(torch.int32), b.view(torch.int32))


def boundary(length: int) -> int:
    """A: where the radix cache's extra buffer tracks the state of an L-token prompt sent again (its match
    stops short of the last token, on the 64-token grid)."""
    return (length - 1) // CHUNK * CHUNK


def check(
    chunk, kernel, length: int, hk: int, hv: int, dim: int, seed: int, device: str = "cpu"
) -> list[str]:  # noqa: ANN001
    """What differs from the contract (module docstring) for one prompt; empty when it holds. `kernel`:
    a TritonGDNKernel, whose extend must hand the snapshot request on to the chunk kernel."""
    import torch

    parts = inputs(length, hk, hv, dim, seed, device)
    boundary_ = boundary(length)
    pool = torch.zeros(8, hv, dim, dim, dtype=torch.float32, device=device)
    o_cold, h_cold, snapshot = run(chunk, pool, 0, parts, 0, length, boundary_ // CHUNK)
    run(chunk, pool, 1, parts, 0, boundary_, None)  # stops at A: its final state is the state at A
    problems = []
    if not same_bits(snapshot[0], pool[1]):
        problems.append("fp32 snapshot != the state of a prompt stopped at A")
    pool[2] = snapshot[0]
    o_warm, _, _ = run(chunk, pool, 2, parts, boundary_, length, None)
    if not same_bits(o_warm.float(), o_cold[:, boundary_:].float()):
        problems.append("warm outputs from the fp32 snapshot != cold")
    if not same_bits(pool[2], pool[0]):
        problems.append("warm final state from the fp32 snapshot != cold")
    stock = h_cold[0, boundary_ // CHUNK].float()  # what the stock path saves: h, in the activation dtype
    pool[3] = stock
    run(chunk, pool, 3, parts, boundary_, length, None)
    if same_bits(stock, pool[1]) or same_bits(pool[3], pool[0]):
        problems.append("the stock snapshot equals the fp32 one: this case cannot tell the paths apart")
    others = (inputs(length + 11, hk, hv, dim, seed + 1, device), inputs(70, hk, hv, dim, seed + 2, device))
    if not same_bits(batched_snapshot(chunk, pool, parts, others, boundary_ // CHUNK), snapshot[0]):
        problems.append("snapshot in a varlen batch != alone")
    if not kernel.supports_track_state_snapshot:
        problems.append("TritonGDNKernel does not declare supports_track_state_snapshot")
    if not same_bits(kernel_snapshot(kernel, pool, parts, boundary_ // CHUNK), snapshot[0]):
        problems.append("TritonGDNKernel.extend's snapshot != the chunk kernel's (not passed on?)")
    return problems
