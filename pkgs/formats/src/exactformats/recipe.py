"""The one reader of a recipe file (nix/recipes/*.json) for bitexact, the launcher and pinlock: the file is
read as exactformats reads every file (its kind before the open, UTF-8), parsed as strict JSON (a key given
twice is refused: the last would win silently), its schema checked against RECIPE_SCHEMAS, and its shape
checked as every consumer relies on it: known keys only (a typo would silently do nothing), each section
of its kind, names that can name files. What comes back is a read-only, typed view.

Each program keeps what is its own: the launcher checks the argv and environment it will run (flag and
value kinds, the variables it decides itself, what each variant's argv does), pinlock the form of the repos
and revisions it pins, bitexact the requests in flight it can keep. The Nix lib reads the same file
(nix/lib/recipe.nix), held equal to this reader by a test.

Every refusal is a RecipeError (a FormatError of kind "recipe") whose message names the file as the program
names it (`what`: `--recipe`, `recipe`) and the key."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from exactformats import strictjson
from exactformats.files import FormatError, read_text, shown
from exactformats.schema import RECIPE_SCHEMAS, schema_problem

EXPECT = "the recipe file (nix/recipes/<name>.json)"
# The sections of a recipe file; another key is a typo or a newer format.
RECIPE_KEYS = frozenset(
    {"schema", "name", "description", "engine", "deepGemm", "model", "drafter", "card", "sampling"}
    | {"launch", "variants", "reference"}
)
LAUNCH_KEYS = frozenset({"argv", "env", "servingFlags"})
# Keys a variant may carry; anything else is a typo that would silently do nothing.
VARIANT_KEYS = frozenset({"description", "speculative", "unset", "set", "env", "client"})
CLIENT_KEYS = frozenset({"inflight"})
# Names bitexact gives its own presets (`long` is the recipe against no-spec on long prompts): a variant of
# that name would be shadowed there, silently.
RESERVED_VARIANTS = frozenset({"long"})
# The recipe's and its variants' names become file names (goldens, reports): the pattern bitexact, the
# launcher and nix/lib/recipe.nix check.
NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,99}")
NAME_RULE = (
    "lowercase letters, digits, '.', '_' or '-', starting with a letter or digit (at most 100); bitexact "
    "makes file names of it"
)
WEIGHTS_SECTIONS = ("model", "drafter")


class RecipeError(FormatError):
    """A recipe file whose content is unusable; the message names the file and the key."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "recipe")


@dataclass(frozen=True)
class Variant:
    """A variant as the recipe gives it: edits to the recipe's argv and environment, and client settings.
    `speculative` is None where the variant does not say."""

    name: str
    unset: tuple[str, ...] = ()
    set: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    speculative: bool | None = None
    inflight: int = 1
    description: str = ""


@dataclass(frozen=True)
class Weights:
    """A model the recipe serves: a Hub repo at a revision, or one the recipe's tooling generates
    (`generator` and `path`, no revision: nothing on the Hub to pin)."""

    repo: str
    revision: str | None
    generator: str | None = None
    path: str | None = None

    @property
    def loaded_as(self) -> str:
        """What `--model-path` names for it: the generated model's path, else the Hub repo."""
        return self.path if self.generator is not None and self.path is not None else self.repo


@dataclass(frozen=True)
class Recipe:
    """A recipe file, checked. `data` is the whole parsed file, read-only, for sections no field carries
    (the card, sampling, the author's figures)."""

    path: Path
    name: str
    description: str
    engine_repo: str
    engine_rev: str
    engine_patches: tuple[str, ...]
    deep_gemm_header: str
    weights: Mapping[str, Weights]  # "model", "drafter": those the recipe gives
    argv: tuple[str, ...]
    env: Mapping[str, str]
    serving_flags: tuple[str, ...]
    variants: Mapping[str, Variant]
    reference: Mapping[str, Any] | None
    data: Mapping[str, Any]


