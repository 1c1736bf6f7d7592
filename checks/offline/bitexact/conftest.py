"""Fixtures shared by the bitexact tests: tiny models and a prompt file (makers in bx_tiny_models.py), and
the fuzzers' servers and golden (bx_fuzz_run.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # helpers beside the tests (bx_*.py)

from bx_fuzz_run import canned, golden_bytes, radix, scripted  # noqa: E402, F401  (the fuzzers' servers)
from bx_tiny_models import make_model, write_prompts  # noqa: E402


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
