"""Every evidence folder's claims (docs/evidence/<folder>/claims.json, docs/evidence/README.md): each
figure the pages quote is the one its raw file holds, and the pages quote it as stated. A new campaign
adds a folder with its claims.json, and no test file.

Two halves, so that the offline flake check, whose source carries the claims and the pages but no raw
result, runs the first:
- every folder has a well-formed claims.json, and every page a claim names holds the figure;
- (marked `evidence`: it reads the raw results) every figure is the raw file's value, every reference
  the folder names carries the committed golden's per-prompt digests. That every regenerated file is
  what its command (a lab program) writes from the folder today is the lab's test
  (lab/tests/test_evidence_regenerated.py).
The checker itself is tested on small folders written here, each shown to fail when a figure, a page or
a digest moves.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bitexact.golden import digests, load_golden
from checkhelpers.evidence_claims import (
    CLAIMS,
    EVIDENCE,
    REPO,
    Claim,
    ClaimError,
    DigestCheck,
    Folder,
    Regenerated,
    figure,
    folders,
    load,
    normalised,
    quoted_text,
    read_raw,
    run_regenerated,
    stated,
)


def _loaded() -> dict[str, Folder | ClaimError]:
    out: dict[str, Folder | ClaimError] = {}
    for name in folders():
        try:
            out[name] = load(name)
        except ClaimError as e:
            out[name] = e
    return out


LOADED = _loaded()
GOOD = [f for f in LOADED.values() if isinstance(f, Folder)]
ALL_CLAIMS = [c for f in GOOD for c in f.claims]
ALL_DIGESTS = [d for f in GOOD for d in f.digests]


def _page(rel: str, repo: Path = REPO) -> str:
    path = repo / rel
    assert path.is_file(), f"{rel}: no such page (a claim names it)"
    return normalised(path.read_text())


def check_quoted(claim: Claim, repo: Path = REPO) -> None:
    for quote in claim.quoted:
        want = quoted_text(quote, claim)
        if want not in _page(quote.page, repo):  # raised, not asserted: pytest would print the page
            raise AssertionError(
                f"{quote.page} does not quote {claim.name} as {want!r}: update the page, or the claim if the "
                "figure changed with a new run"
            )


def check_raw(claim: Claim, root: Path = EVIDENCE) -> None:
    raw = figure(claim, read_raw(claim, root))
    assert raw == stated(claim), (
        f"{claim.name}: the claim says {stated(claim)!r}, {claim.file} holds {raw!r}"
        f" ({claim.source} {claim.selector!r}): fix the claim and the pages that quote it"
    )


def _prompt_digests(path: Path, card: str, recipe: str) -> dict[str, dict[str, str]]:
    """Per-prompt digests: a *.digests.json's as committed, a full record's recomputed from its values."""
    data = json.loads(path.read_text())
    if data.get("prompts") and "id" in data["prompts"][0]:
        return {p["id"]: p["digests"] for p in data["prompts"]}
    record = load_golden(path, card=card, recipe=recipe)
    return {gen.prompt_id: digests(gen) for gen in record.generations}


def check_digests(check: DigestCheck, root: Path = EVIDENCE, repo: Path = REPO) -> None:
    golden_path = repo / check.golden
    golden = json.loads(golden_path.read_text())
    path = root / check.folder / check.file
    new = json.loads(path.read_text())
    where = f"{check.folder}/{check.file}"
    assert new["settings"] == golden["settings"], f"{where}: other settings than {check.golden}"
    ours = _prompt_digests(path, new["card"], new["recipe"])
    theirs = _prompt_digests(golden_path, golden["card"], golden["recipe"])
    assert sorted(ours) == sorted(theirs), f"{where}: other prompts than {check.golden}"
    assert len(ours) == check.prompts, f"{where}: {len(ours)} prompts, the claims say {check.prompts}"
    differ = sorted(p for p in ours if ours[p] != theirs[p])
    assert not differ, f"{where}: prompts {differ} differ from {check.golden} in their digests"


# --- every folder, against its pages (runs in the offline flake check too) ---


@pytest.mark.parametrize("name", sorted(LOADED))
def test_every_folder_carries_well_formed_claims(name: str) -> None:
    loaded = LOADED[name]
    if isinstance(loaded, ClaimError):
        pytest.fail(str(loaded))


@pytest.mark.parametrize("claim", ALL_CLAIMS, ids=lambda c: c.name)
def test_each_claim_is_quoted_by_its_pages(claim: Claim) -> None:
    check_quoted(claim)


# --- against the raw results (not in the offline flake check's source) ---


@pytest.mark.evidence
@pytest.mark.parametrize("claim", ALL_CLAIMS, ids=lambda c: c.name)
def test_each_claim_is_its_raw_files_value(claim: Claim) -> None:
    check_raw(claim)


@pytest.mark.evidence
@pytest.mark.parametrize("check", ALL_DIGESTS, ids=lambda d: f"{d.folder}:{d.file}")
def test_each_reference_carries_the_goldens_digests(check: DigestCheck) -> None:
    check_digests(check)


# --- the checker on small folders written here ---


def _write_folder(tmp: Path, claims: dict) -> tuple[Path, Path]:
    repo, root = tmp, tmp / "docs" / "evidence"
    (root / "run").mkdir(parents=True)
    (root / "run" / "verdicts.jsonl").write_text(
        json.dumps({"name": "gpu-repeat", "results": [{"summary": {"compared": 1176, "divergent": 0}}]})
        + "\n"
        + json.dumps({"name": "gpu-golden", "exit": 0})
        + "\n"
    )
    (root / "run" / "summary.md").write_text("| 640 | 257.3 | 0.10 |\n")
    (root / "run" / CLAIMS).write_text(json.dumps(claims))
    (repo / "docs" / "e2e.md").write_text("gpu-repeat: **0 of\n1176** answers differ; 257.3 t/s at 640.\n")
    return repo, root


QUOTE = {"page": "docs/e2e.md", "text": "**0 of {value}** answers"}
REPEAT = {"id": "repeat-compared", "value": 1176, "file": "verdicts.jsonl", "quoted": [QUOTE]}


def test_a_pointer_selects_by_name_and_the_page_may_break_the_line(tmp_path: Path) -> None:
    claim = {**REPEAT, "pointer": "/name=gpu-repeat/results/0/summary/compared"}
    rate = {
        "id": "rate-640",
        "value": "257.3",
        "file": "summary.md",
        "line": r"^\| 640 \| ([\d.]+) \|",
        "quoted": [{"page": "docs/e2e.md", "text": "{value} t/s at 640"}],
    }
    repo, root = _write_folder(tmp_path, {"claims": [claim, rate]})
    for c in load("run", root).claims:
        check_raw(c, root)
        check_quoted(c, repo)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"value": 1175}, "the claim says '1175', verdicts.jsonl holds '1176'"),
        ({"pointer": "/name=gpu-nope/exit"}, "0 entries with name == 'gpu-nope'"),
        ({"file": "*.json"}, "must match one file of the folder, it matches []"),
    ],
)
def test_a_figure_its_file_does_not_hold_fails(tmp_path: Path, change: dict, message: str) -> None:
    claim = {**REPEAT, "pointer": "/name=gpu-repeat/results/0/summary/compared", **change}
    _repo, root = _write_folder(tmp_path, {"claims": [claim]})
    (loaded,) = load("run", root).claims
    with pytest.raises((AssertionError, ClaimError), match=message.replace("[", r"\[").replace("]", r"\]")):
        check_raw(loaded, root)


def test_a_page_that_quotes_another_figure_fails(tmp_path: Path) -> None:
    claim = {**REPEAT, "pointer": "/0/results/0/summary/compared"}
    repo, root = _write_folder(tmp_path, {"claims": [claim]})
    (repo / "docs" / "e2e.md").write_text("gpu-repeat: **0 of 1175** answers differ\n")
    (loaded,) = load("run", root).claims
    check_raw(loaded, root)
    with pytest.raises(
        AssertionError, match=r"docs/e2e.md does not quote run:repeat-compared as '\*\*0 of 1176"
    ):
        check_quoted(loaded, repo)


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        (None, "missing; every evidence folder carries"),
        ({"claims": []}, "no claims: give `unquoted`"),
        ({"claims": [{**REPEAT}]}, "give exactly one of pointer, line, bench, got none"),
        ({"claims": [{**REPEAT, "line": "no group"}]}, "exactly one group"),
        ({"claims": [{**REPEAT, "pointer": "/0", "quoted": []}]}, "`quoted` must list the pages"),
        (
            {"claims": [{**REPEAT, "pointer": "/0", "quoted": [{"page": "docs/x.md", "text": "x"}]}]},
            "{value}",
        ),
        (
            {"claims": [{**REPEAT, "pointer": "/0", "quoted": [{"page": "x.md", "text": "{value}"}]}]},
            "page 'x.md'",
        ),
        ({"claims": [{**REPEAT, "pointer": "/0", "id": "Repeat"}]}, "lower-case words"),
        ({"claims": [{**REPEAT, "pointer": "/0", "value": True}]}, "must be a string or a number"),
        ({"claims": [{**REPEAT, "pointer": "/0"}, {**REPEAT, "pointer": "/1"}]}, "given twice"),
        ({"claims": [], "unquoted": "x", "figures": 1}, "keys among"),
    ],
)
def test_a_malformed_claims_file_is_refused_naming_the_fix(
    tmp_path: Path, claims: dict | None, message: str
) -> None:
    _repo, root = _write_folder(tmp_path, claims or {})
    if claims is None:
        (root / "run" / CLAIMS).unlink()
    with pytest.raises(ClaimError, match=message.replace("{", r"\{").replace("}", r"\}")):
        load("run", root)


def test_a_reference_whose_digest_moved_fails(tmp_path: Path) -> None:
    golden = json.loads((REPO / "checks" / "golden" / "h200" / "e2e-tiny-hybrid-long.json").read_text())
    record = {
        **{k: golden[k] for k in ("card", "recipe", "settings")},
        "prompts": [{"id": p["prompt"]["id"], "digests": p["digests"]} for p in golden["prompts"]],
    }
    root = tmp_path / "evidence"
    (root / "run").mkdir(parents=True)
    (root / "run" / "ref.digests.json").write_text(json.dumps(record))
    check = DigestCheck("run", "ref.digests.json", "checks/golden/h200/e2e-tiny-hybrid-long.json", 3)
    check_digests(check, root)
    record["prompts"][1]["digests"] = {**record["prompts"][1]["digests"], "logprobs": "0" * 64}
    (root / "run" / "ref.digests.json").write_text(json.dumps(record))
    with pytest.raises(AssertionError, match=f"prompts \\['{record['prompts'][1]['id']}'\\] differ"):
        check_digests(check, root)
    with pytest.raises(AssertionError, match="3 prompts, the claims say 24"):
        check_digests(DigestCheck("run", "ref.digests.json", check.golden, 24), root)


def test_a_regenerated_file_is_compared_with_what_its_command_prints(tmp_path: Path) -> None:
    (tmp_path / "upper.py").write_text(
        "import sys; print(open(sys.argv[1] + '/in.txt').read().upper(), end='')\n"
    )
    (tmp_path / "ev" / "run").mkdir(parents=True)
    (tmp_path / "ev" / "run" / "in.txt").write_text("row\n")
    item = Regenerated("run", "out.txt", ("upper", "{folder}"))
    assert run_regenerated(item, tmp_path / "ev", tmp_path) == "ROW\n"


def test_the_figures_page_is_what_the_claims_say() -> None:
    """docs/figures.md lists every figure the reference pages quote, with its run, file and field, as
    checkhelpers/figures_page.py writes it from the claims: a changed claim or page shows here."""
    from checkhelpers import figures_page

    assert (REPO / "docs" / "figures.md").read_text() == figures_page.page(), (
        "docs/figures.md is stale: run python -m checkhelpers.figures_page --write docs/figures.md"
    )
