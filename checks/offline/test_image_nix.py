"""images/image.nix evaluated with the real Nix against recording doubles of nix2container and the
few nixpkgs builders it calls: layer contents and order, the config the container runs with, labels,
and that the weight layers' arguments do not change when the server does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from checkhelpers.hfcache_support import (
    NIXPKGS_DOUBLES,
    RECIPE_PATH,
    nix_error,
    nix_eval,
    nix_str,
    write_locked,
)
from checkhelpers.hub_files import DRAFTER_FILES, MODEL_FILES
from checkhelpers.image_eval import ADAPTER, image

pytestmark = pytest.mark.nix  # every test evaluates with the real nix-instantiate

RECIPE = json.loads(RECIPE_PATH.read_text())
MODEL, DRAFTER = RECIPE["model"], RECIPE["drafter"]


@pytest.fixture()
def locked(tmp_path: Path) -> dict[str, Path]:
    return write_locked(tmp_path, [(MODEL, MODEL_FILES), (DRAFTER, DRAFTER_FILES)])


def fetched_paths(locked: dict[str, Path]) -> dict[str, dict[str, str]]:
    """repo -> file path -> the fixed-output store path its fetch derivation has."""
    return nix_eval(
        f"let d = {NIXPKGS_DOUBLES}; w = import ./pkgs/weights/default.nix {{ "
        "inherit (d) lib fetchurl runCommandLocal writeText writeShellApplication; "
        "recipe = builtins.fromJSON (builtins.readFile ./nix/recipes/qwen3.8-27b-exact.json); "
        f"manifestsDir = /. + {nix_str(str(locked['manifests']))}; }}; "
        "in builtins.mapAttrs (r: builtins.mapAttrs (p: f: f.outPath)) w.files"
    )


def test_baked_image_layers(locked: dict[str, Path]) -> None:
    img = image(locked)
    names = [layer["created_by"] for layer in img["layers"]]
    assert names[-2:] == ["bitexact: hub cache links", "bitexact: server closure"]
    weight_layers = img["layers"][:-2]
    assert [n.split("weights-")[1].rsplit("-", 2)[0] for n in names[:-2]] == [
        "Qwen--Qwen3.8-27B",
        "incoai--Qwen3.8-27B-DFlash2",
    ]
    # Each weight layer holds exactly the fetched files of its repo (the small test repos fit in one).
    fetched = fetched_paths(locked)
    assert sorted(weight_layers[0]["deps"]) == sorted(fetched[MODEL["repo"]][p] for p in MODEL_FILES)
    assert sorted(weight_layers[1]["deps"]) == sorted(fetched[DRAFTER["repo"]][p] for p in DRAFTER_FILES)
    assert all(path.startswith("/nix/store/") for path in weight_layers[0]["deps"])
    assert all(layer["below"] == [] for layer in weight_layers)
    hub, server = img["layers"][-2:]
    assert hub["deps"] == ["/fake-store/hf-hub-cache"] and hub["below"] == names[:-2]
    assert server["deps"] == ["/fake-store/server", "/fake-store/bitexact-entrypoint"]
    assert server["below"] == names[:-1] and server["maxLayers"] == 100


def test_a_server_change_leaves_the_weight_layers_alone(locked: dict[str, Path]) -> None:
    before, after = image(locked, "/fake-store/server-a"), image(locked, "/fake-store/server-b")
    assert before["layers"][:-1] == after["layers"][:-1]
    assert before["layers"][-1] != after["layers"][-1]


def test_baked_image_config(locked: dict[str, Path]) -> None:
    config = image(locked)["config"]
    env = dict(item.split("=", 1) for item in config["Env"])
    assert config["User"] == "1000:1000"
    assert config["Entrypoint"] == ["/fake-store/bitexact-entrypoint/bin/bitexact-entrypoint"]
    assert config["Cmd"] == ["--port", "30000"] and "30000/tcp" in config["ExposedPorts"]
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    # The driver is found by the entrypoint and the launcher, not named in the image; no host binary
    # directory (the toolkit mounts nvidia-smi into /usr/bin) is on PATH.
    assert "LD_LIBRARY_PATH" not in env
    assert all(entry.startswith("/fake-store/") for entry in env["PATH"].split(":"))
    assert env["BITEXACT_HF_HUB_CACHE"] == "/fake-store/hf-hub-cache"
    assert env["BITEXACT_WEIGHTS_SPEC"] == "/fake-store/hf-weights-completeness.json"
    assert env["BITEXACT_RECIPE"].endswith("qwen3.8-27b-exact.json")
    cache = env["BITEXACT_JIT_CACHE"]
    assert list(config["Volumes"]) == [cache]
    for var in ("XDG_CACHE_HOME", "TRITON_CACHE_DIR", "FLASHINFER_WORKSPACE_BASE", "TORCHINDUCTOR_CACHE_DIR"):
        assert env[var].startswith(cache), var
    assert config["Labels"]["dev.bitexact.weights"] == "baked"
    assert config["Labels"]["dev.bitexact.model"] == f"{MODEL['repo']}@{MODEL['revision']}"


def test_both_images_are_tagged_with_the_recipe(locked: dict[str, Path]) -> None:
    """nix2container tags with the image description's store hash when `tag` is null, and its
    copyToDockerDaemon / copyToRegistry push `<name>:<tag>`: README's `docker run` names need a set tag."""
    assert image(locked)["tag"] == RECIPE["name"]
    assert image(None)["tag"] == RECIPE["name"]
    # images/default.nix builds both with that default (the dev image under its own name).
    got = nix_eval(f"let d = {NIXPKGS_DOUBLES}; out = {ADAPTER}; in {{ inherit (out.image-dev) name tag; }}")
    assert got == {"name": "bitexact-sglang-dev", "tag": RECIPE["name"]}


