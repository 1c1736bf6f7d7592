"""One recipe reader (exactformats.recipe) for bitexact, the launcher and pinlock (and the GPU checks'
runner), and the Nix lib's reader (nix/lib/recipe.nix) held equal to it.

The programs take the same typed, read-only recipe from the shared reader and refuse a bad one with the
same words; each keeps only what it derives (bitexact its presets, pinlock its pins, the launcher the argv
it runs, the runner its copies with another memory share). Nix reads the committed recipes (really
evaluated here) to the same names, pins, variants and client settings the Python programs derive, and
refuses what the Python reader refuses of the parts Nix reads."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import exactformats
import pytest
from bitexact import presets
from bitexact.errors import UsageError
from exactlaunch import recipe as launcher_recipe
from gpuchecks import trees
from pinlock import recipe as pinlock_recipe
from pinlock.pins import UsageError as PinlockUsageError

REPO = Path(__file__).resolve().parents[2]
RECIPES = sorted((REPO / "nix" / "recipes").glob("*.json"))
QWEN = REPO / "nix" / "recipes" / "qwen3.8-27b-exact.json"
ANY = {"reader": "test", "older": "use the flake the recipe came with"}


def _write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    return path


def test_the_committed_recipes_are_more_than_one() -> None:
    assert len(RECIPES) >= 2 and QWEN in RECIPES


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.stem)
def test_the_programs_take_one_reading_of_a_recipe(path: Path) -> None:
    shared = exactformats.read_recipe(path, **ANY)
    launched = launcher_recipe.load_recipe(path)
    compared = presets.load_recipe(str(path))
    assert isinstance(launched, exactformats.Recipe) and isinstance(compared, exactformats.Recipe)
    assert launched == shared and compared == shared
    assert trees.read_recipe(path) == shared
    pins = pinlock_recipe.read(path)
    assert pins == pinlock_recipe.pins_of(shared)
    assert pins.engine.identity == f"{shared.engine_repo}@{shared.engine_rev}"
    hub = {key: w for key, w in shared.weights.items() if w.revision is not None}
    assert pins.weights == tuple((w.repo, w.revision) for w in hub.values())


def test_the_recipe_is_read_only() -> None:
    recipe = exactformats.read_recipe(QWEN, **ANY)
    with pytest.raises(dataclasses.FrozenInstanceError):
        recipe.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        recipe.variants["x"] = recipe.variants["recipe"]  # type: ignore[index]
    with pytest.raises(TypeError):
        recipe.env["X"] = "1"  # type: ignore[index]
    with pytest.raises(TypeError):
        recipe.data["card"]["slug"] = "h200"  # type: ignore[index]
    assert isinstance(recipe.data["launch"]["argv"], tuple)
    assert recipe.argv == tuple(json.loads(QWEN.read_text())["launch"]["argv"])
    # The frozen view reads back to the file's JSON, and reads again to the same recipe.
    assert exactformats.recipe.thawed(recipe.data) == json.loads(QWEN.read_text())
    assert exactformats.recipe.parse_recipe(recipe.data, QWEN, **ANY) == recipe


def _messages(path: Path) -> list[str]:
    """What bitexact, the launcher, pinlock and the GPU checks' runner say of the recipe at `path` (each
    must refuse it)."""
    messages = []
    for read, error in (
        (lambda: presets.load_recipe(str(path)), UsageError),
        (lambda: launcher_recipe.load_recipe(path), launcher_recipe.RecipeError),
        (lambda: pinlock_recipe.read(path), PinlockUsageError),
        (lambda: trees.recipe_setting(path, {}), trees.TreeError),
    ):
        with pytest.raises(error) as caught:
            read()
        messages.append(str(caught.value))
    return messages


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (
            lambda d: d["variants"].update(x={"flags": ["--a"]}),
            "variant `x` has unknown keys ['flags']; allowed: ",
        ),
        (lambda d: d["launch"].pop("argv"), "missing key `launch.argv`"),
        (
            lambda d: d["engine"].update(patches="0001.patch"),
            "`engine.patches` must be a list of strings, found a string",
        ),
        (lambda d: d.update(varaints={}), "unknown keys ['varaints']; a recipe of schema 1 has "),
        (
            lambda d: d["variants"].update(x={"client": {"inflight": 0}}),
            "`variants.x.client.inflight` must be at least 1",
        ),
        (
            lambda d: d["variants"].update(long={}),
            "variant `long`: the name is bitexact's own preset",
        ),
        (lambda d: d["model"].pop("revision"), "missing key `model.revision`"),
    ],
)
def test_a_bad_recipe_is_refused_by_every_program_in_the_same_words(
    edit: Any, said: str, tmp_path: Path
) -> None:
    data = json.loads(QWEN.read_text())
    edit(data)
    path = _write(tmp_path, data)
    for message in _messages(path):
        assert said in message, message
        assert str(path) in message, message


def test_each_program_names_the_schema_with_its_own_fix(tmp_path: Path) -> None:
    path = _write(tmp_path, {**json.loads(QWEN.read_text()), "schema": 2})
    bitexact, launcher, pinlock, runner = _messages(path)
    assert f"--recipe {path} has schema 2: it was written by a newer bitexact" in bitexact
    assert f"recipe {path} has schema 2: it was written by a newer bitexact-server" in launcher
    assert f"recipe {path} has schema 2: it was written by a newer pinlock" in pinlock
    assert f"--recipe {path} has schema 2: it was written by a newer bitexact-gpu-checks" in runner


# --- the Nix reader, held equal -----------------------------------------------------------------------

NIX = pytest.mark.skipif(shutil.which("nix-instantiate") is None, reason="nix-instantiate not on PATH")

# What the flake's Nix takes from a recipe (nix/outputs.nix, nix/lib/image-plan.nix, hf-cache.nix,
# gpu-batteries.nix, pkgs/server-env, pkgs/weights), derived from nix/lib/recipe.nix's reading.
NIX_VIEW = """let
  lib = import ROOT/nix/lib;
  weights = r: builtins.listToAttrs (map (k: { name = k; value = {
      repo = r.${k}.repo; revision = r.${k}.revision or null; path = r.${k}.path or null; }; })
    (builtins.filter (k: r ? ${k}) [ "model" "drafter" ]));
  view = path: let r = lib.recipe.load path; in {
    name = r.name;
    description = r.description or "";
    engine = "${r.engine.repo}@${r.engine.rev}";
    patches = r.engine.patches;
    fencedHeader = r.deepGemm.fencedHeader;
    card = r.card.slug or null;
    weights = weights r;
    variants = builtins.mapAttrs (n: v: {
      inflight = (v.client or { }).inflight or 1;
      speculative = v.speculative or null;
    }) r.variants;
  };
