"""The recipe's variants as parity presets: which server configuration is compared with which, whether
each side must (or must not) speculate, and client-side settings such as requests in flight."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import exactformats
from exactformats import Recipe

from bitexact.argv import MAX_IN_FLIGHT
from bitexact.errors import UsageError
from bitexact.files import env_value

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


def recipe_path(path: str | None) -> Path:
    """--recipe, else $BITEXACT_RECIPE (checked for characters a file name would not hold)."""
    chosen = path or env_value("BITEXACT_RECIPE")
    if not chosen:
        raise UsageError(
            "presets need the recipe: pass --recipe nix/recipes/<name>.json (or set BITEXACT_RECIPE)"
        )
    return Path(chosen)


def load_recipe(path: str | None) -> Recipe:
    """The recipe file, read by the reader the launcher and pinlock share (exactformats.recipe: strict
    JSON, a known schema, known keys, names that can name files, every section of its kind), and the
    requests in flight of each variant within what bitexact keeps."""
    p = recipe_path(path)
    try:
        recipe = exactformats.read_recipe(
            p, what="--recipe", reader="bitexact", older="use the bitexact of the flake the recipe came with"
        )
    except exactformats.FormatError as error:
        raise UsageError(str(error)) from None
    for name, variant in recipe.variants.items():
        if variant.inflight > MAX_IN_FLIGHT:
            raise UsageError(
                f"--recipe {exactformats.shown(p)}: `variants.{name}.client.inflight` is {variant.inflight}; "
                f"bitexact keeps from 1 to {MAX_IN_FLIGHT} requests in flight"
            )
    return recipe


def variant_side(recipe: Recipe, name: str) -> Side:
    """How a recipe variant's server is asked and what it must do: its speculation requirement (must,
    never, any) and the requests its client keeps in flight. An unknown variant is a usage error."""
    variant = recipe.variants.get(name)
    if variant is None:
        raise UsageError(f"recipe {recipe.name!r} has no variant {name!r}; it has {sorted(recipe.variants)}")
    spec = variant.speculative
    return Side(
        variant=name, spec="any" if spec is None else ("must" if spec else "never"), inflight=variant.inflight
    )


def preset_names(recipe: Recipe) -> list[str]:
    return sorted(set(recipe.variants) - {"no-spec"}) + ["long"]


def make_preset(recipe: Recipe, name: str) -> Preset:
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
    if name not in recipe.variants:
        raise UsageError(f"unknown preset {name!r}; presets of {recipe.name}: {preset_names(recipe)}")
    variant = recipe.variants[name]
    reference = "recipe" if variant.set else "no-spec"
    return Preset(
        name,
        variant_side(recipe, name),
        variant_side(recipe, reference),
        False,
        variant.description,
    )
