# The server's Python closure: the uv.lock beside this file as a pyproject.nix package set, wheels
# only (the recipe's pip environment, same binaries), with
#   - the CUDA fix-ups the wheels need in the store (./fixups.nix),
#   - sglang built from the pinned git commit plus our patch series (../sglang); with withSeries = false the
#     commit as released (the GPU checks' stock tree: same closure, no series),
#   - sgl-deep-gemm with the sm120 fence patched into its installed header (../deep-gemm).
{
  lib,
  pkgs,
  callPackage,
  python312,
  uv2nix,
  pyproject-nix,
  pyproject-build-systems,
  blib,
  recipe,
  pinsDir,
  patchesDir,
  withSeries ? true,
}:
let
  python = python312;

  workspace = uv2nix.lib.workspace.loadWorkspace { workspaceRoot = ./.; };

  # Wheels for everything the lock has wheels for; the one sdist-only package (a wheel stub) gets
  # its real wheel in ./fixups.nix.
  lockOverlay = workspace.mkPyprojectOverlay { sourcePreference = "wheel"; };

  fixups = import ./fixups.nix {
    inherit
      lib
      pkgs
      python
      blib
      pinsDir
      ;
    elfNeeds = lib.importJSON ./elf-needs.json;
  };

  engine = final: prev: {
    sglang = final.callPackage ../sglang {
      locked = prev.sglang;
      inherit blib pinsDir;
      patches = if withSeries then blib.patches.series (patchesDir + "/sglang") else [ ];
    };
    sgl-deep-gemm = final.callPackage ../deep-gemm {
      locked = prev.sgl-deep-gemm;
      patches = blib.patches.series (patchesDir + "/deep-gemm");
      inherit (recipe.deepGemm) fencedHeader;
    };
    # The launcher, so that it can run on (and inspect) this set's interpreter.
    exactlaunch = final.callPackage ../server/exactlaunch.nix { };
    exactformats = final.callPackage ../formats/exactformats.nix { };
    gpuhost = final.callPackage ../gpuhost/gpuhost.nix { };
  };

  pythonSet = (callPackage pyproject-nix.build.packages { inherit python; }).overrideScope (
    lib.composeManyExtensions [
      pyproject-build-systems.overlays.wheel
      lockOverlay
      fixups
      engine
    ]
  );

  # Two wheels ship a top-level build_backend.py (flashinfer-python, torch-c-dlpack-ext: their
  # own PEP 517 shims, never imported at run time); every other shared path is identical.
  ignoreCollisions = [ "lib/python${python.pythonVersion}/site-packages/build_backend.py" ];

  mkEnv =
    name: extra:
    (pythonSet.mkVirtualEnv name (workspace.deps.default // extra)).overrideAttrs {
      venvIgnoreCollisions = ignoreCollisions;
    };
in
{
  inherit python pythonSet mkEnv;
  venv = mkEnv "bitexact-server-env" { };
}
