"""The recipe file (nix/recipes/*.json), read with the standard library and checked for the keys we use.

Strict JSON (a key given twice is refused: the last would win silently), known keys only at the top, in
`launch` and in each variant (a typo would silently do nothing), and every value the launcher later puts
on the command line or in the environment checked here by its kind (exactlaunch.values)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import exactformats

from exactlaunch import strictjson, values
from exactlaunch.environment import DECIDED_VARS

# The sections of a recipe file (DESIGN.md's contract); another key is a typo or a newer format.
RECIPE_KEYS = frozenset(
    {"schema", "name", "description", "engine", "deepGemm", "model", "drafter", "card", "sampling"}
    | {"launch", "variants", "reference"}
)
LAUNCH_KEYS = frozenset({"argv", "env", "servingFlags"})
# The serving flags the launcher knows how to check.
SERVING_FLAGS = tuple(values.SERVING)
# Keys a variant may carry; anything else is a typo that would silently do nothing.
VARIANT_KEYS = frozenset({"description", "speculative", "unset", "set", "env", "client"})
# Names bitexact gives its own presets (bitexact.presets: `long` is the recipe against no-spec on long
# prompts): a variant of that name would be shadowed there, silently.
RESERVED_VARIANTS = frozenset({"long"})
# What a variant's `speculative` promises is whether its argv keeps this flag.
SPECULATIVE_FLAG = "--speculative-algorithm"
# The flags that name the weights a server loads, each with the recipe section that pins them.
WEIGHTS_FLAGS = {"--model-path": "model", "--speculative-draft-model-path": "drafter"}


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
    # The whole parsed file, for readers of the sections the launcher itself does not use (the image
    # entrypoint's card and weights): one reading of the file for all.
    data: Mapping[str, Any] = field(default_factory=dict)


_JSON_KINDS: dict[type, str] = {Mapping: "an object", list: "a list", str: "a string"}


def _json_kind(value: Any) -> str:
    """How JSON names the kind of a parsed value."""
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float):
        return "a number"
    return "null" if value is None else next(n for k, n in _JSON_KINDS.items() if isinstance(value, k))


def _require(data: Mapping[str, Any], dotted: str, kind: type, where: Path) -> Any:
    value: Any = data
    for key in dotted.split("."):
        if not isinstance(value, Mapping) or key not in value:
            raise RecipeError(f"{where}: missing key `{dotted}`")
        value = value[key]
    if not isinstance(value, kind):
        raise RecipeError(f"{where}: `{dotted}` must be {_JSON_KINDS[kind]}, found {_json_kind(value)}")
    return value


def _strings(value: Any, what: str, where: Path) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise RecipeError(f"{where}: `{what}` must be a list of strings")
    return tuple(value)


def _checked(
    items: tuple[str, ...], kind: Callable[[str], object], what: str, where: Path
) -> tuple[str, ...]:
    for item in items:
        try:
            kind(item)
        except values.BadValue as error:
            raise RecipeError(f"{where}: `{what}`: {error}") from None
    return items


def _string_map(
    value: Any,
    what: str,
    where: Path,
    keys: Callable[[str], object],
    entries: Callable[[str], object],
) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise RecipeError(f"{where}: `{what}` must map strings to strings (quote numbers in JSON)")
    _checked(tuple(value), keys, what, where)
    for key, item in value.items():
        _checked((item,), entries, f"{what}.{key}", where)
    return dict(value)


def _env(value: Any, what: str, where: Path) -> dict[str, str]:
    env = _string_map(value, what, where, values.env_name, values.env_value)
    decided = sorted(set(env) & DECIDED_VARS)
    if decided:
        raise RecipeError(
            f"{where}: `{what}` sets {decided}: the launcher decides these itself (the pinned weights "
            "cache, CUDA, the JIT cache, the driver's libraries), so --print would show the recipe's value "
            "and a start another; remove them from the recipe"
        )
    return env


def _variant(name: str, data: Any, where: Path) -> Variant:
    try:
        values.recipe_name(name)
    except values.BadValue as error:
        raise RecipeError(f"{where}: `variants`: {error}") from None
    if name in RESERVED_VARIANTS:
        raise RecipeError(
            f"{where}: variant `{name}`: the name is bitexact's own preset (the recipe against no-spec on "
            "long prompts), which would shadow it; give the variant another name"
        )
    variant = _variant_fields(name, data, where)
    if name == "recipe" and (variant.unset or variant.set or variant.env):
        raise RecipeError(
            f"{where}: variant `recipe` edits the argv or the environment; `recipe` is the recipe as "
            "published (its argv and env verbatim, what `bitexact-server` starts by default): give the "
            "edits a variant of their own"
        )
    ours = sorted({*variant.unset, *variant.set} & set(SERVING_FLAGS))
    if ours:
        raise RecipeError(
            f"{where}: variant `{name}` edits {ours}: serving flags are the launcher's to append "
            "(`bitexact-server --host/--port`), never the recipe's"
        )
    return variant


def _variant_fields(name: str, data: Any, where: Path) -> Variant:
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
    description = data.get("description", "")
    if not isinstance(description, str):
        raise RecipeError(f"{where}: `variants.{name}.description` must be a string")
    unset = _strings(data.get("unset", []), f"variants.{name}.unset", where)
    return Variant(
        name=name,
        unset=_checked(unset, values.flag, f"variants.{name}.unset", where),
        set=_string_map(data.get("set", {}), f"variants.{name}.set", where, values.flag, values.flag_value),
        env=_env(data.get("env", {}), f"variants.{name}.env", where),
        speculative=speculative,
        client=dict(client),
        description=description,
    )


def parse_recipe(data: Any, where: Path) -> Recipe:
    """Check the parsed JSON of a recipe and return what the launcher needs from it."""
    if not isinstance(data, Mapping):
        raise RecipeError(f"{where}: a recipe is a JSON object")
    problem = exactformats.schema_problem(
        data.get("schema"),
        exactformats.RECIPE_SCHEMAS,
        f"recipe {where}",
        reader="bitexact-server",
        older="use the launcher of the flake the recipe came with",
    )
    if problem is not None:
        raise RecipeError(problem)
    _known(data, RECIPE_KEYS, "", where)
    _known(_require(data, "launch", Mapping, where), LAUNCH_KEYS, "launch.", where)
    argv = _strings(_require(data, "launch.argv", list, where), "launch.argv", where)
    if argv[:3] != ("python", "-m", "sglang.launch_server"):
        raise RecipeError(f"{where}: `launch.argv` must start with python -m sglang.launch_server")
    joined = [a for a in argv if a.startswith("--") and "=" in a]
    if joined:
        flag, _, value = joined[0].partition("=")
        raise RecipeError(
            f"{where}: `launch.argv` holds {joined[0]!r}: write a flag and its value as two elements "
            f"({flag!r}, {value!r}); variants and the fleet find flags by name and would miss it"
        )
    held = sorted({a.split("=", 1)[0] for a in argv} & set(SERVING_FLAGS))
    if held:
        raise RecipeError(
            f"{where}: `launch.argv` holds {held}: serving flags are the launcher's to append "
            "(`bitexact-server --host/--port`), never the recipe's"
        )
    serving = _strings(_require(data, "launch.servingFlags", list, where), "launch.servingFlags", where)
    foreign = [flag for flag in serving if flag not in SERVING_FLAGS]
    if foreign:
        raise RecipeError(
            f"{where}: `launch.servingFlags` lists {foreign}; the launcher appends only "
            f"{list(SERVING_FLAGS)}, "
            "whose values it checks (anything else belongs in the argv or a variant)"
        )
    header = _require(data, "deepGemm.fencedHeader", str, where)
    _checked((header,), values.relative_path, "deepGemm.fencedHeader", where)
    variants = _require(data, "variants", Mapping, where)
    name = _require(data, "name", str, where)
    try:
        values.recipe_name(name)
    except values.BadValue as error:
        raise RecipeError(f"{where}: `name`: {error}") from None
    recipe = Recipe(
        path=where,
        name=name,
        argv=_checked(argv, values.argv_item, "launch.argv", where),
        env=_env(_require(data, "launch.env", Mapping, where), "launch.env", where),
        serving_flags=serving,
        engine_patches=_strings(_require(data, "engine.patches", list, where), "engine.patches", where),
        deep_gemm_header=header,
        variants={name: _variant(name, body, where) for name, body in variants.items()},
        data=data,
    )
    for variant in recipe.variants.values():
        _check_variant_argv(recipe, variant, variants[variant.name])
    return recipe


def _pinned_weights(data: Mapping[str, Any], section: str) -> str | None:
    """What the recipe pins for `section` (model, drafter): a Hub repo, or the path of a generated model."""
    entry = data.get(section)
    if not isinstance(entry, Mapping):
        return None
    value = entry.get("path") if "generator" in entry else entry.get("repo")
    return value if isinstance(value, str) else None


def _check_variant_argv(recipe: Recipe, variant: Variant, raw: Mapping[str, Any]) -> None:
    """Every variant's argv, as the launcher would run it, against what the recipe says of it: the edits
    apply, `speculative` (when given) says whether the argv speculates, and the weights it loads are the
    ones the recipe pins (pinlock pins `model` and `drafter`; an argv loading another repo would serve
    weights no pin holds)."""
    where = recipe.path
    try:
        argv, _ = apply_variant(recipe.argv, recipe.env, variant)
    except RecipeError as error:
        raise RecipeError(f"{where}: {error}") from None
    if "speculative" in raw and variant.speculative != (SPECULATIVE_FLAG in argv):
        does = "keeps" if SPECULATIVE_FLAG in argv else "has no"
        fix = "set it to false"
        if SPECULATIVE_FLAG in argv:
            fix = f"unset {SPECULATIVE_FLAG} and its companions"
        raise RecipeError(
            f"{where}: variant `{variant.name}` says speculative: {str(variant.speculative).lower()}, but "
            f"its argv {does} {SPECULATIVE_FLAG}: bitexact would take it for what it is not; {fix}"
        )
    for flag, section in WEIGHTS_FLAGS.items():
        pinned = _pinned_weights(recipe.data, section)
        for index, item in enumerate(argv[:-1]):
            if item == flag and argv[index + 1] != pinned:
                raise RecipeError(
                    f"{where}: variant `{variant.name}` runs {flag} {argv[index + 1]}, but the recipe's "
                    f"`{section}` pins {pinned or 'nothing'}: the server would load weights no pin holds; "
                    f"make them the same"
                )


def _known(section: Mapping[str, Any], keys: frozenset[str], prefix: str, where: Path) -> None:
    unknown = sorted(set(section) - keys)
    if unknown:
        raise RecipeError(
            f"{where}: unknown keys {[prefix + k for k in unknown]}; a recipe of schema "
            f"{exactformats.RECIPE_SCHEMAS[-1]} has {sorted(prefix + k for k in keys)}"
        )


def load_recipe(path: Path) -> Recipe:
    """Read and check a recipe file; every problem is a RecipeError naming the file. The reader is the one
    bitexact and pinlock share (exactformats): a FIFO or a device is refused before it is opened."""
    try:
        text = exactformats.read_text(path, "recipe", "the recipe file (nix/recipes/<name>.json)")
    except exactformats.FormatError as error:
        raise RecipeError(str(error)) from None
    try:
        data = strictjson.loads(text)
    except strictjson.JsonProblem as error:
        raise RecipeError(f"{path}: {error}") from None
    return parse_recipe(data, path)


# Variant edits and serving flags on the recipe's argv (the same semantics as the Nix lib implements).
# `unset`: each flag is removed with its value (the next element, unless it starts with `--`); a flag not
# in argv is an error. `set`: an existing flag's value is replaced (error if the flag has no value), a
# missing flag is appended as `flag value` (flags of one `set` in sorted order). `env` is merged over the
# recipe's env. Edits apply in that order; the `recipe` variant (no edits) is the identity.


def _has_value(argv: Sequence[str], index: int) -> bool:
    return index + 1 < len(argv) and not argv[index + 1].startswith("--")


def unset_flag(argv: Sequence[str], flag: str) -> list[str]:
    """argv without every occurrence of `flag` and its value."""
    if flag not in argv:
        raise RecipeError(f"cannot unset {flag}: it is not in the argv")
    out: list[str] = []
    index = 0
    while index < len(argv):
        if argv[index] == flag:
            index += 2 if _has_value(argv, index) else 1
            continue
        out.append(argv[index])
        index += 1
    return out


def set_flag(argv: Sequence[str], flag: str, value: str) -> list[str]:
    """argv with `flag`'s value replaced, or with `flag value` appended when the flag is absent."""
    try:
        values.flag(flag)
        values.flag_value(value)
    except values.BadValue as error:
        raise RecipeError(f"cannot set {flag} to {value!r}: {error}") from None
    out = list(argv)
    positions = [i for i, item in enumerate(out) if item == flag]
    if not positions:
        return out + [flag, value]
    for index in positions:
        if not _has_value(out, index):
            raise RecipeError(f"cannot set {flag}: in the argv it is a switch without a value")
        out[index + 1] = value
    return out


