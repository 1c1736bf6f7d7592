"""Which golden a golden verb's options name: the card the engine computes on, where goldens live, the
golden's key and file, and for a check, the golden loaded with the prompts it runs and their answers."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bitexact import families
from bitexact.engines.base import Settings
from bitexact.engines.spec import EngineSpec
from bitexact.errors import GoldenError, UsageError
from bitexact.files import env_value
from bitexact.generation import Generation
from bitexact.golden import Golden, golden_path, load_golden, stored_settings
from bitexact.identity import CPU, card_properties, detect_card, model_mismatch
from bitexact.names import checked_name
from bitexact.options import PromptOptions, resolve_prompts
from bitexact.presets import load_recipe, variant_side
from bitexact.prompts import Prompt


@dataclass(frozen=True)
class GoldenRequest:
    """What a golden verb (golden record and check, warm against a golden) asks, as read from its command
    line: the engine, the golden's key and where it lives, the prompts and the settings asked for."""

    engine: EngineSpec
    card: str | None  # --card; None: this machine's card, where it can be seen
    recipe: str | None  # --recipe (else $BITEXACT_RECIPE)
    recipe_name: str | None
    variant: str
    spec: str | None  # --spec, the speculation requirement; None: the variant's
    golden_dir: Path | None
    golden: Path | None
    prompts: PromptOptions
    max_new_tokens: int | None = None
    top_logprobs: int | None = None


def card_of(request: GoldenRequest) -> str:
    """The card the engine computes on. Never guessed: a server elsewhere runs on a card this machine
    cannot see (SGLang's /server_info names none), and a machine without a GPU cannot name one."""
    if request.card:
        return str(request.card)
    spec = request.engine
    if spec.kind == "hf" and spec.params.get("device", "cpu") == "cpu":
        return "cpu"
    if not spec.local:
        raise UsageError(
            f"engine {spec.raw!r} runs on another machine: its card cannot be seen from here and the "
            "server does not report it; pass --card SLUG, the slug of the server's card (e.g. h200, "
            "rtx-pro-6000-blackwell)"
        )
    card = checked_name(detect_card(), "this machine's card slug")
    if card == CPU:  # detect_card's answer where no NVIDIA GPU is visible
        raise UsageError(
            f"no NVIDIA GPU is visible on this machine, so the card behind {spec.raw!r} is unknown "
            "(a golden keyed 'cpu' would be wrong); pass --card SLUG, the slug of the server's card"
        )
    return card


def golden_dir_of(golden_dir: Path | None, recipe_file: str | None) -> Path:
    """--golden-dir; else checks/golden of the repository that holds the recipe file
    (<repo>/nix/recipes/NAME.json), else of the repository around the current directory. Never a
    checks/golden made up in whatever directory one happens to be in."""
    if golden_dir:
        return golden_dir
    recipe = recipe_file or env_value("BITEXACT_RECIPE")
    if recipe:
        where = Path(os.path.realpath(recipe))  # realpath: a link loop is read (and named) later
        root = where.parents[2] if len(where.parents) > 2 else where.parent
        if (
            where.parent.name == "recipes"
            and where.parent.parent.name == "nix"
            and (root / "checks").is_dir()
        ):
            return root / "checks" / "golden"
    for folder in [Path.cwd(), *Path.cwd().parents]:
        if (folder / "flake.nix").is_file() and (folder / "pkgs" / "bitexact").is_dir():
            return folder / "checks" / "golden"
    raise UsageError(
        "where do goldens live? No repository was found from the recipe file's location or the current "
        "directory: pass --golden-dir DIR (the repository's checks/golden) or --golden FILE"
    )


def golden_key(request: GoldenRequest) -> tuple[str, str, str]:
    """(card, recipe name, spec requirement)."""
    spec = request.spec or "any"
    if request.recipe_name:
        name = request.recipe_name
        if request.recipe:  # the name replaces the recipe file's; its variant's requirement still holds
            spec = request.spec or variant_side(load_recipe(request.recipe), request.variant).spec
    elif request.recipe or env_value("BITEXACT_RECIPE"):
        recipe = load_recipe(request.recipe)
        name = recipe.name
        spec = request.spec or variant_side(recipe, request.variant).spec
    else:
        raise UsageError("goldens are keyed by recipe: pass --recipe FILE or --recipe-name NAME")
    if request.prompts.long and not request.recipe_name and not request.golden:
        # A golden holds one prompt set: in a golden dir the long prompts key as `<recipe>-long`.
        name = f"{name}-long"
    return card_of(request), name, spec


