"""`bitexact golden record|check ENGINE`: values recorded on one card, compared on later runs of that card."""

from __future__ import annotations

import argparse
import datetime
import os
from pathlib import Path
from typing import Any

from bitexact import __version__
from bitexact.commands.common import add_prompt_options, emit, resolve_prompts, run_side, settings_of
from bitexact.commands.parity import _write_reports
from bitexact.engines.base import Settings
from bitexact.errors import UsageError
from bitexact.golden import build_record, golden_path, load_golden, write_record
from bitexact.identity import detect_card, gpu_info
from bitexact.presets import _side, load_recipe
from bitexact.speccheck import REQUIREMENTS, check_spec, spec_summary
from bitexact.summary import comparison_summary


def add_parser(sub: Any) -> None:
    p = sub.add_parser("golden", help="golden records per card and recipe")
    verbs = p.add_subparsers(dest="golden_verb", required=True, metavar="{record,check}")
    for name, helptext in (
        ("record", "record a golden on this card"),
        ("check", "compare with this card's golden"),
    ):
        q = verbs.add_parser(name, help=helptext)
        q.add_argument("engine")
        q.add_argument(
            "--card",
            help="card slug (default: read through NVML, docs/cards.md; 'cpu' without an NVIDIA driver)",
        )
        q.add_argument("--recipe", help="recipe JSON: its name keys the golden (default: $BITEXACT_RECIPE)")
        q.add_argument("--recipe-name", help="key goldens by this name instead of a recipe file's")
        q.add_argument(
            "--variant", default="recipe", help="the recipe variant the server runs (default recipe)"
        )
        q.add_argument(
            "--spec", choices=REQUIREMENTS, help="must the engine speculate? (default: from the variant)"
        )
        q.add_argument("--golden-dir", type=Path, default=Path("checks/golden"))
        q.add_argument("--golden", type=Path, help="the golden file itself (overrides --golden-dir)")
        q.add_argument(
            "--build-id",
            default=os.environ.get("BITEXACT_BUILD_ID"),
            help="build identity for metadata (default: $BITEXACT_BUILD_ID)",
        )
        add_prompt_options(q)
        q.set_defaults(run=record if name == "record" else check)


def _key(args: argparse.Namespace) -> tuple[str, str, str]:
    """(card, recipe name, spec requirement)."""
    card = args.card or detect_card()
    spec = args.spec or "any"
    if args.recipe_name:
        name = args.recipe_name
    elif args.recipe or os.environ.get("BITEXACT_RECIPE"):
        recipe = load_recipe(args.recipe)
        name = recipe["name"]
        spec = args.spec or _side(recipe, args.variant).spec
    else:
        raise UsageError("goldens are keyed by recipe: pass --recipe FILE or --recipe-name NAME")
    return card, name, spec


def _path(args: argparse.Namespace, card: str, name: str) -> Path:
    return args.golden or golden_path(args.golden_dir, card, name)


def record(args: argparse.Namespace) -> int:
    card, name, spec = _key(args)
    settings = settings_of(args)
    prompts = resolve_prompts(args, [args.engine])
    gens, identity = run_side(args.engine, prompts, settings, args.out, "golden", tokenizer=args.tokenizer)
    check_spec(gens, spec, args.engine)
    metadata = {
        "recorded": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "bitexact": __version__,
        "engine": args.engine,
        "engine_identity": identity,
        "build_id": args.build_id,
        "gpu": gpu_info(),
        "spec": spec_summary(gens, spec),
    }
    rec = build_record(
        card=card,
        recipe=name,
        variant=args.variant,
        settings=settings.to_json(),
        metadata=metadata,
        prompts=prompts,
        generations=gens,
    )
    path = _path(args, card, name)
    write_record(rec, path)
    summary = {
        "verb": "golden record",
        "path": str(path),
        "card": card,
        "recipe": name,
        "prompts": len(prompts),
    }
    emit(summary, args.json, f"golden written: {path} ({len(prompts)} prompts, card {card})")
    return 0


def check(args: argparse.Namespace) -> int:
    card, name, spec = _key(args)
    golden = load_golden(_path(args, card, name), card=card, recipe=name)
    stored = golden.record["settings"]
    settings = Settings(
        max_new_tokens=int(stored["max_new_tokens"]), top_logprobs=int(stored["top_logprobs"])
    )
    gens, identity = run_side(
        args.engine, golden.prompts, settings, args.out, "check", tokenizer=args.tokenizer
    )
    check_spec(gens, spec, args.engine)
    summary = comparison_summary(
        verb="golden check",
        title=f"golden check: {args.engine} vs {golden.path} (card {card}, recipe {name})",
        a={
            "engine": args.engine,
            "variant": args.variant,
            "identity": identity,
            "spec": spec_summary(gens, spec),
        },
        b={
            "engine": f"golden {golden.path}",
            "variant": golden.record.get("variant"),
            "identity": golden.record["metadata"],
        },
        settings=settings.to_json(),
        gens_a=gens,
        gens_b=golden.generations,
    )
    _write_reports(args.out, "golden-check", summary)
    emit(summary, args.json, f"{summary['equal']}/{summary['prompts']} prompts equal to the golden")
    return 0 if summary["differ"] == 0 else 1
