"""Fixtures shared by the bitexact tests: tiny models and a prompt file (makers in bx_tiny_models.py), and
the fuzzers' servers and golden (bx_fuzz_run.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from checkhelpers.bx_fuzz_run import (  # noqa: F401  (the fuzzers' servers)
    canned,
    golden_bytes,
    radix,
    scripted,
)
from checkhelpers.bx_tiny_models import make_model, write_prompts


@pytest.fixture(scope="session")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    return {
        "target": make_model(root / "target", layers=2, hidden=64, seed=0),
        "draft": make_model(root / "draft", layers=1, hidden=32, seed=1),
    }


@pytest.fixture
def prompt_file(tmp_path: Path) -> Path:
    return write_prompts(tmp_path / "prompts.jsonl", [5, 23, 11, 40, 17, 31])
