"""nix/lib/hf-cache.nix evaluated with the real nix-instantiate: manifest checks, fetch specs, the hub
cache plan, and that plan laid out on disk resolving offline with the real huggingface_hub 1.32.0 (the
server lock's version, from its released wheel)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from checkhelpers.hfcache_support import (
    RECIPE_PATH,
    materialize,
    nix_error,
    nix_eval,
    nix_str,
    nix_value,
    write_repo,
)
from checkhelpers.hub_files import DRAFTER_FILES, MODEL_FILES, resolve_offline

# One test (the fixture manifests against pinlock's schema) needs no Nix; it rides along.
pytestmark = pytest.mark.nix  # every test evaluates with the real nix-instantiate

RECIPE = json.loads(RECIPE_PATH.read_text())
MODEL = RECIPE["model"]
DRAFTER = RECIPE["drafter"]
HF = "(import ./nix/lib/hf-cache.nix)"


@pytest.fixture()
def weights(tmp_path: Path) -> dict[str, Any]:
    """Two repos written to disk with real manifests in a manifests directory (the lock tool's output)."""
    files = tmp_path / "files"
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    model = write_repo(files, MODEL["repo"], MODEL["revision"], MODEL_FILES)
    drafter = write_repo(files, DRAFTER["repo"], DRAFTER["revision"], DRAFTER_FILES)
    for m in (model, drafter):
        org, name = m["repo"].split("/")
        (manifests / f"{org}--{name}.json").write_text(json.dumps(m, indent=2))
    return {"files": files, "manifests": manifests, "model": model, "drafter": drafter}


def read_expr(manifests: Path, entry: dict[str, str]) -> str:
    return (
        f"{HF}.readManifest {{ manifestsDir = /. + {nix_str(str(manifests))}; "
        f"repo = {nix_str(entry['repo'])}; revision = {nix_str(entry['revision'])}; }}"
    )


def test_absent_manifest_is_one_line_naming_the_lock_command(tmp_path: Path) -> None:
    error = nix_error(read_expr(tmp_path, MODEL))
    (line,) = [ln for ln in error.splitlines() if ln.startswith("error:")]
    assert line == (
        f"error: weights manifest for {MODEL['repo']}@{MODEL['revision']} is absent "
        "(pkgs/weights/manifests/Qwen--Qwen3.8-27B.json): run `nix run .#lock` on a machine with "
        "network access to write it"
    )


def test_the_repository_manifests_are_locked_or_absent_with_the_fix() -> None:
    """Whatever state the repository is in: a committed manifest must pass the checks, a missing one
    must name the lock command."""
    for entry in (MODEL, DRAFTER):
        expr = read_expr(Path("/work/none"), entry).replace('/. + "/work/none"', "./pkgs/weights/manifests")
        org, name = entry["repo"].split("/")
        if (RECIPE_PATH.parents[2] / "pkgs" / "weights" / "manifests" / f"{org}--{name}.json").exists():
            assert nix_eval(expr)["revision"] == entry["revision"]
        else:
            assert "run `nix run .#lock`" in nix_error(expr)


def test_fetch_specs_name_the_resolve_url_and_the_manifest_hash(weights: dict[str, Any]) -> None:
    specs = nix_eval(f"{HF}.fetchSpecs ({read_expr(weights['manifests'], MODEL)})")
    by_path = {s["path"]: s for s in specs}
    assert sorted(by_path) == sorted(MODEL_FILES)
    shard = by_path["model-00001-of-00002.safetensors"]
    assert shard == {
        "name": "hf-Qwen--Qwen3.8-27B--model-00001-of-00002.safetensors",
        "url": f"https://huggingface.co/Qwen/Qwen3.8-27B/resolve/{MODEL['revision']}/model-00001-of-00002.safetensors",
        "repo": MODEL["repo"],
        "path": "model-00001-of-00002.safetensors",
        "size": len(MODEL_FILES["model-00001-of-00002.safetensors"]),
        "lfs": True,
        "sha256": hashlib.sha256(MODEL_FILES["model-00001-of-00002.safetensors"]).hexdigest(),
    }
    # A dot file gets a valid store name (no leading dot) and keeps its URL.
    assert by_path[".gitattributes"]["name"] == "hf-Qwen--Qwen3.8-27B--.gitattributes"
    assert by_path[".gitattributes"]["url"].endswith(f"/resolve/{MODEL['revision']}/.gitattributes")


def test_sri_hashes_pass_as_hash_and_paths_are_encoded() -> None:
    data = b"x"
    sri = "sha256-" + __import__("base64").b64encode(hashlib.sha256(data).digest()).decode()
    manifest = {
        "repo": "org/name",
        "revision": MODEL["revision"],
        "files": [{"path": "sub dir/a+b#1.json", "size": 1, "sha256": sri, "lfs": False}],
    }
    (spec,) = nix_eval(f"{HF}.fetchSpecs {nix_value(manifest)}")
    assert spec["hash"] == sri and "sha256" not in spec
    assert (
        spec["url"] == f"https://huggingface.co/org/name/resolve/{MODEL['revision']}/sub%20dir/a%2Bb%231.json"
    )
    assert spec["name"] == "hf-org--name--sub_dir--a+b_1.json"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"revision": "0" * 39 + "1"}, "but the recipe wants"),
        ({"repo": "Qwen/Other"}, "it is for 'Qwen/Other'"),
        ({"files": []}, "it lists no files"),
        ({"file": {"sha256": ""}}, "has no sha256"),
        ({"file": {"sha256": "abc"}}, "neither 64 hex digits nor sha256-<base64>"),
        ({"file": {"size": None}}, "has no size"),
        ({"file": {"path": "../escape"}}, "is not a plain relative path"),
        ({"file": {"path": "/abs"}}, "is not a plain relative path"),
        ({"file": {"path": "tokenizer.json"}}, "a file path is listed twice"),
    ],
)
def test_bad_manifests_name_the_problem_and_the_fix(
    weights: dict[str, Any], change: dict[str, Any], message: str
) -> None:
    manifest = json.loads(json.dumps(weights["model"]))
    for key, value in change.items():
        if key == "file":
            manifest["files"][0].update(value)
        else:
            manifest[key] = value
    expr = (
        f"{HF}.validateManifest {{ manifest = {nix_value(manifest)}; repo = {nix_str(MODEL['repo'])}; "
        f"revision = {nix_str(MODEL['revision'])}; }}"
    )
    error = nix_error(expr)
    assert message in error and "nix run .#lock" in error


