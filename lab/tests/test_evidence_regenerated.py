"""Every file an evidence folder says is regenerated (its claims.json, docs/evidence/README.md) is what
its command, a lab program, writes from the folder's raw results today: a change to the lab's summaries
shows as a diff against the committed evidence, not silently. Reads the raw results (marked
`evidence`)."""

from __future__ import annotations

import pytest
from checkhelpers.evidence_claims import EVIDENCE, ClaimError, Regenerated, folders, load, run_regenerated


def _regenerated() -> list[Regenerated]:
    out: list[Regenerated] = []
    for name in folders():
        try:
            out += load(name).regenerated
        except ClaimError:
            continue  # a malformed claims.json fails the checks' claims test, which names it
    return out


REGENERATED = _regenerated()


@pytest.mark.evidence
def test_some_folder_names_a_regenerated_file() -> None:
    assert REGENERATED, "no evidence folder names a regenerated file: is the claims reader finding them?"


@pytest.mark.evidence
@pytest.mark.parametrize("item", REGENERATED, ids=lambda r: f"{r.folder}:{r.file}")
def test_each_regenerated_file_is_its_commands_output(item: Regenerated) -> None:
    assert run_regenerated(item) == (EVIDENCE / item.folder / item.file).read_text(), (
        f"{item.folder}/{item.file} is not what `python -m {' '.join(item.command)}` writes today: rerun it "
        "and commit"
    )
