"""Results appended to JSONL as they come, so a crash or Ctrl-C loses nothing that finished.

The first line of a file is its header: the run key (the engine's identity as it reports itself, the
settings that change results, the grouping) and the fields it was made from. A rerun with the same key
skips prompts that already have a line; a rerun with another key (another build behind the same
address, other settings) reuses nothing: the old file is moved aside, never deleted, and the run
starts fresh. A line torn by a crash mid-write is moved aside too, so that the next result is never
glued to it, and its prompt is redone."""

from __future__ import annotations

import datetime
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

from bitexact import strictjson
from bitexact.files import append_line, atomic_write_text, dumps
from bitexact.generation import Generation
from bitexact.ownership import aside_folder
from bitexact.prompts import Prompt

KIND = "bitexact-results"
SCHEMA = 2


def run_key(fields: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts as one dict of dotted keys (`identity.model_path`); other values as they are."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


def key_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What differs between two key field sets, as `field: old -> new` (JSON values)."""
    a, b = flatten(old), flatten(new)
    return [
        f"{k}: {json.dumps(a.get(k))} -> {json.dumps(b.get(k))}"
        for k in sorted(set(a) | set(b))
        if a.get(k) != b.get(k)
    ]


def _stamp() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S%fZ")


def _say(message: str) -> None:
    print(f"bitexact: {message}", file=sys.stderr)


class ResultStore:
    def __init__(self, path: Path, key_fields: dict[str, Any]) -> None:
        self.path = path
        self.key_fields = key_fields
        self.key = run_key(key_fields)

    def _aside(self, suffix: str) -> Path:
        target = aside_folder(self.path.parent) / f"{self.path.stem}.{_stamp()}{suffix}"
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def _replace_file(self, why: str) -> None:
        target = self._aside(self.path.suffix)
        self.path.replace(target)
        _say(f"{self.path}: {why}; none of its rows are reused: moved to {target}, starting fresh")

    def _cut_torn_tail(self, data: bytes) -> bytes:
        """A last line without its newline is a write a crash cut short: keep the fragment aside, cut
        it from the file (so the next result starts on a line of its own), and say which prompt is
        redone."""
        start = data.rfind(b"\n") + 1
        fragment = data[start:]
        target = self._aside(".torn")
        target.write_bytes(fragment)
        with self.path.open("r+b") as handle:
            handle.truncate(start)
        found = re.match(rb'\{"id": ("(?:[^"\\]|\\.)*")', fragment)
        who = f"prompt {json.loads(found.group(1))!r}" if found else "its prompt"
        _say(
            f"{self.path}: the last line was torn (a crash mid-write, {len(fragment)} bytes); "
            f"{who} is redone; the fragment is kept in {target}"
        )
        return data[:start]

    def load_rows(self, digests: dict[str, str], field: str) -> dict[str, Any]:
        """`field` of every stored row of this run whose item id and prompt digest are in `digests`."""
        if not self.path.exists():
            return {}
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            data = self._cut_torn_tail(data)
        lines = strictjson.lines(data.decode("utf-8", errors="replace"))
        try:
            header = strictjson.loads(lines[0][1]) if lines else None
        except strictjson.StrictJSONError:
            header = None
        if not isinstance(header, dict) or header.get("kind") != KIND:
            if lines:
                self._replace_file("no bitexact results header (an older bitexact, or another file)")
            else:
                self.path.unlink()  # empty: nothing to keep
            return {}
        if header.get("run") != self.key:
            changes = key_changes(header.get("key") or {}, self.key_fields)
            self._replace_file("made by another engine identity or settings (" + "; ".join(changes) + ")")
            return {}
        found: dict[str, Any] = {}
        for number, line in lines[1:]:
            try:
                row = strictjson.loads(line)
                item, payload = str(row["id"]), row[field]
            except (strictjson.StrictJSONError, KeyError, TypeError):
                _say(f"{self.path}:{number}: unreadable line skipped; its prompt is redone")
                continue
            if row.get("run") == self.key and digests.get(item) == row.get("prompt_digest"):
                found.setdefault(item, payload)
        return found

    def append_row(self, item: str, prompt_digest: str, field: str, payload: Any) -> None:
        """One row, written whole. The header goes first into a new (or emptied) file."""
        prefix = ""
        if not self.path.exists() or self.path.stat().st_size == 0:
            header = {"kind": KIND, "schema": SCHEMA, "run": self.key, "key": self.key_fields}
            prefix = dumps(header, sort_keys=True) + "\n"
        row = {"id": item, "run": self.key, "prompt_digest": prompt_digest, field: payload}
        self._write(prefix + dumps(row) + "\n")

    def load(self, prompts: list[Prompt]) -> dict[str, Generation]:
        """Finished generations of this run for these prompts."""
        rows = self.load_rows({p.id: p.digest() for p in prompts}, "generation")
        done: dict[str, Generation] = {}
        for item, payload in rows.items():
            try:
                done[item] = Generation.from_json(payload)
            except (KeyError, TypeError, ValueError) as error:
                _say(f"{self.path}: the stored result of {item!r} is unreadable ({error}); it is redone")
        return done

    def append(self, prompt: Prompt, generation: Generation) -> None:
        self.append_row(prompt.id, prompt.digest(), "generation", generation.to_json())

    def withdraw(self, items: set[str], why: str) -> int:
        """Take the rows of `items` out of the file, so that a rerun asks them again: rows a refusal rests
        on (a cold answer that shows cache hits) would otherwise be resumed on every rerun, and the
        refusal could never clear. They are kept aside (`replaced/<stem>.<stamp>.withdrawn`), never
        deleted. How many rows were taken out."""
        if not items or not self.path.exists():
            return 0
        # bitexact writes its rows as ASCII JSON; a line of other bytes was never readable
        lines = self.path.read_bytes().decode("utf-8", errors="replace").split("\n")
        kept, taken = [], []
        for number, line in enumerate(lines):
            try:
                row = strictjson.loads(line) if number and line.strip() else None
            except strictjson.StrictJSONError:
                row = None  # unreadable: skipped on load anyway, left as it is
            (taken if isinstance(row, dict) and row.get("id") in items else kept).append(line)
        if not taken:
            return 0
        target = self._aside(".withdrawn")
        atomic_write_text(target, "\n".join(taken) + "\n")
        atomic_write_text(self.path, "\n".join(kept))
        _say(
            f"{self.path}: {len(taken)} stored answers withdrawn ({why}); a rerun asks them again; they are "
            f"kept in {target}"
        )
        return len(taken)

    def _write(self, text: str) -> None:
        append_line(self.path, text, "the results written before are kept and a rerun resumes from them")
