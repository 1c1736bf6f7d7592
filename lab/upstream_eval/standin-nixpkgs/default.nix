# A stand-in for nixpkgs, for evaluating the flake against the real uv2nix, pyproject.nix,
# build-system-pkgs and nix2container where nixpkgs itself cannot be fetched (lab/upstream_eval).
# `lib` is nixpkgs' real lib (a nix-community/nixpkgs.lib snapshot, placed at ./lib by the harness);
# the packages are the fewest stand-ins the flake and those inputs call, each a real derivation that
# cannot be built. Builders follow the nixpkgs files named in ./stdenv.nix, ./trivial.nix,
# ./fetchers.nix and ./python.nix; the hooks are setup-hook derivations named as nixpkgs names them
# (pkgs/build-support/setup-hooks/auto-patchelf.sh, pkgs/by-name/au/autoAddDriverRunpath,
# pkgs/build-support/rust/hooks), so their order in a derivation's nativeBuildInputs is observable.
{
  system ? "x86_64-linux",
  config ? { },
  overlays ? [ ],
  ...
}:
let
  lib = import ./lib;
  std = import ./stdenv.nix { inherit lib system; };
  inherit (std) stdenv;
  trivial = import ./trivial.nix {
    inherit lib stdenv;
    inherit (pkgs) shellcheck;
  };
  fetchers = import ./fetchers.nix { inherit lib stdenv trivial; };
  pythons = import ./python.nix {
    inherit lib stdenv trivial pkgs;
  };

  # A package nothing here looks into: name, version and a main program.
  leaf =
    pname: version:
    stdenv.mkDerivation {
      inherit pname version;
      meta.mainProgram = pname;
    };
  hook =
    name: propagated:
    trivial.makeSetupHook {
      inherit name;
      propagatedBuildInputs = propagated;
    } (builtins.toFile "${name}.sh" "# stand-in: lab/upstream_eval\n");

  pkgs =
    trivial
    // fetchers
    // pythons
    // {
      inherit lib config system stdenv pkgs;
      stdenvNoCC = stdenv;
      buildPackages = pkgs;
      pkgsBuildHost = pkgs;
      callPackage = lib.callPackageWith pkgs;
      newScope = extra: lib.callPackageWith (pkgs // extra);
      runtimeShell = "${stdenv.shell}/bin/bash";

      python3 = pkgs.python313;
      python3Packages = pkgs.python313.pkgs;
      pythonManylinuxPackages = {
        manylinux1 = [ (leaf "glibc" "2.42") ];
        manylinux2010 = [ (leaf "glibc" "2.42") ];
        manylinux2014 = [ (leaf "glibc" "2.42") ];
      };

      autoPatchelfHook = hook "auto-patchelf-hook" [ ];
      autoAddDriverRunpath = hook "auto-add-driver-runpath-hook" [ ];
      makeWrapper = hook "make-shell-wrapper-hook" [ ];
      rustPlatform = {
        inherit (fetchers) importCargoLock;
        cargoSetupHook = hook "cargo-setup-hook.sh" [ ];
      };

      # pkgs/build-support/go/module.nix: the vendored modules are a fixed output of vendorHash.
      buildGoModule =
        {
          pname,
          version,
          src,
          vendorHash,
          ...
        }@args:
        stdenv.mkDerivation (
          builtins.removeAttrs args [ "vendorHash" ]
          // {
            goModules = fetchers.fetchzip {
              name = "${pname}-${version}-go-modules";
              url = "stand-in:go-modules";
              hash = vendorHash;
            };
            nativeBuildInputs = [ pkgs.go ];
          }
        );
      go = leaf "go" "1.25" // {
        GOARCH = "amd64";
      };
      skopeo = stdenv.mkDerivation {
        pname = "skopeo";
        version = "1.20";
        nativeBuildInputs = [ pkgs.go ];
        meta.mainProgram = "skopeo";
      };
    }
    // lib.genAttrs [
      "zlib"
      "cargo"
      "rustc"
      "protobuf"
      "gcc"
      "gcc14"
      "curl"
      "coreutils"
      "git"
      "uv"
      "ruff"
      "nixfmt"
      "nixfmt-tree"
      "jq"
      "patchutils"
      "nix"
      "sqlite"
      "cacert"
      "ugrep"
      "shellcheck"
      "unzip"
      "file"
      "patchelf"
      "libffi"
      "util-linux"
      "gnupatch"
    ] (name: leaf name "0-standin")
    // {
      # build-system-pkgs' overlay inherits pkg-config's hook attributes (overlay.nix: pkgconfig).
      pkg-config = leaf "pkg-config" "0-standin" // {
        setupHooks = [ ];
        wrapperName = "PKG_CONFIG_WRAPPER";
        suffixSalt = "_x86_64_unknown_linux_gnu";
        targetPrefix = "";
        baseBinName = "pkg-config";
      };
    };
in
if overlays != [ ] then throw "stand-in nixpkgs: overlays are not supported" else pkgs
