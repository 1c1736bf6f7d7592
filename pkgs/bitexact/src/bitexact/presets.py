"""The recipe's variants as parity presets: which server configuration is compared with which, whether
each side must (or must not) speculate, and client-side settings such as requests in flight."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bitexact.errors import UsageError
from bitexact.files import read_text

LONG_LENGTHS = (16384, 65536, 131072)  # "3/3 prompts up to 128k tokens"
BENCH_LENGTHS = (640, 2200, 131072)  # the recipe's single-stream decode figures
RECIPE_SCHEMAS = (1,)  # the recipe file formats this bitexact reads (nix/recipes/*.json "schema")


@dataclass(frozen=True)
class Side:
    variant: str
    spec: str  # "must", "never" or "any"
    inflight: int


@dataclass(frozen=True)
class Preset:
    name: str
    a: Side
    b: Side
    long_prompts: bool
    description: str


def load_recipe(path: str | None) -> dict[str, Any]:
    path = path or os.environ.get("BITEXACT_RECIPE")
    if not path:
        raise UsageError(
            "presets need the recipe: pass --recipe nix/recipes/<name>.json (or set BITEXACT_RECIPE)"
        )
    p = Path(path)
    text = read_text(p, "--recipe", "a recipe JSON file (nix/recipes/<name>.json)")
    try:
        recipe = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--recipe {p}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(recipe, dict) or not isinstance(recipe.get("variants"), dict) or "name" not in recipe:
        raise UsageError(f"--recipe {p}: no 'name' or 'variants'; is this a recipe file?")
    if recipe.get("schema") not in RECIPE_SCHEMAS:
        raise UsageError(
            f"--recipe {p}: schema {recipe.get('schema')!r} is not one this bitexact reads "
            f"({list(RECIPE_SCHEMAS)}); use a bitexact as new as the recipe"
        )
    return recipe


def _side(recipe: dict[str, Any], name: str) -> Side:
    variant = recipe["variants"].get(name)
    if variant is None:
        raise UsageError(
            f"recipe {recipe['name']!r} has no variant {name!r}; it has {sorted(recipe['variants'])}"
        )
    spec = variant.get("speculative")
    inflight = int((variant.get("client") or {}).get("inflight", 1))
    return Side(
        variant=name, spec="any" if spec is None else ("must" if spec else "never"), inflight=inflight
    )


def preset_names(recipe: dict[str, Any]) -> list[str]:
    return sorted(set(recipe["variants"]) - {"no-spec"}) + ["long"]


def make_preset(recipe: dict[str, Any], name: str) -> Preset:
    """A variant that changes server flags (`set`: capacity, attention backend) is compared with the
    recipe itself; the others (speculation on, forced rejects, requests in flight) with `no-spec`, the
    reference the recipe's output must equal. `long` is the recipe vs no-spec on long prompts."""
    if name == "long":
        return Preset(
            name, _side(recipe, "recipe"), _side(recipe, "no-spec"), True, "recipe vs no-spec, long prompts"
        )
    if name == "no-spec":
        raise UsageError("no-spec is not a preset: it is engine B, the reference of the recipe's presets")
    if name not in recipe["variants"]:
        raise UsageError(f"unknown preset {name!r}; presets of {recipe['name']}: {preset_names(recipe)}")
    variant = recipe["variants"][name]
    reference = "recipe" if variant.get("set") else "no-spec"
    return Preset(
        name, _side(recipe, name), _side(recipe, reference), False, str(variant.get("description", ""))
    )
