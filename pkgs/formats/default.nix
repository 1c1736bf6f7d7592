# exactformats as a nixpkgs Python package (`python3Packages.callPackage ./pkgs/formats { }`): the file
# reader and schema check that bitexact and pinlock import. The launcher takes it from the server's
# package set instead (./exactformats.nix), built for that set's interpreter. Standard library only; built
# by the one local-package function (nix/local-python-package.nix).
{
  lib,
  python,
}:
(import ../../nix/local-python-package.nix { root = ./.; }).nixpkgs python.pkgs { } {
  pythonImportsCheck = [ "exactformats" ];
  meta = {
    description = "The file reader and schema check shared by bitexact, the launcher and pinlock";
    license = lib.licenses.asl20;
  };
}
