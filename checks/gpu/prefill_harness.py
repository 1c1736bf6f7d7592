"""Chunked-prefill attention cases for patch 0006 (the unified extend kernel: causal stop, sm_90 query tile).

A case is a batch of sequences, each a chunk of `extend` new tokens after `prefix` tokens already in the
KV pool, laid out the way the Triton backend lays them out for `extend_attention_fwd_unified` (one unified
index stream per sequence: prefix, then the chunk) and for stock `extend_attention_fwd` (prefix indices
plus the chunk's K/V). The stock unified kernel is the patched tree's `extend_attention.py` with 0006
taken off again by GNU patch (`-R`), loaded as a module of its own, so both kernels run in one process on
the same inputs. Import only after `sglang_tree.install`.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch

KERNEL = Path("kernels") / "ops" / "attention" / "extend_attention.py"


def unified_patch() -> Path:
    """0006 from the series the runner names (series.py: never a path beside this file)."""
    import series

    return series.patch_named("0006-")


def stock_unified_module(tree_sglang: Path) -> ModuleType:
    """The tree's extend_attention.py without 0006, imported as `bitexact_stock_extend_attention`."""
    work = Path(tempfile.mkdtemp(prefix="stock-extend-"))
    copy = work / "python" / "sglang" / KERNEL
    copy.parent.mkdir(parents=True)
    copy.write_bytes((tree_sglang / KERNEL).read_bytes())
    done = subprocess.run(
        ["patch", "-R", "-f", "--fuzz=0", "-p1", "-d", str(work), "-i", str(unified_patch())],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"taking 0006 off {tree_sglang / KERNEL} failed: {done.stdout}{done.stderr}")
    name = "bitexact_stock_extend_attention"
    spec = importlib.util.spec_from_file_location(name, copy)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@dataclass
class PrefillCase:
    prefix: list[int]
    extend: list[int]
    q: torch.Tensor  # [sum(extend), H, D]
    k_buffer: torch.Tensor  # [slots, Hkv, D]
    v_buffer: torch.Tensor
    qo_indptr: torch.Tensor
    unified_indptr: torch.Tensor  # prefix + extend per sequence
    unified_indices: torch.Tensor
    prefix_indptr: torch.Tensor
    prefix_indices: torch.Tensor
    extend_slots: torch.Tensor
    prefix_lens: torch.Tensor
    scale: float

    def out(self) -> torch.Tensor:
        return torch.full_like(self.q, float("nan"))

    def unified(self, fn, causal: bool = True) -> torch.Tensor:  # noqa: ANN001
        o = self.out()
        fn(
            self.q,
            o,
            self.k_buffer,
            self.v_buffer,
            1.0,
            1.0,
            self.qo_indptr,
            self.unified_indptr,
            self.unified_indices,
            self.prefix_lens,
            max(self.extend),
            sm_scale=self.scale,
            is_causal=causal,
        )
        return o

    def stock_two_stage(self, fn) -> torch.Tensor:  # noqa: ANN001
        """SGLang's non-deterministic extend kernel (`_fwd_kernel`), what stock serving runs."""
        o = self.out()
        fn(
            self.q,
            self.k_buffer[self.extend_slots].contiguous(),
            self.v_buffer[self.extend_slots].contiguous(),
            o,
            self.k_buffer,
            self.v_buffer,
            self.qo_indptr,
            self.prefix_indptr,
            self.prefix_indices,
            None,
            True,
            None,
            max(self.extend),
            1.0,
            1.0,
            sm_scale=self.scale,
        )
        return o


def make_prefill(
    prefix: list[int], extend: list[int], geometry: tuple[int, int, int], seed: int, device: str = "cuda"
) -> PrefillCase:
    heads, kv_heads, dim = geometry
    gen = torch.Generator(device="cpu").manual_seed(seed)
    total = sum(prefix) + sum(extend)
    perm = torch.randperm(total, generator=gen) + 1  # slot 0 stays unused
    k_buffer = torch.randn((total + 1, kv_heads, dim), generator=gen).to(torch.bfloat16).to(device)
    v_buffer = torch.randn((total + 1, kv_heads, dim), generator=gen).to(torch.bfloat16).to(device)
    q = torch.randn((sum(extend), heads, dim), generator=gen).to(torch.bfloat16).to(device)
    unified, prefix_idx, extend_idx, start = [], [], [], 0
    for p, e in zip(prefix, extend, strict=True):
        mine = perm[start : start + p + e]
        start += p + e
        unified.append(mine)
        prefix_idx.append(mine[:p])
        extend_idx.append(mine[p:])

    def indptr(lengths: list[int]) -> torch.Tensor:
        out = torch.zeros(len(lengths) + 1, dtype=torch.int32)
        out[1:] = torch.cumsum(torch.tensor(lengths), 0)
        return out.to(device)

    return PrefillCase(
        prefix=list(prefix),
        extend=list(extend),
        q=q,
        k_buffer=k_buffer,
        v_buffer=v_buffer,
        qo_indptr=indptr(list(extend)),
        unified_indptr=indptr([p + e for p, e in zip(prefix, extend, strict=True)]),
        unified_indices=torch.cat(unified).to(torch.int64).to(device),
        prefix_indptr=indptr(list(prefix)),
        prefix_indices=torch.cat(prefix_idx).to(torch.int64).to(device),
        extend_slots=torch.cat(extend_idx).to(torch.int64).to(device),
        prefix_lens=torch.tensor(prefix, dtype=torch.int32, device=device),
        scale=dim**-0.5,
    )
