# The launcher's Python package (pkgs/server: pyproject.toml + src/exactlaunch), built into the server's
# package set so that it runs on the venv's interpreter: it replaces the recipe's leading `python` with
# sys.executable and its preflight finds sglang/deep_gemm through importlib.
{
  lib,
  stdenv,
  pyprojectHook,
  resolveBuildSystem,
}:
stdenv.mkDerivation {
  pname = "exactlaunch";
  version = (lib.importTOML ./pyproject.toml).project.version;
  src = lib.fileset.toSource {
    root = ./.;
    fileset = lib.fileset.unions [
      ./pyproject.toml
      ./src
    ];
  };
  nativeBuildInputs = [ pyprojectHook ] ++ resolveBuildSystem { setuptools = [ ]; };
  # Standard library only, plus gpuhost (pkgs/gpuhost: driver discovery and the NVML card reader it shares
  # with the image entrypoint, the GPU checks and bitexact) and exactformats, the file reader, schema check
  # and recipe reader it shares with bitexact and pinlock (pyproject.toml).
  passthru.dependencies = {
    gpuhost = [ ];
    exactformats = [ ];
  };
}
