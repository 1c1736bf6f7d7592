"""Results appended to JSONL as they come, so a crash or Ctrl-C loses nothing that finished.

Each line carries the run key (engine, settings, grouping) and the prompt's digest; a rerun with the
same key skips prompts that already have a line."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from bitexact.generation import Generation
from bitexact.prompts import Prompt


def run_key(fields: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


class ResultStore:
    def __init__(self, path: Path, key_fields: dict[str, Any]) -> None:
        self.path = path
        self.key_fields = key_fields
        self.key = run_key(key_fields)

    def load(self, prompts: list[Prompt]) -> dict[str, Generation]:
        """Finished results of this run for these prompts (a torn last line from a crash is skipped)."""
        if not self.path.exists():
            return {}
        digests = {p.id: p.digest() for p in prompts}
        done: dict[str, Generation] = {}
        for number, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if row.get("run") != self.key:
                    continue
                gen = Generation.from_json(row["generation"])
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                print(
                    f"bitexact: {self.path}:{number}: unreadable line skipped (torn write?)", file=sys.stderr
                )
                continue
            if digests.get(gen.prompt_id) == row.get("prompt_digest"):
                done.setdefault(gen.prompt_id, gen)
        return done

    def append(self, prompt: Prompt, generation: Generation) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        row = {"run": self.key, "prompt_digest": prompt.digest(), "generation": generation.to_json()}
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