def test_layout_plan(weights: dict[str, Any]) -> None:
    both = " ".join(f"({read_expr(weights['manifests'], e)})" for e in (MODEL, DRAFTER))
    layout = nix_eval(f"{HF}.cacheLayout [ {both} ]")
    assert layout["texts"] == [
        {"target": "models--Qwen--Qwen3.8-27B/refs/main", "text": MODEL["revision"]},
        {"target": "models--incoai--Qwen3.8-27B-DFlash2/refs/main", "text": DRAFTER["revision"]},
    ]
    targets = sorted(link["target"] for link in layout["links"])
    assert targets == sorted(
        [f"models--Qwen--Qwen3.8-27B/snapshots/{MODEL['revision']}/{p}" for p in MODEL_FILES]
        + [f"models--incoai--Qwen3.8-27B-DFlash2/snapshots/{DRAFTER['revision']}/{p}" for p in DRAFTER_FILES]
    )
    spec = nix_eval(f"{HF}.completenessSpec [ ({read_expr(weights['manifests'], DRAFTER)}) ]")
    assert spec == [
        {
            "repo": DRAFTER["repo"],
            "revision": DRAFTER["revision"],
            "snapshot": f"models--incoai--Qwen3.8-27B-DFlash2/snapshots/{DRAFTER['revision']}",
            "files": [{"path": p, "size": len(d)} for p, d in sorted(DRAFTER_FILES.items())],
        }
    ]


@pytest.mark.network  # huggingface_hub's released wheel
def test_the_planned_cache_resolves_offline_with_huggingface_hub(
    weights: dict[str, Any], tmp_path: Path
) -> None:
    manifests = [read_expr(weights["manifests"], e) for e in (MODEL, DRAFTER)]
    plan = nix_eval(
        f"let ms = [ ({manifests[0]}) ({manifests[1]}) ]; in "
        f"{{ layout = {HF}.cacheLayout ms; specs = builtins.concatMap {HF}.fetchSpecs ms; }}"
    )
    # Stand in for the fetchers: the spec's name -> the written file its manifest hash names.
    fetched = {s["name"]: weights["files"] / s["repo"].replace("/", "--") / s["path"] for s in plan["specs"]}
    for spec in plan["specs"]:
        assert hashlib.sha256(fetched[spec["name"]].read_bytes()).hexdigest() == spec["sha256"]
    cache = tmp_path / "hub"
    materialize(plan["layout"], fetched, cache)

    done = resolve_offline(cache, [MODEL["repo"], DRAFTER["repo"]])
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["version"] == "1.32.0"
    for entry, files in ((MODEL, MODEL_FILES), (DRAFTER, DRAFTER_FILES)):
        got = result[entry["repo"]]
        folder = "models--" + entry["repo"].replace("/", "--")
        assert got["snapshot"] == str(cache / folder / "snapshots" / entry["revision"])
        assert got["config"] == files["config.json"].decode()


@pytest.mark.network  # huggingface_hub's released wheel
def test_a_ref_with_a_newline_does_not_resolve(weights: dict[str, Any], tmp_path: Path) -> None:
    """Why the plan writes refs/main without a newline: huggingface_hub reads it verbatim."""
    plan = nix_eval(f"{HF}.cacheLayout [ ({read_expr(weights['manifests'], DRAFTER)}) ]")
    plan["texts"] = [{**t, "text": t["text"] + "\n"} for t in plan["texts"]]
    fetched = {
        link["name"]: weights["files"] / "incoai--Qwen3.8-27B-DFlash2" / link["target"].split("/", 3)[3]
        for link in plan["links"]
    }
    materialize(plan, fetched, tmp_path / "hub")
    done = resolve_offline(tmp_path / "hub", [DRAFTER["repo"]])
    assert done.returncode != 0 and "LocalEntryNotFoundError" in done.stderr


def test_fixture_manifests_follow_the_lock_tools_schema(weights: dict[str, Any]) -> None:
    """The manifests these tests feed to Nix are what `nix run .#lock` writes (pinlock's own check)."""
    from pinlock.hf import validate_manifest

    for key in ("model", "drafter"):
        assert validate_manifest(weights[key], key) == weights[key]
