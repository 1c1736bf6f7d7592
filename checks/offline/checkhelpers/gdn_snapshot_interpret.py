"""Patch 0007's fp32 prefix-cache snapshot of the GDN chunk kernel, on a CPU under Triton's interpreter.

Usage: TRITON_INTERPRET=1 BITEXACT_SGLANG_TREE=<patched tree> python -m checkhelpers.gdn_snapshot_interpret.
Runs SGLang's own `chunk_gated_delta_rule` (fla/chunk.py, patched to pass `track_state` / `track_chunk_idx`
through to the chunk kernel) against the contract checks/gpu/gdn_snapshot_harness.py states: the fp32
snapshot at A is the state of a prompt stopped at A, a warm extend from it ends bit for bit where the cold
prompt does, the stock path's bf16 state does not, a varlen batch changes nothing, and
TritonGDNKernel.extend passes the request on. Bits here are numpy's, in the kernel's order of operations;
checks/gpu/test_gdn_prefix_snapshot.py proves the card's.
Prints one line per case and `N cases, F failures`; exits 1 on a failure or a tree without 0007.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import gdn_snapshot_harness as harness
import sglang_tree

from checkhelpers import generated_modules

# What the interpreter needs of Triton before fla is imported, written into a module file of its own
# (Triton's JIT reads a kernel's source from its file):
# - it cannot time an autotuner's configs (no driver): each kernel keeps its first config, so every run
#   of a case, cold, warm and batched, uses the same one;
# - fla's op.py binds `exp = tl.exp` (and exp2, log, log2) at import, and the interpreter patches only
#   calls through `tl`: ALIASES maps them to functions of the same name that call through `tl`.
SCAFFOLD_SOURCE = """import triton
import triton.language as tl

_autotune = triton.autotune
triton.autotune = lambda configs, key, **kw: _autotune(configs=configs[:1], key=key, **kw)


@triton.jit
def exp(x):
    return tl.exp(x)


@triton.jit
def exp2(x):
    return tl.math.exp2(x)


@triton.jit
def log(x):
    return tl.log(x)


@triton.jit
def log2(x):
    return tl.log2(x)


ALIASES = {tl.exp: exp, tl.math.exp2: exp2, tl.log: log, tl.log2: log2}
"""


def interpreter_scaffold() -> dict:
    """Install SCAFFOLD_SOURCE's autotuner; its ALIASES."""
    folder = Path(tempfile.mkdtemp(prefix="bitexact-fla-scaffold-"))
    (folder / "bx_fla_scaffold.py").write_text(SCAFFOLD_SOURCE)
    return generated_modules.load(folder / "bx_fla_scaffold.py").ALIASES


# (prompt length, key heads, value heads, head dim): L - A small and large, several chunks, GQA heads
CASES = [(67, 1, 2, 64), (137, 1, 2, 64), (200, 2, 4, 64), (129, 1, 1, 128)]


def main() -> int:
    problem = sglang_tree.install_for_interpreter()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    import contextlib

    aliases = interpreter_scaffold()
    from sglang.kernels.ops.attention.fla import chunk, utils
    from sglang.srt.layers.attention.linear.kernels.gdn_triton import TritonGDNKernel

    # fla's input_guard enters a device context of the tensors' device module; torch.cpu has none. On a
    # CPU there is nothing to select, so the guard gets a null context (no arithmetic changes).
    utils.custom_device_ctx = lambda index: contextlib.nullcontext()
    for name, module in list(sys.modules.items()):
        if name.startswith("sglang.kernels.ops.attention.fla"):
            for attr, value in list(vars(module).items()):
                if callable(value) and not isinstance(value, type) and value in aliases:
                    setattr(module, attr, aliases[value])

    import inspect

    if "track_state" not in inspect.signature(chunk.chunk_gated_delta_rule).parameters:
        print("no track_state in chunk_gated_delta_rule: the tree lacks 0007-exact-gdn-prefix-snapshot.patch")
        return 1
    kernel = TritonGDNKernel()
    failures = 0
    for seed, (length, hk, hv, dim) in enumerate(CASES):
        problems = harness.check(chunk, kernel, length, hk, hv, dim, seed)
        failures += bool(problems)
        verdict = "; ".join(problems) or "ok"
        print(f"L={length} A={harness.boundary(length)} heads {hk}/{hv}x{dim}: {verdict}")
    print(f"{len(CASES)} cases, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
