# bitexact as a Nix package, for `callPackage ./pkgs/bitexact/default.nix { }` in the flake: built
# with nixpkgs' python3Packages, so its dependency set is pinned by the flake's nixpkgs lock.
#
# The core (HTTP engines for SGLang and OpenAI-compatible servers, comparison, goldens, reports) needs
# only the standard library; `withTransformers = true` adds torch and transformers for the in-process
# `hf:` engine; `withCard = true` adds gpuhost (pkgs/gpuhost), which reads this machine's card through
# NVML when `--card` is left out. The tests run in the offline suite (checks/offline/run.sh), not here: they need
# transformers on CPU, which the GPU checks' closure does not.
{
  lib,
  python3Packages,
  withTransformers ? false,
  withCard ? false,
}:
# Built by nix/local-python-package.nix: exactformats (pkgs/formats), pyproject.toml's one dependency, the
# file reader and schema check shared with the launcher and pinlock; the extras' packages after it.
(import ../../nix/local-python-package.nix { root = ./.; }).nixpkgsApplication python3Packages
  { exactformats = python3Packages.callPackage ../formats { }; }
  {
    dependencies =
      lib.optionals withTransformers [
        python3Packages.torch
        python3Packages.transformers
      ]
      ++ lib.optionals withCard [ (python3Packages.callPackage ../gpuhost { }) ];

    pythonImportsCheck = [
      "bitexact"
      "bitexact.cli"
    ];

    # A smoke test of the installed entry point; the behaviour is tested by the offline suite.
    doInstallCheck = true;
    installCheckPhase = ''
      runHook preInstallCheck
      $out/bin/bitexact --version
      $out/bin/bitexact parity --help > /dev/null
      runHook postInstallCheck
    '';

    meta = {
      description = "Bit-exactness checks for LLM inference engines (parity, repeat, golden records, bench)";
      mainProgram = "bitexact";
      license = lib.licenses.asl20;
    };
  }
