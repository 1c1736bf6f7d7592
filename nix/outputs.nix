# Flake outputs. Pure logic lives in nix/lib (builtins only, exported as `lib`); this file wires
# nixpkgs, uv2nix and the package files together for x86_64-linux.
{
  nixpkgs,
  uv2nix,
  pyproject-nix,
  pyproject-build-systems,
  nix2container,
  ...
}:
let
  system = "x86_64-linux";
  blib = import ./lib;
  inherit (nixpkgs) lib;
  # The shape of the outputs (attribute names) is computed with builtins only, so that outputs that
  # do not need nixpkgs (`lib`, and the names in `nix flake show`) evaluate without fetching it.
  optionalAttrs = cond: attrs: if cond then attrs else { };

  recipePath = ./recipes/qwen3.8-27b-exact.json;
  recipe = blib.recipe.load recipePath;
  pinsDir = ./pins;

  # No global cudaSupport: the CUDA code comes from the locked wheels, so nothing in nixpkgs has to
  # be rebuilt for CUDA. Unfree only for NVIDIA/CUDA names.
  pkgs = import nixpkgs {
    inherit system;
    config.allowUnfreePredicate = pkg: blib.unfree.allowed (lib.getName pkg);
  };

  # What `nix run .#lock` still has to fill; packages that need a missing pin are replaced by a
  # derivation that fails with this list, so that `nix flake check` evaluates and fails only in
  # the `pins` check. (The builtins-level throw in nix/lib/pins.nix still guards every direct use.)
  missingPins =
    repos:
    blib.pins.missing {
      inherit pinsDir repos;
      inherit (recipe) engine;
      manifestsDir = ../pkgs/weights/manifests;
      wheelStubs = [ "cuda-tile" ];
    };
  missingForServer = missingPins [ ];
  missingForImage = missingPins [
    recipe.model.repo
    recipe.drafter.repo
  ];
  pinsReport = missing: lib.concatMapStrings (m: "  - ${m}\n") missing;
  unpinned =
    name: missing:
    pkgs.runCommand "${name}-needs-pins" { meta.mainProgram = name; } ''
      printf '%s needs pins that are not filled yet:\n%s' ${lib.escapeShellArg name} ${lib.escapeShellArg (pinsReport missing)} >&2
      echo "run \`${blib.pins.lockCommand}\` on a machine with network access and commit nix/pins/" >&2
      exit 1
    '';
  guard = missing: name: drv: if missing == [ ] then drv else unpinned name missing;

  serverEnv = pkgs.callPackage ../pkgs/server-env {
    inherit
      uv2nix
      pyproject-nix
      pyproject-build-systems
      blib
      recipe
      pinsDir
      ;
    patchesDir = ../patches;
  };

  mkServer =
    args:
    pkgs.callPackage ../pkgs/server (
      {
        inherit serverEnv recipePath;
      }
      // args
    );

  server = mkServer { };

  # SGLang at the same commit as released, in the same closure: the GPU checks' stock tree.
  mkStockServer =
    args:
    mkServer (
      {
        serverEnv = serverEnv.override { withSeries = false; };
      }
      // args
    );

  packages = {
    server = guard missingForServer "server" server;
    sglang = guard missingForServer "sglang" serverEnv.pythonSet.sglang;
    server-env = guard missingForServer "server-env" serverEnv.venv;
    deep-gemm = serverEnv.pythonSet.sgl-deep-gemm;
    # SGLang's router (PyPI's sglang-router, in the server env's lock), which `bitexact-server
    # --replicas N` starts in front of the replicas; also usable alone (`python -m sglang_router.launch_router`).
    sglang-router = serverEnv.pythonSet.sglang-router;
    lock = pkgs.callPackage ../pkgs/lock { };
    cpu-checks = pkgs.linkFarm "bitexact-cpu-checks" (
      lib.mapAttrsToList (name: path: { inherit name path; }) cpuChecks
    );
    # The bitexact tool, built for the server env's Python (the GPU checks load it into that venv):
    # the package takes `python3Packages`, which would otherwise be nixpkgs' default Python.
    bitexact = pkgs.callPackage ../pkgs/bitexact/default.nix { python3Packages = serverEnv.python.pkgs; };
    # The GPU checks' runner, for the same Python (nix/gpu-checks.nix runs it in the server venv).
    gpu-checks = pkgs.callPackage ../pkgs/gpu-checks/default.nix { python3Packages = serverEnv.python.pkgs; };
  }
  # The OCI images, the weights they bake, seed-weights and image-layer-sizes (images/default.nix).
  # image-dev bakes no weights, so only the server's pins gate it.
  // builtins.mapAttrs (n: guard (if n == "image-dev" then missingForServer else missingForImage) n) (
    import ../images {
      inherit
        pkgs
        blib
        recipe
        mkServer
        ;
      nix2container = nix2container.packages.${system}.nix2container;
    }
  );

  cpuChecks = import ./cpu-checks.nix {
    inherit pkgs lib;
    deep-gemm = serverEnv.pythonSet.sgl-deep-gemm;
    sglangSrc =
      if missingForServer == [ ] then serverEnv.pythonSet.sglang.passthru.src else null;
    sglangPatches = blib.patches.series ../patches/sglang;
  };

  # The one check that names the lock command while pins are absent.
  pinsCheck = pkgs.runCommand "pins" { } (
    if missingForImage == [ ] then
      "echo all pins filled > $out"
    else
      ''
        printf 'pins not filled yet:\n%s' ${lib.escapeShellArg (pinsReport missingForImage)} >&2
        echo "run \`${blib.pins.lockCommand}\` on a machine with network access and commit nix/pins/" >&2
        exit 1
      ''
  );

  # GPU checks (nix/gpu-checks.nix returns an attrset of derivations with
  # requiredSystemFeatures = [ "cuda" ]). They need the server and the weights, so they join the
  # flake checks once every pin is filled.
  gpuChecks = optionalAttrs (missingForImage == [ ]) (
    import ./gpu-checks.nix {
      inherit
        pkgs
        blib
        recipe
        mkServer
        mkStockServer
        packages
        ;
      inherit (serverEnv) python;
    }
  );
in
{
  lib = blib;

  packages.${system} = packages // {
    default = packages.server;
  };

  apps.${system} = {
    server = {
      type = "app";
      program = lib.getExe packages.server;
      meta.description = "Run the recipe's SGLang server (or a --variant), verbatim";
    };
    lock = {
      type = "app";
      program = lib.getExe packages.lock;
      meta.description = "Fill the pins that need a network (nix/pins, weights manifests, uv.lock)";
    };
    # Records this card's golden file (gpu-golden's passthru); needs every pin, like the check.
    record-golden = {
      type = "app";
      meta.description = "Record this card's golden file for the GPU checks";
      program =
        if gpuChecks ? gpu-golden then
          lib.getExe gpuChecks.gpu-golden.recordGolden
        else
          lib.getExe (unpinned "record-golden" missingForImage);
    };
  };

  checks.${system} = cpuChecks // { pins = pinsCheck; } // gpuChecks;

  devShells.${system}.default = pkgs.mkShell {
    packages = [
      pkgs.python312
      pkgs.uv
      pkgs.nixfmt
      pkgs.ruff
    ];
    shellHook = ''
      echo "offline tests: bash checks/offline/run.sh; pins: nix run .#lock"
    '';
  };

  formatter.${system} = pkgs.nixfmt-tree;
}
