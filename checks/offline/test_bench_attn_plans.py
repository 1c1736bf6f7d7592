"""The launch plans the attention bench times and the GPU checks prove (checks/gpu/attn_plans.py) start
from what patch 0003 ships: their first plan is the patch's module constants, read here from the patch
itself, so that a change to either shows before a device call is spent on a bench that stops at its
first check."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "bench" / "kernels"), str(REPO / "checks" / "gpu")]
import attn_plans as plans  # noqa: E402
import smallm_table  # noqa: E402

ROWS_FILE = "python/sglang/srt/layers/attention/exact_verify_attention.py"


def _patch_constants() -> dict[str, object]:
    text = (REPO / "patches" / "sglang" / "0003-exact-verify-attention.patch").read_text()
    source = smallm_table.new_file_from_patch(text, ROWS_FILE)
    constants = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                constants[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return constants


def test_each_sweep_starts_from_the_shipped_plan() -> None:
    constants = _patch_constants()
    for names, listed in ((plans.TILE_NAMES, plans.TILE_PLANS), (plans.DRAFT_NAMES, plans.DRAFT_PLANS)):
        assert tuple(constants[n] for n in names) == listed[0], names
        assert len(set(listed)) == len(listed) and all(len(p) == len(names) for p in listed)


def test_the_free_draft_plan_is_off_as_shipped() -> None:
    """Switched on only once a card has measured it faster (docs/kernels.md)."""
    assert _patch_constants()["_DRAFT_FREE"] is False
