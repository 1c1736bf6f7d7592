"""pkgs/weights/default.nix evaluated with the real Nix against recording doubles of the nixpkgs
builders it calls (fetchurl's double has the real fixed-output path of its name and hash): the fetch
arguments, that a token in the environment reaches no derivation, the seed script adding an existing
hub cache's files to the real store at exactly those paths, and the layout script building a hub cache
over them that huggingface_hub 1.32.0 resolves offline."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from checkhelpers.hfcache_support import (
    NIX_CONFIG,
    NIXPKGS_DOUBLES,
    RECIPE_PATH,
    WEIGHTS_BUILDERS,
    nix_error,
    nix_eval,
    nix_str,
    shellcheck_as_nixpkgs,
    write_locked,
)
from checkhelpers.hub_files import DRAFTER_FILES, MODEL_FILES, resolve_offline

pytestmark = pytest.mark.nix  # every test evaluates with the real nix-instantiate

RECIPE = json.loads(RECIPE_PATH.read_text())
MODEL, DRAFTER = RECIPE["model"], RECIPE["drafter"]


def weights_expr(manifests: Path) -> str:
    return (
        f"let d = {NIXPKGS_DOUBLES}; "
        "recipe = builtins.fromJSON (builtins.readFile ./nix/recipes/qwen3.8-27b-exact.json); in "
        f"import ./pkgs/weights/default.nix {{ {WEIGHTS_BUILDERS} "
        f"inherit recipe; manifestsDir = /. + {nix_str(str(manifests))}; }}"
    )


def user_hub_cache(root: Path, entry: dict[str, str], files: dict[str, bytes]) -> None:
    """A hub cache as huggingface_hub writes one: blobs named by hash, snapshot entries linking to them."""
    folder = root / ("models--" + entry["repo"].replace("/", "--"))
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(entry["revision"])
    for rel, data in files.items():
        blob = folder / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = folder / "snapshots" / entry["revision"] / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))


@pytest.fixture()
def locked(tmp_path: Path) -> dict[str, Path]:
    return {**write_locked(tmp_path, [(MODEL, MODEL_FILES), (DRAFTER, DRAFTER_FILES)]), "tmp": tmp_path}


def evaluate(locked: dict[str, Path], expr: str, env: dict[str, str] | None = None) -> Any:
    """`expr` over the weights derivation `w`, evaluated with `env` added to the environment."""
    full = f"let w = {weights_expr(locked['manifests'])}; in {expr}"
    old = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    try:
        return nix_eval(full)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k)
            else:
                os.environ[k] = v


def test_one_fetchurl_per_file_with_the_manifest_hash(locked: dict[str, Path]) -> None:
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
    error = nix_error(f"({weights_expr(tmp_path / 'manifests')}).outPath")
    assert "weights manifest for Qwen/Qwen3.8-27B@" in error and "run `nix run .#lock`" in error


def run(script: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "NIX_CONFIG": NIX_CONFIG, **env}
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script, "script", *args], capture_output=True, text=True, env=full
    )


@pytest.mark.network  # huggingface_hub's released wheel
def test_seed_then_layout_resolves_offline(locked: dict[str, Path]) -> None:
    """A user's existing hub cache -> the real store (seed script, real nix-store) -> the layout script's
    hub cache, whose links point at those store paths -> huggingface_hub resolves both repos."""
    result = evaluate(
        locked,
        "{ seed = w.seed.text; inherit (w) script totalBytes; spec = w.completeness.text; "
        "paths = builtins.mapAttrs (r: builtins.mapAttrs (p: f: f.outPath)) w.files; }",
    )
    user = locked["tmp"] / "user-hub"
    user_hub_cache(user, MODEL, MODEL_FILES)
    user_hub_cache(user, DRAFTER, DRAFTER_FILES)
    seeded = run(result["seed"], str(user))
    assert seeded.returncode == 0, seeded.stderr
    for repo, paths in result["paths"].items():
        for path in paths.values():
            assert f"added: {path}" in seeded.stdout or f"present: {path}" in seeded.stdout
            assert Path(path).is_file()
        assert (
            Path(paths["config.json"]).read_bytes()
            == (MODEL_FILES if repo == MODEL["repo"] else DRAFTER_FILES)["config.json"]
        )
    assert not list(user.glob(".seed-weights.*")), "the staging directory was left behind"

    out = locked["tmp"] / "out"
    laid = run(result["script"], out=str(out))
    assert laid.returncode == 0, laid.stderr
    ref = out / "models--Qwen--Qwen3.8-27B" / "refs" / "main"
    assert ref.read_bytes() == MODEL["revision"].encode()
    shard = (
        out
        / "models--Qwen--Qwen3.8-27B"
        / "snapshots"
        / MODEL["revision"]
        / "model-00001-of-00002.safetensors"
    )
    assert os.readlink(shard) == result["paths"][MODEL["repo"]]["model-00001-of-00002.safetensors"]
    resolved = resolve_offline(out, [MODEL["repo"], DRAFTER["repo"]])
    assert resolved.returncode == 0, resolved.stderr
    assert result["totalBytes"] == sum(map(len, MODEL_FILES.values())) + sum(map(len, DRAFTER_FILES.values()))
    assert [s["repo"] for s in json.loads(result["spec"])] == [MODEL["repo"], DRAFTER["repo"]]


def test_seed_refuses_a_file_that_differs_from_the_manifest(tmp_path: Path) -> None:
    # Content of its own (the store keeps what earlier tests added, and present paths are skipped).
    salt = os.urandom(8).hex().encode()
    model_files = {"config.json": b"model " + salt, "model.safetensors": b"weights " + salt}
    drafter_files = {"config.json": b"drafter " + salt}
    manifests = write_locked(tmp_path, [(MODEL, model_files), (DRAFTER, drafter_files)])["manifests"]
    seed = nix_eval(f"({weights_expr(manifests)}).seed.text")
    user = tmp_path / "user-hub"
    user_hub_cache(user, MODEL, model_files)
    user_hub_cache(user, DRAFTER, {"config.json": b"tampered " + salt})
    done = run(seed, str(user))
    assert done.returncode == 1
    assert "differs from the manifest: models--incoai--Qwen3.8-27B-DFlash2/snapshots/" in done.stderr
    assert done.stdout.count("added: /nix/store/") == 2  # the model's two files went in
    empty = tmp_path / "empty-hub"
    empty.mkdir()
    done = run(seed, str(empty))
    assert (
        done.returncode == 1 and "missing in the cache: models--incoai--Qwen3.8-27B-DFlash2/" in done.stderr
    )


def test_the_seed_script_passes_shellcheck(locked: dict[str, Path]) -> None:
    """writeShellApplication runs shellcheck when it builds; a finding would break `.#seed-weights`."""
    done = shellcheck_as_nixpkgs(evaluate(locked, "w.seed.text"), locked["tmp"])
    assert done.returncode == 0, done.stdout


def test_the_seed_script_depends_on_no_fetch(locked: dict[str, Path]) -> None:
    """`nix run .#seed-weights` must not download the weights before it runs: its text names each
    file's store path as data, with no derivation (the fetches') in its string context."""
    got = evaluate(
        locked,
        "{ context = builtins.attrNames (builtins.getContext w.seed.text); "
        "paths = builtins.concatLists (map builtins.attrValues (builtins.attrValues "
        "(builtins.mapAttrs (r: builtins.mapAttrs (p: f: f.outPath)) w.files))); inherit (w.seed) text; }",
    )
    assert got["context"] == []
    # ... while it still names every file's store path.
    assert got["paths"] and all(path in got["text"] for path in got["paths"])
