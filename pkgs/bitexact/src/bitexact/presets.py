"""The recipe's variants as parity presets: which server configuration is compared with which, whether
each side must (or must not) speculate, and client-side settings such as requests in flight."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exactformats import RECIPE_SCHEMAS, schema_problem

from bitexact import strictjson
from bitexact.argv import MAX_IN_FLIGHT
from bitexact.errors import UsageError
from bitexact.files import env_value, read_text
from bitexact.names import checked_name

LONG_LENGTHS = (16384, 65536, 131072)  # "3/3 prompts up to 128k tokens"
BENCH_LENGTHS = (640, 2200, 131072)  # the recipe's single-stream decode figures


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


VARIANT_KEYS = frozenset({"description", "speculative", "unset", "set", "env", "client"})  # the launcher's
CLIENT_KEYS = frozenset({"inflight"})


def recipe_path(path: str | None) -> Path:
    """--recipe, else $BITEXACT_RECIPE (checked for characters a file name would not hold)."""
    chosen = path or env_value("BITEXACT_RECIPE")
    if not chosen:
        raise UsageError(
            "presets need the recipe: pass --recipe nix/recipes/<name>.json (or set BITEXACT_RECIPE)"
        )
    return Path(chosen)


def load_recipe(path: str | None) -> dict[str, Any]:
    """The recipe file, read strictly: standard JSON without a key given twice (which of two `no-spec`
    variants is meant?), a known schema, a name and variant names that can name files, and every field
    bitexact reads of the type it must have. Fields bitexact does not read are the launcher's."""
    p = recipe_path(path)
    text = read_text(p, "--recipe", "a recipe JSON file (nix/recipes/<name>.json)")
    try:
        recipe = strictjson.loads(text)
    except strictjson.StrictJSONError as exc:
        raise UsageError(f"--recipe {p}: {exc}") from None
    if not isinstance(recipe, dict):
        raise UsageError(f"--recipe {p}: not a JSON object; is this a recipe file?")
    problem = schema_problem(
        recipe.get("schema"),
        RECIPE_SCHEMAS,
        f"--recipe {p}",
        reader="bitexact",
        older="use the bitexact of the flake the recipe came with",
    )
    if problem is not None:
        raise UsageError(problem)
    if not isinstance(recipe.get("variants"), dict) or "name" not in recipe:
        raise UsageError(f"--recipe {p}: no 'name' or 'variants'; is this a recipe file?")
    checked_name(recipe["name"], f"--recipe {p}: the recipe's name")
    for name, variant in recipe["variants"].items():
        _check_variant(p, name, variant)
    if "reference" in recipe and not isinstance(recipe["reference"], dict):
        raise UsageError(f"--recipe {p}: 'reference' must be an object (the author's figures)")
    return recipe


def _check_variant(path: Path, name: str, variant: Any) -> None:
    where = f"--recipe {path}: variant {name!r}"
    checked_name(name, f"--recipe {path}: the variant name")
    if name == "long":  # the preset of that name (make_preset) would shadow the variant, silently
        raise UsageError(f"{where}: `long` is the name of bitexact's own preset; rename the variant")
    if not isinstance(variant, dict):
        raise UsageError(f"{where} must be an object, not {type(variant).__name__}")
    unknown = sorted(set(variant) - VARIANT_KEYS)
    if unknown:
        raise UsageError(f"{where} has unknown keys {unknown}; allowed: {sorted(VARIANT_KEYS)}")
    expected = {
        "description": str,
        "speculative": bool,
        "set": dict,
        "env": dict,
        "unset": list,
        "client": dict,
    }
    for key, kind in expected.items():
        if key in variant and not isinstance(variant[key], kind):
            raise UsageError(
                f"{where}: '{key}' must be {'true or false' if kind is bool else 'a ' + kind.__name__}, "
                f"not {json.dumps(variant[key])}"
            )
    client = variant.get("client", {})
    unknown = sorted(set(client) - CLIENT_KEYS)
    if unknown:
        raise UsageError(f"{where}: 'client' has unknown keys {unknown}; allowed: {sorted(CLIENT_KEYS)}")
    inflight = client.get("inflight", 1)
    if isinstance(inflight, bool) or not isinstance(inflight, int) or not 1 <= inflight <= MAX_IN_FLIGHT:
        raise UsageError(
            f"{where}: 'client.inflight' must be a whole number from 1 to {MAX_IN_FLIGHT}, "
            f"not {json.dumps(inflight)}"
        )


def variant_side(recipe: dict[str, Any], name: str) -> Side:
    """How a recipe variant's server is asked and what it must do: its speculation requirement (must,
    never, any) and the requests its client keeps in flight. An unknown variant is a usage error."""
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
            name,
            variant_side(recipe, "recipe"),
            variant_side(recipe, "no-spec"),
            True,
            "recipe vs no-spec, long prompts",
        )
    if name == "no-spec":
        raise UsageError("no-spec is not a preset: it is engine B, the reference of the recipe's presets")
    if name not in recipe["variants"]:
        raise UsageError(f"unknown preset {name!r}; presets of {recipe['name']}: {preset_names(recipe)}")
    variant = recipe["variants"][name]
    reference = "recipe" if variant.get("set") else "no-spec"
    return Preset(
        name,
        variant_side(recipe, name),
        variant_side(recipe, reference),
        False,
        str(variant.get("description", "")),
    )
