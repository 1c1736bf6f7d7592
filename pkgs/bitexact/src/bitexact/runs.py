"""One command per verb in an --out. A run records the command that made its part of --out
(`<out>/.bitexact-run.json`: per verb, every option that shapes what it writes, engines without their
transport options), and another command of that verb is refused there, before anything runs: its
reports would replace the first one's, and a resume with other settings (`repeat -n 2`, then `-n 3`)
would reuse rows made in other company. Verbs name their files apart (parity `A-*`, `B-*` and
`parity*`, repeat `repeat*`, golden record `golden*`, golden check `check-*` and `golden-check*`, bench
`bench*`, history `history-*`, warm `warm*`: FILES), so a record, a check of it and a warm run against it
may share one --out; no option names a report into another verb's files (`parity --name golden-record`
would replace the record's report). Which files are bitexact's is never told by these names but by the
manifest each run writes (ownership.py): `--force` moves the files the manifest lists aside (into
`<out>/replaced/`, never deleted) and starts the new run; files of the user's there (`--out .` in a
project, the prompt file kept beside its reports, a `parity-notes.md` of their own) stay where they
are, and the message names them.

Without --out, each command gets its own folder, `bitexact-out/<verb>-<digest of the command>`: the same
command again finds its results there and resumes, another command never meets them."""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bitexact import strictjson
from bitexact.engines.spec import EngineSpec
from bitexact.errors import UsageError
from bitexact.files import LOCK_NAME, atomic_write_text, dumps, read_text
from bitexact.ownership import ASIDE, MANIFEST, aside_folder, forget, not_ours, ours_there

RECORD_NAME = ".bitexact-run.json"
KIND = "bitexact-run"
DEFAULT_ROOT = Path("bitexact-out")
# Options that shape nothing in --out: where it is, how the verdict is shown, whether to start over,
# and where a history line goes and what it names (the history is outside --out).
NOT_IDENTITY = {"out", "json", "force", "run", "history", "no_history", "build_id", "build_info"}
ENGINE_OPTIONS = ("a", "b", "engine")
# A command's engine options, each parsed once (given_engines), by option name.
Engines = dict[str, EngineSpec]
# The names each verb gives its files in an --out (results, reports), by prefix: kept apart between verbs
# (report_stem); which files are bitexact's is the manifest's to say (ownership.py), never these.
FILES = {
    "parity": ("A-", "B-", "parity"),
    "repeat": ("repeat",),
    "golden-record": ("golden",),
    "golden-check": ("check-", "golden-check"),
    "bench": ("bench",),
    "history": ("history-",),
    "warm": ("warm",),
}


def owner(name: str) -> str | None:
    """The verb whose files `name` (a file in an --out) is among, or None for a file no verb writes."""
    return next((verb for verb, starts in FILES.items() if name.startswith(starts)), None)


def report_stem(verb: str, stem: str, option: str) -> str:
    """`stem` for `verb`'s reports, if no other verb's files are named so (UsageError otherwise)."""
    other = owner(stem)
    if other is not None and other != verb:
        raise UsageError(
            f"{option} {stem!r}: `bitexact {other.replace('-', ' ')}` names its files so, and its report in "
            f"the same --out would be replaced; give another name (e.g. {verb}-{stem})"
        )
    return stem


# Options given as text that name a file or folder (a --tokenizer of `bytes` or `bytes:N` names none).
PATH_OPTIONS = ("prompts", "tokenizer")


def _names_a_path(name: str, value: Any) -> bool:
    if isinstance(value, Path):
        return True
    if name not in PATH_OPTIONS or not isinstance(value, str) or not value:
        return False
    return not (name == "tokenizer" and (value == "bytes" or value.startswith("bytes:")))


def _value(name: str, value: Any, engines: Engines) -> Any:
    """An option's value as it keys --out and the results there: what it names, not how it is spelled.
    An engine without its transport options; a path resolved (`p.jsonl`, `./p.jsonl`, `../x/p.jsonl` and
    a link to it name one file), so that a rerun spelled otherwise resumes instead of being refused."""
    if name in engines:
        return engines[name].canonical  # `?retries=5` waits differently, computes the same
    if _names_a_path(name, value):
        return os.path.realpath(value)
    return value


@dataclass(frozen=True)
class Command:
    """A bitexact command as it shapes --out: its verb (`golden-check`, say), its identity (run_identity),
    whether --force was given, and its command line as typed (the run record shows it)."""

    verb: str
    identity: dict[str, Any]
    force: bool
    argv: tuple[str, ...]


def run_identity(options: dict[str, Any], engines: Engines) -> dict[str, Any]:
    """The command as it shapes --out: the verb and its options (name to value, as parsed), less those
    that do not. `engines`: the command's engine options as parsed (cli.given_engines)."""
    return {
        name: _value(name, value, engines)
        for name, value in sorted(options.items())
        if name not in NOT_IDENTITY and not callable(value)
    }


