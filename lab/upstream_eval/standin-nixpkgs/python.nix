# Stand-ins for nixpkgs' CPython interpreters and their package sets (evaluation only). The attributes
# are those of pkgs/development/interpreters/python/cpython/default.nix's passthru
# (passthrufun.nix) that pyproject.nix, uv2nix and the flake read; buildPythonPackage and
# buildPythonApplication follow pkgs/development/interpreters/python/mk-python-derivation.nix in which
# inputs land where (build-system in nativeBuildInputs, dependencies propagated with the
# interpreter), and makePythonPath / withPackages follow python-packages-base.nix and
# wrapper.nix. The leaf packages are the few nixpkgs Python packages the flake names.
{
  lib,
  stdenv,
  trivial,
  # The whole stand-in package set (a python set's callPackage sees it, as in nixpkgs).
  pkgs,
}:
let
  leafNames = [
    "setuptools"
    "pytest"
    "pluggy"
    "iniconfig"
    "packaging"
    "torch"
    "transformers"
    "huggingface-hub"
    "httpx"
    # nix/python-offline-tests.nix's list (nixpkgs' attribute names for these PyPI projects)
    "gguf"
    "numpy"
    "tokenizers"
    "nvidia-ml-py"
    "safetensors"
    "hypothesis"
    "tomli"
    "tomli-w"
    "installer"
    "build"
    # build-system-pkgs' overlay takes setup hooks from these (overlay.nix: `overrides`).
    "setuptools-scm"
    "cython"
    "pdm-backend"
    "poetry-dynamic-versioning"
    "meson-python"
    "cmake"
    "ninja"
  ];

  mkPython =
    {
      major,
      minor,
      patch,
    }:
    let
      pythonVersion = "${major}.${minor}";
      version = "${pythonVersion}.${patch}";
      sitePackages = "lib/python${pythonVersion}/site-packages";
      drv = stdenv.mkDerivation {
        pname = "python3";
        inherit version;
        passthru = self;
      };
      sourceVersion = {
        inherit major minor patch;
        suffix = "";
      };
      self = {
        inherit
          pythonVersion
          sitePackages
          sourceVersion
          stdenv
          ;
        implementation = "cpython";
        libPrefix = "python${pythonVersion}";
        executable = "python${pythonVersion}";
        interpreter = "${drv}/bin/python${pythonVersion}";
        isPy3 = true;
        pythonOlder = lib.versionOlder pythonVersion;
        pythonAtLeast = lib.versionAtLeast pythonVersion;
        pythonOnBuildForHost = final;
        pkgs = packages;
        withPackages =
          f:
          trivial.runCommand "python3-${version}-env" {
            paths = [ final ] ++ packages.requiredPythonModules (f packages);
          } "build the environment";
      };
      final = drv;

      buildPythonPackage =
        {
          pyproject ? null,
          format ? null,
          build-system ? [ ],
          dependencies ? [ ],
          nativeBuildInputs ? [ ],
          propagatedBuildInputs ? [ ],
          makeWrapperArgs ? [ ],
          passthru ? { },
          ...
        }@attrs:
        stdenv.mkDerivation (
          builtins.removeAttrs attrs [
            "pyproject"
            "format"
            "build-system"
            "dependencies"
            "makeWrapperArgs"
          ]
          // {
            name = "python${pythonVersion}-${attrs.pname}-${attrs.version}";
            nativeBuildInputs = [
              final
              packages.pypaBuildHook
              packages.pypaInstallHook
            ]
            ++ build-system
            ++ nativeBuildInputs;
            propagatedBuildInputs = dependencies ++ propagatedBuildInputs ++ [ final ];
            inherit makeWrapperArgs;
            passthru = passthru // {
              pythonModule = final;
            };
          }
        );

      # A package the flake only names; with the setup-hook attributes build-system-pkgs inherits.
      leaf =
        name:
        buildPythonPackage {
          pname = name;
          version = "0-standin";
          setupHook = builtins.toFile "${name}-setup-hook.sh" "# stand-in: lab/upstream_eval\n";
          setupHooks = [ ];
          postUnpack = "";
          preBuild = "";
        };

      packages = lib.genAttrs leafNames leaf // {
        inherit buildPythonPackage;
        python = final;
        buildPythonApplication = buildPythonPackage;
        callPackage = lib.callPackageWith (pkgs // packages);
        pypaBuildHook = trivial.makeSetupHook { name = "pypa-build-hook"; } (builtins.toFile "hook.sh" "");
        pypaInstallHook = trivial.makeSetupHook { name = "pypa-install-hook"; } (builtins.toFile "hook.sh" "");
        # The Python modules of `drvs` and their propagated Python dependencies.
        requiredPythonModules =
          drvs:
          lib.unique (
            lib.concatMap (
              d:
              [ d ]
              ++ packages.requiredPythonModules (
                builtins.filter (p: p ? pythonModule && p != final) (d.propagatedBuildInputs or [ ])
              )
            ) drvs
          );
        makePythonPath = drvs: lib.makeSearchPath sitePackages (packages.requiredPythonModules drvs);
      };
    in
    final;
in
{
  python312 = mkPython {
    major = "3";
    minor = "12";
    patch = "12";
  };
  # nixpkgs' default python3 of mid-2026.
  python313 = mkPython {
    major = "3";
    minor = "13";
    patch = "7";
  };
}
