# `nix run .#lock`: pinlock (pkgs/lock), the tool that fills what needs a network: GitHub narHash,
# Cargo git-dependency hashes, Hugging Face weight manifests, the uv.lock refresh. huggingface_hub
# (nixpkgs') reads the Hub and the local hub cache; the rest is the standard library (NAR hashing
# included); uv, for the uv.lock refresh, is put on its PATH.
{
  lib,
  python3Packages,
  uv,
}:
python3Packages.buildPythonApplication {
  pname = "pinlock";
  version = (lib.importTOML ./pyproject.toml).project.version;
  pyproject = true;
  src = lib.fileset.toSource {
    root = ./.;
    fileset = lib.fileset.unions [
      ./pyproject.toml
      ./src/pinlock
    ];
  };
  build-system = [ python3Packages.setuptools ];
  dependencies = [
    python3Packages.huggingface-hub
    (python3Packages.callPackage ../formats { })
  ];
  makeWrapperArgs = [
    "--prefix"
    "PATH"
    ":"
    (lib.makeBinPath [ uv ])
  ];
  pythonImportsCheck = [ "pinlock" ];
  meta.mainProgram = "pinlock";
}