def apply_variant(
    argv: Sequence[str], env: Mapping[str, str], variant: Variant
) -> tuple[list[str], dict[str, str]]:
    """The variant's argv and env, from the recipe's."""
    out = list(argv)
    for flag in variant.unset:
        try:
            out = unset_flag(out, flag)
        except RecipeError as error:
            raise RecipeError(f"variant `{variant.name}`: {error}") from None
    # Sorted, as the Nix lib must (attribute sets have no order): appended flags land in one order.
    for flag, value in sorted(variant.set.items()):
        try:
            out = set_flag(out, flag, value)
        except RecipeError as error:
            raise RecipeError(f"variant `{variant.name}`: {error}") from None
    return out, {**env, **variant.env}


def variant_named(recipe: Recipe, name: str) -> Variant:
    """The recipe's variant `name`; `recipe` is the identity even when the file does not list it."""
    if name in recipe.variants:
        return recipe.variants[name]
    if name == "recipe":
        return Variant(name="recipe")
    known = ", ".join(sorted(set(recipe.variants) | {"recipe"}))
    raise RecipeError(f"unknown variant `{name}` for recipe {recipe.name}; known: {known}")


def append_serving_flags(
    argv: Sequence[str], serving: Mapping[str, str | None], allowlist: Sequence[str]
) -> list[str]:
    """argv plus the given serving flags (in allowlist order), each value checked by its kind; only
    allowlisted flags, never twice."""
    unknown = sorted(flag for flag, value in serving.items() if flag not in allowlist and value is not None)
    if unknown:
        raise RecipeError(f"serving flags {unknown} are not in the recipe's allowlist {list(allowlist)}")
    out = list(argv)
    for flag in allowlist:
        value = serving.get(flag)
        if value is None:
            continue
        if flag in out:
            raise RecipeError(
                f"{flag} is already in the argv; the recipe must leave serving flags to the launcher"
            )
        try:
            out += [flag, values.SERVING[flag](value)]
        except values.BadValue as error:
            raise RecipeError(f"{flag}: {error}") from None
    return out
