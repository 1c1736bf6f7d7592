"""lab/kernels/bench_attn_prefetch.py rewrites patch 0003's stage-1 kernel from its source; its anchors are
read here from the patch itself, so that a change to the kernel shows before a device call is spent on a
bench that would stop at its first rewrite."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import smallm_table

from lab.kernels import bench_attn_prefetch as bench

REPO = Path(__file__).resolve().parents[2]

ROWS_FILE = "python/sglang/srt/layers/attention/exact_verify_attention.py"


def _kernel_source() -> str:
    text = (REPO / "patches" / "sglang" / "0003-exact-verify-attention.patch").read_text()
    module = smallm_table.new_file_from_patch(text, ROWS_FILE)
    (node,) = [
        n
        for n in ast.parse(module).body
        if isinstance(n, ast.FunctionDef) and n.name == "_shared_rows_stage1"
    ]
    lines = module.splitlines(keepends=True)
    return "".join(lines[node.decorator_list[0].lineno - 1 : node.end_lineno])


def test_the_kv_prefetch_rewrite_finds_its_anchors_in_the_patched_kernel() -> None:
    source = _kernel_source()
    rewritten = bench.rewrite(source, "kv-prefetch")
    tree = ast.parse(rewritten)  # still Python
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert {"k_n", "v_n", "kv_loc_n", "next_in", "first_in"} <= names
    # the tile's own K and V loads are gone: each tile's K and V are the ones loaded one tile ahead
    assert bench.K_LOAD not in rewritten and bench.V_LOAD not in rewritten
    assert "tl.static_assert(PAGE_SIZE == 1)" in rewritten
    assert bench.rewrite(source, "as-patched") == source


def test_every_variant_names_a_rewrite_the_bench_knows() -> None:
    source = _kernel_source()
    for _name, variant, stages, warps in bench.VARIANTS:
        bench.rewrite(source, variant)
        assert stages in (None, 3) and warps in (None, 8)


def test_a_kernel_without_the_anchor_stops_the_bench_naming_it() -> None:
    with pytest.raises(SystemExit, match="variant kv-prefetch: anchor found 0 times"):
        bench.rewrite("def _shared_rows_stage1():\n    pass\n", "kv-prefetch")
