"""A real TritonAttnBackend on real SGLang pools, for the verify-attention checks and benchmark.

The backend's `__init__` needs a whole ModelRunner and a published server config; the methods under
test (init_forward_metadata, forward_extend, forward_decode, the CUDA-graph metadata path) read only
the attributes set in `make_backend`, with the values `__init__` computes for a GQA model under
`--enable-deterministic-inference` on CUDA (fixed split tile 256, no lean decode, no DCP, no window).
Pools, the KV index translator, the layers, the batches and the DFLASH verify input are SGLang's own
classes. Import this module only after `sglang_tree.install`.

References: decode is the stock backend's forward_decode (SGLang's own split-KV decode kernels; the
patched backend routes decode through the patch's kernels, whose bits are what is being checked).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
from sglang.kernels.ops.attention.decode_attention import decode_attention_fwd
from sglang.kernels.ops.attention.extend_attention import (
    build_unified_kv_indices,
    extend_attention_fwd,
    extend_attention_fwd_unified,
)
from sglang.srt.layers.attention.triton_backend import TritonAttnBackend
from sglang.srt.layers.radix_attention import AttentionType, RadixAttention
from sglang.srt.mem_cache.kv_index_translator import KVIndexTranslator
from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool, ReqToTokenPool
from sglang.srt.model_executor.forward_batch_info import ForwardBatch, ForwardMode
from sglang.srt.speculative.dflash_info import DFlashVerifyInput

# Qwen3.8-27B's full-attention layers as far as public Qwen3.5/3.6 configs suggest: 24 query heads,
# 4 KV heads, head_dim 256 (an assumption; the kernels take any GQA geometry).
NUM_HEADS = 24
NUM_KV_HEADS = 4
HEAD_DIM = 256
GEOMETRY = (NUM_HEADS, NUM_KV_HEADS, HEAD_DIM)
# The recipe's --context-length; it fixes max_kv_splits = 1024 as in serving. The variable only exists
# to debug the harness under TRITON_INTERPRET=1 on a CPU, where 1024 splits per row are too slow.
CONTEXT_LEN = int(os.environ.get("BITEXACT_ATTN_CONTEXT_LEN", "262144"))
SPLIT_TILE = 256  # SGLANG_TRITON_DECODE_SPLIT_TILE_SIZE default under deterministic inference


def make_backend(
    pool: MHATokenToKVPool,
    req_pool: ReqToTokenPool,
    num_draft_tokens: int,
    exact: bool = True,
    geometry: tuple[int, int, int] = GEOMETRY,
    deterministic: bool = True,
) -> TritonAttnBackend:
    num_heads, num_kv_heads, head_dim = geometry
    device = pool.device
    backend = object.__new__(TritonAttnBackend)
    backend.decode_attention_fwd = decode_attention_fwd
    backend.extend_attention_fwd = extend_attention_fwd
    backend.extend_attention_fwd_unified = extend_attention_fwd_unified
    backend.build_unified_kv_indices = build_unified_kv_indices
    backend.verify_splitkv_fwd = backend.verify_shared_kv_fwd = None
    backend.use_verify_splitkv = backend.use_verify_shared_kv = False
    backend.enable_lean_attention = False
    backend._lean_capture_policy = backend._lean_decode_seqlen_gate = None
    backend.lean_total_programs, backend.lean_block_m = 1, 16
    backend._dense_one_shot_kv_indptr = None
    backend.use_dense_fp8_chunked_prefill = False
    backend.skip_prefill = False
    backend.sliding_window_size = None
    backend.req_to_token_pool = req_pool
    backend.token_to_kv_pool = pool
    backend.req_to_token = req_pool.req_to_token
    backend.use_sliding_window_kv_pool = False
    backend.page_size = 1
    backend.kv_index_translator = KVIndexTranslator(
        req_to_token=req_pool.req_to_token,
        token_to_kv_pool_allocator=None,
        token_to_kv_pool=pool,
        page_size=1,
        device=device,
    )
    backend.num_draft_tokens = num_draft_tokens
    backend.speculative_num_steps = num_draft_tokens - 1
    backend.topk = 1
    backend.use_mla = False
    backend.is_hip_dspark_draft = False
    backend.dcp_size, backend.dcp_rank = 1, 0
    backend.num_head = num_heads
    backend.num_kv_head = num_kv_heads
    backend.v_head_dim = head_dim
    backend.swa_v_head_dim = None
    backend.max_context_len = CONTEXT_LEN
    backend.device = device
    backend.device_core_count = (
        torch.cuda.get_device_properties(device).multi_processor_count if pool.device != "cpu" else 1
    )
    backend.use_pdl = False
    backend.allow_bidirectional_attention_in_extend = False
    backend.enable_deterministic = deterministic
    # stock SGLang without --enable-deterministic-inference: no split tile, adaptive split counts up
    # to triton_attention_num_kv_splits (8 by default)
    backend.split_tile_size = SPLIT_TILE if deterministic else None
    backend.static_kv_splits = False
    backend.max_kv_splits = (CONTEXT_LEN + SPLIT_TILE - 1) // SPLIT_TILE if deterministic else 8
    max_bs = req_pool.size
    backend.kv_indptr = torch.zeros((max_bs + 1,), dtype=torch.int32, device=device)
    backend.window_kv_indptr = None
    backend.qo_indptr = torch.zeros((max_bs + 1,), dtype=torch.int64, device=device)
    backend.mask_indptr = torch.zeros((max_bs + 1,), dtype=torch.int64, device=device)
    backend.forward_metadata = None
    backend._verify_mask = None
    backend.is_draft_runner = False
    if not exact:
        # the patch keeps its state in this attribute; None means "exact path off": the stock verify
        backend._bitexact_exact_verify = None
    return backend


@dataclass
class VerifyCase:
    """bs requests with the given prefixes and T draft tokens each, K/V already in the pool."""

    backend: TritonAttnBackend
    stock: TritonAttnBackend
    layer: RadixAttention
    draft_layer: RadixAttention  # the DFLASH drafter's: non-causal over context and block
    prefix_lens: list[int]
    width: int
    req_pool_indices: torch.Tensor
    slots: list[torch.Tensor]  # per request: its KV slots, prefix then drafts
    q: torch.Tensor  # [bs * T, H * D], request-major
    k_draft: torch.Tensor  # [bs * T, Hkv, D]
    v_draft: torch.Tensor

    @property
    def bs(self) -> int:
        return len(self.prefix_lens)

    def draft_slots(self) -> torch.Tensor:
        return torch.cat([s[p:] for s, p in zip(self.slots, self.prefix_lens, strict=True)])

    def verify_batch(self, seq_lens: list[int] | None = None) -> ForwardBatch:
        device = self.q.device
        lens = torch.tensor(seq_lens or self.prefix_lens, dtype=torch.int64, device=device)
        spec = DFlashVerifyInput(
            draft_token=torch.zeros(self.bs * self.width, dtype=torch.int64, device=device),
            positions=torch.zeros(self.bs * self.width, dtype=torch.int64, device=device),
            draft_token_num=self.width,
        )
        return ForwardBatch(
            forward_mode=ForwardMode.TARGET_VERIFY,
            batch_size=self.bs,
            input_ids=spec.draft_token,
            req_pool_indices=self.req_pool_indices,
            seq_lens=lens,
            out_cache_loc=self.draft_slots(),
            seq_lens_sum=int(lens.sum()),
            spec_info=spec,
        )

    def decode_batch(self, step: int) -> ForwardBatch:
        """The decode step that writes draft position `step` of every request."""
        device = self.q.device
        lens = torch.tensor([p + step + 1 for p in self.prefix_lens], dtype=torch.int64, device=device)
        loc = torch.stack([s[p + step] for s, p in zip(self.slots, self.prefix_lens, strict=True)])
        return ForwardBatch(
            forward_mode=ForwardMode.DECODE,
            batch_size=self.bs,
            input_ids=torch.zeros(self.bs, dtype=torch.int64, device=device),
            req_pool_indices=self.req_pool_indices,
            seq_lens=lens,
            out_cache_loc=loc,
            seq_lens_sum=int(lens.sum()),
        )

    def subset(self, requests: list[int]) -> VerifyCase:
        """The same requests (same pools, queries and drafts) as a smaller batch."""
        picked = torch.cat([torch.arange(b * self.width, (b + 1) * self.width) for b in requests]).to(
            self.q.device
        )
        return VerifyCase(
            backend=self.backend,
            stock=self.stock,
            layer=self.layer,
            draft_layer=self.draft_layer,
            prefix_lens=[self.prefix_lens[b] for b in requests],
            width=self.width,
            req_pool_indices=self.req_pool_indices[requests],
            slots=[self.slots[b] for b in requests],
            q=self.q[picked],
            k_draft=self.k_draft[picked],
            v_draft=self.v_draft[picked],
        )

    def rows(self, step: int) -> slice:
        return slice(step, None, self.width)

    def run_verify(self, backend: TritonAttnBackend) -> torch.Tensor:
        batch = self.verify_batch()
        backend.init_forward_metadata(batch)
        return backend.forward_extend(self.q, self.k_draft, self.v_draft, self.layer, batch)

    def run_draft(self, backend: TritonAttnBackend) -> torch.Tensor:
        """The drafter's attention: every block position sees the context and the whole block."""
        batch = self.verify_batch()
        backend.init_forward_metadata(batch)
        return backend.forward_extend(self.q, self.k_draft, self.v_draft, self.draft_layer, batch)

    def run_decode(self, backend: TritonAttnBackend | None = None) -> torch.Tensor:
        """Decode's output for every (request, draft position), laid out like the verify output; by
        default SGLang's own decode (the stock backend)."""
        backend = backend or self.stock
        out = torch.empty_like(self.q)
        for step in range(self.width):
            batch = self.decode_batch(step)
            backend.init_forward_metadata(batch)
            idx = self.rows(step)
            out[idx] = backend.forward_decode(
                self.q[idx].contiguous(),
                self.k_draft[idx].contiguous(),
                self.v_draft[idx].contiguous(),
                self.layer,
                batch,
            )
        return out


