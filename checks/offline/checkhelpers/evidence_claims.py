"""The claims of the evidence folders (docs/evidence/<folder>/claims.json; the schema is
docs/evidence/README.md's): read, checked for shape, and each figure read back from its raw file and
found in the pages that quote it. checks/offline/test_evidence_claims.py runs these over every folder.

A claim's figure is compared as text: the raw value through the claim's `format` (a Python format
spec) where it has one, else a string as it is and a number as JSON writes it; the page must hold the
claim's `text` with `{value}` replaced by the figure, white space normalised (a figure may be quoted
across a line break).
"""

from __future__ import annotations

import fnmatch
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bitexact.engines.base import Timing

from checkhelpers.repo import REPO

EVIDENCE = REPO / "docs" / "evidence"
CLAIMS = "claims.json"
SOURCES = ("pointer", "line", "bench")
CLAIM_KEYS = {"id", "value", "file", "format", "quoted", "why", *SOURCES}
FOLDER_KEYS = {"claims", "digests", "regenerated", "unquoted"}
BENCH_FIGURES = ("decode_tps", "ttft_s")
ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


class ClaimError(Exception):
    """A claims.json that does not follow the schema, or a figure its file or page does not hold."""


@dataclass(frozen=True)
class Quote:
    page: str  # repository-relative: README.md, docs/<page>.md or docs/evidence/<folder>/results.md
    text: str  # holds {value}


@dataclass(frozen=True)
class Claim:
    folder: str
    id: str
    value: str | int | float
    file: str  # inside the folder; a glob must match exactly one file
    source: str  # one of SOURCES
    selector: Any  # the pointer, the line pattern, or {"prompt_tokens": N, "figure": F}
    format: str | None
    quoted: tuple[Quote, ...]

    @property
    def name(self) -> str:
        return f"{self.folder}:{self.id}"


@dataclass(frozen=True)
class DigestCheck:
    """A reference recorded in the run whose per-prompt digests equal a committed golden's."""

    folder: str
    file: str  # a *.digests.json or a full golden record, inside the folder
    golden: str  # repository-relative, e.g. checks/golden/h200/e2e-tiny-hybrid.json
    prompts: int  # how many prompts both hold


@dataclass(frozen=True)
class Regenerated:
    """A file of the folder that a committed command writes from the folder's raw results."""

    folder: str
    file: str
    command: tuple[str, ...]  # a module (python -m, from the repository root), then its arguments; {folder}
    # in them is the folder's path


@dataclass(frozen=True)
class Folder:
    name: str
    claims: tuple[Claim, ...]
    digests: tuple[DigestCheck, ...]
    regenerated: tuple[Regenerated, ...]


def folders(root: Path = EVIDENCE) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.is_dir())


def _fail(where: str, message: str) -> ClaimError:
    return ClaimError(f"{where}: {message} (the schema: docs/evidence/README.md)")