def golden_file(request: GoldenRequest, card: str, name: str) -> Path:
    return (
        request.golden or golden_path(golden_dir_of(request.golden_dir, request.recipe), card, name)
    ).absolute()


def _stored_settings(request: GoldenRequest, golden_path_: Path, stored: dict[str, Any]) -> Settings:
    """The golden's settings; an option that asks for others is refused, never silently ignored."""
    settings = stored_settings(stored)  # load_golden has checked them
    for option, given, recorded in (
        ("--max-new-tokens", request.max_new_tokens, settings.max_new_tokens),
        ("--top-logprobs", request.top_logprobs, settings.top_logprobs),
    ):
        if given is not None and given != recorded:
            raise UsageError(
                f"{option} {given}: golden {golden_path_} was recorded with {option} {recorded}, and a check "
                "compares with the same settings; drop the option (or record a new golden)"
            )
    return settings


def _selected(request: GoldenRequest, golden: Any) -> tuple[list[Any], list[Any]]:
    """The golden's prompts (the first --limit of them), or those named by --prompts/--long, each of
    which must be one of the golden's, sent exactly as recorded; anything else is refused."""
    by_id = dict(
        zip((p.id for p in golden.prompts), zip(golden.prompts, golden.generations, strict=True), strict=True)
    )
    asked = request.prompts
    if not (asked.prompts or asked.long):
        pairs = list(by_id.values())[: asked.limit or None]
    else:
        pairs = []
        for prompt in resolve_prompts(asked, [request.engine]):
            stored = by_id.get(prompt.id)
            if stored is None or stored[0].digest() != prompt.digest():
                what = "is not in" if stored is None else "differs from the one in"
                raise UsageError(
                    f"prompt {prompt.id!r} {what} golden {golden.path}: a check runs the golden's own "
                    "prompts (drop --prompts/--long to run all of them, --limit N for the first N)"
                )
            pairs.append(stored)
    return [p for p, _ in pairs], [g for _, g in pairs]


@dataclass(frozen=True)
class Selected:
    """A check's golden, named by the options, and what the check runs from it."""

    card: str
    recipe: str
    spec: str  # the speculation requirement
    golden: Golden
    prompts: list[Prompt]
    expected: list[Generation]
    settings: Settings
    recorded_by: str  # the card whose golden it is: this card, or its family's (families.py)

    def vet(self, engine: str, allow_mismatch: bool) -> Callable[[dict[str, Any]], None]:
        """Refuses a server that names another model than the golden's (unless allowed)."""

        def vet(identity: dict[str, Any]) -> None:
            recorded = self.golden.record["metadata"].get("engine_identity") or {}
            mismatch = model_mismatch(recorded, identity)
            if mismatch and not allow_mismatch:
                raise GoldenError(
                    f"{engine} serves another model than golden {self.golden.path} was recorded from "
                    f"({'; '.join(mismatch)}); check the server's --model-path, or pass "
                    "--allow-identity-mismatch to compare anyway"
                )

        return vet


def select_golden(request: GoldenRequest) -> Selected:
    """The golden that --card/--recipe/--golden-dir/--golden name (checked on load), the prompts a check
    runs (--limit/--prompts/--long) with their recorded answers, and its settings."""
    card, name, spec = golden_key(request)
    recorded_by = card
    if request.golden is None:  # a golden dir: this card's golden, or its family's for this recipe
        local = not request.card
        resolved = families.resolve(
            golden_dir_of(request.golden_dir, request.recipe), card, name, card_properties(card, local)
        )
        recorded_by = resolved.recorded_by
        if resolved.family is not None:
            print(f"bitexact: {resolved.note}", file=sys.stderr)
    golden = load_golden(golden_file(request, recorded_by, name), card=recorded_by, recipe=name)
    settings = _stored_settings(request, golden.path, golden.record["settings"])
    prompts, expected = _selected(request, golden)
    return Selected(card, name, spec, golden, prompts, expected, settings, recorded_by)