def make_case(
    prefix_lens: list[int],
    width: int,
    seed: int = 0,
    device: str = "cuda",
    max_bs: int | None = None,
    geometry: tuple[int, int, int] = GEOMETRY,
) -> VerifyCase:
    num_heads, num_kv_heads, head_dim = geometry
    gen = torch.Generator(device="cpu").manual_seed(seed)
    bs = len(prefix_lens)
    total = sum(p + width for p in prefix_lens)
    pool = MHATokenToKVPool(
        size=total + 1,
        page_size=1,
        dtype=torch.bfloat16,
        head_num=num_kv_heads,
        head_dim=head_dim,
        layer_num=1,
        device=device,
        enable_memory_saver=False,
        enable_alt_stream=False,
    )
    req_pool = ReqToTokenPool(
        size=max(max_bs or bs, bs), max_context_len=CONTEXT_LEN, device=device, enable_memory_saver=False
    )
    # Slots are a random permutation of the pool (slot 0 stays the padding slot), so a row that read the
    # wrong index would read other data.
    perm = (torch.randperm(total, generator=gen) + 1).to(device)
    slots, start = [], 0
    for b, p in enumerate(prefix_lens):
        mine = perm[start : start + p + width]
        start += p + width
        req_pool.req_to_token[b, : p + width] = mine.to(torch.int32)
        slots.append(mine)
    k_buf, v_buf = pool.get_key_buffer(0), pool.get_value_buffer(0)
    k_buf.copy_(torch.randn(k_buf.shape, generator=gen, dtype=torch.float32).to(torch.bfloat16))
    v_buf.copy_(torch.randn(v_buf.shape, generator=gen, dtype=torch.float32).to(torch.bfloat16))
    draft = torch.cat([s[p:] for s, p in zip(slots, prefix_lens, strict=True)])
    q = torch.randn((bs * width, num_heads * head_dim), generator=gen, dtype=torch.float32)
    layers = [
        RadixAttention(
            num_heads=num_heads,
            head_dim=head_dim,
            scaling=head_dim**-0.5,
            num_kv_heads=num_kv_heads,
            layer_id=0,
            attn_type=attn_type,
        )
        for attn_type in (AttentionType.DECODER, AttentionType.ENCODER_ONLY)
    ]
    return VerifyCase(
        backend=make_backend(pool, req_pool, width, exact=True, geometry=geometry),
        stock=make_backend(pool, req_pool, width, exact=False, geometry=geometry),
        layer=layers[0],
        draft_layer=layers[1],
        prefix_lens=list(prefix_lens),
        width=width,
        req_pool_indices=torch.arange(bs, dtype=torch.int64, device=device),
        slots=slots,
        q=q.to(torch.bfloat16).to(device),
        k_draft=k_buf[draft].clone(),
        v_draft=v_buf[draft].clone(),
    )
