# gpuhost as a nixpkgs Python package (`python3Packages.callPackage ./pkgs/gpuhost { }`): driver
# discovery, the NVML card reader and the card table, for bitexact's optional card extra
# (`pkgs/bitexact/default.nix` with `withCard = true`). The launcher takes it from the server's package
# set instead (./gpuhost.nix), built for that set's interpreter. Its dependencies (nvidia-ml-py from
# nixpkgs, exactformats from ../formats) are pyproject.toml's (nix/local-python-package.nix).
{
  lib,
  python,
  callPackage,
}:
(import ../../nix/local-python-package.nix { root = ./.; }).nixpkgs python.pkgs
  { exactformats = callPackage ../formats { }; }
  {
    pythonImportsCheck = [ "gpuhost" ];
    meta = {
      description = "The host's NVIDIA driver and cards: driver discovery, NVML card identity, the card table";
      mainProgram = "bitexact-driver";
      license = lib.licenses.asl20;
    };
  }
