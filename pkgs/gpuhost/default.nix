# gpuhost as a nixpkgs Python package (`python3Packages.callPackage ./pkgs/gpuhost { }`): driver
# discovery, the NVML card reader and the card table, for bitexact's optional card extra
# (`pkgs/bitexact/default.nix` with `withCard = true`). The launcher takes it from the server's package
# set instead (./gpuhost.nix), built for that set's interpreter.
{
  lib,
  buildPythonPackage,
  setuptools,
  nvidia-ml-py,
  callPackage,
}:
buildPythonPackage {
  pname = "gpuhost";
  version = (lib.importTOML ./pyproject.toml).project.version;
  pyproject = true;
  src = lib.fileset.toSource {
    root = ./.;
    fileset = lib.fileset.unions [
      ./pyproject.toml
      ./src
    ];
  };
  build-system = [ setuptools ];
  dependencies = [
    nvidia-ml-py
    (callPackage ../formats { })
  ];
  pythonImportsCheck = [ "gpuhost" ];
  meta = {
    description = "The host's NVIDIA driver and cards: driver discovery, NVML card identity, the card table";
    mainProgram = "bitexact-driver";
    license = lib.licenses.asl20;
  };
}
