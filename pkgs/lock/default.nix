# `nix run .#lock`: pinlock (pkgs/lock), the tool that fills what needs a network: GitHub narHash,
# Cargo git-dependency hashes, Hugging Face weight manifests, the uv.lock refresh. huggingface_hub
# (nixpkgs') reads the Hub and the local hub cache; the rest is the standard library (NAR hashing
# included); uv, for the uv.lock refresh, is put on its PATH.
{
  lib,
  python3Packages,
  uv,
}:
# Built by nix/local-python-package.nix: huggingface-hub and exactformats are pyproject.toml's dependencies.
(import ../../nix/local-python-package.nix { root = ./.; }).nixpkgsApplication python3Packages
  { exactformats = python3Packages.callPackage ../formats { }; }
  {
    makeWrapperArgs = [
      "--prefix"
      "PATH"
      ":"
      (lib.makeBinPath [ uv ])
    ];
    pythonImportsCheck = [ "pinlock" ];
    meta.mainProgram = "pinlock";
  }
