"""Patch 0003's verify rows run copies of decode's split-KV kernels: pin what they copy.

`exact_verify_attention.py` (patch 0003) computes each verify row with copies of decode's grouped
stage-1 split body and stage-2 merge, launched over the splits that exist. Their bits equal decode's
only while decode's kernels are the ones the copies follow (proven bitwise on the H200 against
sglang 0.5.20, whose decode kernels 0.5.21 ships unchanged). This pins the source of every piece of
decode that the copies mirror, in both releases, so that a release whose decode path differs fails here
with the fix named, instead of the verify rows drifting from decode silently.
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

import pytest
from checkhelpers.released_wheels import unpacked_wheel

RELEASES = ("0.5.20", "0.5.21")
DECODE = Path("sglang") / "kernels" / "ops" / "attention" / "decode_attention.py"
# sha256 of each definition's source text, as 0.5.20 and 0.5.21 ship it: the two kernels the copies
# mirror, the launchers whose constants they reuse (BLOCK_N, warps, stages, grid) and the grouped entry
# (no MLA tuning on CUDA). The copy imports decode's own tanh, so that one cannot differ.
PINNED_SOURCES = {
    "_fwd_grouped_kernel_stage1": "768b4f2e23f238519d20e8e4173bbdf51589abdf2872463b694eee2ef16d1a40",
    "_decode_grouped_att_m_fwd": "e10f2cce73093237f41c9f02c70f4d0cecd3444d4651c8e2933c39a5c0cda140",
    "_fwd_kernel_stage2": "a5be2c9c64ff54b35b3c109377585c5f313e1008bf67ab49900df74992edfcb4",
    "_decode_softmax_reducev_fwd": "f06db1ca8bfb1edeec653daf3cf2d9d14e5adb8ae9e7dc4a39fde2e9fb9db57c",
    "decode_attention_fwd_grouped": "f1e3a45cc7737e4a9cbe2e2cff72c65e915f57a0bae5a6b287b26e3022caf2c4",
}
PINNED_CONSTANTS = {"_GROUPED_BLOCK_H": 16, "_MIN_BLOCK_KV": 32}
FIX = (
    "carry the change into the copies in patches/sglang/0003-exact-verify-attention.patch "
    "(exact_verify_attention.py), run checks/gpu/test_attn_exact_verify.py on a CUDA card, then pin the "
    "new value in checks/offline/test_sglang_attn_copies.py"
)
FIXTURE_NEEDS = {"decode_module": ("network",)}


@pytest.fixture(scope="module", params=RELEASES)
def decode_module(request: pytest.FixtureRequest) -> tuple[str, str, ast.Module]:
    version: str = request.param
    source = (unpacked_wheel("sglang", version) / DECODE).read_text()
    return version, source, ast.parse(source)


def definitions(source: str, module: ast.Module) -> dict[str, str]:
    """Top-level function name -> its source text (decorators excluded, as ast reports the segment)."""
    return {
        node.name: ast.get_source_segment(source, node) or ""
        for node in module.body
        if isinstance(node, ast.FunctionDef)
    }


def constants(module: ast.Module) -> dict[str, object]:
    found: dict[str, object] = {}
    for node in module.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                found[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return found


def test_decode_kernels_are_the_ones_the_copies_follow(decode_module: tuple[str, str, ast.Module]) -> None:
    version, source, module = decode_module
    found = definitions(source, module)
    for name, digest in PINNED_SOURCES.items():
        assert name in found, f"sglang {version}: {DECODE} no longer defines {name}; {FIX}"
        got = hashlib.sha256(found[name].encode()).hexdigest()
        assert got == digest, f"sglang {version}: decode's {name} changed (sha256 {got}); {FIX}"


def test_decode_launch_constants_are_the_ones_the_copies_use(
    decode_module: tuple[str, str, ast.Module],
) -> None:
    version, _, module = decode_module
    found = constants(module)
    for name, value in PINNED_CONSTANTS.items():
        assert found.get(name) == value, (
            f"sglang {version}: {name} is {found.get(name)!r}, not {value}; {FIX}"
        )
