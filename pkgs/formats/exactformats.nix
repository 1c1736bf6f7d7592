# exactformats in the server's package set (pyproject.nix's builders, like ../server/exactlaunch.nix),
# so that the launcher, which runs on that set's interpreter, imports it from its venv. Standard library only.
{
  lib,
  stdenv,
  pyprojectHook,
  resolveBuildSystem,
}:
stdenv.mkDerivation {
  pname = "exactformats";
  version = (lib.importTOML ./pyproject.toml).project.version;
  src = lib.fileset.toSource {
    root = ./.;
    fileset = lib.fileset.unions [
      ./pyproject.toml
      ./src
    ];
  };
  nativeBuildInputs = [ pyprojectHook ] ++ resolveBuildSystem { setuptools = [ ]; };
  passthru.dependencies = { };
}
