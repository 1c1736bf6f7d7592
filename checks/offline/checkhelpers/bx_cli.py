"""Running the bitexact CLI in tests: in process (exit code, --json summary, stderr) or as a process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from bitexact.cli import main

PROMPT_LENGTHS = [5, 23, 11, 40, 17, 31]  # conftest's prompt_file: p0..p5, told apart by length
SETTINGS = ["--max-new-tokens", "6", "--top-logprobs", "4"]


def prompt_id(body: dict[str, Any]) -> str:
    """Which test prompt a generate request carries (SGLang native or OpenAI shape)."""
    ids = body.get("input_ids", body.get("prompt"))
    return f"p{PROMPT_LENGTHS.index(len(ids))}"


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict[str, Any], str]:
    """In process, with --json: (exit code, summary or {}, stderr)."""
    rc = main([*argv, "--json"])
    captured = capsys.readouterr()
    return rc, (json.loads(captured.out) if captured.out.strip() else {}), captured.err


def parity_argv(a: str, b: str, prompt_file: Path, out: Path, *extra: str) -> list[str]:
    return ["parity", a, b, "--prompts", str(prompt_file), "--out", str(out), *extra, *SETTINGS]


def rows(path: Path) -> list[dict[str, Any]]:
    """The result rows of a results file (its header line aside); every line must be whole JSON."""
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines and lines[0]["kind"] == "bitexact-results"
    return lines[1:]


def interrupt_default() -> None:
    """In the child before exec: Ctrl-C's default back. A suite started in the background of a shell
    without job control (`(pytest &)`, nohup) inherits SIGINT ignored, and Python then never turns
    SIGINT into KeyboardInterrupt, so a test of what SIGINT does would time out."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def spawn(argv: list[str], cwd: Path) -> subprocess.Popen[str]:
    """`python -m bitexact ARGV` as its own process (for signals), output captured."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "bitexact", *argv],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=interrupt_default,
    )