def _string(where: str, data: dict, key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise _fail(where, f"`{key}` must be a non-empty string, got {value!r}")
    return value


def _inside(where: str, rel: str) -> str:
    if rel.startswith("/") or ".." in Path(rel).parts:
        raise _fail(where, f"`file` {rel!r} must be a path inside the folder")
    return rel


def _page(where: str, page: str) -> str:
    parts = Path(page).parts
    ok = page == "README.md" or (
        len(parts) == 2 and parts[0] == "docs" and page.endswith(".md")
    )  # docs/<page>.md
    ok = ok or (len(parts) == 4 and parts[:2] == ("docs", "evidence") and parts[3] == "results.md")
    if not ok:
        raise _fail(
            where, f"page {page!r} is none of README.md, docs/<page>.md, docs/evidence/<folder>/results.md"
        )
    return page


def _claim(folder: str, data: Any) -> Claim:
    where = f"docs/evidence/{folder}/{CLAIMS}"
    if not isinstance(data, dict):
        raise _fail(where, f"a claim must be an object, got {data!r}")
    where = f"{where} claim {data.get('id')!r}"
    ident = _string(where, data, "id")
    if not ID.match(ident):
        raise _fail(where, "`id` must be lower-case words joined by hyphens")
    unknown = set(data) - CLAIM_KEYS
    if unknown:
        raise _fail(where, f"unknown keys {sorted(unknown)}; a claim holds {sorted(CLAIM_KEYS)}")
    value = data.get("value")
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise _fail(where, f"`value` must be a string or a number as the page writes it, got {value!r}")
    sources = [s for s in SOURCES if s in data]
    if len(sources) != 1:
        raise _fail(where, f"give exactly one of {', '.join(SOURCES)}, got {sources or 'none'}")
    (source,) = sources
    selector = data[source]
    if source == "pointer" and not (isinstance(selector, str) and selector.startswith("/")):
        raise _fail(where, f"`pointer` must be a JSON pointer starting with '/', got {selector!r}")
    if source == "line":
        if not isinstance(selector, str):
            raise _fail(where, f"`line` must be a regular expression, got {selector!r}")
        try:
            groups = re.compile(selector).groups
        except re.error as e:
            raise _fail(where, f"`line` {selector!r} is no regular expression: {e}") from None
        if groups != 1:
            raise _fail(where, f"`line` must hold exactly one group (the figure), it holds {groups}")
    if source == "bench" and not (
        isinstance(selector, dict)
        and set(selector) == {"prompt_tokens", "figure"}
        and isinstance(selector["prompt_tokens"], int)
        and selector["figure"] in BENCH_FIGURES
    ):
        raise _fail(where, f"`bench` must be {{prompt_tokens: N, figure: one of {BENCH_FIGURES}}}")
    spec = data.get("format")
    if spec is not None and not isinstance(spec, str):
        raise _fail(where, f"`format` must be a Python format spec such as '.1f', got {spec!r}")
    quoted = data.get("quoted")
    if not isinstance(quoted, list) or not quoted:
        raise _fail(where, "`quoted` must list the pages that quote the figure ({page, text})")
    quotes = []
    for q in quoted:
        if not isinstance(q, dict) or set(q) != {"page", "text"}:
            raise _fail(where, f"each quote is {{page, text}}, got {q!r}")
        text = _string(where, q, "text")
        if "{value}" not in text:
            raise _fail(where, f"quote {text!r} must hold {{value}} where the figure stands")
        quotes.append(Quote(_page(where, _string(where, q, "page")), text))
    return Claim(
        folder,
        ident,
        value,
        _inside(where, _string(where, data, "file")),
        source,
        selector,
        spec,
        tuple(quotes),
    )


def load(name: str, root: Path = EVIDENCE) -> Folder:
    """A folder's claims.json, its shape checked; a clear error names the folder, the claim and the fix."""
    path = root / name / CLAIMS
    where = f"docs/evidence/{name}/{CLAIMS}"
    if not path.is_file():
        raise ClaimError(
            f"{where}: missing; every evidence folder carries the figures the pages quote from it"
        )
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise _fail(where, f"not JSON: {e}") from None
    if not isinstance(data, dict) or set(data) - FOLDER_KEYS:
        raise _fail(where, f"must be an object with keys among {sorted(FOLDER_KEYS)}")
    claims = tuple(_claim(name, c) for c in data.get("claims", []))
    ids = [c.id for c in claims]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise _fail(where, f"claim ids {twice} given twice")
    if not claims and not isinstance(data.get("unquoted"), str):
        raise _fail(where, "no claims: give `unquoted`, a sentence saying why no page quotes this folder")
    digests = []
    for d in data.get("digests", []):
        if (
            not isinstance(d, dict)
            or set(d) != {"file", "golden", "prompts"}
            or not isinstance(d["prompts"], int)
        ):
            raise _fail(where, f"each digests entry is {{file, golden, prompts}}, got {d!r}")
        digests.append(
            DigestCheck(name, _inside(where, d["file"]), _string(where, d, "golden"), d["prompts"])
        )
    regenerated = []
    for r in data.get("regenerated", []):
        ok = isinstance(r, dict) and set(r) == {"file", "command"} and isinstance(r["command"], list)
        if not ok or not all(isinstance(a, str) for a in r["command"]) or not r["command"]:
            raise _fail(where, f"each regenerated entry is {{file, command: [script, args...]}}, got {r!r}")
        regenerated.append(Regenerated(name, _inside(where, r["file"]), tuple(r["command"])))
    return Folder(name, claims, tuple(digests), tuple(regenerated))


def normalised(text: str) -> str:
    return " ".join(text.split())


def figure(claim: Claim, raw: Any) -> str:
    """The raw value as the pages write it."""
    if claim.format is not None:
        if isinstance(raw, str):
            raw = float(raw)
        return format(raw, claim.format)
    return raw if isinstance(raw, str) else json.dumps(raw)


def stated(claim: Claim) -> str:
    return claim.value if isinstance(claim.value, str) else json.dumps(claim.value)


def resolve_file(claim_folder: Path, pattern: str, where: str) -> Path:
    matches = sorted(p for p in claim_folder.glob(pattern) if p.is_file() and p.name != CLAIMS)
    if len(matches) != 1:
        found = [str(p.relative_to(claim_folder)) for p in matches]
        raise ClaimError(f"{where}: `file` {pattern!r} must match one file of the folder, it matches {found}")
    return matches[0]


def _step(where: str, node: Any, token: str) -> Any:
    token = token.replace("~1", "/").replace("~0", "~")
    if isinstance(node, list):
        if "=" in token:  # key=value: the one element whose field key equals value (e.g. name=gpu-repeat)
            key, want = token.split("=", 1)
            hits = [e for e in node if isinstance(e, dict) and str(e.get(key)) == want]
            if len(hits) != 1:
                raise ClaimError(f"{where}: {len(hits)} entries with {key} == {want!r}, need exactly one")
            return hits[0]
        if not token.isdigit() or int(token) >= len(node):
            raise ClaimError(f"{where}: no index {token!r} in a list of {len(node)}")
        return node[int(token)]
    if isinstance(node, dict) and token in node:
        return node[token]
    raise ClaimError(
        f"{where}: no key {token!r} (keys: {sorted(node) if isinstance(node, dict) else node!r})"
    )


def read_raw(claim: Claim, root: Path = EVIDENCE) -> Any:
    """The claim's figure as its raw file holds it (JSON, JSONL as a list of its lines, or text)."""
    where = f"docs/evidence/{claim.folder}/{CLAIMS} claim {claim.id!r}"
    path = resolve_file(root / claim.folder, claim.file, where)
    text = path.read_text()
    if claim.source == "line":
        found = re.search(claim.selector, text, flags=re.M)
        if not found:
            raise ClaimError(f"{where}: no line of {claim.file} matches {claim.selector!r}")
        return found.group(1)
    data: Any = (
        [json.loads(line) for line in text.splitlines() if line.strip()]
        if fnmatch.fnmatch(path.name, "*.jsonl")
        else json.loads(text)
    )
    if claim.source == "bench":  # bitexact bench's JSONL: a header, then one timing per row
        want = claim.selector["prompt_tokens"]
        rows = [r["timing"] for r in data[1:] if r.get("timing", {}).get("prompt_tokens") == want]
        if len(rows) != 1:
            raise ClaimError(
                f"{where}: {len(rows)} timings at {want} prompt tokens in {claim.file}, need one"
            )
        timing = Timing(**{k: rows[0][k] for k in ("prompt_tokens", "new_tokens", "ttft_s", "decode_s")})
        return getattr(timing, claim.selector["figure"])
    node = data
    for token in claim.selector.split("/")[1:]:
        node = _step(f"{where} at {claim.selector}", node, token)
    return node


def quoted_text(quote: Quote, claim: Claim) -> str:
    return normalised(quote.text.replace("{value}", stated(claim)))


def run_regenerated(item: Regenerated, root: Path = EVIDENCE, repo: Path = REPO) -> str:
    """What the item's command writes today: its module run with `python -m` from the repository root."""
    folder = str(root / item.folder)
    module, *args = (a.replace("{folder}", folder) for a in item.command)
    done = subprocess.run(
        [sys.executable, "-m", module, *args], cwd=repo, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{' '.join(item.command)}: {done.stderr[-3000:]}"
    return done.stdout
