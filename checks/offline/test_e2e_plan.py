"""The plan a GPU host without Nix runs (checks/plans/e2e-tiny-hybrid.json) is the flake's own
(nix/lib/gpu-batteries.nix's `plan` for the e2e recipe, evaluated with the real Nix), the runner reads it,
and its step list is the one the flake's checks are made from. Also: the e2e recipe is the recipe's argv
and environment with only the model paths changed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLAN = REPO / "checks" / "plans" / "e2e-tiny-hybrid.json"
E2E_RECIPE = REPO / "nix" / "recipes" / "e2e-tiny-hybrid.json"
RECIPE = REPO / "nix" / "recipes" / "qwen3.8-27b-exact.json"
READ = "builtins.fromJSON (builtins.readFile ./nix/recipes/{name}.json)"
# Regenerate the committed plan with: nix-instantiate --eval --strict --json -E "$EXPR" | python3 -m json.tool
EXPR = f"(import ./nix/lib/gpu-batteries.nix).plan ({READ.format(name='e2e-tiny-hybrid')})"


def nix_json(expr: str) -> object:
    done = subprocess.run(
        ["nix-instantiate", "--eval", "--strict", "--json", "-E", expr],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


@pytest.mark.nix
def test_the_committed_plan_is_what_nix_evaluates() -> None:
    assert nix_json(EXPR) == json.loads(PLAN.read_text()), (
        f"{PLAN.relative_to(REPO)} is stale; regenerate it with the expression in this test (EXPR)"
    )


@pytest.mark.nix
@pytest.mark.parametrize("recipe", ["e2e-tiny-hybrid", "qwen3.8-27b-exact"])
def test_the_flakes_step_list_is_the_runners(recipe: str) -> None:
    """nix/gpu-checks-build.nix makes its checks from `stepNames`; the runner lists the steps of the same
    plan (`bitexact-gpu-checks steps`): one list, so no check names a step the runner does not run."""
    plan_expr = f"(import ./nix/lib/gpu-batteries.nix).plan ({READ.format(name=recipe)})"
    names_expr = f"(import ./nix/lib/gpu-batteries.nix).stepNames ({READ.format(name=recipe)})"
    plan = Path(f"/tmp/plan-{recipe}-{id(recipe)}.json")
    plan.write_text(json.dumps(nix_json(plan_expr)))
    try:
        done = subprocess.run(
            [sys.executable, "-m", "gpuchecks", "steps", "--plan", str(plan)],
            capture_output=True,
            text=True,
            check=True,
        )
    finally:
        plan.unlink()
    assert json.loads(done.stdout) == nix_json(names_expr)


def test_every_battery_states_what_the_stock_tree_must_do() -> None:
    """The stock tree's expectations are data: the two the evidence names (docs/e2e.md) differ, the shared
    prefix passed there, and every other battery says it is not run on stock."""
    plan = json.loads(PLAN.read_text())
    stock = {b["name"]: b["stock"] for b in plan["batteries"]}
    assert {n for n, s in stock.items() if s == "differs"} == {"gpu-parity-recipe", "gpu-radix-cold-warm"}
    assert {n for n, s in stock.items() if s == "passes"} == {"gpu-radix-shared-prefix"}
    assert set(stock.values()) <= {"differs", "passes", "not-run"}


def test_every_command_states_what_it_needs_of_the_server() -> None:
    """commandNeeds: the long prompts (128k and the answer), the shared prefixes, and the commands that
    compare with the long reference; nothing else asks for more than the short prompts."""
    plan = json.loads(PLAN.read_text())
    steps = [*plan["references"].values(), *plan["batteries"]]
    for step in steps:
        assert len(step["commandNeeds"]) == len(step["commands"]), step["name"]
        for command, needs in zip(step["commands"], step["commandNeeds"], strict=True):
            long = "--long" in command or "@REF_LONG@" in command
            long |= step.get("reference") == "long" and "@REF@" in command
            if long:
                assert needs == 131072 + 64, (step["name"], command)
            elif "--shared-prefix" in command:
                prefix = command[command.index("--shared-prefix") + 1]
                assert needs == {"1237": 1237, "64k": 65536, "65537": 65537}[prefix] + 64
            else:
                assert needs is None, (step["name"], command)


def test_the_e2e_recipe_changes_only_the_model_paths() -> None:
    recipe, e2e = json.loads(RECIPE.read_text()), json.loads(E2E_RECIPE.read_text())
    argv, e2e_argv = recipe["launch"]["argv"], e2e["launch"]["argv"]
    changed = [i for i, (a, b) in enumerate(zip(argv, e2e_argv, strict=True)) if a != b]
    assert [argv[i - 1] for i in changed] == ["--model-path", "--speculative-draft-model-path"]
    assert e2e["launch"]["env"] == recipe["launch"]["env"]
    assert e2e["variants"] == recipe["variants"]
    assert e2e["engine"] == recipe["engine"] and e2e["deepGemm"] == recipe["deepGemm"]
