"""pkgs/bitexact/default.nix agrees with pyproject.toml (name, version, entry point, dependencies: the
shared file reader pkgs/formats, built from its own default.nix, and the optional ones: transformers, and
the card reader pkgs/gpuhost, whose own default.nix is held to its pyproject.toml the same way). nixpkgs is
unreachable here, so the function is evaluated with stand-ins for `lib` and the Python package set that
record what nix/local-python-package.nix passes on (the source is real: a store path of the project's
files); the real build runs where nixpkgs is (the flake's packages.bitexact)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "pkgs" / "bitexact"

STUBS = """
let
  lib = {
    fileset = { toSource = a: { root = toString a.root; files = map toString a.fileset; }; unions = l: l; };
    optionals = c: l: if c then l else [ ];
    importTOML = p: builtins.fromTOML (builtins.readFile p);
    licenses.asl20 = "asl20";
  };
  python3Packages = {
    buildPythonApplication = a: removeAttrs a [ "installCheckPhase" ];
    setuptools = "setuptools"; torch = "torch"; transformers = "transformers";
    # the real pkgs/formats and pkgs/gpuhost default.nix, built by a recorder: each package's pname
    # and version, then what it depends on
    callPackage = path: args: let d = record path args; in "${d.pname}==${d.version}" + dependsOn d;
  };
  # what pkgs/formats and pkgs/gpuhost take: nixpkgs' `python` (its package set) and callPackage
  packageSet = python3Packages // { buildPythonPackage = a: a; nvidia-ml-py = "nvidia-ml-py"; };
  scope = { inherit lib; inherit (python3Packages) callPackage; python.pkgs = packageSet; };
  record = path: args: let fn = import path; in
    fn (builtins.intersectAttrs (builtins.functionArgs fn) scope // args);
  dependsOn = d:
    if (d.dependencies or [ ]) != [ ] then " (" + builtins.concatStringsSep ", " d.dependencies + ")" else "";
  f = import PACKAGE;
in {
  plain = f { inherit lib python3Packages; };
  hf = f { inherit lib python3Packages; withTransformers = true; };
  card = f { inherit lib python3Packages; withCard = true; };
  gpuhost = record GPUHOST { };
}
"""


@pytest.mark.nix
@pytest.mark.skipif(shutil.which("nix-instantiate") is None, reason="nix-instantiate not on PATH")
def test_package_nix_matches_pyproject():
    gpuhost_dir = PACKAGE.parent / "gpuhost"
    expr = STUBS.replace("PACKAGE", str(PACKAGE / "default.nix"))
    expr = expr.replace("GPUHOST", str(gpuhost_dir / "default.nix"))
    env = {**os.environ, "NIX_CONFIG": "experimental-features = nix-command flakes"}
    # --read-write-mode: the sources land in the store, so the test reads the files a build would get
    out = subprocess.run(
        ["nix-instantiate", "--eval", "--strict", "--json", "--read-write-mode", "--expr", expr],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    got = json.loads(out)
    project = tomllib.loads((PACKAGE / "pyproject.toml").read_text())["project"]
    plain = got["plain"]
    assert (plain["pname"], plain["version"]) == (project["name"], project["version"])
    assert plain["meta"]["mainProgram"] in project["scripts"]
    formats = tomllib.loads((PACKAGE.parent / "formats" / "pyproject.toml").read_text())["project"]
    assert project["dependencies"] == [formats["name"]]
    assert plain["dependencies"] == [f"{formats['name']}=={formats['version']}"]
    assert got["hf"]["dependencies"] == [*plain["dependencies"], "torch", "transformers"]
    assert {d.split(">")[0] for d in project["optional-dependencies"]["hf"]} == {"torch", "transformers"}
    # the card reader: an optional extra, never a requirement
    gpuhost = tomllib.loads((gpuhost_dir / "pyproject.toml").read_text())["project"]
    assert project["optional-dependencies"]["card"] == [gpuhost["name"]]
    assert gpuhost["name"] not in project["dependencies"]
    card_reader = f"{gpuhost['name']}=={gpuhost['version']} (nvidia-ml-py, {plain['dependencies'][0]})"
    assert got["card"]["dependencies"] == [*plain["dependencies"], card_reader]
    # gpuhost's own derivation agrees with its pyproject.toml: name, version, entry point, dependencies
    built = got["gpuhost"]
    assert (built["pname"], built["version"]) == (gpuhost["name"], gpuhost["version"])
    assert built["meta"]["mainProgram"] in gpuhost["scripts"]
    assert gpuhost["dependencies"] == ["nvidia-ml-py", formats["name"]]
    assert built["dependencies"] == ["nvidia-ml-py", plain["dependencies"][0]]
    # the source each builds from (nix/local-python-package.nix, a real store path): pyproject.toml and src/
    assert sorted(p.name for p in Path(built["src"]).iterdir()) == ["pyproject.toml", "src"]
    assert sorted(p.name for p in Path(plain["src"]).iterdir()) == ["pyproject.toml", "src"]
