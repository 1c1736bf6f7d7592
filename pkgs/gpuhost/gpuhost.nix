# gpuhost in the server's package set (pyproject.nix's builders, like ../server/exactlaunch.nix): the
# launcher, the image entrypoint and the GPU checks run on that set's interpreter and import it from its
# venv, where it also gives `bitexact-driver`.
{
  lib,
  stdenv,
  pyprojectHook,
  resolveBuildSystem,
}:
stdenv.mkDerivation {
  pname = "gpuhost";
  version = (lib.importTOML ./pyproject.toml).project.version;
  src = lib.fileset.toSource {
    root = ./.;
    fileset = lib.fileset.unions [
      ./pyproject.toml
      ./src
    ];
  };
  nativeBuildInputs = [ pyprojectHook ] ++ resolveBuildSystem { setuptools = [ ]; };
  # nvidia-ml-py for the NVML reader; exactformats for the cache folder and the crash guard (pyproject.toml).
  passthru.dependencies = {
    nvidia-ml-py = [ ];
    exactformats = [ ];
  };
}