def digest(identity: dict[str, Any]) -> str:
    return hashlib.sha256(dumps(identity, sort_keys=True, default=str).encode()).hexdigest()


def verb_of(verb: str, sub_verb: str | None) -> str:
    """`golden check` is `golden-check`."""
    return "-".join(v for v in (verb, sub_verb) if v)


def default_out(verb: str, identity: dict[str, Any]) -> Path:
    """The command's own folder under bitexact-out/, where no --out is given."""
    return DEFAULT_ROOT / f"{verb}-{digest(identity)[:8]}"


def _read(path: Path) -> dict[str, Any] | None:
    try:
        record = strictjson.loads(read_text(path, "--out", "a run record written by bitexact"))
    except (strictjson.StrictJSONError, UsageError):
        return None
    return record if isinstance(record, dict) and record.get("kind") == KIND else None


def _changes(old: dict[str, Any], new: dict[str, Any]) -> str:
    names = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    shown = [
        f"{k}: {json.dumps(old.get(k), default=str)} -> {json.dumps(new.get(k), default=str)}" for k in names
    ]
    return "; ".join(shown[:4]) + ("; ..." if len(shown) > 4 else "")


def _move_aside(out: Path) -> tuple[Path, list[str]]:
    """The files the manifest lists (but the folder they go to) moved into `replaced/run-STAMP/`, and the
    run record with them; returns that folder and the names left in place (the user's)."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S%fZ")
    aside = aside_folder(out)
    target = aside / f"run-{stamp}"
    target.mkdir(parents=True)
    moved = set()
    for entry in ours_there(out):
        if entry.name != aside.name:
            entry.replace(target / entry.name)
            moved.add(entry.name)
    if (out / RECORD_NAME).exists():
        (out / RECORD_NAME).replace(target / RECORD_NAME)
    forget(out, moved)
    return target, not_ours(out, (LOCK_NAME, RECORD_NAME, aside.name))


def claim(out: Path, command: Command) -> None:
    """Make `out` this command's for its verb, or refuse: another command of the verb ran there
    (UsageError naming it, the options that differ, a new --out and --force). With --force what --out
    holds is moved aside first. A record whose run wrote nothing (it was refused before it began) holds
    nothing to protect; an --out of files without a record (an older bitexact's) is taken as it is."""
    identity, verb, force = command.identity, command.verb, command.force
    path = out / RECORD_NAME
    there = path.exists() or path.is_symlink()
    record = _read(path) if there else None
    wrote = any(entry.name != ASIDE for entry in ours_there(out))
    runs = dict(record["runs"]) if record is not None and isinstance(record.get("runs"), dict) else {}
    mine = runs.get(verb)
    if there and wrote and (record is None or (isinstance(mine, dict) and mine.get("identity") != identity)):
        if record is None and not force:
            raise UsageError(
                f"--out {out}: {path.name} is not a run record bitexact can read; give a new --out, or "
                f"pass --force to move bitexact's files there (those {MANIFEST} lists) aside into "
                f"{out / ASIDE}/"
            )
        if isinstance(mine, dict) and not force:
            raise UsageError(
                f"--out {out} holds the run of another `bitexact {verb.replace('-', ' ')}` command "
                f"(`{mine.get('command')}`; {_changes(mine.get('identity') or {}, identity)}): its reports "
                "and results would be replaced or mixed with this one's. Give this run a new --out (or "
                f"none: each command gets its own folder under {DEFAULT_ROOT}/), or pass --force to move "
                f"bitexact's files in --out (those {MANIFEST} lists) aside into {out / ASIDE}/ and "
                "start this one"
            )
        moved, kept = _move_aside(out)
        runs = {}
        yours = (
            f"; files of yours there stay untouched, whatever their names ({', '.join(kept[:5])}"
            f"{', ...' if len(kept) > 5 else ''}: {MANIFEST} does not list them)"
            if kept
            else ""
        )
        print(
            f"bitexact: --force: the files bitexact wrote in {out} (those {MANIFEST} lists) are moved to "
            f"{moved}{yours}",
            file=sys.stderr,
        )
    if not wrote:
        runs = {}
    runs[verb] = {
        "command": shlex.join(["bitexact", *command.argv]),
        "identity": identity,
        "digest": digest(identity),
    }
    atomic_write_text(path, dumps({"kind": KIND, "runs": runs}, indent=1, sort_keys=True) + "\n")


def claimed_digest(out: Path, verb: str) -> str | None:
    """The digest of the command of `verb` that holds `out` (what its results files record), if any."""
    record = _read(out / RECORD_NAME) if (out / RECORD_NAME).is_file() else None
    runs = record.get("runs") if record is not None else None
    mine = runs.get(verb) if isinstance(runs, dict) else None
    return mine.get("digest") if isinstance(mine, dict) else None
