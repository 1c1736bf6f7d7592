"""`bitexact golden record|check ENGINE`: values recorded on one card, compared on later runs of that card."""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path
from typing import Any

from bitexact import __version__, history
from bitexact.argv import MAX_IN_FLIGHT, count
from bitexact.engines.spec import EngineSpec
from bitexact.errors import UsageError
from bitexact.files import env_path, env_value, shown
from bitexact.golden import (
    build_record,
    record_text,
    replaceable,
)
from bitexact.goldenselect import (
    GoldenRequest,
    golden_dir_of,
    golden_file,
    golden_key,
    select_golden,
)
from bitexact.helptext import ENGINE, EXAMPLES, HelpFormatter, verb_parser
from bitexact.identity import gpu_info, known_card_slugs
from bitexact.landing import GoldenLock, Landing, probe_append, probe_folder
from bitexact.names import name_option
from bitexact.options import (
    PromptOptions,
    add_prompt_options,
    report_tokenizer,
    resolve_prompts,
    settings_of,
)
from bitexact.output import emit, report_paths, write_comparison
from bitexact.report.fmt import compared_text, not_argmax_text
from bitexact.report.html import record_html
from bitexact.report.markdown import record_markdown
from bitexact.runs import Engines
from bitexact.sides import run_side
from bitexact.speccheck import REQUIREMENTS, check_spec, spec_summary
from bitexact.summary import comparison_summary

RECORD_FORCE = (
    "replace an existing golden; also start over in an --out that holds another command's run (the files "
    "bitexact's manifest there lists are moved aside into OUT/replaced/; files of yours stay)"
)


def add_parser(sub: Any) -> None:
    p = verb_parser(sub, "golden", help="golden records per card and recipe")
    verbs = p.add_subparsers(dest="golden_verb", required=True, metavar="{record,check}")
    for name, helptext in (
        ("record", "record a golden on this card"),
        ("check", "compare with this card's golden"),
    ):
        q = verbs.add_parser(name, help=helptext, formatter_class=HelpFormatter, epilog=EXAMPLES["golden"])
        q.add_argument("engine", help=ENGINE)
        q.add_argument(
            "--card",
            type=name_option,
            help="slug of the card the engine runs on (default: this machine's GPU, for engines in process "
            "or on 127.0.0.1; required for a server elsewhere, or where no GPU is visible)",
        )
        q.add_argument("--recipe", help="recipe JSON: its name keys the golden (default: $BITEXACT_RECIPE)")
        q.add_argument(
            "--recipe-name", type=name_option, help="key goldens by this name instead of a recipe file's"
        )
        q.add_argument(
            "--variant", type=name_option, default="recipe", help="the recipe variant the server runs"
        )
        q.add_argument(
            "--spec", choices=REQUIREMENTS, help="must the engine speculate? (default: from the variant)"
        )
        q.add_argument(
            "--golden-dir",
            type=Path,
            help="where goldens live (default: checks/golden of the repository holding the recipe file, "
            "or of the one around the current directory)",
        )
        q.add_argument("--golden", type=Path, help="the golden file itself (overrides --golden-dir)")
        q.add_argument(
            "--build-id",
            help="a name for this build in the history, e.g. `git rev-parse HEAD` of the flake "
            "(default: $BITEXACT_BUILD_ID)",
        )
        q.add_argument(
            "--build-info",
            type=Path,
            help="the server's build as `bitexact-server --build-info` prints it (SGLang, its patch series "
            "and tree digest, DeepGEMM, torch, triton, the server's store path); the history diffs "
            "builds by it (default: $BITEXACT_BUILD_INFO)",
        )
        q.add_argument(
            "--history",
            type=Path,
            help="the drift history this run appends a line to (default: history.jsonl beside the card's "
            "golden in --golden-dir; none for a golden named by --golden)",
        )
        q.add_argument(
            "--no-history", action="store_true", help="append nothing to a history (a scratch run)"
        )
        q.add_argument(
            "--inflight",
            type=count(1, MAX_IN_FLIGHT),
            default=1,
            help="requests in flight at once (HTTP engines); a capacity check sends many, so that the "
            "server batches them",
        )
        if name == "record":
            q.add_argument(
                "--new-card",
                action="store_true",
                help="record for a card the card table does not list (its --card slug becomes the golden's "
                "directory); without it an unknown slug is refused, since a typo would start a new card",
            )
        else:
            q.add_argument(
                "--allow-identity-mismatch",
                action="store_true",
                help="compare even when the server names another model or revision than the golden "
                "(same weights under another path, say); the mismatch is still shown in the report",
            )
        add_prompt_options(q, force=RECORD_FORCE if name == "record" else None)
        q.set_defaults(run=record if name == "record" else check)


