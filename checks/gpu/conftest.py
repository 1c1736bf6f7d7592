"""GPU kernel checks: run on a CUDA card against an unpacked, patched sglang tree, skip elsewhere.

`BITEXACT_SGLANG_TREE` names the site-packages directory that holds the patched `sglang/`, and
`BITEXACT_SGLANG_SERIES` the patch series (checks_inputs.py). Every test here is skipped, with the reason,
when torch or triton is missing, CUDA is unavailable, or the tree is absent or unpatched; test modules
import torch and sglang only inside fixtures and tests, so they collect on a CPU machine without either.
On a card, the runner (`bitexact-gpu-checks run`) selects what applies by the markers below and fails a
selected test that skips.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import sglang_tree


def gpu_skip_reason() -> str | None:
    """Why the GPU checks cannot run here, or None when they can."""
    for module in ("torch", "triton"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (GPU checks need torch and triton with CUDA)"
    import torch

    if not torch.cuda.is_available():
        return "CUDA is not available (GPU checks need a CUDA card)"
    return sglang_tree.tree_problem(sglang_tree.tree_from_env())


def pytest_configure(config: pytest.Config) -> None:
    # What a check needs, declared; the runner (gpuchecks.selection) selects by it on a card.
    config.addinivalue_line(
        "markers", "capability(*versions): the compute capabilities a kernel check applies to (e.g. '9.0')"
    )
    config.addinivalue_line(
        "markers", "host_feature(*names): host features a kernel check needs (gpuchecks.host.FEATURES)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    reason = gpu_skip_reason()
    if reason is None:
        return
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def sglang_root() -> Path:
    """The patched sglang tree, installed as the importable `sglang` package (no heavy __init__)."""
    reason = gpu_skip_reason()
    if reason is not None:
        pytest.skip(reason)
    tree = sglang_tree.tree_from_env()
    assert tree is not None
    sglang_tree.install(tree)
    return tree


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    placeheld = sglang_tree.placeheld_modules()
    if placeheld:
        names = ", ".join(placeheld)
        terminalreporter.write_line(f"sglang_tree placeholders (missing here, never called): {names}")
