"""nix/lib/image-plan.nix evaluated with the real nix-instantiate: weight layers under the cap, apart
from the server and computed without it, at the bottom of the stack; labels from the recipe."""

from __future__ import annotations

import json
from typing import Any

import pytest
from checkhelpers.hfcache_support import RECIPE_PATH, nix_error, nix_eval, nix_str, nix_value

pytestmark = pytest.mark.nix  # every test evaluates with the real nix-instantiate

PLAN = "(import ./nix/lib/image-plan.nix)"
RECIPE = json.loads(RECIPE_PATH.read_text())
GB = 1_000_000_000
READ_RECIPE = "builtins.fromJSON (builtins.readFile ./nix/recipes/qwen3.8-27b-exact.json)"

# Shapes like the real repos' (a 27B BF16 model in ~4-5 GB shards plus small files); sizes are inputs
# to the packing, not claims about the real manifests.
MODEL = {
    "repo": RECIPE["model"]["repo"],
    "revision": RECIPE["model"]["revision"],
    "files": [
        {"path": f"model-{i:05d}-of-00012.safetensors", "size": 4_600_000_000 + i} for i in range(1, 13)
    ]
    + [{"path": "config.json", "size": 1_500}, {"path": "tokenizer.json", "size": 11_000_000}],
}
DRAFTER = {
    "repo": RECIPE["drafter"]["repo"],
    "revision": RECIPE["drafter"]["revision"],
    "files": [{"path": "model.safetensors", "size": 3_300_000_000}, {"path": "config.json", "size": 900}],
}


def layers(weights: list[dict[str, Any]], server: str, cap: int | None = None) -> list[dict[str, Any]]:
    cap_arg = "" if cap is None else f"capBytes = {cap};"
    return nix_eval(
        f"{PLAN}.layers {{ weights = {nix_value(weights)}; server = {nix_str(server)}; {cap_arg} }}"
    )


def test_weight_layers_respect_the_cap_and_hold_every_file_once() -> None:
    stack = layers([MODEL, DRAFTER], "/nix/store/aaaa-server")
    weight = [layer for layer in stack if layer["kind"] == "weights"]
    cap = nix_eval(f"{PLAN}.defaultCapBytes")
    assert cap == 10 * GB
    for layer in weight:
        sizes = {
            f["path"]: f["size"] for m in (MODEL, DRAFTER) if m["repo"] == layer["repo"] for f in m["files"]
        }
        assert layer["bytes"] == sum(sizes[p] for p in layer["paths"]) <= cap
        assert layer["paths"] == sorted(layer["paths"])
    placed = sorted((layer["repo"], p) for layer in weight for p in layer["paths"])
    expected = sorted((m["repo"], f["path"]) for m in (MODEL, DRAFTER) for f in m["files"])
    assert placed == expected
    # Path order: config.json, 12 shards of 4.6 GB two by two, tokenizer.json; the drafter apart.
    assert [len(layer["paths"]) for layer in weight if layer["repo"] == MODEL["repo"]] == [3, 2, 2, 2, 2, 3]
    assert [layer["paths"] for layer in weight if layer["repo"] == DRAFTER["repo"]] == [
        ["config.json", "model.safetensors"]
    ]


def test_a_server_change_leaves_every_weight_layer_alone() -> None:
    before = layers([MODEL, DRAFTER], "/nix/store/aaaa-server-1")
    after = layers([MODEL, DRAFTER], "/nix/store/bbbb-server-2-with-a-patch")
    assert before != after  # the server layer does change
    weights_before = [layer for layer in before if layer["kind"] != "server"]
    assert weights_before == [layer for layer in after if layer["kind"] != "server"]
    assert weights_before, "no weight layers planned"


def test_weights_sit_below_the_server() -> None:
    kinds = [layer["kind"] for layer in layers([MODEL, DRAFTER], "s")]
    n = kinds.count("weights")
    assert kinds == ["weights"] * n + ["hub-cache", "server"]
    total = n + 1 + layers([MODEL, DRAFTER], "s")[-1]["maxLayers"]
    assert total <= nix_eval(f"{PLAN}.maxTotalLayers")


def test_a_drafter_bump_leaves_the_model_layers_alone() -> None:
    bumped = {
        **DRAFTER,
        "revision": "f" * 40,
        "files": [{"path": "model.safetensors", "size": 3_400_000_000}],
    }
    model_layers = [layer for layer in layers([MODEL, DRAFTER], "s") if layer.get("repo") == MODEL["repo"]]
    assert model_layers == [
        layer for layer in layers([MODEL, bumped], "s") if layer.get("repo") == MODEL["repo"]
    ]


def test_a_file_above_the_cap_is_an_error() -> None:
    error = nix_error(f"{PLAN}.weightLayers {{ weights = {nix_value([DRAFTER])}; capBytes = {3 * GB}; }}")
    assert "model.safetensors (3300000000 bytes) is larger than the layer cap of 3000000000 bytes" in error


def test_too_many_weight_layers_for_the_layer_budget_is_an_error() -> None:
    many = {**MODEL, "files": [{"path": f"s{i:03d}", "size": GB} for i in range(110)]}
    error = nix_error(f'{PLAN}.layers {{ weights = {nix_value([many])}; server = "s"; capBytes = {GB}; }}')
    assert "110 weight layers leave fewer than 20 layers for the server; raise capBytes" in error


def test_no_weights_means_server_only() -> None:
    assert layers([], "s") == [{"kind": "server", "server": "s", "maxLayers": 100}]


def test_labels_name_the_recipe_engine_and_weight_revisions() -> None:
    labels = nix_eval(f"{PLAN}.labels {{ recipe = {READ_RECIPE}; baked = true; }}")
    assert labels["dev.bitexact.recipe"] == RECIPE["name"]
    assert labels["dev.bitexact.engine"] == f"sgl-project/sglang@{RECIPE['engine']['rev']}"
    assert labels["dev.bitexact.engine.patches"] == ",".join(RECIPE["engine"]["patches"])
    assert labels["dev.bitexact.model"] == f"{RECIPE['model']['repo']}@{RECIPE['model']['revision']}"
    assert labels["dev.bitexact.drafter"] == f"{RECIPE['drafter']['repo']}@{RECIPE['drafter']['revision']}"
    assert labels["dev.bitexact.deep-gemm"] == "sgl-deep-gemm==0.2.0+0001-sm120-fence.patch"
    assert labels["dev.bitexact.card"] == "rtx-pro-6000-blackwell"
    assert labels["dev.bitexact.weights"] == "baked"
    assert all(isinstance(v, str) for v in labels.values())


def test_dev_image_labels_say_no_weights() -> None:
    labels = nix_eval(
        f'{PLAN}.labels {{ recipe = {READ_RECIPE}; baked = false; source = "https://example.invalid/repo"; }}'
    )
    assert labels["dev.bitexact.weights"].startswith("none")
    assert labels["org.opencontainers.image.source"] == "https://example.invalid/repo"
