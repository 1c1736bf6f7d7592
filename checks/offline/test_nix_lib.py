"""nix/lib (builtins only) evaluated with real Nix: pins -> fetch specs, committed Cargo locks, the patch
series, and the one-line errors for absent pins. (What a recipe variant runs is the launcher's alone:
checks/offline/test_launcher_variants.py.)"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "nix" / "recipes" / "qwen3.8-27b-exact.json"
FIXTURES = ROOT / "nix" / "lib" / "tests" / "fixtures"
LOCK_HINT = "run `nix run .#lock` on a machine with network access"

pytestmark = [
    pytest.mark.nix,
    pytest.mark.skipif(shutil.which("nix-instantiate") is None, reason="nix-instantiate not on PATH"),
]


def nix_eval(expr: str) -> subprocess.CompletedProcess[str]:
    """Evaluate `expr` strictly, with `lib` (nix/lib) and `r` (the recipe) in scope."""
    wrapped = f"let lib = import {ROOT}/nix/lib; r = lib.recipe.load {RECIPE}; in {expr}"
    return subprocess.run(
        ["nix-instantiate", "--eval", "--strict", "--json", "-E", wrapped],
        capture_output=True,
        text=True,
        timeout=120,
    )


def value(expr: str) -> Any:
    done = nix_eval(expr)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def error(expr: str) -> str:
    done = nix_eval(expr)
    assert done.returncode != 0, f"expected an evaluation error, got {done.stdout}"
    lines = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert lines, done.stderr
    return lines[-1]


def recipe_json() -> dict[str, Any]:
    return json.loads(RECIPE.read_text())


def test_in_nix_unit_tests_pass() -> None:
    result = value(f"import {ROOT}/nix/lib/tests")
    assert result["failures"] == []
    assert result["count"] > 0


def test_nix_reads_the_recipe_as_data_only() -> None:
    """The recipe -> argv/env rule lives in the launcher alone; nix/lib only parses the file."""
    assert value("builtins.attrNames lib.recipe") == ["load"]
    assert value("r") == recipe_json()


def test_github_pin_becomes_fetch_from_github_arguments() -> None:
    spec = value(f'lib.pins.githubSrc "sglang-src" (lib.pins.read {FIXTURES}/pins-complete/sglang-src.json)')
    assert spec == {
        "owner": "sgl-project",
        "repo": "sglang",
        "rev": "542a043f1b68796d269ef1ee11be7865f8d4a5f1",
        "hash": "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
    }


def test_absent_hash_throws_one_line_naming_the_lock_command() -> None:
    message = error(
        f'lib.pins.githubSrc "nix/pins/sglang-src.json" (lib.pins.read {ROOT}/nix/pins/sglang-src.json)'
    )
    assert message.startswith("error: nix/pins/sglang-src.json narHash for sgl-project/sglang@542a043f")
    assert LOCK_HINT in message
    cargo = error(
        f'lib.pins.cargoOutputHashes "nix/pins/sglang-cargo.json" (lib.pins.read {ROOT}/nix/pins/none.json)'
    )
    assert LOCK_HINT in cargo


def test_committed_sglang_pin_matches_the_recipe_and_has_no_invented_hash() -> None:
    pin = json.loads((ROOT / "nix" / "pins" / "sglang-src.json").read_text())
    engine = recipe_json()["engine"]
    assert f"{pin['owner']}/{pin['repo']}" == engine["repo"]
    assert pin["rev"] == engine["rev"]
    # Filled only by `nix run .#lock`; when present it must be an SRI sha256.
    if "narHash" in pin:
        assert value(f"lib.pins.isSriSha256 {json.dumps(pin['narHash'])}") is True


def test_missing_pins_are_listed_for_the_pins_check() -> None:
    missing = value(
        f"lib.pins.missing {{ pinsDir = {FIXTURES}/pins-partial; manifestsDir = {FIXTURES}/manifests; "
        'repos = [ "Qwen/Qwen3.8-27B" "incoai/Qwen3.8-27B-DFlash2" ]; wheelStubs = [ "cuda-tile" ]; }'
    )
    assert missing == [
        "nix/pins/sglang-src.json: narHash",
        "nix/pins/sglang-cargo.json: outputHashes",
        "nix/pins/sglang-cargo.json: locks",
        "nix/pins/wheel-stubs.json: cuda-tile",
        "weights manifest: incoai/Qwen3.8-27B-DFlash2",
    ]


def test_cargo_locks_come_from_the_pins_not_the_fetched_source() -> None:
    """The Cargo locks are committed files under nix/pins (no import-from-derivation), main workspace
    first; each lock's importCargoLock gets only the hashes of its own git dependencies."""
    pin = f"(lib.pins.read {FIXTURES}/pins-complete/sglang-cargo.json)"
    locks = (
        f"lib.pins.cargoLocks {{ pin = {pin}; locksDir = {FIXTURES}/pins-complete/sglang-cargo-locks; "
        'rev = "542a043f1b68796d269ef1ee11be7865f8d4a5f1"; }'
    )
    got = value(
        f"map (l: {{ inherit (l) path; hashes = lib.cargo.outputHashesFor l.lock {pin}.outputHashes; }}) "
        f"({locks})"
    )
    assert got == [
        {
            "path": "rust/Cargo.lock",
            "hashes": {"tonic-0.12.3": "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="},
        },
        {"path": "rust/ext/Cargo.lock", "hashes": {}},
    ]
    absent = error(
        f"lib.pins.cargoLocks {{ pin = lib.pins.read {ROOT}/nix/pins/none.json; "
        f"locksDir = {ROOT}/nix/pins/none; "
        'rev = "542a043f1b68796d269ef1ee11be7865f8d4a5f1"; }'
    )
    assert "nix/pins/sglang-cargo.json locks" in absent and LOCK_HINT in absent
    stale = error(locks.replace("542a043f1b68796d269ef1ee11be7865f8d4a5f1", "0" * 40))
    assert "written for sglang 542a043f" in stale and LOCK_HINT in stale


def test_patch_series_is_every_patch_file_in_name_order() -> None:
    assert value(f"lib.patches.names {FIXTURES}/patches") == ["0001-a.patch", "0002-b.patch"]
    real = sorted(p.name for p in (ROOT / "patches" / "sglang").glob("*.patch"))
    assert value(f"lib.patches.names {ROOT}/patches/sglang") == real
