"""A results folder's layout, as `measure` writes it and `summarize` and targets.py read it: one folder per
server, its bench rows (bench.json and tagged ones) and its decode profiles by context length."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PROFILE_PROMPT = 2200  # the profile length of results written before profiles at every length


def breakdown_files(folder: Path) -> dict[int, Path]:
    """Profile length -> its breakdown JSON in a server folder (the legacy single profile as 2200)."""
    found = {int(p.stem.split("-", 1)[1]): p for p in folder.glob("breakdown-*.json")}
    legacy = folder / "breakdown.json"
    if legacy.exists() and PROFILE_PROMPT not in found:
        found[PROFILE_PROMPT] = legacy
    return dict(sorted(found.items()))


def load_json(folder: Path, name: str) -> Any:
    """A JSON file of a server folder, None where the stage that writes it did not run."""
    path = folder / name
    return json.loads(path.read_text()) if path.exists() else None


def bench_rows(folder: Path) -> list[dict[str, Any]]:
    """Rows of every bench of a server (bench.json, and tagged ones such as bench-128k.json)."""
    return [
        r for path in sorted(folder.glob("bench*.json")) for r in json.loads(path.read_text()).get("rows", [])
    ]
