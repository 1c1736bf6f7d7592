"""The end-to-end runner's battery plan (checks/e2e/batteries.json) is the flake's own
(nix/lib/gpu-batteries.nix evaluated for the e2e recipe): the GPU host has no Nix, so the plan travels as
JSON, and this test keeps the copy from drifting. Also: the e2e recipe is the recipe's argv and
environment with only the model paths changed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLAN = REPO / "checks" / "e2e" / "batteries.json"
E2E_RECIPE = REPO / "nix" / "recipes" / "e2e-tiny-hybrid.json"
RECIPE = REPO / "nix" / "recipes" / "qwen3.8-27b-exact.json"
EXPR = (
    "let b = import ./nix/lib/gpu-batteries.nix; r = builtins.fromJSON (builtins.readFile "
    "./nix/recipes/e2e-tiny-hybrid.json); in { inherit (b) references goldenRecord longLengths repeats; "
    "batteries = b.batteries r; }"
)


@pytest.mark.nix
def test_the_committed_plan_is_what_nix_evaluates() -> None:
    done = subprocess.run(
        ["nix-instantiate", "--eval", "--strict", "--json", "-E", EXPR],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout) == json.loads(PLAN.read_text()), (
        "checks/e2e/batteries.json is stale; regenerate it with the command in docs/e2e.md"
    )


def test_the_e2e_recipe_changes_only_the_model_paths() -> None:
    recipe, e2e = json.loads(RECIPE.read_text()), json.loads(E2E_RECIPE.read_text())
    argv, e2e_argv = recipe["launch"]["argv"], e2e["launch"]["argv"]
    changed = [i for i, (a, b) in enumerate(zip(argv, e2e_argv, strict=True)) if a != b]
    assert [argv[i - 1] for i in changed] == ["--model-path", "--speculative-draft-model-path"]
    assert e2e["launch"]["env"] == recipe["launch"]["env"]
    assert e2e["variants"] == recipe["variants"]
    assert e2e["engine"] == recipe["engine"] and e2e["deepGemm"] == recipe["deepGemm"]


def test_the_nondeterministic_copy_drops_only_the_flag(tmp_path: Path) -> None:
    """batteries.py --no-deterministic (issue 20's stock row): the recipe copy, through the launcher's real
    `--print`, gives the stock tree's server every argument of the recipe but the deterministic flag, for
    every capacity variant too; the memory copy and this one compose."""
    sys.path.insert(0, str(REPO / "checks" / "e2e"))
    import batteries

    sized = batteries.recipe_with_memory(batteries.RECIPE, 0.1, tmp_path / "recipe.json")
    copy = batteries.recipe_without_determinism(sized, tmp_path / "recipe.json")
    for variant in ("no-spec", "recipe", "max-running-1", "chunked-prefill-4096", "cuda-graph-decode-bs-1"):
        plain, _ = batteries.server_command(tmp_path, "stock", variant, 30005, batteries.RECIPE)
        dropped, env = batteries.server_command(tmp_path, "stock", variant, 30005, copy)
        want = [a for a in plain if a != batteries.DETERMINISTIC_FLAG]
        want[want.index("--mem-fraction-static") + 1] = "0.1"
        assert batteries.DETERMINISTIC_FLAG in plain and dropped == want, variant
        assert env["BITEXACT_RECIPE"] == str(copy)
    with pytest.raises(SystemExit, match="no --enable-deterministic-inference to drop"):
        batteries.recipe_without_determinism(copy, tmp_path / "again.json")


def test_long_lengths_replace_only_the_long_commands() -> None:
    """batteries.with_long, as batteries.py (the long reference) and goldens.py (record and check) use it
    on the committed plan's commands."""
    sys.path.insert(0, str(REPO / "checks" / "e2e"))
    import batteries

    plan = json.loads(PLAN.read_text())
    long_ref = plan["references"]["long"]["commands"][0]
    changed = batteries.with_long(long_ref, "16k")
    assert (
        changed[changed.index("--long") + 1] == "16k"
        and long_ref[long_ref.index("--long") + 1] == "16k,64k,128k"
    )
    assert [a for a in changed if a != "16k"] == [a for a in long_ref if a != "16k,64k,128k"]
    short_ref = plan["references"]["short"]["commands"][0]
    assert batteries.with_long(short_ref, "16k") == short_ref  # no --long: nothing to replace
    assert batteries.with_long(long_ref, None) == long_ref
