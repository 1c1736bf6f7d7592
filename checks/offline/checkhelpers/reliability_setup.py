"""What the bad-input catalogue's rows are built from: the Case row, the programs and how the docs name
them, and the helpers that write a case's inputs and check what holds afterwards. Each program's rows live
in reliability_cases_<program>.py (bitexact's in four), each topic's in reliability_cases_<topic>.py;
reliability_catalogue.py joins them, reliability_run.py runs them for real, test_reliability.py asserts
them."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from checkhelpers.canned_sglang import CannedSGLang
from checkhelpers.repo import REPO

RECIPE = REPO / "nix" / "recipes" / "qwen3.8-27b-exact.json"
PROGRAMS = {
    "bitexact": ["-m", "bitexact"],
    "pinlock": ["-m", "pinlock.cli"],
    "launcher": ["-m", "exactlaunch.cli"],
    "entrypoint": ["-m", "image_entrypoint.main"],
    "gpu-checks": ["-m", "gpuchecks"],
    "fleet": ["-m", "exactlaunch.fleet"],
}
COMMAND_NAMES = {  # how the docs name each program (the names the flake's apps and the image give them)
    "bitexact": "bitexact",
    "pinlock": "nix run .#lock --",
    "launcher": "bitexact-server",
    "entrypoint": "docker run IMAGE",
    "gpu-checks": "bitexact-gpu-checks",
    "fleet": "python -m exactlaunch.fleet",
}
REV = "a" * 40
OTHER_REV = "b" * 40
Setup = Callable[[Path], None]
Check = Callable[[Path], "str | None"]


@dataclass(frozen=True)
class Case:
    id: str
    tool: str
    what: str  # the bad input, in words
    argv: tuple[str, ...]
    exit: int
    expect: str  # a pattern the message must match
    setup: Setup | None = None
    env: dict[str, str] = field(default_factory=dict)
    server: str | None = None  # canned_sglang behaviour, at {url}
    model: str = "Qwen/Qwen3.8-27B"
    # "ro" | "full" | "three-pages" (12 KiB free: bitexact's lock, run record and manifest take them, the
    # results file then finds none): {tmp}/mnt is such a tmpfs
    fs: str | None = None
    check: Check | None = None  # what must hold afterwards (nothing lost, nothing left behind)


# --- helpers that write inputs ------------------------------------------------------------------------


def write(rel: str, data: str | bytes) -> Setup:
    def setup(tmp: Path) -> None:
        path = tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data)

    return setup


def both(*setups: Setup) -> Setup:
    def setup(tmp: Path) -> None:
        for one in setups:
            one(tmp)

    return setup


def mkdir(rel: str) -> Setup:
    return lambda tmp: (tmp / rel).mkdir(parents=True, exist_ok=True)


PROMPTS = '{"id": "p0", "input_ids": [5, 6, 7]}\n{"id": "p1", "input_ids": [9, 10]}\n'
prompts = write("p.jsonl", PROMPTS)
# a 100-token prompt and a 10-token one: on a cache that matches in 64-token units only the first can hit
MIXED_LENGTHS = "".join(
    json.dumps({"id": f"p{n}", "input_ids": [5 + k % 50 for k in range(n)]}) + "\n" for n in (100, 10)
)
mixed_lengths = write("p.jsonl", MIXED_LENGTHS)


def recipe_with(**changes: object) -> Setup:
    data = json.loads(RECIPE.read_text())
    data.update(changes)
    return write("r.json", json.dumps(data))


def recipe_without(key: str) -> Setup:
    data = json.loads(RECIPE.read_text())
    data.pop(key)
    return write("r.json", json.dumps(data))


def variant(name: str, body: object) -> Setup:
    data = json.loads(RECIPE.read_text())
    data["variants"][name] = body
    return write("r.json", json.dumps(data))


def golden(
    edit: Callable[[dict], None] | None = None, answers: Callable[[list], None] | None = None
) -> Setup:
    """A real golden recorded through bitexact's own record path against the canned server's values;
    `answers` edits the generations before the record (and its digests) is made, `edit` the record after."""

    def setup(tmp: Path) -> None:
        from bitexact.engines.base import Settings
        from bitexact.engines.sglang_shapes import parse_generate_output, request_fields
        from bitexact.golden import build_record, write_record
        from bitexact.prompts import parse_jsonl

        settings = Settings(max_new_tokens=4, top_logprobs=2)
        plist = parse_jsonl(PROMPTS, "p.jsonl")
        with CannedSGLang() as canned:  # its answers as the server would send them, without HTTP
            gens = [
                parse_generate_output(p, canned.generate(request_fields(p, settings)), settings, "canned")
                for p in plist
            ]
        if answers is not None:
            answers(gens)
        identity = {"engine": "sglang", "version": "0.5.20", "model_path": "Qwen/Qwen3.8-27B"}
        record = build_record(
            card="h200", recipe="qwen3.8-27b-exact", variant="no-spec", settings=settings.to_json(),
            metadata={"engine_identity": identity}, prompts=plist, generations=gens,
        )  # fmt: skip
        if edit is not None:
            edit(record)
        write_record(record, tmp / "g" / "h200" / "qwen3.8-27b-exact.json")

    return setup


# One history line as `golden check` writes it (kind, schema, build label and components, verdict).
HISTORY_LINE = (
    json.dumps(
        {
            "kind": "bitexact-history", "schema": 1, "at": "2026-12-01T00:00:00+00:00", "verdict": "EQUAL",
            "card": "h200", "recipe": "qwen3.8-27b-exact", "variant": "recipe", "engine": "sglang+http://h:1",
            "golden": {"path": "g.json", "digest": "0" * 64, "recorded": None, "build": None},
            "build": {"label": "0123456789ab", "components": {"bitexact": "0.1.0"}},
            "prompts": 2, "equal": 2, "tokens_differ": 0, "first_divergence": None, "touched": [],
        }
    )
    + "\n"
)  # fmt: skip


def raw_golden(text: str) -> Setup:
    return write("g/h200/qwen3.8-27b-exact.json", text)


def hub_cache(
    files: dict[str, bytes], refs: bytes | None = None, repo: str = "Org/Name", rev: str = REV
) -> Setup:
    """A Hugging Face hub cache as huggingface_hub lays it out: blobs named by git blob id (small files),
    snapshots/<rev>/<path> linking to them, refs/main naming the revision."""
    import hashlib

    def setup(tmp: Path) -> None:
        folder = tmp / "hub" / ("models--" + repo.replace("/", "--"))
        snap = folder / "snapshots" / rev
        (folder / "blobs").mkdir(parents=True, exist_ok=True)
        snap.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
            (folder / "blobs" / blob).write_bytes(data)
            (snap / name).symlink_to(Path("../../blobs") / blob)
        (folder / "refs").mkdir(exist_ok=True)
        (folder / "refs" / "main").write_bytes(refs if refs is not None else rev.encode())

    return setup


def checkout(extra: Setup | None = None) -> Setup:
    """A flake checkout pinlock accepts: nix/recipes/ with the real recipe."""
    base = write("repo/nix/recipes/qwen3.8-27b-exact.json", RECIPE.read_text())
    return both(base, extra) if extra else base


def manifest(repo: str, rev: str) -> Setup:
    data = {
        "repo": repo,
        "revision": rev,
        "files": [{"path": "config.json", "size": 2, "sha256": "0" * 64, "lfs": False}],
    }
    return write(f"repo/pkgs/weights/manifests/{repo.replace('/', '--')}.json", json.dumps(data))


def lock_holder(tmp: Path) -> None:
    """Another bitexact run holding --out: a real process with the lock, named in its lock file."""
    out = tmp / "o"
    out.mkdir(parents=True, exist_ok=True)
    code = (
        "import fcntl, json, os, sys, time\n"
        "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "os.write(fd, json.dumps({'pid': os.getpid(), 'host': 'here', 'started': 'now', "
        "'command': 'bitexact parity A B'}).encode())\n"
        "print('held', flush=True)\n"
        "time.sleep(60)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(out / ".bitexact.lock")], stdout=subprocess.PIPE
    )
    assert holder.stdout is not None
    holder.stdout.readline()
    (tmp / "holder.pid").write_text(str(holder.pid))


def empty_answers(gens: list) -> None:
    for gen in gens:
        gen.token_ids, gen.logprobs, gen.top_logprobs = [], [], []


def other_run(verb_argv: tuple[str, ...], out: str = "o", wrote: str = "repeat.md") -> Setup:
    """An --out that holds the run of another command (what bitexact's own first run leaves there: its
    run record, made by bitexact's run code from that command line, and a report)."""

    def setup(tmp: Path) -> None:
        from bitexact import runs
        from bitexact.cli import build_parser, command_of, given_engines
        from bitexact.ownership import take

        argv = [a.replace("{tmp}", str(tmp)) for a in verb_argv]
        args = build_parser().parse_args(argv)
        (tmp / out).mkdir(parents=True, exist_ok=True)
        runs.claim(tmp / out, command_of(args, given_engines(args), argv))
        take(tmp / out / wrote).write_text(
            "the first run's report\n"
        )  # entered in its manifest, as bitexact does

    return setup


def golden_intact(rel: str) -> Check:
    """The golden at `rel` is still a whole golden record: one JSON object of its kind, nothing appended."""

    def check(tmp: Path) -> str | None:
        try:
            data = json.loads((tmp / rel).read_text())
        except (OSError, ValueError) as error:
            return f"{rel} is no longer one JSON document: {error}"
        return None if data.get("kind") == "bitexact-golden" else f"{rel} is no golden any more"

    return check


def no_tmp_left(where: str) -> Check:
    def check(tmp: Path) -> str | None:
        if not (tmp / where).is_dir():
            return f"{where} is missing: the run's files were not kept for the check"
        left = [p.name for p in (tmp / where).rglob("*") if p.name.endswith(".tmp")]
        return f"temporary files left behind: {left}" if left else None

    return check


def whole_lines(where: str) -> Check:
    """Every results file under `where` ends with a whole line: a failed append tore nothing."""

    def check(tmp: Path) -> str | None:
        if not (tmp / where).is_dir():
            return f"{where} is missing: the run's files were not kept for the check"
        torn = [
            p.name
            for p in (tmp / where).glob("*.jsonl")
            if p.read_bytes() and not p.read_bytes().endswith(b"\n")
        ]
        return f"torn lines in {torn}" if torn else None

    return check


def rows_kept(where: str, count: int) -> Check:
    """The run's results under `where` hold `count` finished rows (and a header): a rerun resumes there."""

    def check(tmp: Path) -> str | None:
        files = sorted((tmp / where).glob("*.jsonl")) if (tmp / where).is_dir() else []
        rows = sum(len(p.read_text().splitlines()) - 1 for p in files)
        return None if rows == count else f"{rows} result rows kept under {where}, not {count}"

    return check


def both_checks(*checks: Check) -> Check:
    return lambda tmp: next((p for p in (c(tmp) for c in checks) if p), None)


def absent(rel: str) -> Check:
    return lambda tmp: f"{rel} was written" if (tmp / rel).exists() else None


def unchanged(rel: str, text: str) -> Check:
    return lambda tmp: None if (tmp / rel).read_text() == text else f"{rel} changed"


# --- values the rows share ----------------------------------------------------------------------------

URL = "sglang+http://127.0.0.1:9"  # nothing listens on port 9 (discard), so a connection is refused
FAST = "?retries=0"
common = ("--prompts", "{tmp}/p.jsonl", "--max-new-tokens", "4", "--top-logprobs", "2", "--out", "{tmp}/o")
golden_args = ("--recipe", str(RECIPE), "--variant", "no-spec", "--card", "h200", "--golden-dir", "{tmp}/g")

# the end-to-end runner's arguments, good ones (cases add the bad one)
# The runner over the committed plan with a patched tree (a folder holding sglang/srt and the series'
# manifest), the goldens and OUT under the case's folder.
gc_args = (
    "run",
    "--plan",
    str(REPO / "checks" / "plans" / "e2e-tiny-hybrid.json"),
    "--recipe",
    str(REPO / "nix" / "recipes" / "e2e-tiny-hybrid.json"),
    "--tree",
    "patched={tmp}/w/patched",
    "--golden-dir",
    "{tmp}/g",
    "--out",
    "{tmp}/o",
)
gc_tree = write("w/patched/sglang/srt/bitexact_manifest.json", "{}")
gc_golden = write("g/README.md", "goldens")


def gc_ready(tmp: Path) -> None:
    gc_tree(tmp)
    gc_golden(tmp)


def gc_nothing_written(tmp: Path) -> str | None:
    return "a verdict was written" if (tmp / "o" / "verdicts.jsonl").exists() else None


# --- issue 28, third pass: the launcher, the image entrypoint, the e2e runners' arguments, pinlock ------
# (classes 3, 6, 7 and 9 of issue 28 and the failures the fuzzers test_fuzz_launcher.py and
# test_fuzz_pinlock.py found; each row's mechanism is named in docs/reliability.md)

RECIPE_TEXT = RECIPE.read_text()
RECIPE_REV = "1d4bf0f2ff6012fd82039f2fa52739d0dd7c60c0"
ENGINE_REV = "542a043f1b68796d269ef1ee11be7865f8d4a5f1"
GOOD_SRI = "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
launch_args = ("--recipe", "{tmp}/r.json")


def recipe_text(old: str, new: str, rel: str = "r.json") -> Setup:
    """The real recipe's text with `old` replaced by `new` once (for what JSON values cannot say: a key
    given twice, NaN)."""
    assert old in RECIPE_TEXT, old
    return write(rel, RECIPE_TEXT.replace(old, new, 1))


def launch_with(**changes: object) -> Setup:
    data = json.loads(RECIPE_TEXT)
    data["launch"].update(changes)
    return write("r.json", json.dumps(data))


def memory(fraction: str) -> Setup:
    data = json.loads(RECIPE_TEXT)
    argv = data["launch"]["argv"]
    argv[argv.index("--mem-fraction-static") + 1] = fraction
    return write("r.json", json.dumps(data))


def pin(rel: str, data: object) -> Setup:
    return write(f"repo/{rel}", json.dumps(data))


def recipe_in_checkout(edit: Callable[[dict], None]) -> Setup:
    data = json.loads(RECIPE_TEXT)
    edit(data)
    return write("repo/nix/recipes/qwen3.8-27b-exact.json", json.dumps(data))


def unchanged_manifest(repo: str, rev: str) -> Check:
    def check(tmp: Path) -> str | None:
        path = tmp / f"repo/pkgs/weights/manifests/{repo.replace('/', '--')}.json"
        held = json.loads(path.read_text())["revision"] if path.exists() else None
        return None if held == rev else f"{path.name} now pins {held}, not {rev}"

    return check


def scratch_recipe(rev: str) -> Setup:
    data = json.loads(RECIPE_TEXT)
    data["model"]["revision"] = rev
    return write("scratch.json", json.dumps(data))


STUB_LOCK_NO_HASH = (
    'version = 1\n[[package]]\nname = "cuda-tile"\nversion = "1.0.0"\n'
    'sdist = { url = "https://files.example/cuda_tile-1.0.0.tar.gz" }\n'
)


def link(rel: str, target: str) -> Setup:
    """A symbolic link at `rel` to `target` (`{tmp}` in it is the case's folder): dangling, or a loop."""

    def setup(tmp: Path) -> None:
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).symlink_to(target.replace("{tmp}", str(tmp)))

    return setup


def argv_with(edit: Callable[[list], None]) -> Setup:
    data = json.loads(RECIPE_TEXT)
    edit(data["launch"]["argv"])
    return write("r.json", json.dumps(data))


def _model(argv: list) -> None:
    argv[argv.index("--model-path") + 1] = "Qwen/Qwen3.8-32B"


def _joined_memory(argv: list) -> None:
    at = argv.index("--mem-fraction-static")
    argv[at : at + 2] = ["--mem-fraction-static=0.88"]


SNAPSHOT_ARGS = ("weights", "Org/Name@" + REV, "--snapshot", "{tmp}/hub")
SMALL_HUB = hub_cache({"config.json": b"{}", "model.safetensors": b"w"})


def src_pin_at(rev: str) -> Setup:
    return pin(
        "nix/pins/sglang-src.json",
        {"owner": "sgl-project", "repo": "sglang", "rev": rev, "narHash": GOOD_SRI},
    )
