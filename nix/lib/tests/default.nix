# Unit tests of nix/lib, builtins only. Evaluates to the list of failing cases ([ ] = pass), so
# both `nix-instantiate --eval --strict` (checks/offline/test_nix_lib.py) and a flake check
# derivation (nix/cpu-checks.nix) can run it. Expected values are written out, not recomputed.
let
  lib = import ../.;
  inherit (lib) pins cargo;
  fx = ./fixtures;
  completeLocks = pins.cargoLocks {
    pin = pins.read (fx + "/pins-complete/sglang-cargo.json");
    locksDir = fx + "/pins-complete/sglang-cargo-locks";
    rev = "542a043f1b68796d269ef1ee11be7865f8d4a5f1";
  };
  completeHashes = (pins.read (fx + "/pins-complete/sglang-cargo.json")).outputHashes;

  # The complete fixture pins against a recipe whose engine is sgl-project/sglang at `rev`.
  missingForEngineAt =
    rev:
    pins.missing {
      pinsDir = fx + "/pins-complete";
      manifestsDir = fx + "/manifests";
      repos = [ ];
      wheelStubs = [ "cuda-tile" ];
      engine = {
        repo = "sgl-project/sglang";
        inherit rev;
      };
    };

  # True when evaluating `v` deeply throws (the message is checked by pytest).
  throws = v: !(builtins.tryEval (builtins.deepSeq v v)).success;

  cases = {
    githubSrcComplete = {
      expr = pins.githubSrc "sglang-src" (pins.read (fx + "/pins-complete/sglang-src.json"));
      expected = {
        owner = "sgl-project";
        repo = "sglang";
        rev = "542a043f1b68796d269ef1ee11be7865f8d4a5f1";
        hash = "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=";
      };
    };
    githubSrcAbsentHashThrows = {
      expr = throws (pins.githubSrc "sglang-src" (pins.read (fx + "/pins-partial/sglang-src.json")));
      expected = true;
    };
    githubSrcMissingFileThrows = {
      expr = throws (pins.githubSrc "sglang-src" (pins.read (fx + "/pins-partial/nope.json")));
      expected = true;
    };
    githubSrcBadRevThrows = {
      expr = throws (
        pins.githubSrc "x" {
          owner = "o";
          repo = "r";
          rev = "main";
          narHash = "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=";
        }
      );
      expected = true;
    };
    cargoHashesAbsentThrows = {
      expr = throws (pins.cargoOutputHashes "sglang-cargo" (pins.read (fx + "/pins-partial/sglang-cargo.json")));
      expected = true;
    };
    cargoHashesPresent = {
      expr = pins.cargoOutputHashes "sglang-cargo" (pins.read (fx + "/pins-complete/sglang-cargo.json"));
      expected."tonic-0.12.3" = "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=";
    };
    cargoNothingMissingWhenPinned = {
      expr = cargo.missingOutputHashes (map (l: l.lock) completeLocks) (
        pins.cargoOutputHashes "sglang-cargo" (pins.read (fx + "/pins-complete/sglang-cargo.json"))
      );
      expected = [ ];
    };
    urlSrcPresent = {
      expr = pins.urlSrc "cuda-tile" (pins.read (fx + "/pins-complete/wheel-stubs.json"))."cuda-tile";
      expected = {
        url = "https://example.invalid/cuda_tile-1.6.0rc5-py3-none-any.whl";
        hash = "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=";
      };
    };
    urlSrcAbsentThrows = {
      expr = throws (pins.urlSrc "cuda-tile" null);
      expected = true;
    };
    missingWhenPartial = {
      expr = pins.missing {
        pinsDir = fx + "/pins-partial";
        manifestsDir = fx + "/manifests";
        repos = [
          "Qwen/Qwen3.8-27B"
          "incoai/Qwen3.8-27B-DFlash2"
        ];
        wheelStubs = [ "cuda-tile" ];
      };
      expected = [
        "nix/pins/sglang-src.json: narHash"
        "nix/pins/sglang-cargo.json: outputHashes"
        "nix/pins/sglang-cargo.json: locks"
        "nix/pins/wheel-stubs.json: cuda-tile"
        "weights manifest: incoai/Qwen3.8-27B-DFlash2"
      ];
    };
    missingWhenComplete = {
      expr = pins.missing {
        pinsDir = fx + "/pins-complete";
        manifestsDir = fx + "/manifests";
        repos = [ "Qwen/Qwen3.8-27B" ];
        wheelStubs = [ "cuda-tile" ];
      };
      expected = [ ];
    };

    # A source pin is the recipe's only at the recipe's rev: one the engine moved away from is named.
    missingWhenTheEngineMoved = {
      expr = missingForEngineAt "1111111111111111111111111111111111111111";
      expected = [
        "nix/pins/sglang-src.json: it pins sgl-project/sglang@542a043f1b68796d269ef1ee11be7865f8d4a5f1, the recipe's engine is sgl-project/sglang@1111111111111111111111111111111111111111"
      ];
    };
    missingWhenTheEngineIsThePins = {
      expr = missingForEngineAt "542a043f1b68796d269ef1ee11be7865f8d4a5f1";
      expected = [ ];
    };

    missingFlagsMalformedCargoHash = {
      expr = pins.missing {
        pinsDir = fx + "/pins-malformed";
        manifestsDir = fx + "/manifests";
        repos = [ ];
        wheelStubs = [ ];
      };
      expected = [
        "nix/pins/sglang-src.json: narHash"
        "nix/pins/sglang-cargo.json: tonic-0.12.3 is not an SRI sha256"
        "nix/pins/sglang-cargo-locks/rust/Cargo.lock"
      ];
    };
    cargoLocksFromThePins = {
      expr = map (l: {
        inherit (l) path;
        file = baseNameOf l.file;
        packages = map (p: p.name) l.lock.package;
      }) completeLocks;
      expected = [
        {
          path = "rust/Cargo.lock";
          file = "Cargo.lock";
          packages = [
            "serde"
            "sglang-grpc"
            "tonic"
          ];
        }
        {
          path = "rust/ext/Cargo.lock";
          file = "Cargo.lock";
          packages = [
            "mem_cache"
            "serde"
            "tch"
          ];
        }
      ];
    };
    cargoLocksAbsentThrows = {
      expr = throws (
        pins.cargoLocks {
          pin = pins.read (fx + "/pins-partial/sglang-cargo.json");
          locksDir = fx + "/pins-partial/sglang-cargo-locks";
          rev = "542a043f1b68796d269ef1ee11be7865f8d4a5f1";
        }
      );
      expected = true;
    };
    cargoLocksListedButMissingThrows = {
      expr = throws (
        builtins.deepSeq (pins.cargoLocks {
          pin = pins.read (fx + "/pins-malformed/sglang-cargo.json");
          locksDir = fx + "/pins-malformed/sglang-cargo-locks";
          rev = "542a043f1b68796d269ef1ee11be7865f8d4a5f1";
        }) null
      );
      expected = true;
    };
    cargoLocksForAnotherRevThrow = {
      expr = throws (
        pins.cargoLocks {
          pin = pins.read (fx + "/pins-complete/sglang-cargo.json");
          locksDir = fx + "/pins-complete/sglang-cargo-locks";
          rev = "0000000000000000000000000000000000000001";
        }
      );
      expected = true;
    };
    cargoGitDependencies = {
      expr = cargo.gitDependencies (map (l: l.lock) completeLocks);
      expected = [ "tonic-0.12.3" ];
    };
    cargoMissingOutputHashes = {
      expr = cargo.missingOutputHashes (map (l: l.lock) completeLocks) { };
      expected = [ "tonic-0.12.3" ];
    };
    # importCargoLock throws on a hash naming no git dependency of its lock: each lock gets its own.
    cargoOutputHashesPerLock = {
      expr = map (l: cargo.outputHashesFor l.lock completeHashes) completeLocks;
      expected = [
        { "tonic-0.12.3" = "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="; }
        { }
      ];
    };
    cargoJoinableLocks = {
      expr = {
        unreplaced = cargo.unreplacedGitSources (map (l: l.lock) completeLocks);
        conflicts = cargo.conflictingCrates (map (l: l.lock) completeLocks);
      };
      expected = {
        unreplaced = [ ];
        conflicts = [ ];
      };
    };
    cargoUnjoinableLocks =
      let
        main.package = [
          {
            name = "a";
            version = "1.0.0";
            source = "registry+https://github.com/rust-lang/crates.io-index";
          }
        ];
        ext.package = [
          {
            name = "a";
            version = "1.0.0";
            source = "git+https://example.invalid/a#0123456789abcdef0123456789abcdef01234567";
          }
        ];
      in
      {
        expr = {
          unreplaced = cargo.unreplacedGitSources [
            main
            ext
          ];
          conflicts = cargo.conflictingCrates [
            main
            ext
          ];
        };
        expected = {
          unreplaced = [ "git+https://example.invalid/a#0123456789abcdef0123456789abcdef01234567" ];
          conflicts = [ "a-1.0.0" ];
        };
      };
    patchSeriesInNameOrder = {
      expr = lib.patches.names (fx + "/patches");
      expected = [
        "0001-a.patch"
        "0002-b.patch"
      ];
    };
    unfreeOnlyNvidia = {
      expr = map lib.unfree.allowed [
        "cuda_nvcc"
        "libcublas"
        "nvidia-x11"
        "cudnn"
        "steam"
        "vscode"
        "python3.12-torch"
      ];
      expected = [
        true
        true
        true
        true
        false
        false
        false
      ];
    };
    patchSeriesOfMissingDirIsEmpty = {
      expr = lib.patches.names (fx + "/no-such-dir");
      expected = [ ];
    };
  };

  failures = builtins.filter (n: cases.${n}.expr != cases.${n}.expected) (builtins.attrNames cases);
in
{
  count = builtins.length (builtins.attrNames cases);
  failures = map (n: {
    name = n;
    inherit (cases.${n}) expr expected;
  }) failures;
}
