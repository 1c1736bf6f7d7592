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
python3Packages.buildPythonApplication {
  pname = "bitexact";
  version = "0.1.0";
  pyproject = true;

  src = lib.fileset.toSource {
    root = ./.;
    fileset = lib.fileset.unions [
      ./pyproject.toml
      ./src
    ];
  };

  build-system = [ python3Packages.setuptools ];

  # exactformats (pkgs/formats): the file reader, schema check and recipe reader shared with the launcher and pinlock.
  dependencies = [
    (python3Packages.callPackage ../formats { })
  ]
  ++ lib.optionals withTransformers [
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
