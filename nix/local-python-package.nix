# One of the repository's own Python projects (a folder with a setuptools pyproject.toml) as a derivation,
# for either package set that holds them. Name, version and dependencies are read from pyproject.toml's
# [project], so a derivation depends on exactly what its project declares. Builtins only (the source is
# ./lib/source-subset.nix's), so the flake check's package list and the server set's files evaluate without
# nixpkgs.
#
#   root:   the project's folder, e.g. ../pkgs/formats
#   files:  what the build reads, relative to root; unless given, pyproject.toml and, for a project of
#           flat modules (tool.setuptools.py-modules), those modules' files, else src/
#
# Gives:
#   pname, version, dependencies (the names pyproject.toml lists), src;
#   nixpkgs ps local attrs: nixpkgs' buildPythonPackage in the package set `ps`, each dependency
#     taken from `local` (the other local projects, built the same way) or else from `ps`; `attrs` are
#     added (meta, pythonImportsCheck, ...), their `dependencies` (an optional extra's) after pyproject's;
#   nixpkgsApplication ps local attrs: the same with buildPythonApplication (a program);
#   serverSet: for the server set's callPackage (pyproject.nix's builders: the server venv takes the
#     dependencies from passthru.dependencies, so a name missing there is a module missing at run time).
{
  root,
  files ? null,
}:
let
  toml = builtins.fromTOML (builtins.readFile (root + "/pyproject.toml"));
  inherit (toml) project;
  modules = toml.tool.setuptools.py-modules or null;
  include =
    if files != null then
      files
    else if modules != null then
      [ "pyproject.toml" ] ++ map (m: "${m}.py") modules
    else
      [
        "pyproject.toml"
        "src"
      ];
  # "huggingface-hub>=0.20; extra" -> "huggingface-hub": the names are nixpkgs' attribute names.
  nameOf = spec: builtins.head (builtins.match "[[:space:]]*([A-Za-z0-9._-]+).*" spec);
  dependencies = map nameOf (project.dependencies or [ ]);
  src = import ./lib/source-subset.nix {
    inherit root include;
    name = "${project.name}-source";
  };
  pname = project.name;
  inherit (project) version;
  build =
    builder: ps: local: attrs:
    builder ps (
      {
        inherit pname version src;
        pyproject = true;
        build-system = [ ps.setuptools ];
      }
      // builtins.removeAttrs attrs [ "dependencies" ]
      // {
        dependencies =
          map (
            name:
            local.${name} or ps.${name}
              or (throw "${pname}: dependency ${name} (pyproject.toml) is neither a local project nor in the Python package set")
          ) dependencies
          ++ (attrs.dependencies or [ ]);
      }
    );
in
{
  inherit
    pname
    version
    dependencies
    src
    ;

  nixpkgs = build (ps: ps.buildPythonPackage);
  # The same as a program (nixpkgs' buildPythonApplication: no python3.x- name prefix, not a module
  # that propagates to dependents).
  nixpkgsApplication = build (ps: ps.buildPythonApplication);

  serverSet =
    {
      stdenv,
      pyprojectHook,
      resolveBuildSystem,
      ...
    }:
    stdenv.mkDerivation {
      inherit pname version src;
      nativeBuildInputs = [ pyprojectHook ] ++ resolveBuildSystem { setuptools = [ ]; };
      passthru.dependencies = builtins.listToAttrs (
        map (name: {
          inherit name;
          value = [ ];
        }) dependencies
      );
    };
}
