"""The perf servers and the recipe they start from: which tree, recipe variant and speculation each named
server runs, and how its own meta_info must show that it ran so.

Servers (SERVERS; variants of nix/recipes/perf-27b-shape.json, the recipe's argv with only the model paths
changed and `--load-format dummy` added):
- `exact-spec`: the recipe (speculation on, `--enable-deterministic-inference`), patched tree, through
  the launcher (`perf-exact-spec`: the recipe plus simulated acceptance);
- `stock-spec`: the released tree, the launcher's printed argv without `--enable-deterministic-inference`
  (`perf-stock-spec`), the same simulated acceptance;
- `exact-no-spec`: patched tree, the recipe's `no-spec` variant;
- `stock-no-spec`: the released tree without `--enable-deterministic-inference` and without speculation
  (`perf-stock-no-spec`): the recipe author's reference row.
Beside them, on request (--server): `exact-spec-window` (exact-spec with the drafter's context capped at
4096 tokens), and `exact-spec-radix` / `stock-spec-radix` (exact-spec and stock-spec with the radix cache
on), which run the prefix-reuse stage alone (lab/perf/reuse.py).
Random weights accept no drafts, so both speculative servers run with SGLang's own
`SGLANG_SIMULATE_ACC_LEN` (srt/speculative/dflash_worker_v2.py calls
dflash_utils.apply_dflash_simulated_acceptance: every verify step commits that many tokens;
`real-draft-token` commits the drafter's tokens and the target's own next one); the length is the
recipe variant's, and the server's meta_info must report it (check_meta).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.perf import lab_servers  # the product runner's Server and trees, the lab's host settings
from lab.perf.run_errors import RunError

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "nix" / "recipes" / "perf-27b-shape.json"


@dataclass(frozen=True)
class ServerSpec:
    name: str
    tree: str
    variant: str
    speculative: bool
    description: str
    reuse: bool = False  # a radix server: only the prefix-reuse stage runs (lab/perf/reuse.py)


SERVERS = {
    s.name: s
    for s in (
        ServerSpec("exact-spec", "patched", "perf-exact-spec", True, "exact, speculation on (the recipe)"),
        ServerSpec("stock-spec", "stock", "perf-stock-spec", True, "stock tree, no deterministic inference"),
        ServerSpec(
            "exact-spec-window",
            "patched",
            "perf-exact-spec-window",
            True,
            "exact, speculation on, the drafter's context capped at 4096 tokens",
        ),
        ServerSpec("exact-no-spec", "patched", "no-spec", False, "exact, speculation off"),
        ServerSpec(
            "stock-no-spec",
            "stock",
            "perf-stock-no-spec",
            False,
            "stock tree, speculation off (the reference row)",
        ),
        ServerSpec(
            "exact-spec-radix",
            "patched",
            "perf-exact-spec-radix",
            True,
            "exact, speculation on, the radix cache on",
            reuse=True,
        ),
        ServerSpec(
            "stock-spec-radix",
            "stock",
            "perf-stock-spec-radix",
            True,
            "stock tree, no deterministic inference, the radix cache on",
            reuse=True,
        ),
    )
}
# `measure` without --server: the four servers of docs/performance.md's table
DEFAULT_SERVERS = ["exact-spec", "stock-spec", "exact-no-spec", "stock-no-spec"]


def recipe() -> dict[str, Any]:
    return json.loads(RECIPE.read_text())


def accept_len(spec: ServerSpec) -> float | None:
    """The simulated accept length the recipe variant states (None for a server without speculation)."""
    if not spec.speculative:
        return None
    env = recipe()["variants"][spec.variant].get("env", {})
    if "SGLANG_SIMULATE_ACC_LEN" not in env:
        raise RunError(f"{RECIPE}: variant {spec.variant} states no SGLANG_SIMULATE_ACC_LEN")
    return float(env["SGLANG_SIMULATE_ACC_LEN"])


def model_dirs() -> tuple[Path, Path]:
    r = recipe()
    return REPO / r["model"]["path"], REPO / r["drafter"]["path"]


def check_ready(work: Path) -> None:
    """The assembled trees and the model folders exist (they live only while the GPU machine is held)."""
    missing = [
        str(work / p) for p in ("patched/sglang", "stock/sglang", "deps/.complete") if not (work / p).exists()
    ]
    if missing:
        raise RunError(
            f"not assembled: {', '.join(missing)} missing. Run `bash lab/card/host.sh stash ...` and "
            "`bash lab/card/host.sh build` first (docs/performance.md, calls 1 and 2); a machine that was "
            "given back between calls starts bare"
        )
    for folder in model_dirs():
        if not (folder / "config.json").exists():
            raise RunError(f"no {folder}/config.json: run `bash lab/perf/host.sh model` first")


def served_recipe(args: argparse.Namespace) -> Path:
    """The recipe the servers start from: RECIPE, or a copy with --max-running-requests replaced."""
    requests = getattr(args, "max_running_requests", None)
    if requests is None:
        return RECIPE
    return lab_servers.recipe_with_running(
        RECIPE, requests, args.results / f"recipe-max-running-{requests}.json"
    )


def max_running(args: argparse.Namespace) -> int:
    """The request slots the servers run with (the recipe's unless --max-running-requests replaced it)."""
    requests = getattr(args, "max_running_requests", None)
    if requests is not None:
        return int(requests)
    argv = recipe()["launch"]["argv"]
    return int(argv[argv.index("--max-running-requests") + 1])


def speculation_phrase(info: dict[str, Any], expected: float) -> str:
    """SGLang's meta_info on speculation, against the stated accept length."""
    tokens = info.get("completion_tokens")
    return (
        f"accept length {float(info.get('spec_accept_length') or 0):.2f} over "
        f"{int(info.get('spec_verify_ct') or 0)} verify steps"
        + (f" of {tokens} tokens" if tokens else "")
        + f" (stated {expected:g}; a step cut short by max_new_tokens lowers the mean)"
    )


def check_meta(spec: ServerSpec, meta: dict[str, Any]) -> dict[str, Any]:
    """meta_info must show speculation at the stated length (spec servers) or no speculation."""
    expected = accept_len(spec)
    verify = int(meta.get("spec_verify_ct") or 0)
    length = meta.get("spec_accept_length")
    if expected is None:
        ok = verify == 0
        why = "no verify steps" if ok else f"{verify} verify steps in a server without speculation"
    else:
        ok = verify > 0 and length is not None and abs(float(length) - expected) <= 0.5
        why = speculation_phrase(meta, expected) if verify else "no verify steps: speculation did not run"
    return {"meta_info": meta, "expected_accept_length": expected, "ok": ok, "check": why}