def _request(args: argparse.Namespace, engine: EngineSpec) -> GoldenRequest:
    """What this golden verb asks, read once from its command line."""
    asked = PromptOptions(args.prompts, args.long, args.limit, args.tokenizer, args.vocab_size, args.seed)
    return GoldenRequest(
        engine=engine,
        card=args.card,
        recipe=args.recipe,
        recipe_name=args.recipe_name,
        variant=args.variant,
        spec=args.spec,
        golden_dir=args.golden_dir,
        golden=args.golden,
        prompts=asked,
        max_new_tokens=args.max_new_tokens,
        top_logprobs=args.top_logprobs,
    )


def _known_card(args: argparse.Namespace, card: str) -> None:
    """A golden keyed by a slug no table lists is refused unless --new-card says it is meant."""
    where = None if args.golden else golden_dir_of(args.golden_dir, args.recipe)
    known = known_card_slugs(where)
    if card not in known and not args.new_card:
        raise UsageError(
            f"--card {card!r} names no known card (known: {', '.join(known)}); check the spelling, or pass "
            "--new-card to start goldens for a card the table (docs/cards.md) does not list"
        )


def _components(
    args: argparse.Namespace,
    engine: EngineSpec,
    identity: dict[str, Any],
    build_info: dict[str, str],
    gpu: dict[str, Any] | None,
) -> dict[str, str]:
    """The build behind the values; the host's driver counts only for an engine on this machine (NVML is
    asked here when `gpu` is not already at hand)."""
    if not engine.local:
        gpu = {}
    elif gpu is None:
        gpu = gpu_info()
    return history.components(
        identity, build_info, gpu, bitexact_version=__version__, build_id=_build_id(args)
    )


def _golden_ref(path: Path, rec: dict[str, Any]) -> dict[str, Any]:
    build = rec["metadata"].get("build") or {}
    return {
        "path": str(path),
        "digest": rec["digest"],  # build_record writes it; load_golden has checked it
        "recorded": rec["metadata"].get("recorded"),
        "build": build.get("label"),
    }


def _history_target(args: argparse.Namespace, golden_file: Path) -> Path | None:
    """Where this run's history line goes, checked before anything runs (a history that cannot take the
    line must not fail the run after the golden is written): the card's history beside its golden; a
    golden named by --golden (a scratch reference) keeps none unless --history names one."""
    if args.no_history and args.history is not None:
        raise UsageError(f"--no-history and --history {args.history} say opposite things; give one of them")
    if args.no_history:
        return None
    if args.history is None and args.golden is not None:
        print(
            "bitexact: no history line written: --golden names a file, not a card's golden "
            "(pass --history FILE to keep one)",
            file=sys.stderr,
        )
        return None
    target = args.history or history.history_path(golden_file)
    history.check_target(target, golden_file)
    return target


def _build_info(args: argparse.Namespace) -> dict[str, str]:
    return history.read_build_info(args.build_info or env_path("BITEXACT_BUILD_INFO"))


def _build_id(args: argparse.Namespace) -> str | None:
    return args.build_id or env_value("BITEXACT_BUILD_ID")


def record(args: argparse.Namespace, engines: Engines) -> int:
    """One transaction (landing.py): the golden locked for the whole record, every destination proven
    writable before the engine runs, and the golden, its reports and its history line written together
    or not at all."""
    engine = engines["engine"]
    request = _request(args, engine)
    card, name, spec = golden_key(request)
    _known_card(args, card)
    path = golden_file(request, card, name)
    _not_there(args, path)
    replaceable(path, card=card, recipe=name)
    target = _history_target(args, path)
    probe_folder(path.parent, "--golden-dir/--golden")
    if target is not None:
        probe_append(target, "--history")
    with GoldenLock(path):
        _not_there(args, path)  # a record that held the lock until now may have written it
        return _record(args, request, card, name, spec, path, target)


def _not_there(args: argparse.Namespace, path: Path) -> None:
    if path.exists() and not args.force:
        raise UsageError(
            f"golden {shown(path)} exists; pass --force to replace it (or --golden FILE to write elsewhere)"
        )


