"""What the launcher checks of a recipe beyond its shape, and what it derives from it: the argv and
environment each variant runs.

The file is read by the reader bitexact and pinlock share (exactformats.recipe: strict JSON, the schema,
known keys, every section of its kind); here every value the launcher later puts on the command line or in
the environment is checked by its kind (exactlaunch.values), and every variant's argv against what the
recipe says of it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import exactformats
from exactformats.recipe import Recipe, RecipeError, Variant

from exactlaunch import values
from exactlaunch.environment import DECIDED_VARS

__all__ = [
    "Recipe",
    "RecipeError",
    "Variant",
    "append_serving_flags",
    "apply_variant",
    "load_recipe",
    "parse_recipe",
    "set_flag",
    "unset_flag",
    "variant_named",
]

# The serving flags the launcher knows how to check.
SERVING_FLAGS = tuple(values.SERVING)
# What a variant's `speculative` promises is whether its argv keeps this flag.
SPECULATIVE_FLAG = "--speculative-algorithm"
# The flags that name the weights a server loads, each with the recipe section that pins them.
WEIGHTS_FLAGS = {"--model-path": "model", "--speculative-draft-model-path": "drafter"}
READER = {"reader": "bitexact-server", "older": "use the launcher of the flake the recipe came with"}


def _checked(items: Sequence[str], kind: Callable[[str], object], what: str, where: str) -> None:
    for item in items:
        try:
            kind(item)
        except values.BadValue as error:
            raise RecipeError(f"{where}: `{what}`: {error}") from None


def _map(
    value: Mapping[str, str],
    what: str,
    where: str,
    keys: Callable[[str], object],
    entries: Callable[[str], object],
) -> None:
    _checked(tuple(value), keys, what, where)
    for key, item in value.items():
        _checked((item,), entries, f"{what}.{key}", where)


def _env(env: Mapping[str, str], what: str, where: str) -> None:
    _map(env, what, where, values.env_name, values.env_value)
    decided = sorted(set(env) & DECIDED_VARS)
    if decided:
        raise RecipeError(
            f"{where}: `{what}` sets {decided}: the launcher decides these itself (the pinned weights "
            "cache, CUDA, the JIT cache, the driver's libraries), so --print would show the recipe's value "
            "and a start another; remove them from the recipe"
        )


def _variant(variant: Variant, where: str) -> None:
    at = f"variants.{variant.name}"
    if variant.name == "recipe" and (variant.unset or variant.set or variant.env):
        raise RecipeError(
            f"{where}: variant `recipe` edits the argv or the environment; `recipe` is the recipe as "
            "published (its argv and env verbatim, what `bitexact-server` starts by default): give the "
            "edits a variant of their own"
        )
    ours = sorted({*variant.unset, *variant.set} & set(SERVING_FLAGS))
    if ours:
        raise RecipeError(
            f"{where}: variant `{variant.name}` edits {ours}: serving flags are the launcher's to append "
            "(`bitexact-server --host/--port`), never the recipe's"
        )
    _checked(variant.unset, values.flag, f"{at}.unset", where)
    _map(variant.set, f"{at}.set", where, values.flag, values.flag_value)
    _env(variant.env, f"{at}.env", where)


def _launch(recipe: Recipe, where: str) -> None:
    argv = recipe.argv
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
    foreign = [flag for flag in recipe.serving_flags if flag not in SERVING_FLAGS]
    if foreign:
        raise RecipeError(
            f"{where}: `launch.servingFlags` lists {foreign}; the launcher appends only "
            f"{list(SERVING_FLAGS)}, "
            "whose values it checks (anything else belongs in the argv or a variant)"
        )
    _checked((recipe.deep_gemm_header,), values.relative_path, "deepGemm.fencedHeader", where)
    _checked(argv, values.argv_item, "launch.argv", where)
    _env(recipe.env, "launch.env", where)


def checked(recipe: Recipe, what: str = "recipe") -> Recipe:
    """`recipe` (read by exactformats) once what the launcher runs of it is checked: RecipeError naming
    the file and the key otherwise."""
    where = f"{what} {exactformats.shown(recipe.path)}"
    _launch(recipe, where)
    for variant in recipe.variants.values():
        _variant(variant, where)
    for variant in recipe.variants.values():
        _check_variant_argv(recipe, variant, where)
    return recipe


def parse_recipe(data: Any, where: Path) -> Recipe:
    """Check the parsed JSON of a recipe and return what the launcher needs from it."""
    return checked(exactformats.recipe.parse_recipe(data, where, **READER))


def _check_variant_argv(recipe: Recipe, variant: Variant, where: str) -> None:
    """Every variant's argv, as the launcher would run it, against what the recipe says of it: the edits
    apply, `speculative` (when given) says whether the argv speculates, and the weights it loads are the
    ones the recipe pins (pinlock pins `model` and `drafter`; an argv loading another repo would serve
    weights no pin holds)."""
    try:
        argv, _ = apply_variant(recipe.argv, recipe.env, variant)
    except RecipeError as error:
        raise RecipeError(f"{where}: {error}") from None
    if variant.speculative is not None and variant.speculative != (SPECULATIVE_FLAG in argv):
        does = "keeps" if SPECULATIVE_FLAG in argv else "has no"
        fix = "set it to false"
        if SPECULATIVE_FLAG in argv:
            fix = f"unset {SPECULATIVE_FLAG} and its companions"
        raise RecipeError(
            f"{where}: variant `{variant.name}` says speculative: {str(variant.speculative).lower()}, but "
            f"its argv {does} {SPECULATIVE_FLAG}: bitexact would take it for what it is not; {fix}"
        )
    for flag, section in WEIGHTS_FLAGS.items():
        weights = recipe.weights.get(section)
        pinned = weights.loaded_as if weights is not None else None
        for index, item in enumerate(argv[:-1]):
            if item == flag and argv[index + 1] != pinned:
                raise RecipeError(
                    f"{where}: variant `{variant.name}` runs {flag} {argv[index + 1]}, but the recipe's "
                    f"`{section}` pins {pinned or 'nothing'}: the server would load weights no pin holds; "
                    f"make them the same"
                )


def load_recipe(path: Path) -> Recipe:
    """Read and check a recipe file; every problem is a RecipeError naming the file. The reader is the one
    bitexact and pinlock share (exactformats.recipe): a FIFO or a device is refused before it is opened."""
    try:
        recipe = exactformats.recipe.read_recipe(path, **READER)
    except exactformats.FormatError as error:
        raise RecipeError(str(error)) from None
    return checked(recipe)


# Variant edits and serving flags on the recipe's argv (the launcher's alone: Nix reads pins and names only).
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
    # Sorted (a JSON object has no order to keep): appended flags land in one order.
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
