"""Which golden a golden verb's options name: the card the engine computes on, where goldens live, the
golden's key and file, and for a check, the golden loaded with the prompts it runs and their answers."""

from __future__ import annotations

import argparse
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
from bitexact.options import resolve_prompts
from bitexact.presets import load_recipe, variant_side
from bitexact.prompts import Prompt


def card_of(args: argparse.Namespace, spec: EngineSpec) -> str:
    """The card the engine computes on. Never guessed: a server elsewhere runs on a card this machine
    cannot see (SGLang's /server_info names none), and a machine without a GPU cannot name one."""
    if args.card:
        return str(args.card)
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


def golden_dir_of(args: argparse.Namespace) -> Path:
    """--golden-dir; else checks/golden of the repository that holds the recipe file
    (<repo>/nix/recipes/NAME.json), else of the repository around the current directory. Never a
    checks/golden made up in whatever directory one happens to be in."""
    if args.golden_dir:
        return args.golden_dir
    recipe = args.recipe or env_value("BITEXACT_RECIPE")
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


def golden_key(args: argparse.Namespace, engine: EngineSpec) -> tuple[str, str, str]:
    """(card, recipe name, spec requirement)."""
    spec = args.spec or "any"
    if args.recipe_name:
        name = args.recipe_name
        if args.recipe:  # the name replaces the recipe file's; its variant's requirement still holds
            spec = args.spec or variant_side(load_recipe(args.recipe), args.variant).spec
    elif args.recipe or env_value("BITEXACT_RECIPE"):
        recipe = load_recipe(args.recipe)
        name = recipe["name"]
        spec = args.spec or variant_side(recipe, args.variant).spec
    else:
        raise UsageError("goldens are keyed by recipe: pass --recipe FILE or --recipe-name NAME")
    if args.long and not args.recipe_name and not args.golden:
        # A golden holds one prompt set: in a golden dir the long prompts key as `<recipe>-long`.
        name = f"{name}-long"
    return card_of(args, engine), name, spec


def golden_file(args: argparse.Namespace, card: str, name: str) -> Path:
    return (args.golden or golden_path(golden_dir_of(args), card, name)).absolute()


def _stored_settings(args: argparse.Namespace, golden_path_: Path, stored: dict[str, Any]) -> Settings:
    """The golden's settings; an option that asks for others is refused, never silently ignored."""
    settings = stored_settings(stored)  # load_golden has checked them
    for option, given, recorded in (
        ("--max-new-tokens", args.max_new_tokens, settings.max_new_tokens),
        ("--top-logprobs", args.top_logprobs, settings.top_logprobs),
    ):
        if given is not None and given != recorded:
            raise UsageError(
                f"{option} {given}: golden {golden_path_} was recorded with {option} {recorded}, and a check "
                "compares with the same settings; drop the option (or record a new golden)"
            )
    return settings


def _selected(args: argparse.Namespace, engine: EngineSpec, golden: Any) -> tuple[list[Any], list[Any]]:
    """The golden's prompts (the first --limit of them), or those named by --prompts/--long, each of
    which must be one of the golden's, sent exactly as recorded; anything else is refused."""
    by_id = dict(
        zip((p.id for p in golden.prompts), zip(golden.prompts, golden.generations, strict=True), strict=True)
    )
    if not (args.prompts or args.long):
        pairs = list(by_id.values())[: args.limit or None]
    else:
        pairs = []
        for prompt in resolve_prompts(args, [engine]):
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


def select_golden(args: argparse.Namespace, engine: EngineSpec) -> Selected:
    """The golden that --card/--recipe/--golden-dir/--golden name (checked on load), the prompts a check
    runs (--limit/--prompts/--long) with their recorded answers, and its settings."""
    card, name, spec = golden_key(args, engine)
    recorded_by = card
    if args.golden is None:  # a golden dir: this card's golden, or its family's for this recipe
        local = not args.card
        resolved = families.resolve(golden_dir_of(args), card, name, card_properties(card, local))
        recorded_by = resolved.recorded_by
        if resolved.family is not None:
            print(f"bitexact: {resolved.note}", file=sys.stderr)
    golden = load_golden(golden_file(args, recorded_by, name), card=recorded_by, recipe=name)
    settings = _stored_settings(args, golden.path, golden.record["settings"])
    prompts, expected = _selected(args, engine, golden)
    return Selected(card, name, spec, golden, prompts, expected, settings, recorded_by)