def test_dev_image_has_no_weights() -> None:
    img = image(None)
    assert [layer["created_by"] for layer in img["layers"]] == ["bitexact: server closure"]
    env = dict(item.split("=", 1) for item in img["config"]["Env"])
    assert "BITEXACT_HF_HUB_CACHE" not in env and env["HF_HUB_CACHE"] == "/models"
    assert img["config"]["Labels"]["dev.bitexact.weights"].startswith("none")


def test_root_filesystem_permissions() -> None:
    img = image(None)
    (rootfs,) = img["copyToRoot"]
    by_regex = {p["regex"]: p for p in img["perms"]}
    assert by_regex["/tmp$"]["mode"] == "1777" and by_regex["/tmp$"]["path"] == rootfs
    cache = by_regex["/var/cache/bitexact(/home)?$"]
    assert (cache["uid"], cache["gid"]) == (1000, 1000)


def test_the_outputs_adapter_without_manifests() -> None:
    """images/default.nix as nix/outputs.nix calls it, in this repository's state (no manifests yet):
    the dev image evaluates; the baked image stops with the lock command."""
    got = nix_eval(
        f"let d = {NIXPKGS_DOUBLES}; out = {ADAPTER}; in {{ names = builtins.attrNames out; "
        "devLayers = map (l: l.metadata.created_by) out.image-dev.layers; devName = out.image-dev.name; "
        "entrypoint = builtins.head out.image-dev.config.Entrypoint; }"
    )
    assert got["names"] == ["image", "image-dev", "image-layer-sizes", "seed-weights", "weights"]
    assert got["devLayers"] == ["bitexact: server closure"] and got["devName"] == "bitexact-sglang-dev"
    assert got["entrypoint"] == "/fake-store/bitexact-entrypoint/bin/bitexact-entrypoint"
    if not (RECIPE_PATH.parents[2] / "pkgs" / "weights" / "manifests" / "Qwen--Qwen3.8-27B.json").exists():
        error = nix_error(f"let d = {NIXPKGS_DOUBLES}; out = {ADAPTER}; in builtins.toJSON out.image.layers")
        assert "run `nix run .#lock`" in error
