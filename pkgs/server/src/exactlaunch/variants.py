"""Variant edits and serving flags on the recipe's argv (the same semantics as the Nix lib implements).

`unset`: each flag is removed with its value (the next element, unless it starts with `--`); a flag not
in argv is an error. `set`: an existing flag's value is replaced (error if the flag has no value), a
missing flag is appended as `flag value` (flags of one `set` in sorted order). `env` is merged over the
recipe's env. Edits apply in that order; the `recipe` variant (no edits) is the identity.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from exactlaunch import values
from exactlaunch.recipe import Recipe, RecipeError, Variant


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