def frozen(value: Any) -> Any:
    """Parsed JSON made read-only: objects as mapping proxies, arrays as tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({key: frozen(item) for key, item in value.items()})
    if isinstance(value, list | tuple):
        return tuple(frozen(item) for item in value)
    return value


_KIND_NAMES: dict[type, str] = {
    dict: "an object",
    list: "a list",
    str: "a string",
    int: "a whole number",
    bool: "true or false",
}


def thawed(value: Any) -> Any:
    """A frozen value as plain JSON data again (dicts and lists), for a program that writes it out."""
    if isinstance(value, Mapping):
        return {key: thawed(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [thawed(item) for item in value]
    return value


def _kind(value: Any) -> str:
    """How JSON names the kind of a parsed value."""
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int):
        return "a whole number"
    if isinstance(value, float):
        return "a decimal number"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    return "a string" if isinstance(value, str) else "null"


Keys = tuple[str, ...]


class _Reader:
    """The checks of one file, each message prefixed with the file as its program names it. A field is
    named by its keys from the top (`("variants", "v1.2", "set")`: a variant's name may hold a dot)."""

    def __init__(self, where: str, data: Mapping[str, Any]) -> None:
        self.where = where
        self.data = data

    def fail(self, message: str) -> RecipeError:
        return RecipeError(f"{self.where}: {message}")

    def known(self, section: Mapping[str, Any], keys: frozenset[str], prefix: str) -> None:
        unknown = sorted(set(section) - keys)
        if unknown:
            raise self.fail(
                f"unknown keys {[prefix + k for k in unknown]}; a recipe of schema {RECIPE_SCHEMAS[-1]} has "
                f"{sorted(prefix + k for k in keys)}"
            )

    def _at(self, keys: Keys) -> tuple[bool, Any]:
        """(found, value) at `keys`."""
        value: Any = self.data
        for key in keys:
            if not isinstance(value, Mapping) or key not in value:
                return False, None
            value = value[key]
        return True, value

    def field(self, keys: Keys, kind: type, default: Any = ...) -> Any:
        """The value at `keys`, of `kind`; `default` where it is absent (missing key without one)."""
        found, value = self._at(keys)
        if not found:
            if default is ...:
                raise self.fail(f"missing key `{'.'.join(keys)}`")
            return default
        expected: Any = {dict: Mapping, list: (list, tuple)}.get(kind, kind)  # a frozen recipe reads too
        if not isinstance(value, expected) or (kind is int and isinstance(value, bool)):
            raise self.fail(f"`{'.'.join(keys)}` must be {_KIND_NAMES[kind]}, found {_kind(value)}")
        return value

    def strings(self, keys: Keys, default: Any = ...) -> tuple[str, ...]:
        label = ".".join(keys)
        found, value = self._at(keys)
        if not found and default is not ...:
            return tuple(default)
        if not found:
            raise self.fail(f"missing key `{label}`")
        if not isinstance(value, list | tuple):
            raise self.fail(f"`{label}` must be a list of strings, found {_kind(value)}")
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise self.fail(f"`{label}` must be a list of strings; item {index} is {_kind(item)}")
        return tuple(value)

    def string_map(self, keys: Keys, default: Any = ...) -> Mapping[str, str]:
        value = self.field(keys, dict, default)
        if not all(isinstance(item, str) for item in value.values()):
            raise self.fail(f"`{'.'.join(keys)}` must map strings to strings (quote numbers in JSON)")
        return MappingProxyType(dict(value))

    def name(self, value: str, what: str) -> str:
        if not NAME.fullmatch(value):
            raise self.fail(f"`{what}`: {value!r} is not a recipe or variant name: {NAME_RULE}")
        return value


def _weights(r: _Reader, section: str) -> Weights:
    entry = r.field((section,), dict)
    repo = r.field((section, "repo"), str)
    if "revision" not in entry and {"generator", "path"} <= set(entry):
        generator = r.field((section, "generator"), str)
        return Weights(repo, None, generator, r.field((section, "path"), str))
    return Weights(repo, r.field((section, "revision"), str))


def _variant(r: _Reader, name: str) -> Variant:
    r.name(name, "variants")
    if name in RESERVED_VARIANTS:
        raise r.fail(
            f"variant `{name}`: the name is bitexact's own preset (the recipe against no-spec on long "
            "prompts), which would shadow it; give the variant another name"
        )
    at = ("variants", name)
    body = r.data["variants"][name]
    if not isinstance(body, Mapping):
        raise r.fail(f"variant `{name}` must be an object, found {_kind(body)}")
    unknown = sorted(set(body) - VARIANT_KEYS)
    if unknown:
        raise r.fail(f"variant `{name}` has unknown keys {unknown}; allowed: {sorted(VARIANT_KEYS)}")
    client = r.field((*at, "client"), dict, {})
    unknown = sorted(set(client) - CLIENT_KEYS)
    if unknown:
        raise r.fail(f"`variants.{name}.client` has unknown keys {unknown}; allowed: {sorted(CLIENT_KEYS)}")
    inflight = r.field((*at, "client", "inflight"), int, 1)
    if inflight < 1:
        raise r.fail(
            f"`variants.{name}.client.inflight` must be at least 1 (requests in flight), not {inflight}"
        )
    return Variant(
        name=name,
        unset=r.strings((*at, "unset"), []),
        set=r.string_map((*at, "set"), {}),
        env=r.string_map((*at, "env"), {}),
        speculative=r.field((*at, "speculative"), bool, None),
        inflight=inflight,
        description=r.field((*at, "description"), str, ""),
    )


def parse_recipe(data: Any, path: Path | str, *, what: str = "recipe", reader: str, older: str) -> Recipe:
    """The parsed JSON of the recipe at `path`, checked; `reader` (the program) and `older` (its fix for a
    schema older than it reads) go into the schema's message."""
    path = Path(path)
    r = _Reader(f"{what} {shown(path)}", data)
    if not isinstance(data, Mapping):
        raise r.fail(f"not a JSON object but {_kind(data)}; is this a recipe file?")
    problem = schema_problem(data.get("schema"), RECIPE_SCHEMAS, r.where, reader=reader, older=older)
    if problem is not None:
        raise RecipeError(problem)
    r.known(data, RECIPE_KEYS, "")
    name = r.name(r.field(("name",), str), "name")
    r.known(r.field(("launch",), dict), LAUNCH_KEYS, "launch.")
    variants = r.field(("variants",), dict)
    for section in ("card", "sampling", "reference"):
        r.field((section,), dict, None)
    return Recipe(
        path=path,
        name=name,
        description=r.field(("description",), str, ""),
        engine_repo=r.field(("engine", "repo"), str),
        engine_rev=r.field(("engine", "rev"), str),
        engine_patches=r.strings(("engine", "patches")),
        deep_gemm_header=r.field(("deepGemm", "fencedHeader"), str),
        weights=MappingProxyType(
            {section: _weights(r, section) for section in WEIGHTS_SECTIONS if section in data}
        ),
        argv=r.strings(("launch", "argv")),
        env=r.string_map(("launch", "env")),
        serving_flags=r.strings(("launch", "servingFlags")),
        variants=MappingProxyType({key: _variant(r, key) for key in variants}),
        reference=frozen(data["reference"]) if "reference" in data else None,
        data=frozen(data),
    )


def read_recipe(path: Path | str, *, what: str = "recipe", reader: str, older: str) -> Recipe:
    """The recipe file at `path`, read and checked; FormatError (RecipeError for its content) naming the
    file as `what` and the fix."""
    text = read_text(path, what, EXPECT)
    try:
        data = strictjson.loads(text)
    except strictjson.JsonProblem as error:
        raise RecipeError(f"{what} {shown(path)}: {error}") from None
    return parse_recipe(data, path, what=what, reader=reader, older=older)
