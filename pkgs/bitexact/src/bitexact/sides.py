"""Running one side: an engine opened, the prompts run with results stored under --out keyed by the
engine's identity (not its engine string), the engine closed."""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bitexact import runs
from bitexact.engines.base import Engine, Settings
from bitexact.engines.factory import open_engine
from bitexact.engines.spec import EngineSpec
from bitexact.generation import Generation
from bitexact.ownership import take
from bitexact.prompts import Prompt, vocabulary_ids
from bitexact.results import ResultStore
from bitexact.runner import run_battery

# Identity fields that describe where or how an engine was reached, not what it computes: they show in
# reports but key no results (the URL names the results file; the launch command repeats the port; a
# restart changes the start time, and a restarted server computes the same).
REPORT_ONLY = ("url", "launch_command", "started")
# The verb whose results a results file's tag names (runs.py keeps one command per verb in an --out).
TAG_VERBS = {"A": "parity", "B": "parity", "golden": "golden-record", "check": "golden-check"}


def slug(text: str) -> str:
    """A file-name-safe form of an engine string; the hash keeps long strings with a common prefix apart."""
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:60]
    return f"{readable}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def identity_key(identity: dict[str, Any]) -> dict[str, Any]:
    """The part of an engine's identity that keys stored results."""
    return {k: v for k, v in identity.items() if k not in REPORT_ONLY}


def results_path(out: Path, tag: str, spec: EngineSpec) -> Path:
    """Named by the engine string without transport options, so `?retries=5` finds the same file."""
    return out / f"{tag}-{slug(spec.canonical)}.jsonl"


def run_side(
    spec: EngineSpec,
    prompts: list[Prompt],
    settings: Settings,
    out: Path,
    tag: str,
    inflight: int = 1,
    group: int | None = None,
    tokenizer: str | None = None,
    vet: Callable[[dict[str, Any]], None] | None = None,
    groups: list[list[Prompt]] | None = None,
    before_group: Callable[[Engine, list[Prompt]], None] | None = None,
) -> tuple[list[Generation], dict[str, Any]]:
    """Open the engine, run the prompts with results stored under `out`, close it. `vet` sees the engine's
    identity before any prompt runs and may refuse it (a golden of another model, say); `groups` and
    `before_group` (given the open engine) as run_battery takes them."""
    engine: Engine = open_engine(spec, inflight=inflight, tokenizer=tokenizer)
    if group is not None:
        engine.group_size = group
    try:
        identity = engine.identity()
        if vet is not None:
            vet(identity)
        store = keyed_store(out, tag, spec, identity, settings.to_json(), group=engine.group_size)
        hook = None if before_group is None else (lambda g: before_group(engine, g))
        vocabulary = vocabulary_ids(tokenizer) if tokenizer else None
        gens = run_battery(engine, prompts, settings, store, f"{tag} {spec.raw}", groups, hook, vocabulary)
    finally:
        engine.close()
    return gens, identity


def keyed_store(
    out: Path, tag: str, spec: EngineSpec, identity: dict[str, Any], settings: dict[str, Any], **extra: Any
) -> ResultStore:
    """The results file of engine `spec` under `out`, keyed by what the engine is (its identity, not the
    engine string) and what it was asked: rows of another build or other settings are set aside."""
    if spec.kind in ("sglang", "openai", "llamacpp") and not identity.get("version"):
        print(
            f"bitexact: {spec.raw}: the server reports no version; stored results cannot be told from "
            "another build's on this address: use a fresh --out after changing the server",
            file=sys.stderr,
        )
    # The command that holds --out (runs.py) keys the rows too: they were made in its company (its
    # prompt list and grouping), and a file of another command's rows is never resumed from.
    key = {
        "engine": spec.canonical,
        "identity": identity_key(identity),
        "settings": settings,
        "command": runs.claimed_digest(out, TAG_VERBS.get(tag, tag)),
        **extra,
    }
    return ResultStore(take(results_path(out, tag, spec)), {**key, "tag": tag})