def _record(
    args: argparse.Namespace,
    request: GoldenRequest,
    card: str,
    name: str,
    spec: str,
    path: Path,
    target: Path | None,
) -> int:
    engine = request.engine
    settings = settings_of(args.max_new_tokens, args.top_logprobs)
    prompts = resolve_prompts(request.prompts, [engine])
    build_info = _build_info(args)
    reports = report_paths(args.out, "golden-record")  # bitexact's in --out, or refused before the run
    gens, identity = run_side(
        engine, prompts, settings, args.out, "golden", args.inflight, tokenizer=args.tokenizer
    )
    check_spec(gens, spec, args.engine)
    gpu = gpu_info()
    found = _components(args, engine, identity, build_info, gpu)
    metadata = {
        "recorded": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "bitexact": __version__,
        "engine": args.engine,
        "engine_identity": identity,
        "build_id": _build_id(args),
        "build": {"label": history.build_label(found), "components": found},
        "gpu": gpu,
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
    summary: dict[str, Any] = {
        "verb": "golden record",
        "title": f"golden record: card {card}, recipe {name}",
        "path": str(path),
        "card": card,
        "recipe": name,
        "variant": args.variant,
        "engine": args.engine,
        "identity": identity,
        "settings": settings.to_json(),
        "spec": spec_summary(gens, spec),
        "prompts": len(prompts),
        "rows": [
            {
                "prompt_id": p.id,
                "prompt_tokens": len(p.input_ids) if p.input_ids is not None else None,
                "generated": len(g.token_ids),
                "first_tokens": ", ".join(str(t) for t in g.token_ids[:8]),
            }
            for p, g in zip(prompts, gens, strict=True)
        ],
    }
    landing = Landing()
    landing.file(reports[0], record_markdown(summary), "--out")
    landing.file(reports[1], record_html(summary), "--out")
    landing.file(path, record_text(rec), "--golden-dir/--golden")
    if target is not None:
        landing.line(target, history.line_text(history.entry(
            verdict="RECORDED", card=card, recipe=name, variant=args.variant, engine=args.engine,
            golden=_golden_ref(path, rec), found=found, summary=None, prompts=len(prompts),
        )), "--history")  # fmt: skip
    landing.land()
    summary["reports"] = [str(p) for p in reports]
    emit(
        summary,
        args.json,
        f"golden record: wrote {path} ({len(prompts)} prompts, card {card}, recipe {name})",
    )
    return 0


def _partial(checked: int, recorded: int) -> str:
    """What a check of some of a golden's prompts says of itself: it is not a check of the golden."""
    if checked == recorded:
        return ""
    return f" (a partial check: {checked} of the golden's {recorded} prompts)"


def check(args: argparse.Namespace, engines: Engines) -> int:
    engine = engines["engine"]
    selected = select_golden(_request(args, engine))
    card, name, spec, golden = selected.card, selected.recipe, selected.spec, selected.golden
    settings, prompts, expected = selected.settings, selected.prompts, selected.expected
    # a family's golden: say which card recorded it and which one checked (the same card: say it once)
    family = selected.recorded_by != card
    recorded = (
        f"recorded on card {selected.recorded_by}, checked on card {card}" if family else f"card {card}"
    )
    vet = selected.vet(args.engine, args.allow_identity_mismatch)
    report_paths(args.out, "golden-check")  # bitexact's in --out, or refused before the run
    build_info = _build_info(args)
    target = _history_target(args, golden.path)
    gens, identity = run_side(
        engine, prompts, settings, args.out, "check", args.inflight, tokenizer=args.tokenizer, vet=vet
    )
    check_spec(gens, spec, args.engine)
    summary = comparison_summary(
        verb="golden check",
        title=f"golden check: {args.engine} vs {golden.path} ({recorded}, recipe {name})",
        a={
            "engine": args.engine,
            "variant": args.variant,
            "identity": identity,
            "spec": spec_summary(gens, spec),
        },
        b={
            "engine": f"golden {golden.path}",
            "variant": golden.record.get("variant"),
            # the build by its label: its components repeat the engine identity shown beside it
            "identity": {
                **golden.record["metadata"],
                "build": (golden.record["metadata"].get("build") or {}).get("label"),
            },
        },
        settings=settings.to_json(),
        gens_a=gens,
        gens_b=expected,
        tokenizer=report_tokenizer(args.tokenizer, [engine]),
    )
    summary["reports"] = write_comparison(args.out, "golden-check", summary)
    summary["golden_prompts"] = len(golden.prompts)  # fewer checked: a partial check (the verdict says so)
    summary["recorded_card"], summary["checked_card"] = selected.recorded_by, card
    verdict = "EQUAL" if summary["differ"] == 0 else "DIFFERENT"
    found = _components(args, engine, identity, build_info, None)
    if target is not None:
        history.append(target, history.entry(
            verdict=verdict, card=card, recipe=name, variant=args.variant, engine=args.engine,
            golden=_golden_ref(golden.path, golden.record), found=found, summary=summary,
            prompts=len(prompts), golden_prompts=len(golden.prompts),
        ))  # fmt: skip
    emit(
        summary,
        args.json,
        f"golden check: {verdict}: {summary['equal']}/{summary['prompts']} prompts equal to {golden.path}"
        f"{f' ({recorded})' if family else ''}{_partial(len(prompts), len(golden.prompts))}"
        f"{not_argmax_text(summary)}; compared: {compared_text(summary['compared_values'])}; "
        f"report: {summary['reports'][1]}",
    )
    return 0 if summary["differ"] == 0 else 1
