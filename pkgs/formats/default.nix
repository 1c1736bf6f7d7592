# exactformats as a nixpkgs Python package (`python3Packages.callPackage ./pkgs/formats { }`): the file
# reader, schema check and recipe reader that bitexact and pinlock import. The launcher takes it from the server's
# package set instead (./exactformats.nix), built for that set's interpreter. Standard library only.
{
  lib,
  buildPythonPackage,
  setuptools,
}:
buildPythonPackage {
  pname = "exactformats";
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
  pythonImportsCheck = [ "exactformats" ];
  meta = {
    description = "The file reader, schema check and recipe reader shared by bitexact, the launcher and pinlock";
    license = lib.licenses.asl20;
  };
}
