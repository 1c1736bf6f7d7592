"""Registers and spills of patch 0003's stage-1 rows kernel per launch plan, compiled for a card on a CPU.

Triton compiles the kernel for the target (default sm_90, the H200) with the ptxas its wheel carries, so
no GPU is needed; cuobjdump from the same wheel reads each cubin's resource usage. A plan that spills
(STACK > 0: local memory per thread) or needs more registers than one program per SM allows is a plan
the kernel bench need not time first. Shape: the 27B target's full-attention layers (24 query heads over
4 KV heads of 256), 8 draft rows.

Usage: BITEXACT_SGLANG_TREE=<patched tree> python -m lab.kernels.ptx_resources [--arch 90] [--json F]
(TRITON_INTERPRET unset). Prints one line per plan: registers, stack bytes, whether warpgroup MMA
(wgmma) is used, mma.sync count, async copies in the PTX (cp.async, bulk ones included) and, from
Triton's TTGIR, what the async copies load (element type: i64 for the KV indices, bf16 for K and V).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import sglang_tree

# name -> (BLOCK_M tile rows, BLOCK_N KV tile, rows per program, row groups, decode order, warps, rows per
# request: 8 for the draft block, 1 for plain decode, which takes its lengths from decode's offsets,
# the tile loop's stages: None for Triton's default, 3 for the H200's plan since 2026-12-03)
PLANS = {
    "verify shipped: 32 rows, 8 warps": (32, 32, 5, 2, True, 8, 8, None),
    "verify 16 rows, 4 warps": (16, 32, 2, 4, True, 4, 8, None),
    "verify 16 rows, 8 warps": (16, 32, 2, 4, True, 8, 8, None),
    "verify 32 rows, 4 warps": (32, 32, 5, 2, True, 4, 8, None),
    "verify 32 rows, 4 warps, tile loop at 3 stages (H200)": (32, 32, 5, 2, True, 4, 8, 3),
    "decode: one row, 16-row tile, 4 warps": (16, 32, 1, 1, True, 4, 1, None),
    "decode: one row, 16-row tile, 4 warps, tile loop at 3 stages (H200)": (16, 32, 1, 1, True, 4, 1, 3),
    "draft free: 32 rows, KV 32, 8 warps": (32, 32, 5, 2, False, 8, 8, None),
    "draft free: 32 rows, KV 64, 8 warps": (32, 64, 5, 2, False, 8, 8, None),
    "draft free: 64 rows, KV 32, 8 warps": (64, 32, 8, 1, False, 8, 8, None),
    "draft free: 64 rows, KV 64, 8 warps": (64, 64, 8, 1, False, 8, 8, None),
    "draft free: 64 rows, KV 64, 16 warps": (64, 64, 8, 1, False, 16, 8, None),
}
POINTERS = {
    "Q": "*bf16", "K_Buffer": "*bf16", "V_Buffer": "*bf16", "req_kv_indptr": "*i32", "kv_indices": "*i64",
    "row_lens": "*i32", "row_splits": "*i32", "Att_Out": "*fp32", "Att_Lse": "*fp32",
}  # fmt: skip
FLOATS = ("sm_scale_withk",)


def executable(name: str) -> str:
    """The wheel's own copy of an NVIDIA tool, made executable in a temporary folder when the wheel was
    unpacked without file modes (a zip extraction, as checks/offline/checkhelpers/released_wheels.py does)."""
    import triton

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
    if os.access(tool, os.X_OK):
        return str(tool)
    copy = Path(tempfile.mkdtemp(prefix="bitexact-nvtools-")) / name
    shutil.copyfile(tool, copy)
    copy.chmod(0o755)
    return str(copy)


def resources(kernel, plan: tuple, arch: int) -> dict:  # noqa: ANN001
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    block_m, block_n, rows, groups, decode_order, warps, width, loop_stages = plan
    constants = dict(
        WIDTH=width, ROWS=rows, ROW_GROUPS=groups, kv_group_num=6, q_head_num=24, BLOCK_DMODEL=256,
        BLOCK_DV=256, BLOCK_N=block_n, BLOCK_H=16, BLOCK_M=block_m, MIN_BLOCK_KV=32, logit_cap=0.0,
        xai_temperature_len=-1, Lk=256, Lv=256, LENS_FROM_INDPTR=width == 1, USE_PDL=False, PAGE_SIZE=1,
        DECODE_ORDER=decode_order, LOOP_STAGES=loop_stages,
    )  # fmt: skip
    params = list(inspect.signature(kernel.fn).parameters)
    signature = {p: POINTERS.get(p, "fp32" if p in FLOATS else "i32") for p in params}
    signature |= {p: "constexpr" for p in constants}
    source = ASTSource(
        fn=kernel, signature=signature, constexprs={(params.index(k),): v for k, v in constants.items()}
    )
    options = {"num_warps": warps, "num_stages": 2}  # as _shared_rows_attention launches it
    compiled = triton.compile(source, target=GPUTarget("cuda", arch, 32), options=options)
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(compiled.asm["cubin"])
        cubin.flush()
        tool = executable("cuobjdump")
        usage = subprocess.run([tool, "-res-usage", cubin.name], capture_output=True, text=True, check=True)
    line = next(x for x in usage.stdout.splitlines() if "REG:" in x)
    fields = dict(part.split(":", 1) for part in line.split() if ":" in part)
    ptx = compiled.asm["ptx"]
    return {
        "registers": int(fields["REG"]),
        "stack_bytes": int(fields["STACK"]),
        "wgmma": "wgmma" in ptx,
        "mma_sync": ptx.count("mma.sync"),
        "async_copies": sum(ptx.count(f"cp.async.{kind}.") for kind in ("ca", "cg", "bulk")),
        "async_copy_loads": _async_copy_loads(compiled.asm["ttgir"]),
    }


def _async_copy_loads(ttgir: str) -> dict[str, int]:
    """Async copies in the TTGIR by the element type of the pointers they load through."""
    found: dict[str, int] = {}
    for line in ttgir.splitlines():
        if "ttg.async_copy_global_to_local" in line:
            match = re.search(r"!tt\.ptr<(\w+)>", line)
            kind = match.group(1) if match else "unknown"
            found[kind] = found.get(kind, 0) + 1
    return dict(sorted(found.items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", type=int, default=90, help="compute capability x10 (default 90)")
    parser.add_argument("--plan", action="append", choices=list(PLANS), help="default: every plan")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    if os.environ.get("TRITON_INTERPRET") == "1":
        print("unset TRITON_INTERPRET: this compiles for a card", file=sys.stderr)
        return 2
    problem = sglang_tree.install_from_env(cpu_only=True)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    import triton
    from sglang.srt.layers.attention import exact_verify_attention as rows

    # the wheel's ptxas (below sm_100) and ptxas-blackwell, runnable (triton's knobs TRITON_*_PATH)
    os.environ.setdefault("TRITON_PTXAS_PATH", executable("ptxas"))
    os.environ.setdefault("TRITON_PTXAS_BLACKWELL_PATH", executable("ptxas-blackwell"))

    found = {"arch": args.arch, "triton": triton.__version__, "plans": {}}
    for name in args.plan or list(PLANS):
        got = resources(rows._shared_rows_stage1, PLANS[name], args.arch)
        found["plans"][name] = got
        print(
            f"{name}: {got['registers']} registers, {got['stack_bytes']} B stack, "
            f"wgmma {'yes' if got['wgmma'] else 'no'}, {got['mma_sync']} mma.sync, "
            f"{got['async_copies']} async copies (TTGIR: {got['async_copy_loads'] or 'none'})",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(found, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
