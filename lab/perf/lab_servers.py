"""The lab's servers on a GPU host without Nix, started the way the GPU checks start theirs: the product's
runner (gpuchecks: a tree, its launcher, one Server class) with the trees `lab/card/assemble.py` built
under WORK. Only the lab's choices live here: its recipe copies and the host's settings beside the recipe.

Host settings (the lent Hopper cards, torch 2.11): sglang-kernel is 0.4.5 there (0.4.7 is built for torch
2.13), which SGLang 0.5.20 refuses without skipping its version check; DeepGEMM 0.2.0 does not run on that
torch (the runner's `deepgemm-runs` probe, docs/e2e.md), so SGLang's batch-invariant GEMMs take their Triton
path, as the checks' servers there do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gpuchecks import servers
from gpuchecks.servers import PortTaken, answers, log, meta_sample, stop_group
from gpuchecks.trees import Tree, with_launch_value, with_memory_fraction

REPO = Path(__file__).resolve().parents[2]
PORT = 30000
HOST_SETTINGS = {"SGLANG_SKIP_SGL_KERNEL_VERSION_CHECK": "1", "SGLANG_ENABLE_JIT_DEEPGEMM": "0"}

__all__ = [
    "PORT",
    "REPO",
    "PortTaken",
    "Server",
    "answers",
    "base_env",
    "log",
    "meta_sample",
    "recipe_with_memory",
    "recipe_with_running",
    "run_bitexact",
    "stop_group",
    "through_launcher",
    "tree_of",
    "with_launch_value",
]


def tree_of(work: Path, tree: str) -> Tree:
    """WORK/TREE as the runner sees it: the tree first, then WORK/deps (which holds the product too)."""
    return Tree(tree, work / tree, deps=(work / "deps",), server_env=dict(HOST_SETTINGS))


def base_env(work: Path, tree: str, recipe: Path) -> dict[str, str]:
    env = tree_of(work, tree).env()
    env.setdefault("BITEXACT_RECIPE", str(recipe))
    return env


def through_launcher(work: Path, tree: str) -> bool:
    return tree_of(work, tree).has_series


def recipe_with_memory(recipe: Path, fraction: float, dest: Path) -> Path:
    """A copy of the recipe whose `--mem-fraction-static` is `fraction` (it keeps the recipe's name)."""
    return with_memory_fraction(recipe, fraction, dest)


def recipe_with_running(recipe: Path, requests: int, dest: Path) -> Path:
    """A copy of the recipe whose `--max-running-requests` is `requests`: fewer request slots leave the
    speculative servers' verify states less room, so longer contexts fit a smaller card."""
    return with_launch_value(recipe, "--max-running-requests", str(requests), dest)


class Server(servers.Server):
    """gpuchecks' Server for VARIANT of WORK/TREE on PORT."""

    def __init__(self, work: Path, tree: str, variant: str, port: int, log_path: Path, recipe: Path) -> None:
        argv, env = tree_of(work, tree).server_command(recipe, variant, port)
        super().__init__(f"{tree} {variant}", argv, env, port, log_path, cwd=REPO)
        self.variant = variant


def run_bitexact(command: list[str], work: Path, tree: str, log_path: Path) -> dict[str, Any]:
    """One bitexact command (its argv starts with `bitexact`): exit code, --json summary and time."""
    argv = [sys.executable, "-m", "bitexact", *command[1:]]
    started = time.monotonic()
    with log_path.open("a") as stderr:
        stderr.write("+ " + " ".join(command) + "\n")
        stderr.flush()
        done = subprocess.run(
            argv, cwd=REPO, env={**os.environ, **tree_of(work, tree).env()}, stdout=subprocess.PIPE,
            stderr=stderr, text=True,
        )  # fmt: skip
    try:
        summary: Any = json.loads(done.stdout) if "--json" in command else done.stdout.strip()[-2000:]
    except json.JSONDecodeError:
        summary = done.stdout[-2000:]
    return {
        "command": command,
        "exit": done.returncode,
        "seconds": round(time.monotonic() - started, 1),
        "summary": summary,
    }
