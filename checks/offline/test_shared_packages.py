"""The packages the programs share stand on their own: gpuhost (pkgs/gpuhost, the driver and cards) runs
with exactformats beside it and nothing else of the project (not the launcher, which depends on it), and
the recipe schemas are declared once, in exactformats, and read by its one recipe reader, through which
bitexact, the launcher and pinlock read every recipe.

gpuhost is run as a real process under `python -S` (no site-packages: no installed launcher, no pynvml), on
a driver folder that holds no driver, so it must say so with the fix rather than fail to import. The server
set's derivations (exactformats, gpuhost, the launcher) are evaluated with stand-ins for the builders and
held to their pyproject.toml's name, version and dependencies."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import exactformats
import pytest
from checkhelpers.bare_python import run_bare, stage_packages

REPO = Path(__file__).resolve().parents[2]
# What bitexact, the launcher, pinlock and the GPU checks' runner take from a recipe: each reads the file
# with exactformats.recipe.
CONSUMERS = (
    "pkgs/bitexact/src/bitexact/presets.py",
    "pkgs/server/src/exactlaunch/recipe.py",
    "pkgs/lock/src/pinlock/recipe.py",
    "pkgs/gpu-checks/src/gpuchecks/trees.py",
)


def test_bitexact_driver_runs_with_exactformats_alone(tmp_path: Path) -> None:
    """`python -S` with only gpuhost and exactformats staged beside it (checkhelpers.bare_python)."""
    bare = stage_packages(tmp_path / "bare", ["gpuhost", "exactformats"])
    driver = tmp_path / "driver"  # an empty folder: no driver library in it
    driver.mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "BITEXACT_DRIVER_LIB": str(driver)}
    done = run_bare(bare, ["-m", "gpuhost.cli", "show"], env)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("bitexact-driver: error: "), done.stderr
    assert "BITEXACT_DRIVER_LIB" in done.stderr and str(driver) in done.stderr, done.stderr
    assert "internal error" not in done.stderr and "ModuleNotFoundError" not in done.stderr, done.stderr


# The server set's derivations of the project's packages (pyproject.nix builders): the venv takes each
# package's dependencies from passthru.dependencies, so a name missing there is a module missing at run time.
SERVER_SET = ("pkgs/formats/exactformats.nix", "pkgs/gpuhost/gpuhost.nix", "pkgs/server/exactlaunch.nix")
STUBS = """let
  lib = { fileset = { toSource = a: map toString a.fileset; unions = l: l; };
    importTOML = p: builtins.fromTOML (builtins.readFile p); };
  d = import FILE { inherit lib; stdenv.mkDerivation = a: a; pyprojectHook = "hook";
    resolveBuildSystem = x: [ ]; };
in { inherit (d) pname version; dependencies = builtins.attrNames d.passthru.dependencies; }"""


@pytest.mark.nix
@pytest.mark.skipif(shutil.which("nix-instantiate") is None, reason="nix-instantiate not on PATH")
@pytest.mark.parametrize("derivation", SERVER_SET)
def test_the_server_set_derivation_depends_on_what_its_pyproject_names(derivation: str) -> None:
    expr = STUBS.replace("FILE", str(REPO / derivation))
    out = subprocess.run(
        ["nix-instantiate", "--eval", "--strict", "--json", "--expr", expr],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    got = json.loads(out)
    project = tomllib.loads((REPO / derivation).with_name("pyproject.toml").read_text())["project"]
    assert (got["pname"], got["version"]) == (project["name"], project["version"])
    assert sorted(got["dependencies"]) == sorted(project["dependencies"]), derivation


def _schema_names(tree: ast.AST) -> list[str]:
    """The module-level names assigned here that end in SCHEMAS (a reader's list of file formats)."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        names += [t.id for t in targets if isinstance(t, ast.Name) and t.id.endswith("RECIPE_SCHEMAS")]
    return names


def test_recipe_schemas_are_declared_once_and_read_by_every_reader() -> None:
    """Declared in exactformats.schema, read by exactformats.recipe alone; every program's recipe module
    reads recipes with exactformats.recipe (read_recipe or parse_recipe), and none checks a schema itself."""
    declared = {
        str(path.relative_to(REPO)): names
        for path in sorted(REPO.glob("pkgs/*/src/**/*.py"))
        if (names := _schema_names(ast.parse(path.read_text(), str(path))))
    }
    assert declared == {"pkgs/formats/src/exactformats/schema.py": ["RECIPE_SCHEMAS"]}, declared
    assert exactformats.RECIPE_SCHEMAS == tuple(sorted(set(exactformats.RECIPE_SCHEMAS)))
    readers = {
        str(path.relative_to(REPO))
        for path in sorted(REPO.glob("pkgs/*/src/**/*.py"))
        if path.name != "__init__.py" and _reads_schema_list(ast.parse(path.read_text(), str(path)))
    }
    assert readers == {"pkgs/formats/src/exactformats/recipe.py"}, readers
    for consumer in CONSUMERS:
        tree = ast.parse((REPO / consumer).read_text())
        assert _calls_recipe_reader(tree), f"{consumer} does not read recipes with exactformats.recipe"


def _reads_schema_list(tree: ast.AST) -> bool:
    """The module names RECIPE_SCHEMAS other than in its own assignment (an import, an attribute, a use)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "RECIPE_SCHEMAS" for a in node.names):
            return True
        if isinstance(node, ast.Attribute) and node.attr == "RECIPE_SCHEMAS":
            return True
        if isinstance(node, ast.Name) and node.id == "RECIPE_SCHEMAS" and isinstance(node.ctx, ast.Load):
            return True
    return False


def _calls_recipe_reader(tree: ast.AST) -> bool:
    """A call of `read_recipe` or `parse_recipe` reached through exactformats (`exactformats.read_recipe`,
    `exactformats.recipe.parse_recipe`)."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in ("read_recipe", "parse_recipe"):
            continue
        owner = node.func.value
        if isinstance(owner, ast.Attribute) and owner.attr == "recipe":
            owner = owner.value
        if isinstance(owner, ast.Name) and owner.id == "exactformats":
            return True
    return False
