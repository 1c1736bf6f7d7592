"""The recipe file (nix/recipes/*.json), read with the standard library and checked for the keys we use."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The recipe file formats this launcher reads (the file's "schema"): a newer one may mean what this one
# would silently get wrong.
RECIPE_SCHEMAS = (1,)
# Keys a variant may carry; anything else is a typo that would silently do nothing.
VARIANT_KEYS = frozenset({"description", "speculative", "unset", "set", "env", "client"})


class RecipeError(ValueError):
    """The recipe file, or a variant in it, is unusable; the message names the key and the file."""


@dataclass(frozen=True)
class Variant:
    name: str
    unset: tuple[str, ...] = ()
    set: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    speculative: bool = True
    client: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""


@dataclass(frozen=True)
class Recipe:
    path: Path
    name: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    serving_flags: tuple[str, ...]
    engine_patches: tuple[str, ...]
    deep_gemm_header: str
    variants: Mapping[str, Variant]


def _require(data: Mapping[str, Any], dotted: str, kind: type, where: Path) -> Any:
    value: Any = data
    for key in dotted.split("."):
        if not isinstance(value, Mapping) or key not in value:
            raise RecipeError(f"{where}: missing key `{dotted}`")
        value = value[key]
    if not isinstance(value, kind):
        raise RecipeError(f"{where}: `{dotted}` must be a {kind.__name__}, found {type(value).__name__}")
    return value


def _strings(value: Any, what: str, where: Path) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise RecipeError(f"{where}: `{what}` must be a list of strings")
    return tuple(value)


def _string_map(value: Any, what: str, where: Path) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise RecipeError(f"{where}: `{what}` must map strings to strings (quote numbers in JSON)")
    return dict(value)


def _variant(name: str, data: Any, where: Path) -> Variant:
    if not isinstance(data, Mapping):
        raise RecipeError(f"{where}: variant `{name}` must be an object")
    unknown = sorted(set(data) - VARIANT_KEYS)
    if unknown:
        raise RecipeError(
            f"{where}: variant `{name}` has unknown keys {unknown}; allowed: {sorted(VARIANT_KEYS)}"
        )
    speculative = data.get("speculative", True)
    if not isinstance(speculative, bool):
        raise RecipeError(f"{where}: `variants.{name}.speculative` must be true or false")
    client = data.get("client", {})
    if not isinstance(client, Mapping):
        raise RecipeError(f"{where}: `variants.{name}.client` must be an object")
    return Variant(
        name=name,
        unset=_strings(data.get("unset", []), f"variants.{name}.unset", where),
        set=_string_map(data.get("set", {}), f"variants.{name}.set", where),
        env=_string_map(data.get("env", {}), f"variants.{name}.env", where),
        speculative=speculative,
        client=dict(client),
        description=str(data.get("description", "")),
    )


def parse_recipe(data: Any, where: Path) -> Recipe:
    """Check the parsed JSON of a recipe and return what the launcher needs from it."""
    if not isinstance(data, Mapping):
        raise RecipeError(f"{where}: a recipe is a JSON object")
    if data.get("schema") not in RECIPE_SCHEMAS:
        raise RecipeError(
            f"{where}: `schema` is {data.get('schema')!r}; this launcher reads schema "
            f"{list(RECIPE_SCHEMAS)}: use the launcher of the flake the recipe came with"
        )
    argv = _strings(_require(data, "launch.argv", list, where), "launch.argv", where)
    if argv[:3] != ("python", "-m", "sglang.launch_server"):
        raise RecipeError(f"{where}: `launch.argv` must start with python -m sglang.launch_server")
    variants = _require(data, "variants", Mapping, where)
    return Recipe(
        path=where,
        name=_require(data, "name", str, where),
        argv=argv,
        env=_string_map(_require(data, "launch.env", Mapping, where), "launch.env", where),
        serving_flags=_strings(
            _require(data, "launch.servingFlags", list, where), "launch.servingFlags", where
        ),
        engine_patches=_strings(_require(data, "engine.patches", list, where), "engine.patches", where),
        deep_gemm_header=_require(data, "deepGemm.fencedHeader", str, where),
        variants={name: _variant(name, body, where) for name, body in variants.items()},
    )


def load_recipe(path: Path) -> Recipe:
    """Read and check a recipe file; every problem is a RecipeError naming the file."""
    if path.is_dir():
        raise RecipeError(f"recipe {path} is a directory; give the recipe file (nix/recipes/<name>.json)")
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise RecipeError(f"cannot read recipe {path}: {error.strerror}") from error
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise RecipeError(
            f"{path}: not UTF-8 text (byte {error.start}: {raw[error.start : error.start + 1]!r}); "
            "save the recipe as UTF-8"
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise RecipeError(f"{path}: not valid JSON ({error})") from error
    return parse_recipe(data, path)
