"""The launch plans the attention bench times and the GPU checks prove (checks/gpu/attn_plans.py) start
from what patch 0003 ships: their first plan is the patch's module constants, read here from the patch
itself, so that a change to either shows before a device call is spent on a bench that stops at its
first check."""

from __future__ import annotations

import ast
from pathlib import Path

import attn_plans as plans
import smallm_table

REPO = Path(__file__).resolve().parents[2]

ROWS_FILE = "python/sglang/srt/layers/attention/exact_verify_attention.py"


def _patch_source() -> str:
    text = (REPO / "patches" / "sglang" / "0003-exact-verify-attention.patch").read_text()
    return smallm_table.new_file_from_patch(text, ROWS_FILE)


def _read_per_card() -> set[str]:
    """The constants the patch reads through plan_value (a card's entry applies to those alone)."""
    return {
        node.args[0].value
        for node in ast.walk(ast.parse(_patch_source()))
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", None) == "plan_value"
        and isinstance(node.args[0], ast.Constant)
    }


def _patch_constants() -> dict[str, object]:
    source = _patch_source()
    constants = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name):
            try:
                constants[target.id] = ast.literal_eval(value)
            except ValueError:
                continue
    return constants


def test_each_sweep_starts_from_the_shipped_plan() -> None:
    constants = _patch_constants()
    for names, listed in ((plans.TILE_NAMES, plans.TILE_PLANS), (plans.DRAFT_NAMES, plans.DRAFT_PLANS)):
        assert tuple(constants[n] for n in names) == listed[0], names
        assert len(set(listed)) == len(listed) and all(len(p) == len(names) for p in listed)


def test_the_free_draft_plan_is_off_but_where_a_card_measured_it() -> None:
    """The constants keep the verify rows' plan for the drafter; a card's entry turns the free plan on
    only where its bench measured it faster (the H200, sm_90: docs/kernels.md)."""
    constants = _patch_constants()
    assert constants["_DRAFT_FREE"] is False
    assert set(constants["_CARD_PLANS"]) == {(9, 0)}


def test_each_cards_plan_is_one_the_sweeps_time_and_the_checks_prove() -> None:
    """A card's plan, applied over the constants, is a plan of the lists: so the bench timed it and the
    GPU checks (test_verify_tile_plans_equal_decode, the draft checks) proved it before it shipped."""
    constants = _patch_constants()
    for card, overrides in constants["_CARD_PLANS"].items():
        assert set(overrides) <= set(plans.TILE_NAMES) | set(plans.DRAFT_NAMES), card
        # an entry naming a constant read straight from the module would be ignored at launch
        assert set(overrides) <= _read_per_card(), (card, set(overrides) - _read_per_card())
        merged = {**constants, **overrides}
        assert tuple(merged[n] for n in plans.TILE_NAMES) in plans.TILE_PLANS, card
        assert tuple(merged[n] for n in plans.DRAFT_NAMES) in plans.DRAFT_PLANS, card