in map view PATHS"""


def _nix(expr: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["nix-instantiate", "--eval", "--strict", "--json", "-E", expr],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _python_view(path: Path) -> dict[str, Any]:
    """The same fields, as the Python programs derive them."""
    recipe = launcher_recipe.load_recipe(path)
    compared = presets.load_recipe(str(path))
    pins = pinlock_recipe.read(path)
    card = recipe.data.get("card")
    return {
        "name": recipe.name,
        "description": recipe.description,
        "engine": pins.engine.identity,
        "patches": list(recipe.engine_patches),
        "fencedHeader": recipe.deep_gemm_header,
        "card": card.get("slug") if card is not None else None,
        "weights": {
            key: {"repo": w.repo, "revision": w.revision, "path": w.path} for key, w in recipe.weights.items()
        },
        "variants": {
            name: {
                "inflight": presets.variant_side(compared, name).inflight,
                "speculative": {"must": True, "never": False, "any": None}[
                    presets.variant_side(compared, name).spec
                ],
            }
            for name in recipe.variants
        },
    }


@pytest.mark.nix
@NIX
def test_the_nix_reader_derives_what_the_python_programs_derive() -> None:
    paths = "[ " + " ".join(str(p) for p in RECIPES) + " ]"
    done = _nix(NIX_VIEW.replace("ROOT", str(REPO)).replace("PATHS", paths))
    assert done.returncode == 0, done.stderr
    nix = json.loads(done.stdout)
    python = [_python_view(path) for path in RECIPES]
    assert nix == python
    assert {p["name"] for p in python} == {p.stem for p in RECIPES}  # gpu-checks.nix: ./recipes/<name>.json


@pytest.mark.nix
@NIX
@pytest.mark.parametrize(
    "edit",
    [
        {"schema": 2},
        {"schema": 0},
        {"schema": "1"},
        {"schema": 1.5},
        {"schema": None},
        {"name": "../x"},
        {"name": "Qwen"},
        {"variants": {"Bad": {}}},
        {"variants": {"long": {}}},
        {"variants": {"a/b": {}}},
    ],
    ids=repr,
)
def test_the_nix_reader_refuses_what_the_python_reader_refuses(edit: dict[str, Any], tmp_path: Path) -> None:
    data = {**json.loads(QWEN.read_text()), **edit}
    if edit.get("schema", 1) is None:
        del data["schema"]
    path = _write(tmp_path, data)
    with pytest.raises(exactformats.RecipeError):
        exactformats.read_recipe(path, **ANY)
    done = _nix(f"(import {REPO}/nix/lib).recipe.load {path}")
    assert done.returncode != 0, done.stdout
    assert f"recipe {path}: " in done.stderr, done.stderr


@pytest.mark.nix
@NIX
@pytest.mark.parametrize("schema", exactformats.RECIPE_SCHEMAS)
def test_the_nix_reader_takes_every_schema_the_python_reader_takes(schema: int, tmp_path: Path) -> None:
    path = _write(tmp_path, {**json.loads(QWEN.read_text()), "schema": schema})
    assert exactformats.read_recipe(path, **ANY).name == "qwen3.8-27b-exact"
    done = _nix(f"((import {REPO}/nix/lib).recipe.load {path}).schema")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == schema
