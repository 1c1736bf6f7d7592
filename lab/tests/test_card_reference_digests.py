"""lab/card/reference_digests.py on the card's real goldens (checks/golden/h200, recorded on the H200):
the digests it writes are the ones bitexact stored in the record at record time, and a record whose
values were edited after recording is refused rather than digested."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bitexact.golden import record_digest

REPO = Path(__file__).resolve().parents[2]
TOOL = ["-m", "lab.card.reference_digests"]
GOLDEN = REPO / "checks" / "golden" / "h200" / "e2e-tiny-hybrid-long.json"


def _run(path: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, *TOOL, str(path), "--note", "a test"]
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def test_the_digests_are_the_ones_recorded_with_the_golden() -> None:
    done = _run(GOLDEN)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    record = json.loads(GOLDEN.read_text())
    assert (out["note"], out["card"], out["recipe"]) == ("a test", "h200", "e2e-tiny-hybrid-long")
    assert out["variant"] == record["variant"] and out["settings"] == record["settings"]
    stored = {p["prompt"]["id"]: p for p in record["prompts"]}
    assert [p["id"] for p in out["prompts"]] == list(stored) and len(stored) == 3
    for prompt in out["prompts"]:
        assert prompt["digests"] == stored[prompt["id"]]["digests"], prompt["id"]
        assert prompt["positions"] == len(stored[prompt["id"]]["token_ids"]) == 64


def test_an_edited_record_is_refused(tmp_path: Path) -> None:
    record = json.loads(GOLDEN.read_text())
    record["prompts"][0]["logprobs"][0] += 1.0  # one value moved after recording
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(record))
    done = _run(edited)
    assert done.returncode == 2 and done.stdout == ""
    assert str(edited) in done.stderr


def test_a_file_that_is_no_record_is_named(tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_text("[1, 2]")
    done = _run(other)
    assert done.returncode == 2 and f"{other}: not a golden record" in done.stderr


def test_a_missing_file_is_named_as_unreadable(tmp_path: Path) -> None:
    done = _run(tmp_path / "absent.json")
    assert done.returncode == 2 and "absent.json: cannot read it" in done.stderr


def test_a_consistent_record_without_its_variant_is_refused(tmp_path: Path) -> None:
    record = json.loads(GOLDEN.read_text())
    del record["variant"]
    record["digest"] = record_digest(record)  # bitexact's own loader then accepts it
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps(record))
    done = _run(partial)
    assert done.returncode == 2 and done.stdout == ""
    assert f"{partial}: the golden record lacks variant" in done.stderr
