"""images/image.nix and images/default.nix evaluated with the real Nix against recording doubles of
nix2container and the few nixpkgs builders they call (checkhelpers.hfcache_support's NIXPKGS_DOUBLES)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from checkhelpers.hfcache_support import NIXPKGS_DOUBLES, WEIGHTS_BUILDERS, nix_eval, nix_str

# images/default.nix as nix/outputs.nix calls it, the server a recorded stand-in.
ADAPTER = (
    "import ./images/default.nix { pkgs = d; inherit (d) nix2container; "
    "recipe = builtins.fromJSON (builtins.readFile ./nix/recipes/qwen3.8-27b-exact.json); "
    'mkServer = args: { outPath = "/fake-store/server"; passthru.venv = "/fake-store/venv"; }; }'
)


def image(locked: dict[str, Path] | None, server: str = "/fake-store/server") -> Any:
    """The recorded buildImage arguments; layers as their recorded buildLayer arguments."""
    weights = (
        f"import ./pkgs/weights/default.nix {{ {WEIGHTS_BUILDERS} "
        f"inherit recipe; manifestsDir = /. + {nix_str(str(locked['manifests']))}; }}"
        if locked
        else "null"
    )
    return nix_eval(
        f"let d = {NIXPKGS_DOUBLES}; "
        "recipe = builtins.fromJSON (builtins.readFile ./nix/recipes/qwen3.8-27b-exact.json); "
        "img = import ./images/image.nix { inherit (d) lib runCommand writeText makeWrapper; "
        "inherit (d) nix2container; "
        f"inherit recipe; recipeFile = ./nix/recipes/qwen3.8-27b-exact.json; server = {nix_str(server)}; "
        f'python = "/fake-store/python"; weights = {weights}; }}; '
        # Layers nest (a layer lists the layers below it); flatten each to its deps' paths and names.
        "show = l: { deps = map toString l.deps; below = map (x: x.metadata.created_by) (l.layers or [ ]); "
        "maxLayers = l.maxLayers or 1; created_by = l.metadata.created_by; }; "
        "in img // { layers = map show img.layers; copyToRoot = map toString img.copyToRoot; "
        "perms = map (p: p // { path = toString p.path; }) img.perms; }"
    )
