"""pkgs/weights/default.nix evaluated with the real Nix against recording doubles of fetchurl and
runCommandLocal: the fetch arguments, that a token in the environment reaches no derivation, and the
layout script run for real into a hub cache that huggingface_hub 1.32.0 resolves offline."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hfcache_support import NIXPKGS_DOUBLES, RECIPE_PATH, nix_error, nix_eval, nix_str, write_repo
from test_hfcache import DRAFTER_FILES, MODEL_FILES, resolve_offline

RECIPE = json.loads(RECIPE_PATH.read_text())
MODEL, DRAFTER = RECIPE["model"], RECIPE["drafter"]


def weights_expr(files: Path, manifests: Path) -> str:
    return (
        f"let d = ({NIXPKGS_DOUBLES}) {nix_str(str(files))}; "
        "recipe = builtins.fromJSON (builtins.readFile ./nix/recipes/qwen3.8-27b-exact.json); in "
        "import ./pkgs/weights/default.nix { inherit (d) lib fetchurl runCommandLocal writeText; "
        f"inherit recipe; manifestsDir = /. + {nix_str(str(manifests))}; }}"
    )


@pytest.fixture()
def locked(tmp_path: Path) -> dict[str, Path]:
    files, manifests = tmp_path / "files", tmp_path / "manifests"
    manifests.mkdir()
    for entry, content in ((MODEL, MODEL_FILES), (DRAFTER, DRAFTER_FILES)):
        m = write_repo(files, entry["repo"], entry["revision"], content)
        (manifests / (entry["repo"].replace("/", "--") + ".json")).write_text(json.dumps(m))
    return {"files": files, "manifests": manifests, "tmp": tmp_path}


def evaluate(locked: dict[str, Path], attr: str, env: dict[str, str] | None = None) -> Any:
    """`attr` of the weights derivation `w`, or any expression over `w`."""
    expr = f"let w = {weights_expr(locked['files'], locked['manifests'])}; in {attr}"
    if env is None:
        return nix_eval(expr)
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return nix_eval(expr)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k)
            else:
                os.environ[k] = v


def test_one_fetchurl_per_file_with_the_manifest_hash(locked: dict[str, Path]) -> None:
    # JSON prints an attrset with outPath as that path: ask for the recorded fetchurl arguments.
    files = evaluate(
        locked,
        "builtins.mapAttrs (r: builtins.mapAttrs (p: f: f.fetchurlArgs)) w.files",
        env={"HF_TOKEN": "hf_secret_sentinel_value"},
    )
    assert sorted(files) == sorted([MODEL["repo"], DRAFTER["repo"]])
    assert sorted(files[MODEL["repo"]]) == sorted(MODEL_FILES)
    shard = files[MODEL["repo"]]["model-00002-of-00002.safetensors"]
    assert shard["url"] == (
        f"https://huggingface.co/{MODEL['repo']}/resolve/{MODEL['revision']}/model-00002-of-00002.safetensors"
    )
    assert shard["sha256"] == hashlib.sha256(MODEL_FILES["model-00002-of-00002.safetensors"]).hexdigest()
    assert shard["name"] == "hf-Qwen--Qwen3.8-27B--model-00002-of-00002.safetensors"
    assert shard["netrcImpureEnvVars"] == ["HF_TOKEN"]
    assert "$HF_TOKEN" in shard["netrcPhase"] and "machine huggingface.co" in shard["netrcPhase"]
    # The token in the evaluating environment appears in no argument of any fetch.
    assert "hf_secret_sentinel_value" not in json.dumps(files)


def test_absent_manifests_name_the_lock_command(tmp_path: Path) -> None:
    (tmp_path / "manifests").mkdir()
    error = nix_error(f"({weights_expr(tmp_path, tmp_path / 'manifests')}).outPath")
    assert "weights manifest for Qwen/Qwen3.8-27B@" in error and "run `nix run .#lock`" in error


def test_the_layout_script_builds_a_cache_that_resolves_offline(locked: dict[str, Path]) -> None:
    result = evaluate(locked, "{ inherit (w) script totalBytes; spec = w.completeness.text; }")
    out = locked["tmp"] / "out"
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", result["script"]], env={**os.environ, "out": str(out)}
    )
    assert done.returncode == 0
    ref = out / "models--Qwen--Qwen3.8-27B" / "refs" / "main"
    assert ref.read_bytes() == MODEL["revision"].encode()
    link = (
        out
        / "models--Qwen--Qwen3.8-27B"
        / "snapshots"
        / MODEL["revision"]
        / "model-00001-of-00002.safetensors"
    )
    assert (
        link.is_symlink() and link.resolve() == (locked["files"] / "Qwen--Qwen3.8-27B" / link.name).resolve()
    )
    resolved = resolve_offline(out, [MODEL["repo"], DRAFTER["repo"]])
    assert resolved.returncode == 0, resolved.stderr
    assert result["totalBytes"] == sum(map(len, MODEL_FILES.values())) + sum(map(len, DRAFTER_FILES.values()))
    spec = json.loads(result["spec"])
    assert [s["repo"] for s in spec] == [MODEL["repo"], DRAFTER["repo"]]
