"""The GDN verify rig of the kernel checks (test_gdn_verify.py) and the lab's GDN bench: one GDN layer of
Qwen3.8-27B's geometry on SGLang's own pool, batch and backend classes, the tree's released
gdn_backend.py beside the patched one, and a bitwise comparison. A harness module (checks/gpu's
pyproject.toml installs it), so the bench imports it as the checks do."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GDN_BACKEND = "sglang/srt/layers/attention/linear/gdn_backend.py"

H, K, HV, V, WIDTH = 16, 128, 48, 128, 4  # Qwen3.8-27B GDN: key heads, key dim, value heads, value dim
QKV_DIM = 2 * H * K + HV * V
T_ALLOC = 9  # draft steps the pool's intermediate buffers hold (runtime T may be smaller)
ACT_DTYPE = "bfloat16"  # activations, weights and conv state; the SSM state is fp32


def load_stock_gdn_backend(tree: Path) -> types.ModuleType:
    """The tree's gdn_backend.py as released (every patch of the series that touches it taken off again),
    as a module of its own."""
    import series

    source = series.released_source(tree, GDN_BACKEND)
    assert "exact_verify" not in source, "the released gdn_backend.py names our exact_verify module"
    name = "sglang.srt.layers.attention.linear.stock_gdn_backend"
    module = types.ModuleType(name)
    module.__file__ = f"<released {GDN_BACKEND}>"
    sys.modules[name] = module
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def deterministic_flag() -> Any:
    """The `exec.deterministic` config bag (published minimally when nothing else published one)."""
    from sglang.srt import runtime_context as rc

    ctx = rc._CONTEXT
    bags = dict(ctx._config_bags or {})
    exec_bag = bags.get("exec")
    if exec_bag is None:
        exec_bag = bags["exec"] = rc._ConfigBag("exec")
        ctx._config_bags = bags
    if "deterministic" not in object.__getattribute__(exec_bag, "_subs"):
        flag = rc._ConfigBag("exec.deterministic")
        flag._set("enable_deterministic_inference", False)
        exec_bag._set_sub("deterministic", flag)
    return exec_bag.deterministic


@dataclass
class Sg:
    """The SGLang modules under test."""

    gdn: types.ModuleType
    stock: types.ModuleType
    exact_verify: types.ModuleType
    det: Any
    torch: types.ModuleType


def bitwise_equal(a: Any, b: Any) -> bool:
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return torch.equal(a.contiguous().view(ints), b.contiguous().view(ints))


class GdnRig:
    """One GDN layer, a speculative Mamba pool and `batch` requests with `draft` tokens each."""

    def __init__(self, sg: Sg, batch: int, draft: int, seed: int, device: str = "cuda") -> None:
        import torch
        from sglang.kernels.ops.attention.triton_gdn_fused_proj import (
            fused_qkvzba_split_reshape_cat_contiguous,
        )
        from sglang.srt.layers.attention.linear.utils import LinearAttnKernelBackend
        from sglang.srt.layers.attention.mamba.mamba2_metadata import ForwardMetadata
        from sglang.srt.layers.radix_linear_attention import RadixLinearAttention
        from sglang.srt.mem_cache.memory_pool import HybridReqToTokenPool, MambaPool
        from sglang.srt.model_executor.forward_batch_info import ForwardBatch, ForwardMode
        from sglang.srt.speculative.dflash_info import DFlashVerifyInput

        self.sg, self.batch, self.draft, self.device = sg, batch, draft, device
        self._split = fused_qkvzba_split_reshape_cat_contiguous
        self._types = (ForwardMetadata, LinearAttnKernelBackend, HybridReqToTokenPool, MambaPool)
        self._batch_types = (ForwardBatch, ForwardMode, DFlashVerifyInput)
        gen = torch.Generator().manual_seed(seed)

        act = getattr(torch, ACT_DTYPE)

        def randn(*shape: int, scale: float = 1.0, dtype: Any = None) -> Any:
            return (torch.randn(*shape, generator=gen) * scale).to(dtype or act).to(device)

        self.num_slots = 2 * batch + 1
        self.slots = torch.randperm(self.num_slots, generator=gen)[:batch].to(torch.int32).to(device)
        self.conv0 = randn(1, self.num_slots + 1, QKV_DIM, WIDTH - 1)
        self.ssm0 = randn(1, self.num_slots + 1, HV, V, K, scale=0.05, dtype=torch.float32)
        # Projections as the model's in_proj GEMMs emit them: [q|k|v|z] and [b|a], request-major.
        self.qkvz = randn(batch * draft, QKV_DIM + HV * V)
        self.ba = randn(batch * draft, 2 * HV)
        log_a = torch.empty(HV).uniform_(1.0, 16.0, generator=gen).log()
        self.layer = RadixLinearAttention(
            layer_id=0,
            num_q_heads=H,
            num_k_heads=H,
            num_v_heads=HV,
            head_q_dim=K,
            head_k_dim=K,
            head_v_dim=V,
            conv_weights=randn(QKV_DIM, WIDTH, scale=0.5),
            bias=None,
            activation="silu",
            A_log=log_a.to(device),
            dt_bias=randn(HV),
        )

    # -- SGLang objects --------------------------------------------------------------------------
    def pool(self) -> Any:
        """A fresh MambaPool holding copies of the initial live states, intermediates zeroed."""
        import torch

        _, _, _, MambaPool = self._types
        pool = object.__new__(MambaPool)
        pool.device = self.device
        _, window = pool._allocate_deduplicated_conv_window(
            conv_shape=(QKV_DIM, WIDTH - 1),
            num_mamba_layers=1,
            spec_state_size=self.num_slots,
            speculative_num_draft_tokens=T_ALLOC,
            conv_dtype=getattr(torch, ACT_DTYPE),
        )
        pool.mamba_cache = MambaPool.SpeculativeState(
            conv=[self.conv0.clone()],
            temporal=self.ssm0.clone(),
            intermediate_ssm=torch.zeros(
                1, self.num_slots + 1, T_ALLOC, HV, V, K, dtype=torch.float32, device=self.device
            ),
            intermediate_conv_window=[window],
        )
        return pool

    def backend(self, pool: Any, module: types.ModuleType, verify: bool) -> Any:
        import torch

        ForwardMetadata, LinearAttnKernelBackend, HybridReqToTokenPool, _ = self._types
        req_pool = object.__new__(HybridReqToTokenPool)
        req_pool.mamba_pool = pool
        req_pool.mamba_map = {0: 0}
        req_pool.layer_transfer_counter = None
        req_pool.start_layer = 0
        triton_backend = LinearAttnKernelBackend.TRITON
        backend = object.__new__(module.GDNAttnBackend)
        backend.req_to_token_pool = req_pool
        backend.kernel_dispatcher = module.GDNKernelDispatcher(triton_backend, triton_backend, triton_backend)
        backend.mis_metadata = None
        backend._use_strided_target_verify_qkv = False  # set by init_forward_metadata in 0.5.21
        # build_verify_intermediate_state_indices without attn-TP padding: slot i owns row i.
        backend.verify_intermediate_state_indices = torch.arange(
            self.num_slots + 1, dtype=torch.int32, device=self.device
        )
        step = self.draft if verify else 1
        backend.forward_metadata = ForwardMetadata(
            query_start_loc=torch.arange(
                0, self.batch * step + 1, step, dtype=torch.int32, device=self.device
            ),
            mamba_cache_indices=self.slots,
        )
        return backend

    def forward_batch(self, verify: bool) -> Any:
        import torch

        ForwardBatch, ForwardMode, DFlashVerifyInput = self._batch_types
        tokens = self.batch * self.draft if verify else self.batch
        zeros = torch.zeros(tokens, dtype=torch.int64, device=self.device)
        seq_lens = torch.full((self.batch,), 640, dtype=torch.int64, device=self.device)
        spec_info = (
            DFlashVerifyInput(draft_token=zeros, positions=zeros, draft_token_num=self.draft)
            if verify
            else None
        )
        return ForwardBatch(
            forward_mode=ForwardMode.TARGET_VERIFY if verify else ForwardMode.DECODE,
            batch_size=self.batch,
            input_ids=zeros,
            req_pool_indices=torch.arange(self.batch, device=self.device),
            seq_lens=seq_lens,
            out_cache_loc=zeros,
            seq_lens_sum=640 * self.batch,
            spec_info=spec_info,
        )

    def split(self, qkvz: Any, ba: Any) -> tuple[Any, Any, Any]:
        """The model's unpack (Qwen3.5 contiguous layout): packed q|k|v, then b and a."""
        mixed_qkv, _z, b, a = self._split(qkvz, ba, H, HV, K, V)
        return mixed_qkv, a, b

    # -- runs -------------------------------------------------------------------------------------
    def verify(self, module: types.ModuleType | None = None, exact: bool = True) -> dict[str, Any]:
        """One target-verify forward of all drafts; returns outputs, intermediates and live states."""
        pool = self.pool()
        backend = self.backend(pool, module or self.sg.gdn, verify=True)
        mixed_qkv, a, b = self.split(self.qkvz, self.ba)
        with self.sg.det.override(enable_deterministic_inference=exact):
            out = backend.forward_extend(self.layer, self.forward_batch(verify=True), mixed_qkv, a, b)
        cache = pool.mamba_cache
        rows = backend.verify_intermediate_state_indices[: self.batch].long()
        return {
            "out": out.reshape(self.batch, self.draft, HV, V),
            "ssm": cache.intermediate_ssm[0][rows, : self.draft].clone(),
            "conv": cache.intermediate_conv_window[0][0][rows, : self.draft].clone(),
            "live_ssm": cache.temporal.clone(),
            "live_conv": cache.conv[0].clone(),
            "pool": pool,
        }

    def decode(self, fused: bool) -> dict[str, Any]:
        """`draft` sequential decode steps; per step the output and the requests' live states."""
        import torch

        pool = self.pool()
        backend = self.backend(pool, self.sg.gdn, verify=False)
        fb = self.forward_batch(verify=False)
        slots = self.slots.long()
        outs, ssm, conv = [], [], []
        qkvz = self.qkvz.view(self.batch, self.draft, -1)
        ba = self.ba.view(self.batch, self.draft, -1)
        with self.sg.det.override(enable_deterministic_inference=True):
            for t in range(self.draft):
                qkvz_t, ba_t = qkvz[:, t].contiguous(), ba[:, t].contiguous()
                if fused:  # the model hands the projections over; GDN unpacks + convs in one kernel
                    out, _z = backend.forward_decode(self.layer, fb, (qkvz_t, ba_t), ba_t, ba_t)
                else:
                    mixed_qkv, a, b = self.split(qkvz_t, ba_t)
                    out = backend.forward_decode(self.layer, fb, mixed_qkv, a, b)
                outs.append(out.reshape(self.batch, HV, V))
                ssm.append(pool.mamba_cache.temporal[0][slots].clone())
                conv.append(pool.mamba_cache.conv[0][0][slots].clone())
        return {"out": torch.stack(outs, 1), "ssm": torch.stack(ssm, 1), "conv": torch.stack(conv, 1)}
