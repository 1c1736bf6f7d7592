"""Patch 0002 (exact GDN verify), checked without a GPU against the released 0.5.20/0.5.21 trees.

What a CPU can establish: the patch applies after 0001 with no fuzz, touches only gdn_backend.py and
its new module (none of 0003/0004's files), the new module parses, and the hook into
`GDNAttnBackend.forward_extend` is reached only for target verify and only through
`use_exact_target_verify`, whose first decision is `--enable-deterministic-inference`. That the
exact path equals decode bit for bit is the GPU check's job (checks/gpu/test_gdn_verify.py).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

import pytest
from checkhelpers.released_wheels import REPO_ROOT, unpacked_wheel

PATCHES = REPO_ROOT / "patches" / "sglang"
PATCH = PATCHES / "0002-exact-gdn-verify.patch"
LINEAR = Path("sglang/srt/layers/attention/linear")
TOUCHED = {
    "python/sglang/srt/layers/attention/linear/exact_verify.py",
    "python/sglang/srt/layers/attention/linear/gdn_backend.py",
}


def patched_tree(version: str, tmp_path: Path) -> Path:
    """The files 0001 and 0002 touch, from the released wheel, with both patches applied."""
    tree = tmp_path / f"sglang-{version}"
    (tree / LINEAR).mkdir(parents=True)
    shutil.copy(unpacked_wheel("sglang", version) / LINEAR / "gdn_backend.py", tree / LINEAR)
    for patch in (PATCHES / "0001-bitexact-marker.patch", PATCH):
        result = subprocess.run(
            ["patch", "-p2", "--fuzz=0", "--batch", "-i", str(patch)],
            cwd=tree,
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, f"{patch.name} on {version}: {result.stdout}{result.stderr}"
    return tree


def test_patch_touches_only_gdn_files() -> None:
    text = PATCH.read_text()
    headers = [line.split()[2][2:] for line in text.splitlines() if line.startswith("diff --git ")]
    assert set(headers) == TOUCHED
    assert "triton_backend.py" not in text and "batch_invariant_ops.py" not in text


@pytest.mark.network
@pytest.mark.parametrize("version", ["0.5.20", "0.5.21"])
def test_hook_is_guarded_by_deterministic_mode(version: str, tmp_path: Path) -> None:
    tree = patched_tree(version, tmp_path)
    module = ast.parse((tree / LINEAR / "exact_verify.py").read_text())
    functions = {node.name: node for node in module.body if isinstance(node, ast.FunctionDef)}
    for kernel in ("_exact_verify_conv_kernel", "_exact_verify_recurrence_kernel"):
        assert any(ast.unparse(d).startswith("triton.jit") for d in functions[kernel].decorator_list), kernel

    flag = ast.unparse(functions["deterministic_inference_enabled"])
    assert "get_exec().deterministic.enable_deterministic_inference" in flag
    guard = functions["use_exact_target_verify"].body
    first = next(node for node in guard if not isinstance(node, ast.Expr))  # after the docstring
    assert ast.unparse(first) == "if not deterministic_inference_enabled():\n    return False"

    backend = ast.parse((tree / LINEAR / "gdn_backend.py").read_text())
    forward_extend = next(
        node
        for node in ast.walk(backend)
        if isinstance(node, ast.FunctionDef) and node.name == "forward_extend"
    )
    hooks = [
        node
        for node in ast.walk(forward_extend)
        if isinstance(node, ast.If) and "exact_verify" in ast.unparse(node.test)
    ]
    assert len(hooks) == 1
    assert ast.unparse(hooks[0].test) == (
        "is_target_verify and exact_verify.use_exact_target_verify(self, mamba_cache_params)"
    )
    assert ast.unparse(hooks[0].body[0]).startswith("return exact_verify.forward_exact_target_verify(")
    # Every other use of the new module is the import.
    uses = [
        n
        for n in ast.walk(backend)
        if isinstance(n, ast.Name | ast.alias) and "exact_verify" in ast.unparse(n)
    ]
    assert len(uses) == 3  # import alias, guard call, forward call
