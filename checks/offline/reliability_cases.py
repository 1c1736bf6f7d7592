"""The bad-input catalogue behind docs/reliability.md: every case a new user might try, with its inputs,
the exit code and a pattern of the message it must get, and what must hold afterwards. reliability_run.py
runs them for real; test_reliability.py asserts them."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from canned_sglang import CannedSGLang  # noqa: E402

RECIPE = REPO / "nix" / "recipes" / "qwen3.8-27b-exact.json"
SOURCES = [
    REPO / p
    for p in (
        "pkgs/formats/src",
        "pkgs/gpuhost/src",
        "pkgs/bitexact/src",
        "pkgs/server/src",
        "pkgs/lock/src",
        "pkgs/gpu-checks/src",
        "images/entrypoint/src",
    )
]
PROGRAMS = {
    "bitexact": ["-m", "bitexact"],
    "pinlock": ["-m", "pinlock.cli"],
    "launcher": ["-m", "exactlaunch.cli"],
    "entrypoint": ["-m", "image_entrypoint.main"],
    "gpu-checks": ["-m", "gpuchecks"],
    "fleet": ["-m", "exactlaunch.fleet"],
    "e2e-assemble": [str(REPO / "checks" / "e2e" / "assemble.py")],
    "perf-router": [str(REPO / "bench" / "perf" / "router.py")],
    "perf-run": [str(REPO / "bench" / "perf" / "run.py")],
    "perf-prefill": [str(REPO / "bench" / "perf" / "prefill.py")],
}
COMMAND_NAMES = {  # how the docs name each program (the names the flake's apps and the image give them)
    "bitexact": "bitexact",
    "pinlock": "nix run .#lock --",
    "launcher": "bitexact-server",
    "entrypoint": "docker run IMAGE",
    "gpu-checks": "bitexact-gpu-checks",
    "fleet": "python -m exactlaunch.fleet",
    "e2e-assemble": "checks/e2e/assemble.py",
    "perf-router": "bench/perf/router.py",
    "perf-run": "bench/perf/run.py",
    "perf-prefill": "bench/perf/prefill.py",
}
REV = "a" * 40
# One kernel, its launch, and a matrix-product op around the launch without "Input Dims" (what the
# torch profiler writes when record_shapes is off).
TRACE_WITHOUT_SHAPES = json.dumps(
    {
        "traceEvents": [
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": 5,
                "dur": 1,
            }
            | {"args": {"correlation": 7}},
            {"ph": "X", "cat": "kernel", "name": "nvjet_sm90_tst_TNT", "pid": 0, "tid": 7, "ts": 10, "dur": 5}
            | {"args": {"correlation": 7}},
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::mm",
                "pid": 1,
                "tid": 1,
                "ts": 4,
                "dur": 3,
                "args": {},
            },
        ]
    }
)
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
        sys.path[:0] = [str(s) for s in SOURCES]
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
        sys.path[:0] = [str(s) for s in SOURCES]
        from bitexact import runs
        from bitexact.cli import build_parser
        from bitexact.ownership import take

        argv = [a.replace("{tmp}", str(tmp)) for a in verb_argv]
        args = build_parser().parse_args(argv)
        (tmp / out).mkdir(parents=True, exist_ok=True)
        runs.claim(tmp / out, args, argv)
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


# --- the catalogue --------------------------------------------------------------------------------------

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


CASES: list[Case] = [
    # bitexact: command line and engine strings
    Case("bx-verb", "bitexact", "an unknown verb", ("compare", "a", "b"), 2, r"invalid choice: 'compare'"),
    Case(
        "bx-engine-form",
        "bitexact",
        "an engine string of no known form",
        ("repeat", "vllm://x:1"),
        2,
        r"unknown form; use one of",
    ),
    Case(
        "bx-engine-noport",
        "bitexact",
        "an engine URL without a port",
        ("repeat", "sglang+http://127.0.0.1"),
        2,
        r"no port; give it explicitly",
    ),
    Case(
        "bx-engine-badport",
        "bitexact",
        "a port that is not a number",
        ("repeat", "sglang+http://127.0.0.1:x0"),
        2,
        r"the port must be a number",
    ),
    Case(
        "bx-openai-nomodel",
        "bitexact",
        "an OpenAI engine without ?model=",
        ("repeat", "openai+http://127.0.0.1:8000/v1"),
        2,
        r"need \?model=NAME",
    ),
    Case(
        "bx-engine-option",
        "bitexact",
        "an unknown engine option",
        ("repeat", "sglang+http://127.0.0.1:1?batch=2"),
        2,
        r"unknown option\(s\) \['batch'\]",
    ),
    Case(
        "bx-engine-option-twice",
        "bitexact",
        "an engine option given twice",
        ("repeat", "sglang+http://127.0.0.1:1?timeout=1&timeout=2"),
        2,
        r"option 'timeout' given twice",
    ),
    Case(
        "bx-timeout-zero",
        "bitexact",
        "timeout=0",
        ("repeat", "sglang+http://127.0.0.1:1?timeout=0"),
        2,
        r"timeout must be > 0",
    ),
    Case(
        "bx-retries-negative",
        "bitexact",
        "retries=-1",
        ("repeat", "sglang+http://127.0.0.1:1?retries=-1"),
        2,
        r"retries must be >= 0",
    ),
    Case(
        "bx-hf-device",
        "bitexact",
        "an hf: engine on device tpu",
        ("repeat", "hf:/m?device=tpu"),
        2,
        r"device must be cpu or cuda",
    ),
    Case(
        "bx-hf-assistant-batch",
        "bitexact",
        "assistant with batch > 1",
        ("repeat", "hf:/m?assistant=/d&batch=2"),
        2,
        r"assistant .* runs one sequence at a time",
    ),
    Case(
        "bx-option-twice",
        "bitexact",
        "an option given twice",
        ("repeat", URL, "--limit", "1", "--limit", "2"),
        2,
        r"--limit given more than once",
    ),
    Case(
        "bx-limit-zero",
        "bitexact",
        "--limit 0",
        ("repeat", URL, "--limit", "0"),
        2,
        r"must be 1 or more, not 0",
    ),
    Case(
        "bx-new-tokens-zero",
        "bitexact",
        "--max-new-tokens 0",
        ("repeat", URL, "--max-new-tokens", "0"),
        2,
        r"must be 1 or more",
    ),
    Case(
        "bx-top-one",
        "bitexact",
        "--top-logprobs 1",
        ("repeat", URL, "--top-logprobs", "1"),
        2,
        r"must be 2 or more",
    ),
    Case(
        "bx-repeats-one",
        "bitexact",
        "repeat -n 1",
        ("repeat", URL, "-n", "1"),
        2,
        r"must be 2 or more, not 1",
    ),
    Case(
        "bx-batch-zero", "bitexact", "repeat -b 0", ("repeat", URL, "-b", "0"), 2, r"must be 1 or more, not 0"
    ),
    # bitexact: prompt files
    Case(
        "bx-prompts-missing",
        "bitexact",
        "--prompts names no file",
        ("repeat", URL + FAST, "--prompts", "{tmp}/none.jsonl", "--out", "{tmp}/o"),
        2,
        r"--prompts .*none.jsonl: no such file; give a JSONL file",
    ),
    Case(
        "bx-prompts-dir",
        "bitexact",
        "--prompts is a directory",
        ("repeat", URL + FAST, "--prompts", "{tmp}/d", "--out", "{tmp}/o"),
        2,
        r"--prompts .*/d is a directory; give a JSONL file",
        mkdir("d"),
    ),
    Case(
        "bx-prompts-utf8",
        "bitexact",
        "--prompts is not UTF-8",
        ("repeat", URL + FAST, *common),
        2,
        r"--prompts .*p.jsonl: not UTF-8 text \(byte 8, line 1: b'\\xff'\)",
        write("p.jsonl", b'{"id": "\xff"}\n'),
    ),
    Case(
        "bx-prompts-notjson",
        "bitexact",
        "a prompt line that is not JSON",
        ("repeat", URL + FAST, *common),
        2,
        r"p.jsonl:2: not JSON",
        write("p.jsonl", '{"id": "a", "input_ids": [1]}\nnot json\n'),
    ),
    Case(
        "bx-prompts-noid",
        "bitexact",
        "a prompt without an id",
        ("repeat", URL + FAST, *common),
        2,
        r"p.jsonl:1: each line must be a JSON object with an 'id'",
        write("p.jsonl", '{"input_ids": [1]}\n'),
    ),
    Case(
        "bx-prompts-dupid",
        "bitexact",
        "two prompts with one id",
        ("repeat", URL + FAST, *common),
        2,
        r"p.jsonl:2: duplicate prompt id 'a'",
        write("p.jsonl", '{"id": "a", "input_ids": [1]}\n{"id": "a", "input_ids": [2]}\n'),
    ),
    Case(
        "bx-prompts-empty",
        "bitexact",
        "an empty prompt file",
        ("repeat", URL + FAST, *common),
        2,
        r"p.jsonl: no prompts",
        write("p.jsonl", "\n"),
    ),
    Case(
        "bx-prompts-negative",
        "bitexact",
        "a negative token id",
        ("repeat", URL + FAST, *common),
        2,
        r"'input_ids' of 'a' must be a non-empty list of ints >= 0",
        write("p.jsonl", '{"id": "a", "input_ids": [-1]}\n'),
    ),
    Case(
        "bx-prompts-emptytext",
        "bitexact",
        "an empty text prompt",
        ("repeat", URL + FAST, *common),
        2,
        r"'text' of 'a' must be a non-empty string",
        write("p.jsonl", '{"id": "a", "text": ""}\n'),
    ),
    Case(
        "bx-prompts-neither",
        "bitexact",
        "a prompt with neither ids nor text",
        ("repeat", URL + FAST, *common),
        2,
        r"prompt 'a' has neither 'input_ids' nor 'text'",
        write("p.jsonl", '{"id": "a"}\n'),
    ),
    Case(
        "bx-prompts-and-long",
        "bitexact",
        "--prompts and --long together",
        ("repeat", URL + FAST, *common, "--long", "16"),
        2,
        r"give either --prompts or --long, not both",
        prompts,
    ),
    Case(
        "bx-long-bad",
        "bitexact",
        "--long abc",
        ("repeat", URL + FAST, "--long", "abc", "--out", "{tmp}/o"),
        2,
        r"lengths 'abc': use numbers like 640,2200,128k",
    ),
    Case(
        "bx-long-zero",
        "bitexact",
        "--long 0",
        ("repeat", URL + FAST, "--long", "0", "--out", "{tmp}/o"),
        2,
        r"every length must be 1 token or more",
    ),
    Case(
        "bx-tokenizer-missing",
        "bitexact",
        "--tokenizer names no folder",
        ("repeat", URL + FAST, *common, "--tokenizer", "{tmp}/tok"),
        2,
        r"not 'bytes' and no such path",
        prompts,
    ),
    Case(
        "bx-tokenizer-offset",
        "bitexact",
        "--tokenizer bytes:x",
        ("repeat", URL + FAST, *common, "--tokenizer", "bytes:x"),
        2,
        r"the offset after 'bytes:' must be a whole number",
        prompts,
    ),
    # bitexact: --out
    Case(
        "bx-out-file",
        "bitexact",
        "--out is a file",
        ("repeat", URL + FAST, *common),
        2,
        r"--out .*/o is a file; give a directory",
        both(prompts, write("o", "x")),
    ),
    Case(
        "bx-out-readonly",
        "bitexact",
        "--out on a read-only file system",
        ("repeat", URL + FAST, *common[:6], "--out", "{tmp}/mnt/o"),
        2,
        r"--out .*mnt/o: cannot write there: Read-only file system \(the file system is mounted read-only",
        prompts,
        fs="ro",
    ),
    Case(
        "bx-out-full",
        "bitexact",
        "--out on a full file system",
        ("repeat", "sglang+{url}", "-n", "2", "-b", "1", *common[:6], "--out", "{tmp}/mnt/o"),
        2,
        r"--out .*mnt/o: cannot write its lock .bitexact.lock: No space left on device "
        r"\(free space on that file system or give another --out\)",
        prompts,
        server="normal",
        fs="full",
        check=no_tmp_left("after"),
    ),
    Case(
        "bx-out-fills",
        "bitexact",
        "--out filling up during the run",
        ("repeat", "sglang+{url}", "-n", "2", "-b", "1", *common[:6], "--out", "{tmp}/mnt/o"),
        2,
        r"cannot append to .*mnt/o/.*: No space left on device "
        r".*the results written before are kept and a rerun resumes from them",
        prompts,
        server="normal",
        fs="three-pages",
        check=both_checks(no_tmp_left("after"), whole_lines("after/o")),
    ),
    Case(
        "bx-out-busy",
        "bitexact",
        "two runs on one --out at once",
        ("repeat", URL + FAST, *common),
        2,
        r"--out .*/o is in use by another bitexact run "
        r"\(pid \d+ on here, started now: `bitexact parity A B`\)",
        both(prompts, lock_holder),
    ),
    Case(
        "bx-server-down",
        "bitexact",
        "a server that is not running",
        ("repeat", URL + FAST, *common),
        2,
        r"127.0.0.1:9/server_info failed 1 times .*is the server still running\?",
        prompts,
    ),
    Case(
        "bx-same-engine",
        "bitexact",
        "parity of an engine with itself",
        ("parity", "sglang+{url}", "sglang+{url}", *common),
        2,
        r"A and B are the same engine .*--allow-same-engine",
        prompts,
        server="normal",
    ),
    # bitexact: recipes and presets
    Case(
        "bx-preset-norecipe",
        "bitexact",
        "a preset without a recipe",
        ("parity", URL, URL + "?timeout=5", "--preset", "no-spec"),
        2,
        r"presets need the recipe: pass --recipe",
    ),
    Case(
        "bx-preset-unknown",
        "bitexact",
        "an unknown preset",
        ("parity", URL, URL + "?timeout=5", "--preset", "fast", "--recipe", str(RECIPE)),
        2,
        r"unknown preset 'fast'; presets of qwen3.8-27b-exact: \['backend-flashinfer'",
    ),
    Case(
        "bx-recipe-missing",
        "bitexact",
        "--recipe names no file",
        ("parity", URL, URL + "?timeout=5", "--preset", "recipe", "--recipe", "{tmp}/none.json"),
        2,
        r"--recipe .*none.json: no such file; give a recipe JSON file",
    ),
    Case(
        "bx-recipe-dir",
        "bitexact",
        "--recipe is a directory",
        ("parity", URL, URL + "?timeout=5", "--preset", "recipe", "--recipe", "{tmp}/d"),
        2,
        r"--recipe .*/d is a directory",
        mkdir("d"),
    ),
    Case(
        "bx-recipe-utf8",
        "bitexact",
        "--recipe is not UTF-8",
        ("parity", URL, URL + "?timeout=5", "--preset", "recipe", "--recipe", "{tmp}/r.json"),
        2,
        r"--recipe .*r.json: not UTF-8 text",
        write("r.json", b'{"name": "\xe9"}'),
    ),
    Case(
        "bx-recipe-notjson",
        "bitexact",
        "--recipe is not JSON",
        ("parity", URL, URL + "?timeout=5", "--preset", "recipe", "--recipe", "{tmp}/r.json"),
        2,
        r"--recipe .*r.json: not JSON",
        write("r.json", "{"),
    ),
    Case(
        "bx-recipe-schema",
        "bitexact",
        "a recipe of an unknown schema",
        ("parity", URL, URL + "?timeout=5", "--preset", "recipe", "--recipe", "{tmp}/r.json"),
        2,
        r"--recipe .*r.json has schema 99: it was written by a newer bitexact \(this one reads schema 1\); "
        r"upgrade bitexact",
        recipe_with(schema=99),
    ),
    Case(
        "bx-recipe-novariants",
        "bitexact",
        "a recipe without variants",
        ("parity", URL, URL + "?timeout=5", "--preset", "recipe", "--recipe", "{tmp}/r.json"),
        2,
        r"no 'name' or 'variants'; is this a recipe file\?",
        recipe_without("variants"),
    ),
    # bitexact warm: passes that cannot count
    Case(
        "bx-warm-cache-off",
        "bitexact",
        "warm against a server started with --disable-radix-cache",
        ("warm", "sglang+{url}", *common),
        2,
        r"runs with --disable-radix-cache \(its /server_info says so\): no answer can come from its cache",
        prompts,
        server="spec",
    ),
    Case(
        "bx-warm-no-hits",
        "bitexact",
        "warm against a server whose cache never reports a hit",
        ("warm", "sglang+{url}", *common),
        2,
        r"pass warm1 shows no cache hits for 2/2 prompts \(cached tokens reported: p0 \(0\), p1 \(0\)\)"
        r".*meta_info.cached_tokens",
        prompts,
        server="radix-never-hits",
    ),
    Case(
        "bx-warm-short-prompts",
        "bitexact",
        "warm with a prompt shorter than the cache's match unit (64 tokens on SGLang's hybrid cache)",
        ("warm", "sglang+{url}", *common),
        2,
        r"pass warm1 shows no cache hits for 1/2 prompts \(cached tokens reported: p10 \(0\)\); these are "
        r"the shortest prompts \(10 prompt tokens; the smallest hit in this pass was 64 tokens\).*"
        r"leave such prompts out with --min-prompt-tokens 65",
        mixed_lengths,
        server="radix-hybrid-64",
    ),
    Case(
        "bx-warm-min-prompt-none",
        "bitexact",
        "--min-prompt-tokens longer than every prompt",
        ("warm", "sglang+{url}", "--min-prompt-tokens", "500", *common),
        2,
        r"--min-prompt-tokens 500 leaves no prompt to compare: the longest of the 2 has 100 prompt tokens",
        mixed_lengths,
        server="radix-hybrid-64",
    ),
    Case(
        "bx-warm-cold-hits",
        "bitexact",
        "a shared prefix on a server that cannot flush its cache",
        ("warm", "sglang+{url}", "--shared-prefix", "9", "--vocab-size", "90", *common),
        2,
        r"the cold pass took prompt tokens from the cache for 1/2 prompts, e.g. p1 \(9 tokens\).*"
        r"the flush failed: /flush_cache: HTTP 404",
        prompts,
        server="radix-no-flush",
    ),
    Case(
        "bx-warm-prefix-text",
        "bitexact",
        "a shared prefix without a tokenizer",
        ("warm", "sglang+{url}", "--shared-prefix", "9", *common[2:]),
        2,
        r"--shared-prefix 9: the prefix is made as token ids.*give --tokenizer",
        server="radix",
    ),
    Case(
        "bx-warm-prefix-length",
        "bitexact",
        "a shared prefix of two lengths",
        ("warm", URL, "--shared-prefix", "9,11", *common),
        2,
        r"argument --shared-prefix: '9,11': one length, e.g. 1237 or 64k",
        prompts,
    ),
    Case(
        "bx-warm-golden-prefix",
        "bitexact",
        "a shared prefix compared with a golden",
        ("warm", URL, "--golden", "{tmp}/g.json", "--card", "h200", "--shared-prefix", "9", *common),
        2,
        r"--shared-prefix with a golden: the golden holds the prompts as recorded",
        prompts,
    ),
    Case(
        "bx-warm-engine",
        "bitexact",
        "warm on an engine without a prefix cache",
        ("warm", "hf:{tmp}/model", *common),
        2,
        r"warm runs need a server with a prefix cache that reports its hits",
        prompts,
    ),
    # bitexact warm, issue 28: the verb under every verb's rules
    Case(
        "bx-warm-option-abbrev",
        "bitexact",
        "warm with an option abbreviated (--warm-pass for --warm-passes)",
        ("warm", URL, "--warm-pass", "2"),
        2,
        r"unrecognized arguments: --warm-pass 2",
    ),
    Case(
        "bx-warm-option-twice",
        "bitexact",
        "warm with --inflight given twice",
        ("warm", URL, "--inflight", "2", "--inflight", "8"),
        2,
        r"--inflight given more than once; give each option once",
    ),
    Case(
        "bx-warm-passes-huge",
        "bitexact",
        "warm --warm-passes beyond any run",
        ("warm", URL, "--warm-passes", "100000000000000000000"),
        2,
        r"argument --warm-passes: must be 100000 or less, not 100000000000000000000",
    ),
    Case(
        "bx-warm-prefix-inf",
        "bitexact",
        "warm --shared-prefix inf",
        ("warm", URL, "--shared-prefix", "inf", "--vocab-size", "90"),
        2,
        r"argument --shared-prefix: lengths 'inf': use numbers like 640,2200,128k \(whole tokens\)",
    ),
    Case(
        "bx-warm-card-path",
        "bitexact",
        "warm --card with ../ in it",
        ("warm", URL, "--golden-dir", "{tmp}/g", "--recipe-name", "r", "--card", "../x"),
        2,
        r"argument --card: '\.\./x': a name that becomes a file or folder name is",
    ),
    Case(
        "bx-warm-recipe-name-path",
        "bitexact",
        "warm --recipe-name with ../ in it",
        ("warm", URL, "--golden-dir", "{tmp}/g", "--card", "h200", "--recipe-name", "../other/x"),
        2,
        r"argument --recipe-name: '\.\./other/x': a name that becomes a file or folder name is",
    ),
    Case(
        "bx-warm-golden-is-prompts",
        "bitexact",
        "warm --golden naming the prompt file",
        ("warm", URL, "--golden", "{tmp}/p.jsonl", "--card", "h200", *common),
        2,
        r"--golden .*p.jsonl and --prompts name the same file",
        prompts,
        check=unchanged("p.jsonl", PROMPTS),
    ),
    Case(
        "bx-warm-out-other-command",
        "bitexact",
        "a second warm of other settings in the same --out",
        ("warm", URL + FAST, "--warm-passes", "2", *common),
        2,
        r"--out .*/o holds the run of another `bitexact warm` command \(`bitexact warm .*`; "
        r"warm_passes: 1 -> 2\).*new --out .*--force",
        both(prompts, other_run(("warm", URL + FAST, *common), wrote="warm.md")),
        check=unchanged("o/warm.md", "the first run's report\n"),
    ),
    Case(
        "bx-warm-answer-empty",
        "bitexact",
        "warm against a server that answers 0 tokens",
        ("warm", "sglang+{url}", *common),
        2,
        r"prompt 'p0#cold': the answer holds no tokens; an answer not compared in full never counts as "
        r"equal",
        prompts,
        server="radix-empty",
    ),
    Case(
        "bx-warm-cached-count",
        "bitexact",
        "warm against a server that reports -1 cached prompt tokens",
        ("warm", "sglang+{url}", *common),
        2,
        r"/generate \('p0#\w+'\): meta_info\.cached_tokens is '-1', not a count \(a whole number >= 0\)",
        prompts,
        server="radix-bad-count",
    ),
    # bitexact: what the server answers
    Case(
        "bx-nan",
        "bitexact",
        "a server answering a NaN logprob",
        ("repeat", "sglang+{url}", "-n", "2", "-b", "1", *common),
        2,
        r"prompt 'p0#r\d+', position 2: the logprob of token \d+ is nan: the engine's numerics are broken",
        prompts,
        server="nan",
    ),
    Case(
        "bx-inf",
        "bitexact",
        "a server answering -inf",
        ("repeat", "sglang+{url}", "-n", "2", "-b", "1", *common),
        2,
        r"position 2: the logprob of token \d+ is -inf",
        prompts,
        server="inf",
    ),
    Case(
        "bx-spec-missing",
        "bitexact",
        "--spec-a must on a server that does not speculate",
        ("parity", "sglang+{url}", "sglang+{url}", "--allow-same-engine", "--spec-a", "must", *common),
        2,
        r"speculation must run",
        prompts,
        server="normal",
    ),
    Case(
        "bx-bench-short",
        "bitexact",
        "a server returning fewer tokens than asked (bench)",
        (
            "bench",
            "sglang+{url}",
            "--lengths",
            "16",
            "--vocab-size",
            "50",
            "--new-tokens",
            "8",
            "--warmup",
            "0",
            "--out",
            "{tmp}/o",
        ),
        2,
        r"returned 4 of the 8 new tokens asked .*--allow-short",
        server="short",
    ),
    Case(
        "bx-bench-lengths",
        "bitexact",
        "bench --lengths 1,x",
        ("bench", URL, "--lengths", "1,x"),
        2,
        r"lengths '1,x': use numbers",
    ),
    Case(
        "bx-bench-newtokens",
        "bitexact",
        "bench --new-tokens 1",
        ("bench", URL, "--new-tokens", "1"),
        2,
        r"must be 2 or more, not 1",
    ),
    Case(
        "bx-bench-runs",
        "bitexact",
        "bench --runs 0",
        ("bench", URL, "--runs", "0"),
        2,
        r"must be 1 or more, not 0",
    ),
    # bitexact: goldens
    Case(
        "bx-record-nan",
        "bitexact",
        "recording a golden from a NaN server",
        ("golden", "record", "sglang+{url}", *golden_args, *common),
        2,
        r"position 2: the logprob of token \d+ is nan",
        prompts,
        server="nan",
        check=absent("g/h200/qwen3.8-27b-exact.json"),
    ),
    Case(
        "bx-record-golden-readonly",
        "bitexact",
        "--golden-dir on a read-only file system",
        ("golden", "record", "sglang+{url}", *golden_args[:-1], "{tmp}/mnt/g", *common),
        2,
        r"--golden-dir/--golden .*mnt/g/h200: cannot write there: Read-only file system \(the file system is "
        r"mounted read-only; give a writable --golden-dir/--golden\); checked before the run, so nothing ran",
        prompts,
        server="normal",
        fs="ro",
        check=rows_kept("o", 0),
    ),
    Case(
        "bx-record-golden-full",
        "bitexact",
        "--golden-dir on a full file system",
        ("golden", "record", "sglang+{url}", *golden_args[:-1], "{tmp}/mnt/g", *common),
        2,
        r"--golden-dir/--golden .*mnt/g/h200: cannot write there: No space left on device .*checked before "
        r"the run, so nothing ran",
        prompts,
        server="normal",
        fs="full",
        check=both_checks(
            no_tmp_left("after"), absent("after/g/h200/qwen3.8-27b-exact.json"), rows_kept("o", 0)
        ),
    ),
    Case(
        "bx-check-nan",
        "bitexact",
        "checking a golden against a NaN server",
        ("golden", "check", "sglang+{url}", *golden_args, "--out", "{tmp}/o"),
        2,
        r"check sglang\+http://127.0.0.1:\d+: prompt 'p0', position 2: the logprob of token \d+ is nan",
        golden(),
        server="nan",
    ),
    Case(
        "bx-record-card",
        "bitexact",
        "a golden for a card no table lists",
        (
            "golden",
            "record",
            "sglang+{url}",
            *golden_args[:-4],
            "--card",
            "h2oo",
            "--golden-dir",
            "{tmp}/g",
            *common,
        ),
        2,
        r"--card 'h2oo' names no known card \(known: .*h200.*\); .*--new-card",
        prompts,
        server="normal",
        check=absent("g/h2oo"),
    ),
    Case(
        "bx-record-slug",
        "bitexact",
        "a card slug with a path in it",
        (
            "golden",
            "record",
            "sglang+{url}",
            *golden_args[:-4],
            "--card",
            "../x",
            "--golden-dir",
            "{tmp}/g",
            *common,
        ),
        2,
        r"argument --card: '\.\./x': a name that becomes a file or folder name is lowercase letters",
        prompts,
        server="normal",
    ),
    Case(
        "bx-record-exists",
        "bitexact",
        "recording over an existing golden",
        ("golden", "record", "sglang+{url}", *golden_args, *common),
        2,
        r"golden .* exists; pass --force",
        both(prompts, golden()),
        server="normal",
    ),
    Case(
        "bx-record-remote",
        "bitexact",
        "a remote server without --card",
        (
            "golden",
            "record",
            "sglang+http://10.1.2.3:30000",
            "--recipe",
            str(RECIPE),
            "--golden-dir",
            "{tmp}/g",
            "--out",
            "{tmp}/o",
        ),
        2,
        r"runs on another machine: its card cannot be seen from here .*pass --card SLUG",
    ),
    Case(
        "bx-record-norecipe",
        "bitexact",
        "a golden without a recipe",
        ("golden", "record", URL, "--card", "h200", "--out", "{tmp}/o"),
        2,
        r"goldens are keyed by recipe: pass --recipe FILE or --recipe-name NAME",
    ),
    Case(
        "bx-check-missing",
        "bitexact",
        "checking against a golden that does not exist",
        ("golden", "check", "sglang+{url}", *golden_args, *common),
        2,
        r"no golden record for card 'h200' .*cannot pass without one. Record it",
        prompts,
        server="normal",
    ),
    Case(
        "bx-check-dir",
        "bitexact",
        "--golden is a directory",
        ("golden", "check", "sglang+{url}", *golden_args[:-2], "--golden", "{tmp}/g", *common),
        2,
        r"--golden .*/g is a directory; give the golden file",
        both(prompts, mkdir("g")),
        server="normal",
    ),
    Case(
        "bx-check-notjson",
        "bitexact",
        "a golden that is not JSON",
        ("golden", "check", "sglang+{url}", *golden_args, *common),
        2,
        r"is corrupted \(not standard JSON: .*restore it as it was recorded",
        both(prompts, raw_golden("{")),
        server="normal",
    ),
    Case(
        "bx-check-nanliteral",
        "bitexact",
        "a golden holding a NaN literal",
        ("golden", "check", "sglang+{url}", *golden_args, *common),
        2,
        r"non-standard JSON constant NaN",
        both(prompts, raw_golden('{"kind": "bitexact-golden", "x": NaN}')),
        server="normal",
    ),
    Case(
        "bx-check-utf8",
        "bitexact",
        "a golden that is not UTF-8",
        ("golden", "check", "sglang+{url}", *golden_args, *common),
        2,
        r"golden .*: not UTF-8 text \(byte 7, line 1: b'\\xff'\); give the golden record itself",
        both(prompts, raw_golden(b'{"a": "\xff"}')),
        server="normal",
    ),
    Case(
        "bx-check-settings",
        "bitexact",
        "a golden whose settings were edited",
        ("golden", "check", "sglang+{url}", *golden_args, "--prompts", "{tmp}/p.jsonl", "--out", "{tmp}/o"),
        2,
        r"was edited after it was recorded",
        both(prompts, golden(lambda r: r["settings"].update(max_new_tokens=5))),
        server="normal",
    ),
    Case(
        "bx-check-values",
        "bitexact",
        "a golden whose values were edited",
        ("golden", "check", "sglang+{url}", *golden_args, "--out", "{tmp}/o"),
        2,
        r"values of prompt 'p0' do not match their digests",
        both(prompts, golden(lambda r: r["prompts"][0]["logprobs"].__setitem__(0, -9.0))),
        server="normal",
    ),
    Case(
        "bx-check-prompt",
        "bitexact",
        "a golden whose prompt was edited",
        ("golden", "check", "sglang+{url}", *golden_args, "--out", "{tmp}/o"),
        2,
        r"was edited after it was recorded",
        both(prompts, golden(lambda r: r["prompts"][0]["prompt"].update(input_ids=[5, 6, 8]))),
        server="normal",
    ),
    Case(
        "bx-check-schema1",
        "bitexact",
        "a golden of the old schema",
        ("golden", "check", "sglang+{url}", *golden_args, "--out", "{tmp}/o"),
        2,
        r"has schema 1, older than this bitexact reads \(schema 2\); .*re-record it",
        golden(lambda r: r.update(schema=1)),
        server="normal",
    ),
    Case(
        "bx-check-card",
        "bitexact",
        "a golden of another card",
        (
            "golden",
            "check",
            "sglang+{url}",
            *golden_args[:-2],
            "--golden",
            "{tmp}/g/h200/qwen3.8-27b-exact.json",
            "--out",
            "{tmp}/o",
        ),
        2,
        r"recorded on card 'h100-sxm5-80gb', not 'h200'",
        golden(lambda r: r.update(card="h100-sxm5-80gb")),
        server="normal",
    ),
    Case(
        "bx-check-recipe",
        "bitexact",
        "a golden of another recipe",
        (
            "golden",
            "check",
            "sglang+{url}",
            "--recipe-name",
            "qwen3.8-27b-exact",
            "--card",
            "h200",
            "--golden",
            "{tmp}/g/h200/qwen3.8-27b-exact.json",
            "--out",
            "{tmp}/o",
        ),
        2,
        r"is for recipe 'other', not 'qwen3.8-27b-exact'",
        golden(lambda r: r.update(recipe="other")),
        server="normal",
    ),
    Case(
        "bx-check-model",
        "bitexact",
        "a server that serves another model than the golden's",
        ("golden", "check", "sglang+{url}", *golden_args, "--out", "{tmp}/o"),
        2,
        r"serves another model than golden .*model_path: golden 'Qwen/Qwen3.8-27B', "
        r"server 'Qwen/Qwen3-0.6B'.*--allow-identity-mismatch",
        golden(),
        server="normal",
        model="Qwen/Qwen3-0.6B",
    ),
    Case(
        "bx-check-newtokens",
        "bitexact",
        "a check asking other settings than the golden's",
        ("golden", "check", "sglang+{url}", *golden_args, "--max-new-tokens", "8", "--out", "{tmp}/o"),
        2,
        r"--max-new-tokens 8: golden .* was recorded with --max-new-tokens 4",
        golden(),
        server="normal",
    ),
    Case(
        "bx-check-foreign-prompt",
        "bitexact",
        "a check with a prompt the golden lacks",
        ("golden", "check", "sglang+{url}", *golden_args, "--prompts", "{tmp}/q.jsonl", "--out", "{tmp}/o"),
        2,
        r"prompt 'zz' is not in golden",
        both(golden(), write("q.jsonl", '{"id": "zz", "input_ids": [1]}\n')),
        server="normal",
    ),
    Case(
        "bx-golden-nodir",
        "bitexact",
        "a golden outside any repository",
        ("golden", "check", URL, "--recipe-name", "x", "--card", "h200", "--out", "{tmp}/o"),
        2,
        r"where do goldens live\? .*pass --golden-dir DIR",
    ),
    Case(
        "bx-build-info-json",
        "bitexact",
        "--build-info that is not JSON",
        ("golden", "check", "sglang+{url}", *golden_args, "--build-info", "{tmp}/b.json", "--out", "{tmp}/o"),
        2,
        r"--build-info .*b.json: not JSON .*write it with `bitexact-server --build-info > FILE`",
        both(golden(), write("b.json", "{")),
        server="normal",
    ),
    Case(
        "bx-history-none",
        "bitexact",
        "the history of a card with none",
        ("history", "h200", "--golden-dir", "{tmp}/g", "--out", "{tmp}/o"),
        2,
        r"no history for card 'h200' at .*history.jsonl: `bitexact golden record` and `golden check` append",
    ),
    Case(
        "bx-history-slug",
        "bitexact",
        "a history card slug with a path in it",
        ("history", "../h200", "--golden-dir", "{tmp}/g"),
        2,
        r"argument card: '\.\./h200': a name that becomes a file or folder name is lowercase letters",
    ),
    Case(
        "bx-history-diff",
        "bitexact",
        "--diff naming a build the history lacks",
        ("history", "h200", "--golden-dir", "{tmp}/g", "--diff", "B1", "B7", "--out", "{tmp}/o"),
        2,
        r"--diff 'B7' names no build of card 'h200': give B1..B1, a check number 1..1",
        write("g/h200/history.jsonl", HISTORY_LINE),
    ),
    # bitexact, issue 28 (nothing silent, third pass): an answer not fully compared never counts as equal
    Case(
        "bx-answer-empty",
        "bitexact",
        "a server that answers 0 tokens (parity)",
        ("parity", "sglang+{url}", "sglang+{url}", "--allow-same-engine", *common),
        2,
        r"prompt 'p0': the answer holds no tokens; an answer not compared in full never counts as equal",
        prompts,
        server="empty",
    ),
    Case(
        "bx-record-empty",
        "bitexact",
        "recording a golden of empty answers",
        ("golden", "record", "sglang+{url}", *golden_args, *common),
        2,
        r"prompt 'p0': the answer holds no tokens",
        prompts,
        server="empty",
        check=absent("g/h200/qwen3.8-27b-exact.json"),
    ),
    Case(
        "bx-check-golden-empty",
        "bitexact",
        "a golden of empty answers (recorded by an older bitexact)",
        ("golden", "check", "sglang+{url}", *golden_args, "--out", "{tmp}/o"),
        2,
        r"golden .*: prompt 'p0': the answer holds no tokens; a golden of answers that cannot be compared "
        r"in full would pass any check",
        golden(answers=empty_answers),
        server="normal",
    ),
    Case(
        "bx-repeat-short",
        "bitexact",
        "answers shorter than asked, without a stop reason (repeat)",
        ("repeat", "sglang+{url}", "-n", "2", "-b", "1", *common),
        2,
        r"the answer holds 2 of the 4 tokens asked, without a stop reason \(finish reason 'length'\)",
        prompts,
        server="short",
    ),
    Case(
        "bx-answer-notop",
        "bitexact",
        "a server that returns no top-k alternatives",
        ("parity", "sglang+{url}", "sglang+{url}", "--allow-same-engine", *common),
        2,
        r"the answer holds 4 tokens but top-k alternatives for 0 positions \(the top 2 were asked",
        prompts,
        server="notop",
    ),
    Case(
        "bx-answer-sometop",
        "bitexact",
        "a server that returns top-k for some positions only",
        ("repeat", "sglang+{url}", "-n", "2", "-b", "1", *common),
        2,
        r"top-k alternatives for 1 positions",
        prompts,
        server="sometop",
    ),
    Case(
        "bx-record-positive",
        "bitexact",
        "recording a golden of positive logprobs",
        ("golden", "record", "sglang+{url}", *golden_args, *common),
        2,
        r"position 0: the logprob of token \d+ is 0.5, above 0 \(a probability above 1\)",
        prompts,
        server="positive",
        check=absent("g/h200/qwen3.8-27b-exact.json"),
    ),
    # bitexact, issue 28: one strict reader per input kind, bounded numbers, each option once and whole
    Case(
        "bx-prompts-bool",
        "bitexact",
        "input_ids of booleans",
        ("repeat", URL + FAST, *common),
        2,
        r"'input_ids' of 'a' must be a non-empty list of ints >= 0 .*not booleans",
        write("p.jsonl", '{"id": "a", "input_ids": [true, false]}\n'),
    ),
    Case(
        "bx-prompts-both",
        "bitexact",
        "a prompt with both input_ids and text",
        ("repeat", URL + FAST, *common),
        2,
        r"prompt 'a' has both 'input_ids' and 'text'; give one",
        write("p.jsonl", '{"id": "a", "input_ids": [5], "text": "hello"}\n'),
    ),
    Case(
        "bx-prompts-nullid",
        "bitexact",
        "a prompt id of null",
        ("repeat", URL + FAST, *common),
        2,
        r"p.jsonl:1: 'id' is null; give a non-empty string or a whole number",
        write("p.jsonl", '{"id": null, "input_ids": [5]}\n'),
    ),
    Case(
        "bx-prompts-emptyid",
        "bitexact",
        "an empty prompt id",
        ("repeat", URL + FAST, *common),
        2,
        r"p.jsonl:1: 'id' is \"\"; give a non-empty string",
        write("p.jsonl", '{"id": "", "input_ids": [5]}\n'),
    ),
    Case(
        "bx-prompts-typo",
        "bitexact",
        "a prompt key misspelt (input_id beside text)",
        ("repeat", URL + FAST, *common),
        2,
        r"p.jsonl:1: unknown key\(s\) \['input_id'\]; a prompt line holds 'id' and one of",
        write("p.jsonl", '{"id": "a", "input_id": [5], "text": "hello"}\n'),
    ),
    Case(
        "bx-prompts-dupkey",
        "bitexact",
        "a prompt line with a key given twice",
        ("repeat", URL + FAST, *common),
        2,
        r"p.jsonl:1: the key 'input_ids' is given twice in one object",
        write("p.jsonl", '{"id": "a", "input_ids": [5], "input_ids": [6]}\n'),
    ),
    Case(
        "bx-prompts-u2028",
        "bitexact",
        "a valid prompt line holding U+2028 (read as one line, as JSON Lines defines it)",
        ("repeat", "sglang+{url}", "-n", "2", "-b", "1", *common),
        0,
        r"repeat: REPEATABLE: 0/1 repeats differ from the first",
        write("p.jsonl", '{"id": "a", "text": "one\u2028two"}\n'.encode()),
        server="normal",
    ),
    Case(
        "bx-tokenizer-negative",
        "bitexact",
        "--tokenizer bytes:-1000 (negative ids)",
        ("repeat", URL + FAST, *common, "--tokenizer", "bytes:-1000"),
        2,
        r"--tokenizer 'bytes:-1000': the offset after 'bytes:' must be a whole number from 0",
        prompts,
    ),
    Case(
        "bx-new-tokens-huge",
        "bitexact",
        "--max-new-tokens 100000000000000000000",
        ("repeat", URL, "--max-new-tokens", "100000000000000000000"),
        2,
        r"argument --max-new-tokens: must be 1048576 or less",
    ),
    Case(
        "bx-long-inf",
        "bitexact",
        "--long inf",
        ("repeat", URL + FAST, "--long", "inf", "--vocab-size", "50", "--out", "{tmp}/o"),
        2,
        r"lengths 'inf': use numbers like 640,2200,128k \(whole tokens\)",
    ),
    Case(
        "bx-timeout-inf",
        "bitexact",
        "an engine ?timeout=inf",
        ("repeat", "sglang+http://127.0.0.1:1?timeout=inf"),
        2,
        r"timeout must be 604800 or less, not inf",
    ),
    Case(
        "bx-option-abbrev",
        "bitexact",
        "an option abbreviated next to its full name",
        ("repeat", URL, "--max-new", "3", "--max-new-tokens", "4"),
        2,
        r"unrecognized arguments: --max-new 3",
    ),
    Case(
        "bx-option-twice-spellings",
        "bitexact",
        "one option given twice under two spellings",
        ("repeat", URL, "-n", "2", "--repeats", "3"),
        2,
        r"--repeats given more than once \(first as -n\); give each option once",
    ),
    # bitexact, issue 28: names that become paths stay inside their folder
    Case(
        "bx-recipe-name-path",
        "bitexact",
        "--recipe-name with ../ in it",
        ("golden", "record", URL, "--recipe-name", "../other/x", "--card", "h200", "--golden-dir", "{tmp}/g"),
        2,
        r"argument --recipe-name: '\.\./other/x': a name that becomes a file or folder name is",
    ),
    Case(
        "bx-recipe-file-name-path",
        "bitexact",
        "a recipe file whose name has ../ in it",
        ("golden", "record", URL, "--recipe", "{tmp}/r.json", "--card", "h200", "--golden-dir", "{tmp}/g"),
        2,
        r"--recipe .*r.json: the recipe's name '\.\./\.\./escaped': a name that becomes a file",
        recipe_with(name="../../escaped"),
        check=absent("escaped.json"),
    ),
    Case(
        "bx-recipe-variant-path",
        "bitexact",
        "a recipe variant named with a path",
        ("parity", URL, URL + "?timeout=5", "--preset", "recipe", "--recipe", "{tmp}/r.json"),
        2,
        r"--recipe .*r.json: the variant name '\.\./x': a name that becomes a file",
        variant("../x", {"speculative": True}),
    ),
    Case(
        "bx-parity-name-path",
        "bitexact",
        "parity --name with ../ in it (the reports' file name)",
        ("parity", URL, URL + "?timeout=5", "--name", "../../x"),
        2,
        r"argument --name: '\.\./\.\./x': a name that becomes a file or folder name is",
    ),
    Case(
        "bx-card-dir-link",
        "bitexact",
        "a card folder that is a link out of the golden dir",
        ("golden", "record", "sglang+{url}", *golden_args, *common),
        2,
        r"golden .*g/h200/qwen3.8-27b-exact.json resolves to .*elsewhere/qwen3.8-27b-exact.json, outside",
        both(
            prompts,
            mkdir("elsewhere"),
            mkdir("g"),
            lambda tmp: (tmp / "g" / "h200").symlink_to("../elsewhere"),
        ),
        server="normal",
        check=absent("elsewhere/qwen3.8-27b-exact.json"),
    ),
    Case(
        "bx-recipe-dupkey",
        "bitexact",
        "a recipe with a key given twice",
        ("parity", URL, URL + "?timeout=5", "--preset", "recipe", "--recipe", "{tmp}/r.json"),
        2,
        r"--recipe .*r.json: the key 'no-spec' is given twice in one object",
        write(
            "r.json",
            RECIPE.read_text().replace('"no-spec": {', '"no-spec": {"speculative": true}, "no-spec": {', 1),
        ),
    ),
    Case(
        "bx-recipe-inflight-type",
        "bitexact",
        "a recipe variant whose client.inflight is not a number",
        ("parity", URL, URL + "?timeout=5", "--preset", "x", "--recipe", "{tmp}/r.json"),
        2,
        r"variant 'x': 'client.inflight' must be a whole number from 1 to 4096, not \"8\"",
        variant("x", {"speculative": True, "client": {"inflight": "8"}}),
    ),
    # bitexact, issue 28: one file in one role; one command per verb in an --out
    Case(
        "bx-history-is-golden",
        "bitexact",
        "--history pointed at the golden itself",
        (
            "golden",
            "check",
            "sglang+{url}",
            *golden_args,
            "--history",
            "{tmp}/g/h200/qwen3.8-27b-exact.json",
            "--out",
            "{tmp}/o",
        ),
        2,
        r"--history .*qwen3.8-27b-exact.json is the golden itself: a history line appended to it would "
        r"corrupt it",
        golden(),
        server="normal",
        check=golden_intact("g/h200/qwen3.8-27b-exact.json"),
    ),
    Case(
        "bx-history-other-file",
        "bitexact",
        "--history pointed at another golden",
        (
            "golden",
            "check",
            "sglang+{url}",
            *golden_args,
            "--history",
            "{tmp}/other.json",
            "--out",
            "{tmp}/o",
        ),
        2,
        r"--history .*other.json is a bitexact-golden file \(its first line is no history line\)",
        both(golden(), write("other.json", '{"kind": "bitexact-golden", "schema": 2}\n')),
        server="normal",
        check=unchanged("other.json", '{"kind": "bitexact-golden", "schema": 2}\n'),
    ),
    Case(
        "bx-record-history-dir",
        "bitexact",
        "golden record --history DIR (checked before the golden is written)",
        ("golden", "record", "sglang+{url}", *golden_args, "--history", "{tmp}/h", *common),
        2,
        r"--history .*/h is a directory; give the history file",
        both(prompts, mkdir("h")),
        server="normal",
        check=absent("g/h200/qwen3.8-27b-exact.json"),
    ),
    Case(
        "bx-golden-is-prompts",
        "bitexact",
        "--golden naming the prompt file",
        (
            "golden",
            "record",
            URL,
            "--recipe-name",
            "r",
            "--card",
            "h200",
            "--golden",
            "{tmp}/p.jsonl",
            "--prompts",
            "{tmp}/p.jsonl",
            "--force",
            "--out",
            "{tmp}/o",
        ),
        2,
        r"--golden .*p.jsonl and --prompts name the same file",
        prompts,
        check=unchanged("p.jsonl", PROMPTS),
    ),
    Case(
        "bx-out-other-command",
        "bitexact",
        "a second parity of other engines in the same --out",
        ("parity", URL + FAST, "sglang+http://127.0.0.1:8?retries=0", *common),
        2,
        r"--out .*/o holds the run of another `bitexact parity` command \(`bitexact parity .*`; b: "
        r".* -> .*\).*new --out .*--force",
        both(
            prompts,
            other_run(("parity", URL + FAST, "sglang+http://127.0.0.1:7", *common), wrote="parity.md"),
        ),
        check=unchanged("o/parity.md", "the first run's report\n"),
    ),
    Case(
        "bx-resume-other-settings",
        "bitexact",
        "a resume with other settings (repeat -n 2, then -n 3)",
        ("repeat", URL + FAST, "-n", "3", *common),
        2,
        r"holds the run of another `bitexact repeat` command "
        r"\(`bitexact repeat .* -n 2 .*`; repeats: 2 -> 3\)",
        both(prompts, other_run(("repeat", URL + FAST, "-n", "2", *common))),
        check=unchanged("o/repeat.md", "the first run's report\n"),
    ),
    Case(
        "bx-out-force",
        "bitexact",
        "--force over another command's run: moved aside, never deleted",
        ("repeat", URL + FAST, "-n", "3", *common, "--force"),
        2,
        r"--force: the files bitexact wrote in .*/o \(those .bitexact-files lists\) are moved to "
        r".*/o/replaced/run-",
        both(prompts, other_run(("repeat", URL + FAST, "-n", "2", *common))),
        check=lambda tmp: None
        if list((tmp / "o" / "replaced").glob("run-*/repeat.md"))
        else "not moved aside",
    ),
    # bitexact, issue 28: the same engine under another name
    Case(
        "bx-same-engine-localhost",
        "bitexact",
        "parity of one server as 127.0.0.1 and as localhost",
        ("parity", "sglang+{url}", "sglang+http://localhost:{port}", *common),
        2,
        r"A and B are the same engine \(.* one server: the same identity and the same start time\), asked "
        r"the same way",
        prompts,
        server="normal",
    ),
    # bitexact, issue 28: a history line of the right kind and the wrong shape is skipped, never fatal
    Case(
        "bx-history-shape",
        "bitexact",
        "a history line of the right kind but the wrong shape",
        ("history", "h200", "--golden-dir", "{tmp}/g", "--out", "{tmp}/o"),
        0,
        r"history.jsonl:2: 'build' has no label; skipped",
        write(
            "g/h200/history.jsonl",
            HISTORY_LINE + HISTORY_LINE.replace('"build": {"label"', '"build": {"lab"'),
        ),
    ),
    # bitexact, issue 28: messages that say what is there
    Case(
        "bx-out-dangling",
        "bitexact",
        "--out a dangling symbolic link",
        ("repeat", URL + FAST, *common),
        2,
        r"--out .*/o is a symbolic link to nowhere, which does not exist; give a directory",
        both(prompts, lambda tmp: (tmp / "o").symlink_to("nowhere")),
    ),
    Case(
        "bx-out-loop",
        "bitexact",
        "--out a symbolic link loop",
        ("repeat", URL + FAST, *common),
        2,
        r"--out .*/o is a symbolic link loop",
        both(prompts, lambda tmp: (tmp / "o").symlink_to("o2"), lambda tmp: (tmp / "o2").symlink_to("o")),
    ),
    Case(
        "bx-golden-loop",
        "bitexact",
        "a golden that is a symbolic link loop",
        ("golden", "check", URL + FAST, *golden_args, "--out", "{tmp}/o"),
        2,
        r"golden .*qwen3.8-27b-exact.json is a symbolic link loop .*, not a file",
        both(
            mkdir("g/h200"),
            lambda tmp: (tmp / "g/h200/qwen3.8-27b-exact.json").symlink_to("qwen3.8-27b-exact.json"),
        ),
    ),
    Case(
        "bx-recipe-env-cr",
        "bitexact",
        "BITEXACT_RECIPE ending in a carriage return",
        ("parity", URL, URL + "?timeout=5", "--preset", "recipe"),
        2,
        r"\$BITEXACT_RECIPE is '.*r.json\\r': it holds the control character '\\r'",
        write("r.json", RECIPE.read_text()),
        env={"BITEXACT_RECIPE": "{tmp}/r.json\r"},
    ),
    # bitexact, issue 28: what the fuzzer (checks/offline/bitexact/test_bitexact_fuzz.py) found
    Case(
        "bx-fuzz-prompt-surrogate",
        "bitexact",
        "a prompt text holding a lone surrogate (a valid JSON escape, not text)",
        ("repeat", URL + FAST, *common),
        2,
        r"p.jsonl:1: 'text' of 'a' holds a lone surrogate \(\\ud800, half of a UTF-16 pair\), which is not "
        r"text",
        write("p.jsonl", '{"id": "a", "text": "\\ud800"}\n'),
    ),
    Case(
        "bx-fuzz-answer-entry",
        "bitexact",
        "a server answer whose logprob entry is an object, not a (logprob, id, text) triple",
        ("repeat", "sglang+{url}", "-n", "2", "-b", "1", *common),
        2,
        r"output_token_logprobs\[0\] is '\{\}', not \(logprob, token_id, text\)",
        prompts,
        server="shapeless",
    ),
    # bitexact, issue 28 review: inputs of each class that the first pass did not list
    Case(
        "bx-answer-badid",
        "bitexact",
        "two servers sending the same token id that no engine can produce (-5)",
        ("parity", "sglang+{url}", "sglang+{url}", "--allow-same-engine", *common),
        2,
        r"prompt 'p0': position 0: the token id -5 is not a token id \(a token id is a whole number from 0 "
        r"to 2147483647\)",
        prompts,
        server="badid",
    ),
    Case(
        "bx-answer-dupkey",
        "bitexact",
        "a server answer holding `output_ids` twice (which copy is the answer?)",
        ("parity", "sglang+{url}", "sglang+{url}", "--allow-same-engine", *common),
        2,
        r"/generate answered JSON that cannot be read one way: the key 'output_ids' is given twice",
        prompts,
        server="dupkey",
    ),
    Case(
        "bx-prompts-long-number",
        "bitexact",
        "input_ids holding a number of 5000 digits (more than Python reads)",
        ("repeat", URL + FAST, *common),
        2,
        r"p.jsonl:1: a number too long to read",
        write("p.jsonl", '{"id": "a", "input_ids": [' + "9" * 5000 + "]}\n"),
    ),
    Case(
        "bx-count-underscore",
        "bitexact",
        "--limit 1_0 (Python reads it as 10)",
        ("repeat", URL + FAST, "--limit", "1_0", *common),
        2,
        r"argument --limit: '1_0' is not a whole number",
        prompts,
    ),
    Case(
        "bx-long-exponent",
        "bitexact",
        "--long 1e3 (a float's exponent, not a length)",
        ("repeat", URL + FAST, "--long", "1e3", "--vocab-size", "100", "--out", "{tmp}/o"),
        2,
        r"lengths '1e3': use numbers like 640,2200,128k \(whole tokens\)",
    ),
    Case(
        "bx-seed-without-long",
        "bitexact",
        "--vocab-size or --seed without --long (they shape generated prompts only: ignored before)",
        ("repeat", URL + FAST, "--vocab-size", "3", "--out", "{tmp}/o"),
        2,
        r"--vocab-size shape generated long prompts \(--long\) only, and this run reads the shipped battery",
    ),
    Case(
        "bx-out-force-user-files",
        "bitexact",
        "--force in an --out that also holds the prompt file (and other files of the user's)",
        (
            "repeat",
            URL + FAST,
            "-n",
            "3",
            "--prompts",
            "{tmp}/o/p.jsonl",
            "--max-new-tokens",
            "4",
            "--top-logprobs",
            "2",
            "--out",
            "{tmp}/o",
            "--force",
        ),
        2,
        r"--force: the files bitexact wrote in .*/o \(those .bitexact-files lists\) are moved to "
        r".*/o/replaced/run-.*; files of yours there stay untouched, whatever their names \(p.jsonl: "
        r".bitexact-files does not list them\)",
        both(
            write("o/p.jsonl", PROMPTS),
            other_run(("repeat", URL + FAST, "-n", "2", "--prompts", "{tmp}/o/p.jsonl", "--out", "{tmp}/o")),
        ),
        check=lambda tmp: None
        if (tmp / "o" / "p.jsonl").is_file() and list((tmp / "o" / "replaced").glob("run-*/repeat.md"))
        else "the prompt file was moved aside, or the first run's report was not",
    ),
    Case(
        "bx-parity-name-other-verb",
        "bitexact",
        "parity --name golden-record (the report of a golden record in the same --out)",
        ("parity", URL + FAST, URL + FAST, "--name", "golden-record", *common),
        2,
        r"--name 'golden-record': `bitexact golden record` names its files so, and its report in the same "
        r"--out would be replaced; give another name",
        prompts,
    ),
    Case(
        "bx-same-engine-two-apis",
        "bitexact",
        "parity of one SGLang server with itself, through its native and its OpenAI-compatible API",
        ("parity", "sglang+{url}", "openai+{url}/v1?model=Qwen/Qwen3.8-27B", *common),
        2,
        r"A and B are the same engine \(.*: one server, reached through two APIs \(sglang and openai\): the "
        r"same build, server arguments and start time\)",
        prompts,
        server="normal",
    ),
    Case(
        "bx-history-verdict-counts",
        "bitexact",
        "a history line whose verdict EQUAL contradicts its counts (1 of 2 prompts equal)",
        ("history", "h200", "--golden-dir", "{tmp}/g", "--out", "{tmp}/o"),
        0,
        r"history.jsonl:2: its verdict EQUAL disagrees with its counts \(1 of 2 prompts equal, 0 touched, "
        r"no first divergence\); skipped",
        write("g/h200/history.jsonl", HISTORY_LINE + HISTORY_LINE.replace('"equal": 2', '"equal": 1')),
    ),
    Case(
        "bx-history-at",
        "bitexact",
        'a history line whose time is no time ("yesterday")',
        ("history", "h200", "--golden-dir", "{tmp}/g", "--out", "{tmp}/o"),
        0,
        r"history.jsonl:2: 'at' is \"yesterday\", not a time \(ISO 8601, as bitexact writes it\); skipped",
        write(
            "g/h200/history.jsonl",
            HISTORY_LINE + HISTORY_LINE.replace('"at": "2026-12-01T00:00:00+00:00"', '"at": "yesterday"'),
        ),
    ),
    Case(
        "bx-history-link-loop",
        "bitexact",
        "a card's history that is a symbolic link loop",
        ("history", "h200", "--golden-dir", "{tmp}/g", "--out", "{tmp}/o"),
        2,
        r"history.jsonl is a symbolic link loop \(it points at itself through other links\)",
        both(mkdir("g/h200"), lambda tmp: (tmp / "g/h200/history.jsonl").symlink_to("history.jsonl")),
    ),
    Case(
        "bx-golden-dir-file",
        "bitexact",
        "golden record with --golden-dir a file (it failed after the engine ran, naming a temporary file)",
        (
            "golden",
            "record",
            "sglang+{url}",
            "--recipe",
            str(RECIPE),
            "--variant",
            "no-spec",
            "--card",
            "h200",
            "--golden-dir",
            "{tmp}/g",
            *common,
        ),
        2,
        r"golden .*/g/h200/qwen3.8-27b-exact.json: its folder .*/g is a file; give --golden-dir a folder",
        both(prompts, write("g", "not a folder\n")),
        server="normal",
        check=lambda tmp: None if not list((tmp / "o").glob("golden-*.jsonl")) else "the engine ran first",
    ),
    Case(
        "bx-golden-dir-dangling",
        "bitexact",
        'golden record with --golden-dir a dangling symbolic link (it said "File exists" after the run)',
        ("golden", "record", "sglang+{url}", *golden_args, *common),
        2,
        r"golden .*/g/h200/qwen3.8-27b-exact.json: its folder .*/g is a symbolic link to nowhere, which does "
        r"not exist",
        both(prompts, lambda tmp: (tmp / "g").symlink_to("nowhere")),
        server="normal",
    ),
    Case(
        "bx-check-golden-dir-file",
        "bitexact",
        'golden check with --golden-dir a file (it said "no golden record")',
        ("golden", "check", URL + FAST, *golden_args, "--out", "{tmp}/o"),
        2,
        r"golden .*/g/h200/qwen3.8-27b-exact.json: its folder .*/g is a file",
        write("g", "not a folder\n"),
    ),
    Case(
        "bx-out-under-file",
        "bitexact",
        "--out inside a file (o/sub where o is a file)",
        ("repeat", URL + FAST, *common[:-1], "{tmp}/o/sub"),
        2,
        r"--out .*/o/sub: its folder .*/o is a file; give a directory",
        both(prompts, write("o", "a file\n")),
    ),
    Case(
        "bx-tokenizer-not-one",
        "bitexact",
        "--tokenizer a folder that holds no tokenizer",
        ("repeat", URL + FAST, "--tokenizer", "{tmp}/tok", *common),
        2,
        r"--tokenizer '.*/tok': not a tokenizer transformers can load \(.*\); give a local tokenizer folder",
        both(prompts, mkdir("tok")),
    ),
    Case(
        "bx-check-partial",
        "bitexact",
        'golden check --limit 1 of a golden of 2 prompts (it read "EQUAL: 1/1 prompts equal to" the golden)',
        ("golden", "check", "sglang+{url}", *golden_args, "--limit", "1", "--out", "{tmp}/o"),
        0,
        r"golden check: EQUAL: 1/1 prompts equal to .*qwen3.8-27b-exact.json \(a partial check: 1 of the "
        r"golden's 2 prompts\)",
        golden(),
        server="normal",
    ),
    Case(
        "bx-engine-underscore",
        "bitexact",
        "an engine ?timeout=1_0 (Python reads it as 10)",
        ("repeat", "sglang+http://127.0.0.1:1?timeout=1_0"),
        2,
        r"timeout='1_0' is not a number",
    ),
    Case(
        "bx-engine-userinfo",
        "bitexact",
        "an engine URL with a user name and password before the host",
        ("repeat", "sglang+http://user:secret@127.0.0.1:1"),
        2,
        r"give the server as sglang\+http://host:port\[/path\]\[\?options\], without a user name or password",
    ),
    Case(
        "bx-record-recipe-name-spec",
        "bitexact",
        "golden record --recipe R --recipe-name N on a server that does not speculate (the name dropped the "
        "recipe variant's requirement, and the golden was written)",
        (
            "golden",
            "record",
            "sglang+{url}",
            "--recipe",
            str(RECIPE),
            "--recipe-name",
            "n",
            "--card",
            "h200",
            "--golden-dir",
            "{tmp}/g",
            *common,
        ),  # fmt: skip
        2,
        r"speculation must run, but 2/2 prompts show no verify steps .*\(then pass --spec any\)",
        prompts,
        server="normal",
        check=absent("g/h200/n.json"),
    ),
    Case(
        "bx-record-no-history-and-history",
        "bitexact",
        "golden record --no-history --history FILE (the file was silently ignored)",
        ("golden", "record", URL + FAST, *golden_args, "--no-history", "--history", "{tmp}/h.jsonl", *common),
        2,
        r"--no-history and --history .*h.jsonl say opposite things; give one of them",
        prompts,
    ),
    Case(
        "bx-answer-two-choices",
        "bitexact",
        "an OpenAI-compatible answer holding two choices where one was asked (the first was compared)",
        ("repeat", "openai+{url}/v1?model=Qwen/Qwen3.8-27B", "-n", "2", *common),
        2,
        r"answer for 'p\d#r\d' holds 2 choices, not the one asked \(n=1\); which one would be compared\?",
        prompts,
        server="twochoices",
    ),
    Case(
        "bx-answer-stopped",
        "bitexact",
        "two servers that stop at a stop token after half the tokens asked (compared as they are: the "
        "verdict said only how many positions)",
        ("parity", "sglang+{url}", "sglang+{url}", "--allow-same-engine", *common),
        0,
        r"at 4 positions of 2 prompts \(2 of them stopped before the 4 tokens asked, with a stop reason\)",
        prompts,
        server="stopped",
    ),
    Case(
        "bx-fuzz-completion-tokens",
        "bitexact",
        "an answer whose completion_tokens says one token more than it holds (found while "
        "extending the fuzzer: REPEATABLE over answers missing a position by their own count)",
        ("repeat", "sglang+{url}", "-n", "2", "-b", "1", *common),
        2,
        r"meta_info.completion_tokens: the server generated 5 tokens but gave logprobs for 4; positions "
        r"cannot be matched to tokens, so the answer is refused",
        prompts,
        server="miscount",
    ),
    Case(
        "bx-fuzz-finish-length",
        "bitexact",
        "an answer whose finish reason says it reached a length of 5 beside 4 tokens (found while "
        "extending the fuzzer: REPEATABLE)",
        ("repeat", "sglang+{url}", "-n", "2", "-b", "1", *common),
        2,
        r"meta_info.finish_reason.length: the server generated 5 tokens but gave logprobs for 4",
        prompts,
        server="finish-length",
    ),
    Case(
        "bx-fuzz-token-id-text",
        "bitexact",
        "an OpenAI-compatible answer naming an alternative token_id:-3 (found while extending the fuzzer: "
        "compared by its value as a token named by text; token_id: with an Arabic-Indic 3 read as the id 3)",
        ("repeat", "openai+{url}/v1?model=Qwen/Qwen3.8-27B", "-n", "2", *common),
        2,
        r"the token 'token_id:-3' is written as vLLM writes token ids \(token_id:N\) but N is not a token "
        r"id \(a whole number in ASCII digits\)",
        prompts,
        server="textid",
    ),
    Case(
        "bx-fuzz-openai-top-number",
        "bitexact",
        "an OpenAI-compatible answer whose logprobs.top_logprobs is a number (found by the fuzzer: an "
        "internal error, TypeError)",
        ("repeat", "openai+{url}/v1?model=Qwen/Qwen3.8-27B", "-n", "2", *common),
        2,
        r"logprobs.top_logprobs is '-1.5', not a list",
        prompts,
        server="topnumber",
    ),
    Case(
        "bx-record-force-other-card",
        "bitexact",
        "golden record --force with --golden naming another card's golden",
        (
            "golden",
            "record",
            URL + FAST,
            "--recipe-name",
            "qwen3.8-27b-exact",
            "--card",
            "h100-nvl",
            "--golden",
            "{tmp}/g/h200/qwen3.8-27b-exact.json",
            "--force",
            *common,
        ),  # fmt: skip
        2,
        r"qwen3.8-27b-exact.json is the golden of card 'h200', recipe 'qwen3.8-27b-exact', and this one is "
        r"of card 'h100-nvl', recipe 'qwen3.8-27b-exact': --force replaces a golden of the same card",
        both(prompts, golden()),
        check=golden_intact("g/h200/qwen3.8-27b-exact.json"),
    ),
    # pinlock
    Case("pl-command", "pinlock", "an unknown command", ("pin",), 2, r"invalid choice: 'pin'"),
    Case(
        "pl-repo",
        "pinlock",
        "a repo without an organisation",
        ("--root", "{tmp}/repo", "weights", "noslash@" + REV),
        2,
        r"not a Hugging Face repo id \(org/name\): 'noslash'; give it as on the Hub",
        checkout(),
    ),
    Case(
        "pl-rev-branch",
        "pinlock",
        "a branch where a commit belongs",
        ("--root", "{tmp}/repo", "weights", "Org/Name@main"),
        2,
        r"give the commit as ORG/NAME@REV: a commit is 40 lower-case hex digits, not 'main'",
        checkout(),
    ),
    Case(
        "pl-norev",
        "pinlock",
        "a repo without a revision",
        ("--root", "{tmp}/repo", "weights", "Org/Name"),
        2,
        r"Org/Name: give the commit as ORG/NAME@REV",
        checkout(),
    ),
    Case(
        "pl-snapshot-missing",
        "pinlock",
        "--snapshot names nothing",
        ("--root", "{tmp}/repo", "weights", "Org/Name@" + REV, "--snapshot", "{tmp}/nope"),
        2,
        r"--snapshot .*nope does not exist",
        checkout(),
    ),
    Case(
        "pl-snapshot-file",
        "pinlock",
        "--snapshot is a file",
        ("--root", "{tmp}/repo", "weights", "Org/Name@" + REV, "--snapshot", "{tmp}/f"),
        2,
        r"--snapshot .*/f is not a directory",
        checkout(write("f", "x")),
    ),
    Case(
        "pl-snapshot-nocache",
        "pinlock",
        "--snapshot is no hub cache",
        ("--root", "{tmp}/repo", "weights", "Org/Name@" + REV, "--snapshot", "{tmp}/d"),
        2,
        r"is not a Hugging Face hub cache",
        checkout(write("d/x.json", "{}")),
    ),
    Case(
        "pl-snapshot-other",
        "pinlock",
        "--snapshot of another repo",
        ("--root", "{tmp}/repo", "weights", "Org/Other@" + REV, "--snapshot", "{tmp}/hub/models--Org--Name"),
        2,
        r"holds Org/Name .*not Org/Other",
        checkout(hub_cache({"config.json": b"{}"})),
    ),
    Case(
        "pl-snapshot-two",
        "pinlock",
        "--snapshot with two repos",
        ("--root", "{tmp}/repo", "weights", "A/B@" + REV, "C/D@" + REV, "--snapshot", "{tmp}/hub"),
        2,
        r"--snapshot takes exactly one ORG/NAME\[@REV\]",
        checkout(),
    ),
    Case(
        "pl-snapshot-norepo",
        "pinlock",
        "--snapshot without a repo",
        ("--root", "{tmp}/repo", "weights", "--snapshot", "{tmp}/hub"),
        2,
        r"--snapshot needs the repo it holds",
        checkout(),
    ),
    Case(
        "pl-snapshot-noweights",
        "pinlock",
        "a snapshot holding only config.json",
        ("--root", "{tmp}/repo", "weights", "Org/Name@" + REV, "--snapshot", "{tmp}/hub"),
        1,
        r"it holds no weights \(config.json; none ends with .safetensors",
        checkout(hub_cache({"config.json": b"{}"})),
        env={"HF_HUB_OFFLINE": "1"},
        check=absent("repo/pkgs/weights/manifests/Org--Name.json"),
    ),
    Case(
        "pl-snapshot-index",
        "pinlock",
        "a snapshot missing a shard its index names",
        ("--root", "{tmp}/repo", "weights", "Org/Name@" + REV, "--snapshot", "{tmp}/hub"),
        1,
        r"model.safetensors.index.json names model-00002-of-00002.safetensors, which the snapshot lacks",
        checkout(
            hub_cache(
                {
                    "model.safetensors.index.json": json.dumps(
                        {
                            "weight_map": {
                                "a": "model-00001-of-00002.safetensors",
                                "b": "model-00002-of-00002.safetensors",
                            }
                        }
                    ).encode(),
                    "model-00001-of-00002.safetensors": b"w",
                }
            )
        ),
        env={"HF_HUB_OFFLINE": "1"},
    ),
    Case(
        "pl-refs-newline",
        "pinlock",
        "refs/main with a trailing newline",
        ("--root", "{tmp}/repo", "weights", "Org/Name", "--snapshot", "{tmp}/hub"),
        2,
        r"refs/main holds b'a{40}\\n': a commit with white space around it, .*printf %s",
        checkout(hub_cache({"config.json": b"{}"}, refs=(REV + "\n").encode())),
    ),
    Case(
        "pl-replace-pin",
        "pinlock",
        "pinning another revision over the recipe's pin",
        (
            "--root",
            "{tmp}/repo",
            "weights",
            "Qwen/Qwen3.8-27B@" + OTHER_REV,
            "--snapshot",
            "{tmp}/hub/models--Qwen--Qwen3.8-27B/snapshots/" + OTHER_REV,
        ),
        2,
        r"already pins Qwen/Qwen3.8-27B@1d4bf0f2.*would replace it, "
        r"and the recipe nix/recipes/qwen3.8-27b-exact.json, which names @1d4bf0f2.*pass --force",
        both(
            checkout(manifest("Qwen/Qwen3.8-27B", "1d4bf0f2ff6012fd82039f2fa52739d0dd7c60c0")),
            hub_cache({"model.safetensors": b"w"}, repo="Qwen/Qwen3.8-27B", rev=OTHER_REV),
        ),
    ),
    Case(
        "pl-recipe-utf8",
        "pinlock",
        "a recipe that is not UTF-8",
        ("--root", "{tmp}/repo", "--recipe", "{tmp}/r.json", "status"),
        2,
        r"r.json: not UTF-8 text \(byte 12, line 1: b'\\xe9'\); give the recipe file .*, saved as UTF-8",
        both(checkout(), write("r.json", b'{"schema": "\xe9"}')),
    ),
    Case(
        "pl-recipe-schema",
        "pinlock",
        "a recipe of an unknown schema",
        ("--root", "{tmp}/repo", "--recipe", "{tmp}/r.json", "status"),
        2,
        r"recipe .*r.json has schema 99: it was written by a newer pinlock \(this one reads schema 1\); "
        r"upgrade pinlock",
        both(checkout(), recipe_with(schema=99)),
    ),
    Case(
        "pl-recipe-missing",
        "pinlock",
        "--recipe names no file",
        ("--root", "{tmp}/repo", "--recipe", "{tmp}/none.json", "status"),
        2,
        r"recipe .*none.json is missing",
        checkout(),
    ),
    Case(
        "pl-recipe-dir",
        "pinlock",
        "--recipe is a directory",
        ("--root", "{tmp}/repo", "--recipe", "{tmp}/d", "status"),
        2,
        r"recipe .*/d is a directory; give the recipe file",
        both(checkout(), mkdir("d")),
    ),
    Case(
        "pl-manifest-json",
        "pinlock",
        "a weights manifest that is not JSON",
        ("--root", "{tmp}/repo", "status"),
        1,
        r"MALFORMED .*Qwen--Qwen3.8-27B.json: not valid JSON",
        checkout(write("repo/pkgs/weights/manifests/Qwen--Qwen3.8-27B.json", "{")),
    ),
    Case(
        "pl-pin-utf8",
        "pinlock",
        "a pin file that is not UTF-8",
        ("--root", "{tmp}/repo", "status"),
        1,
        r"sglang-src.json: not UTF-8 text",
        checkout(write("repo/nix/pins/sglang-src.json", b"\xff")),
    ),
    Case(
        "pl-hashpath",
        "pinlock",
        "hash-path of nothing",
        ("hash-path", "{tmp}/nope"),
        2,
        r"nope does not exist",
    ),
    Case(
        "pl-root",
        "pinlock",
        "--root that is no checkout",
        ("--root", "{tmp}", "status"),
        2,
        r"recipe .* is missing: pass --recipe PATH or run in the flake's checkout",
    ),
    Case(
        "pl-cargo-set",
        "pinlock",
        "cargo --set without a hash",
        ("cargo", "--set", "foo"),
        2,
        r"expected NAME-VERSION=sha256-\.\.\., got 'foo'",
    ),
    # the launcher
    Case(
        "ln-recipe-missing",
        "launcher",
        "--recipe names no file",
        ("--recipe", "{tmp}/none.json", "--print"),
        2,
        r"recipe .*none.json: no such file; give the recipe file",
    ),
    Case(
        "ln-recipe-dir",
        "launcher",
        "--recipe is a directory",
        ("--recipe", "{tmp}/d", "--print"),
        2,
        r"recipe .*/d is a directory",
        mkdir("d"),
    ),
    Case(
        "ln-recipe-utf8",
        "launcher",
        "a recipe that is not UTF-8",
        ("--recipe", "{tmp}/r.json", "--print"),
        2,
        r"r.json: not UTF-8 text \(byte 2, line 1: b'\\xff'\); give the recipe file",
        write("r.json", b'{"\xff": 1}'),
    ),
    Case(
        "ln-recipe-json",
        "launcher",
        "a recipe that is not JSON",
        ("--recipe", "{tmp}/r.json", "--print"),
        2,
        r"r.json: not valid JSON",
        write("r.json", "{"),
    ),
    Case(
        "ln-recipe-schema",
        "launcher",
        "a recipe of an unknown schema",
        ("--recipe", "{tmp}/r.json", "--print"),
        2,
        r"recipe .*r.json has schema 2: it was written by a newer bitexact-server "
        r"\(this one reads schema 1\)",
        recipe_with(schema=2),
    ),
    Case(
        "ln-recipe-noschema",
        "launcher",
        "a recipe without a schema",
        ("--recipe", "{tmp}/r.json", "--print"),
        2,
        r"r.json has no `schema`: every file of this kind names its schema "
        r"\(bitexact-server reads schema 1\)",
        recipe_without("schema"),
    ),
    Case(
        "ln-variant",
        "launcher",
        "an unknown variant",
        ("--recipe", str(RECIPE), "--variant", "fast", "--print"),
        2,
        r"unknown variant `fast` for recipe qwen3.8-27b-exact; known: backend-flashinfer, ",
    ),
    Case(
        "ln-variant-key",
        "launcher",
        "a variant with an unknown key",
        ("--recipe", "{tmp}/r.json", "--variant", "x", "--print"),
        2,
        r"variant `x` has unknown keys \['flags'\]",
        variant("x", {"flags": []}),
    ),
    Case(
        "ln-variant-env",
        "launcher",
        "a variant env value that is a number",
        ("--recipe", "{tmp}/r.json", "--variant", "x", "--print"),
        2,
        r"`variants.x.env` must map strings to strings \(quote numbers in JSON\)",
        variant("x", {"env": {"A": 1}}),
    ),
    Case(
        "ln-argv",
        "launcher",
        "a recipe argv that is not SGLang's",
        ("--recipe", "{tmp}/r.json", "--print"),
        2,
        r"`launch.argv` must start with python -m sglang.launch_server",
        recipe_with(launch={**json.loads(RECIPE.read_text())["launch"], "argv": ["vllm", "serve"]}),
    ),
    Case(
        "ln-sglang-flag",
        "launcher",
        "an SGLang flag given to the launcher",
        ("--recipe", str(RECIPE), "--tp", "2"),
        2,
        r"unknown option --tp: .*SGLang flags are not accepted",
    ),
    Case(
        "ln-port",
        "launcher",
        "--port that is not a port",
        ("--recipe", str(RECIPE), "--port", "http", "--print"),
        2,
        r"not a TCP port: 'http'",
    ),
    Case(
        "ln-replicas-no-port",
        "launcher",
        "replicas without a port for their router",
        ("--recipe", str(RECIPE), "--replicas", "2", "--print"),
        2,
        r"--replicas needs --port: the router listens there",
    ),
    Case(
        "ln-replicas-zero",
        "launcher",
        "zero replicas",
        ("--recipe", str(RECIPE), "--replicas", "0", "--port", "30000", "--print"),
        2,
        r"not a positive whole number: '0'",
    ),
    Case(
        "ln-router-policy",
        "launcher",
        "a router policy SGLang's router does not have",
        (
            "--recipe",
            str(RECIPE),
            "--replicas",
            "2",
            "--port",
            "30000",
            "--router-policy",
            "fastest",
            "--print",
        ),
        2,
        r"invalid choice: 'fastest'",
    ),
    Case(
        "ln-fleet-option-alone",
        "launcher",
        "a fleet option without --replicas",
        ("--recipe", str(RECIPE), "--gpus", "0,1", "--port", "30000", "--print"),
        2,
        r"--gpus only applies with --replicas N",
    ),
    Case(
        "ln-gpus-empty",
        "launcher",
        "--gpus naming no GPU",
        ("--recipe", str(RECIPE), "--replicas", "2", "--port", "30000", "--gpus", ",", "--print"),
        2,
        r"--gpus: ',' names no GPU",
    ),
    Case(
        "ln-norecipe",
        "launcher",
        "no recipe at all",
        ("--print",),
        2,
        r"no recipe: pass --recipe PATH or set BITEXACT_RECIPE",
        env={"BITEXACT_RECIPE": ""},
    ),
    # the image entrypoint
    Case(
        "ep-recipe-utf8",
        "entrypoint",
        "an image recipe that is not UTF-8",
        ("--preflight-only",),
        2,
        r"refusing to start: .*r.json: not UTF-8 text",
        write("r.json", b'{"\xff": 1}'),
        env={"BITEXACT_RECIPE": "{tmp}/r.json"},
    ),
    Case(
        "ep-recipe-schema",
        "entrypoint",
        "an image recipe of an unknown schema",
        ("--preflight-only",),
        2,
        r"refusing to start: recipe .*r.json has schema 3: it was written by a newer bitexact-server",
        recipe_with(schema=3),
        env={"BITEXACT_RECIPE": "{tmp}/r.json"},
    ),
    Case(
        "ep-recipe-unset",
        "entrypoint",
        "no BITEXACT_RECIPE",
        ("--preflight-only",),
        2,
        r"BITEXACT_RECIPE is unset",
        env={"BITEXACT_RECIPE": ""},
    ),
    Case(
        "ep-port",
        "entrypoint",
        "--port that is not a port",
        ("--port", "70000"),
        2,
        r"not a TCP port: '70000'",
    ),
    # the GPU checks' runner
    Case(
        "gc-port-taken",
        "gpu-checks",
        "a port another server holds",
        (*gc_args, "--port", "{busy_port}", "--only", "gpu-parity-recipe"),
        2,
        r"port \d+ is taken \(pid \d+: .*\): a server left by an earlier run",
        gc_ready,
        check=gc_nothing_written,
    ),
    Case(
        "gc-tree-missing",
        "gpu-checks",
        "a GPU machine without the assembled trees (a fresh one: the machine that built them went back)",
        (*gc_args, "--port", "{free_port}", "--only", "gpu-parity-recipe"),
        2,
        r"--tree patched=.*/w/patched: no sglang/srt there; give the site-packages folder that holds sglang/",
        gc_golden,
        check=gc_nothing_written,
    ),
    Case(
        "gc-tree-not-patched",
        "gpu-checks",
        "a tree without the series' manifest given as the patched tree",
        (*gc_args, "--only", "gpu-parity-recipe"),
        2,
        r"--tree patched=.*: no sglang/srt/bitexact_manifest.json \(the series' manifest\): it is not a "
        r"patched tree",
        both(write("w/patched/sglang/srt/__init__.py", ""), gc_golden),
        check=gc_nothing_written,
    ),
    Case(
        "gc-golden-dir-missing",
        "gpu-checks",
        "no goldens folder (the golden checks compare with it)",
        (*gc_args, "--only", "gpu-golden"),
        2,
        r"--golden-dir .*/g: no such folder \(the goldens: checks/golden\)",
        gc_tree,
    ),
    Case(
        "gc-kernels-without-checks",
        "gpu-checks",
        "the kernel step without the kernel checks or the series",
        (*gc_args, "--only", "gpu-kernels"),
        2,
        r"the plan's kernel phase needs --kernel-checks DIR \(checks/gpu\) and --series DIR",
        gc_ready,
    ),
    Case(
        "gc-lanes-without-share",
        "gpu-checks",
        "several lanes on one card at the recipe's memory share",
        (*gc_args, "--lanes", "3"),
        2,
        r"--lanes 3 puts 3 servers on one card: give --mem-fraction-static F with 3 x F <= 0.9",
        gc_ready,
    ),
    Case(
        "gc-plan-schema",
        "gpu-checks",
        "a plan of another schema (exported by another checkout)",
        ("steps", "--plan", "{tmp}/plan.json"),
        2,
        r"plan .*plan.json has schema 2; this runner reads schema 1: export the plan with this checkout's",
        write("plan.json", '{"schema": 2}'),
    ),
    Case(
        "gc-verdict-no-run",
        "gpu-checks",
        "a step's verdict asked of a folder no run wrote",
        ("verdict", "{tmp}", "gpu-repeat"),
        2,
        r"no run.json: not a run's OUT folder",
    ),
    Case(
        "router-no-site",
        "perf-router",
        "a router site without SGLang's router in it",
        ("--work", "{tmp}/w", "--tree", "patched", "--out", "{tmp}/o", "--router-site", "{tmp}/site"),
        2,
        r"--router-site .*site: no sglang_router in it; install the wheel there",
        write("w/patched/sglang/__init__.py", ""),
    ),
    Case(
        "e2e-tree-unknown-patch",
        "e2e-assemble",
        "a tree without a patch the series does not have",
        ("tree", "--wheels", "{tmp}", "--work", "{tmp}/w", "--name", "t", "--without", "0009"),
        2,
        r"--without 0009: no such patch in the series \(0001-bitexact-marker.patch, ",
    ),
    # the fleet of replicas (bitexact-server --replicas N)
    Case(
        "fl-plan-missing",
        "fleet",
        "a fleet plan file that does not exist",
        ("{tmp}/plan.json",),
        2,
        r"plan .*plan.json: no such file; give the plan that `bitexact-server --replicas N --print` writes",
    ),
    Case(
        "fl-plan-no-fleet",
        "fleet",
        "a printed plan of one server, not of a fleet",
        ("{tmp}/plan.json",),
        2,
        r"no `fleet` in it: print it with `bitexact-server --replicas N --print`",
        write("plan.json", '{"variant": "recipe", "argv": ["python"]}'),
    ),
    # the measuring lab (bench/perf)
    Case(
        "pf-bare-machine",
        "perf-run",
        "a measurement on a machine where the trees were never assembled",
        ("measure", "--work", "{tmp}/w", "--results", "{tmp}/r", "--server", "exact-spec"),
        2,
        r"not assembled: .*patched/sglang.* missing\. Run `bash checks/e2e/host\.sh stash",
        check=lambda tmp: None if not (tmp / "r" / "exact-spec").exists() else "a server folder was made",
    ),
    Case(
        "pf-prefill-no-shapes",
        "perf-prefill",
        "a prefill trace recorded without the ops' shapes",
        ("{tmp}/t.json",),
        2,
        r'no matrix-product ops with input dims: record with "record_shapes": true',
        write("t.json", TRACE_WITHOUT_SHAPES),
    ),
    Case(
        "pf-prefill-not-a-trace",
        "perf-prefill",
        "a prefill trace that is not JSON",
        ("{tmp}/t.json",),
        2,
        r"t\.json: not a readable Chrome trace",
        write("t.json", '{"traceEvents": ['),
    ),
]


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

CASES += [
    # the launcher: the recipe reader (strict JSON, known shapes) -- class 6
    Case(
        "ln-recipe-key-twice",
        "launcher",
        "a recipe giving the variant no-spec twice (the last would win)",
        (*launch_args, "--variant", "no-spec", "--print"),
        2,
        r'key "no-spec" is given twice in one object \(lines \d+, \d+\): JSON readers keep only one',
        recipe_text('"forced-reject": {', '"no-spec": {"speculative": false},\n    "forced-reject": {'),
    ),
    Case(
        "ln-recipe-nan",
        "launcher",
        "a recipe holding NaN, which is not JSON",
        (*launch_args, "--print"),
        2,
        r"r.json: NaN is not JSON",
        recipe_text('"temperature": 0.0', '"temperature": NaN'),
    ),
    Case(
        "ln-recipe-unknown-section",
        "launcher",
        "a recipe with a misspelt top-level key",
        (*launch_args, "--print"),
        2,
        r"unknown keys \['varaints'\]; a recipe of schema 1 has",
        recipe_with(varaints={}),
    ),
    Case(
        "ln-launch-unknown-key",
        "launcher",
        "a recipe whose launch section has a misspelt key",
        (*launch_args, "--print"),
        2,
        r"unknown keys \['launch.enviroment'\]",
        launch_with(enviroment={"A": "1"}),
    ),
    Case(
        "ln-schema-true",
        "launcher",
        "schema true (which Python counts as 1)",
        (*launch_args, "--print"),
        2,
        r"`schema` is true, a boolean, not a schema number; bitexact-server reads schema 1: "
        r'write "schema": 1',
        recipe_with(schema=True),
    ),
    Case(
        "ln-set-no-dashes",
        "launcher",
        "a variant setting a flag written without its dashes",
        (*launch_args, "--variant", "x", "--print"),
        2,
        r"`variants.x.set`: 'tp-size' is not a flag: write it as SGLang's argv does, `--name`",
        variant("x", {"set": {"tp-size": "2"}}),
    ),
    Case(
        "ln-set-flag-with-value",
        "launcher",
        "a variant setting `--tp-size=2` as one flag",
        (*launch_args, "--variant", "x", "--print"),
        2,
        r"'--tp-size=2' is not a flag: .*no `=VALUE`",
        variant("x", {"set": {"--tp-size=2": "1"}}),
    ),
    Case(
        "ln-set-value-is-a-flag",
        "launcher",
        "a variant value that argparse would read as a flag",
        (*launch_args, "--variant", "x", "--print"),
        2,
        r"`variants.x.set.--attention-backend`: value '--tp-size=2' starts with - and would be read",
        variant("x", {"set": {"--attention-backend": "--tp-size=2"}}),
    ),
    Case(
        "ln-unset-not-a-flag",
        "launcher",
        "a variant unsetting a word that is not a flag",
        (*launch_args, "--variant", "x", "--print"),
        2,
        r"`variants.x.unset`: 'triton' is not a flag",
        variant("x", {"unset": ["triton"]}),
    ),
    Case(
        "ln-env-name-equals",
        "launcher",
        "an environment name holding `=` (accepted by --print, a traceback at start)",
        (*launch_args, "--variant", "x", "--print"),
        2,
        r"`variants.x.env`: 'A=B' is not an environment variable name",
        variant("x", {"env": {"A=B": "1"}}),
    ),
    Case(
        "ln-env-value-nul",
        "launcher",
        "an environment value holding a NUL character",
        (*launch_args, "--print"),
        2,
        r"`launch.env.SGLANG_BATCH_INVARIANT_OPS_SMALL_M_TRITON`: environment value '1\\x006' holds a NUL",
        launch_with(env={"SGLANG_BATCH_INVARIANT_OPS_SMALL_M_TRITON": "1\x006"}),
    ),
    Case(
        "ln-argv-serving-flag",
        "launcher",
        "a recipe argv holding --port (the launcher's flag)",
        (*launch_args, "--port", "30000", "--print"),
        2,
        r"`launch.argv` holds \['--port'\]: serving flags are the launcher's to append",
        launch_with(argv=[*json.loads(RECIPE_TEXT)["launch"]["argv"], "--port", "1"]),
    ),
    Case(
        "ln-variant-serving-flag",
        "launcher",
        "a variant setting --host",
        (*launch_args, "--variant", "x", "--print"),
        2,
        r"variant `x` edits \['--host'\]: serving flags are the launcher's to append",
        variant("x", {"set": {"--host": "0.0.0.0"}}),
    ),
    Case(
        "ln-serving-flags-foreign",
        "launcher",
        "a recipe allowlisting a numerics flag as a serving flag",
        (*launch_args, "--print"),
        2,
        r"`launch.servingFlags` lists \['--tp-size'\]; the launcher appends only \['--host', '--port'\]",
        launch_with(servingFlags=["--host", "--port", "--tp-size"]),
    ),
    Case(
        "ln-header-outside",
        "launcher",
        "a DeepGEMM header path leaving site-packages (a name that becomes a path)",
        (*launch_args, "--print"),
        2,
        r"`deepGemm.fencedHeader`: '../../../etc/passwd' is not a relative path below its folder",
        recipe_with(deepGemm={**json.loads(RECIPE_TEXT)["deepGemm"], "fencedHeader": "../../../etc/passwd"}),
    ),
    # the launcher: values it appends or edits, checked on the path --print and a start share -- class 6
    Case(
        "ln-host-smuggles-a-flag",
        "launcher",
        "--host=--tp-size=2 (a numerics flag past the allowlist)",
        ("--recipe", str(RECIPE), "--host=--tp-size=2", "--print"),
        2,
        r"--host: not an address to bind: '--tp-size=2'",
    ),
    Case(
        "ln-port-arabic-digits",
        "launcher",
        "--port in Arabic-Indic digits (Python's int reads them as 30000)",
        ("--recipe", str(RECIPE), "--port", "\u0663\u0660\u0660\u0660\u0660", "--print"),
        2,
        r"--port: not a TCP port: '\u0663\u0660\u0660\u0660\u0660' \(.*in ASCII digits\)",
    ),
    Case(
        "ln-port-dashes",
        "launcher",
        "--port=-- (found by the fuzzer: argparse handed over an empty list, a TypeError)",
        ("--recipe", str(RECIPE), "--port=--", "--print"),
        2,
        r"--port needs a value \(given \[\]\)",
    ),
    Case(
        "ln-gpus-letters",
        "launcher",
        "--gpus x,y",
        ("--recipe", str(RECIPE), "--replicas", "2", "--port", "30000", "--gpus", "x,y", "--print"),
        2,
        r"--gpus: 'x,y': 'x' is not a GPU index \(0, 1, \.\.\.; ASCII digits, no spaces\)",
    ),
    Case(
        "ln-gpus-twice",
        "launcher",
        "--gpus naming one GPU twice",
        ("--recipe", str(RECIPE), "--replicas", "2", "--port", "30000", "--gpus", "0,0", "--print"),
        2,
        r"--gpus: '0,0' names GPU 0 more than once",
    ),
    Case(
        "ln-gpus-unused",
        "launcher",
        "more GPUs than replicas (one would serve nothing)",
        ("--recipe", str(RECIPE), "--replicas", "1", "--port", "30000", "--gpus", "0,1", "--print"),
        2,
        r"--gpus 0,1 names 2 GPUs for 1 replica\(s\): GPU 1 would serve nothing",
    ),
    Case(
        "ln-replicas-superscript",
        "launcher",
        "--replicas ² (str.isdigit says it is a digit)",
        ("--recipe", str(RECIPE), "--replicas", "\u00b2", "--port", "30000", "--print"),
        2,
        r"not a positive whole number: '\u00b2' \(ASCII digits",
    ),
    Case(
        "ln-memory-over-one",
        "launcher",
        "--mem-fraction-static 2 with replicas sharing a GPU (a ZeroDivisionError)",
        (*launch_args, "--replicas", "2", "--port", "30000", "--print"),
        2,
        r"replicas sharing a GPU divide the argv's --mem-fraction-static, but '2' is not a fraction",
        memory("2"),
    ),
    Case(
        "ln-memory-share-rounds-to-one",
        "launcher",
        "a memory share that rounds to 1 for the second replica on a GPU",
        (*launch_args, "--replicas", "2", "--port", "30000", "--print"),
        2,
        r"a replica's share of GPU 0 rounds to 1, not a fraction below 1",
        memory("0.99999"),
    ),
    Case(
        "ln-log-dir-file",
        "launcher",
        "--log-dir naming a file (the fleet's start would fail after --print passed)",
        ("--recipe", str(RECIPE), "--replicas", "2", "--port", "30000", "--log-dir", "{tmp}/f", "--print"),
        2,
        r"log folder: .*/f exists and is not a folder",
        write("f", "x"),
    ),
    Case(
        "ln-cache-dir-blocked",
        "launcher",
        "an XDG_CACHE_HOME that is a file (the JIT cache folder cannot be made)",
        ("--recipe", str(RECIPE), "--print"),
        2,
        r"SGLANG_DG_CACHE_DIR \(the DeepGEMM JIT cache\): .* is not a folder",
        write("f", "x"),
        env={"XDG_CACHE_HOME": "{tmp}/f", "BITEXACT_DEEP_GEMM": "/nix/store/x-deep-gemm"},
    ),
    Case(
        "ln-recipe-env-carriage-return",
        "launcher",
        "BITEXACT_RECIPE ending in a carriage return (the message showed a name that looks right)",
        ("--print",),
        2,
        r"BITEXACT_RECIPE: '.*qwen3.8-27b-exact.json\\r' holds '\\r'",
        env={"BITEXACT_RECIPE": str(RECIPE) + "\r"},
    ),
    Case(
        "ln-recipe-path-too-long",
        "launcher",
        "a --recipe path the OS calls too long (a traceback)",
        ("--recipe", "x" * 5000, "--print"),
        2,
        r"recipe x+: cannot read it: File name too long",
    ),
    # the fleet's printed plan
    Case(
        "fl-plan-shape",
        "fleet",
        "a plan whose replica lacks argv (a TypeError)",
        ("{tmp}/plan.json",),
        2,
        r"fleet.replicas\[0\] must be an object with exactly name, argv, env and url",
        write("plan.json", json.dumps({"fleet": {"replicas": [{"name": "replica-0"}], "router": {}}})),
    ),
    Case(
        "fl-plan-name",
        "fleet",
        "a plan whose replica name leads out of the log folder",
        ("{tmp}/plan.json",),
        2,
        r"fleet.replicas\[0\].name must be a name such as replica-0",
        write(
            "plan.json",
            json.dumps(
                {
                    "fleet": {
                        "replicas": [{"name": "../x", "argv": ["p"], "env": {}, "url": "http://h:1"}],
                        "router": {"name": "router", "argv": ["p"], "env": {}, "url": "http://h:2"},
                    }
                }
            ),
        ),  # fmt: skip
    ),
    Case(
        "fl-log-dir-file",
        "fleet",
        "a log folder that is a file",
        ("{tmp}/plan.json", "{tmp}/f"),
        2,
        r"log folder: .*/f exists and is not a folder",
        both(
            write("f", "x"),
            write(
                "plan.json",
                json.dumps(
                    {
                        "fleet": {
                            "replicas": [
                                {"name": "replica-0", "argv": ["p"], "env": {}, "url": "http://h:1"}
                            ],
                            "router": {"name": "router", "argv": ["p"], "env": {}, "url": "http://h:2"},
                        }
                    }
                ),
            ),
        ),  # fmt: skip
    ),
    # the image entrypoint
    Case(
        "ep-port-twice",
        "entrypoint",
        "--port given twice",
        ("--port", "30000", "--port", "30001"),
        2,
        r"--port given twice \(30000 and 30001\): give it once",
    ),
    Case(
        "ep-recipe-key-twice",
        "entrypoint",
        "an image recipe giving a key twice",
        ("--preflight-only",),
        2,
        r'refusing to start: .*key "no-spec" is given twice',
        recipe_text('"forced-reject": {', '"no-spec": {"speculative": false},\n    "forced-reject": {'),
        env={"BITEXACT_RECIPE": "{tmp}/r.json"},
    ),
    Case(
        "ep-recipe-carriage-return",
        "entrypoint",
        "BITEXACT_RECIPE ending in a carriage return",
        ("--preflight-only",),
        2,
        r"refusing to start: BITEXACT_RECIPE: '.*r.json\\r' holds '\\r'",
        env={"BITEXACT_RECIPE": "{tmp}/r.json\r"},
    ),
    # the GPU checks' runner's arguments
    Case(
        "gc-port-digits",
        "gpu-checks",
        "--port in Arabic-Indic digits",
        (*gc_args, "--port", "\u0663\u0660\u0660\u0660\u0660"),
        2,
        r"argument --port: not a TCP port: '\u0663\u0660\u0660\u0660\u0660'",
    ),
    Case(
        "gc-only-unknown",
        "gpu-checks",
        "--only naming no step (nothing would run, exit 0)",
        (*gc_args, "--only", "gpu-parity-recipes"),
        2,
        r"--only names gpu-parity-recipes, which the plan does not hold \(gpu-kernels, reference-no-spec, ",
        gc_ready,
    ),
    Case(
        "gc-timeout-inf",
        "gpu-checks",
        "--start-timeout inf",
        (*gc_args, "--start-timeout", "inf"),
        2,
        r"argument --start-timeout: not a number of seconds from 0 to a week: 'inf'",
    ),
    Case(
        "gc-memory-over-one",
        "gpu-checks",
        "--mem-fraction-static 2",
        (*gc_args, "--mem-fraction-static", "2"),
        2,
        r"argument --mem-fraction-static: '2' is not a fraction between 0 and 1",
    ),
    Case(
        "gc-option-twice",
        "gpu-checks",
        "--out given twice (the last would win)",
        (*gc_args, "--out", "{tmp}/p"),
        2,
        r"--out given twice \(.*/o and .*/p\): give it once",
    ),
    Case(
        "router-tree-escapes",
        "perf-router",
        "a router tree name leading out of --work",
        ("--work", "{tmp}/w", "--tree", "../x", "--out", "{tmp}/o", "--router-site", "{tmp}/site"),
        2,
        r"argument --tree: '../x' is not a name",
    ),
    Case(
        "e2e-assemble-name-escapes",
        "e2e-assemble",
        "a tree name leading out of --work",
        ("tree", "--wheels", "{tmp}", "--work", "{tmp}/w", "--name", "../x"),
        2,
        r"argument --name: '../x' is not a name",
    ),
    # pinlock: pins that read as pinned but are not -- class 7
    Case(
        "pl-narhash-null",
        "pinlock",
        "a source pin with narHash null (read as pinned)",
        ("--root", "{tmp}/repo", "status"),
        1,
        r"MALFORMED  nix/pins/sglang-src.json narHash: .*narHash null is not an SRI sha256",
        checkout(
            pin(
                "nix/pins/sglang-src.json",
                {"owner": "sgl-project", "repo": "sglang", "rev": ENGINE_REV, "narHash": None},
            )
        ),
    ),  # fmt: skip
    Case(
        "pl-src-old-rev",
        "pinlock",
        "a source pin left at the old rev after the recipe's engine moved (read as pinned)",
        ("--root", "{tmp}/repo", "status"),
        1,
        r"ABSENT  nix/pins/sglang-src.json narHash: .*pins sgl-project/sglang@111111111111, "
        r"the recipe's engine is sgl-project/sglang@542a043f1b68",
        checkout(
            pin(
                "nix/pins/sglang-src.json",
                {"owner": "sgl-project", "repo": "sglang", "rev": "1" * 40, "narHash": GOOD_SRI},
            )
        ),
    ),  # fmt: skip
    Case(
        "pl-cargo-other-rev",
        "pinlock",
        "a Cargo pin written for another commit",
        ("--root", "{tmp}/repo", "status"),
        1,
        r"ABSENT  nix/pins/sglang-cargo.json outputHashes: .*written for '1{40}', the recipe's engine is",
        checkout(pin("nix/pins/sglang-cargo.json", {"rev": "1" * 40, "locks": [], "outputHashes": {}})),
    ),
    Case(
        "pl-cargo-lock-escapes",
        "pinlock",
        "a Cargo pin listing a lock file outside its folder (a name that becomes a path)",
        ("--root", "{tmp}/repo", "status"),
        1,
        r"MALFORMED  nix/pins/sglang-cargo.json locks .*locks must list relative paths of Cargo.lock files",
        checkout(
            pin(
                "nix/pins/sglang-cargo.json",
                {"rev": ENGINE_REV, "locks": ["../../../etc/Cargo.lock"], "outputHashes": {}},
            )
        ),
    ),  # fmt: skip
    Case(
        "pl-scratch-recipe",
        "pinlock",
        "--recipe at a scratch copy naming another revision (it replaced the checkout's pin)",
        (
            "--root",
            "{tmp}/repo",
            "--recipe",
            "{tmp}/scratch.json",
            "weights",
            "Qwen/Qwen3.8-27B",
            "--snapshot",
            "{tmp}/hub/models--Qwen--Qwen3.8-27B/snapshots/" + OTHER_REV,
        ),  # fmt: skip
        2,
        r"already pins Qwen/Qwen3.8-27B@1d4bf0f2ff60; pinning Qwen/Qwen3.8-27B@bbbbbbbbbbbb would replace "
        r"it, and the recipe nix/recipes/qwen3.8-27b-exact.json, which names @1d4bf0f2ff60",
        both(
            checkout(manifest("Qwen/Qwen3.8-27B", RECIPE_REV)),
            scratch_recipe(OTHER_REV),
            hub_cache({"model.safetensors": b"w"}, repo="Qwen/Qwen3.8-27B", rev=OTHER_REV),
        ),
        check=unchanged_manifest("Qwen/Qwen3.8-27B", RECIPE_REV),
    ),
    Case(
        "pl-recipe-field-missing",
        "pinlock",
        "a recipe whose model has no revision (a KeyError)",
        ("--root", "{tmp}/repo", "status"),
        2,
        r"recipe .*qwen3.8-27b-exact.json: `model.revision` is missing",
        both(checkout(), recipe_in_checkout(lambda d: d["model"].pop("revision"))),
    ),
    Case(
        "pl-recipe-field-type",
        "pinlock",
        "a recipe whose engine repo is a number (a TypeError)",
        ("--root", "{tmp}/repo", "status"),
        2,
        r"`engine.repo` must be a string, not 5",
        both(checkout(), recipe_in_checkout(lambda d: d["engine"].update(repo=5))),
    ),
    Case(
        "pl-recipe-rev-branch",
        "pinlock",
        "a recipe naming its model by a branch (a failed step, exit 1, for a usage error)",
        ("--root", "{tmp}/repo", "weights"),
        2,
        r"`model.revision`: a commit is 40 lower-case hex digits, not 'main'",
        both(checkout(), recipe_in_checkout(lambda d: d["model"].update(revision="main"))),
    ),
    Case(
        "pl-recipe-key-twice",
        "pinlock",
        "a recipe giving the engine's rev twice",
        ("--root", "{tmp}/repo", "status"),
        2,
        r'not valid JSON \(key "rev" is given twice in one object\)',
        both(
            checkout(),
            recipe_text(
                '"rev": "542a',
                f'"rev": "{"1" * 40}", "rev": "542a',
                "repo/nix/recipes/qwen3.8-27b-exact.json",
            ),
        ),
    ),
    Case(
        "pl-shards-without-index",
        "pinlock",
        "an offline snapshot holding shard 1 of 2 and no index (it was pinned)",
        ("--root", "{tmp}/repo", "weights", "Org/Name@" + REV, "--snapshot", "{tmp}/hub"),
        1,
        r"the shards' names say there are 2, the snapshot lacks model-00002-of-00002.safetensors",
        checkout(hub_cache({"model-00001-of-00002.safetensors": b"w", "config.json": b"{}"})),
        env={"HF_HUB_OFFLINE": "1"},
        check=absent("repo/pkgs/weights/manifests/Org--Name.json"),
    ),
    Case(
        "pl-manifest-repo-null",
        "pinlock",
        "a weights manifest whose repo is null (found by the fuzzer: a TypeError)",
        ("--root", "{tmp}/repo", "status"),
        1,
        r"MALFORMED  weights manifest Qwen/Qwen3.8-27B@1d4bf0f2ff60: .*repo must be a string, not null",
        checkout(
            pin(
                "pkgs/weights/manifests/Qwen--Qwen3.8-27B.json",
                {"repo": None, "revision": RECIPE_REV, "files": []},
            )
        ),
    ),  # fmt: skip
    Case(
        "pl-uv-lock-no-hash",
        "pinlock",
        "a uv.lock sdist without a hash (found by the fuzzer: a KeyError)",
        ("--root", "{tmp}/repo", "status"),
        1,
        r"MALFORMED  pkgs/server-env/uv.lock: uv.lock: cuda-tile 1.0.0: its sdist needs a url and a hash",
        checkout(write("repo/pkgs/server-env/uv.lock", STUB_LOCK_NO_HASH)),
    ),
    # pinlock: misleading messages and exit codes -- class 9
    Case(
        "pl-status-carriage-return",
        "pinlock",
        "a source pin whose owner ends in a carriage return (found by the fuzzer: printed as it looks right)",
        ("--root", "{tmp}/repo", "status"),
        1,
        r"ABSENT  nix/pins/sglang-src.json narHash: .*pins sgl-project\\r/sglang@542a043f1b68, the recipe's",
        checkout(
            pin(
                "nix/pins/sglang-src.json",
                {"owner": "sgl-project\r", "repo": "sglang", "rev": ENGINE_REV, "narHash": GOOD_SRI},
            )
        ),
    ),  # fmt: skip
    Case(
        "pl-rev-upper-case",
        "pinlock",
        'a 40-digit revision in upper case (told "40 hex digits")',
        ("--root", "{tmp}/repo", "weights", "Org/Name@" + "A" * 40),
        2,
        r"is in upper case; write the commit in lower case, as git prints it: a{40}",
        checkout(),
    ),
    Case(
        "pl-option-twice",
        "pinlock",
        "--root given twice (the last would win)",
        ("--root", "{tmp}/repo", "--root", "{tmp}", "status"),
        2,
        r"--root given more than once; give each option once",
        checkout(),
    ),
    Case(
        "pl-option-abbreviated",
        "pinlock",
        "--rec for --recipe (an abbreviation taken silently)",
        ("--root", "{tmp}/repo", "--rec", "{tmp}/r.json", "status"),
        2,
        r"unknown option --rec: did you mean --recipe\? \(abbreviations are not taken\)",
        checkout(),
    ),
]


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


CASES += [
    # the launcher: a recipe at odds with itself, found by a review of issue 28's classes 3, 6, 7, 9
    Case(
        "ln-speculative-contradicts-argv",
        "launcher",
        "a variant saying speculative: false whose argv still speculates (a reference that speculates)",
        (*launch_args, "--variant", "x", "--print"),
        2,
        r"variant `x` says speculative: false, but its argv keeps --speculative-algorithm: .*unset",
        variant("x", {"speculative": False}),
    ),
    Case(
        "ln-model-path-unpinned",
        "launcher",
        "an argv loading a model the recipe does not pin (served weights no pin holds)",
        (*launch_args, "--print"),
        2,
        r"runs --model-path Qwen/Qwen3.8-32B, but the recipe's `model` pins Qwen/Qwen3.8-27B",
        argv_with(_model),
    ),
    Case(
        "ln-env-launcher-decides",
        "launcher",
        "a recipe env setting LD_LIBRARY_PATH (--print showed it, a start replaced it with the driver's)",
        (*launch_args, "--print"),
        2,
        r"`launch.env` sets \['LD_LIBRARY_PATH'\]: the launcher decides these itself",
        launch_with(env={"SGLANG_BATCH_INVARIANT_OPS_SMALL_M_TRITON": "16", "LD_LIBRARY_PATH": "/opt/lib"}),
    ),
    Case(
        "ln-argv-flag-equals-value",
        "launcher",
        "--mem-fraction-static=0.88 in the argv (the fleet said the recipe sets none)",
        (*launch_args, "--replicas", "2", "--port", "30000", "--print"),
        2,
        r"`launch.argv` holds '--mem-fraction-static=0.88': write a flag and its value as two elements",
        argv_with(_joined_memory),
    ),
    Case(
        "ln-recipe-variant-edits",
        "launcher",
        "the `recipe` variant editing the argv (the default start no longer the recipe as published)",
        (*launch_args, "--print"),
        2,
        r"variant `recipe` edits the argv or the environment; `recipe` is the recipe as published",
        variant("recipe", {"set": {"--attention-backend": "flashinfer"}}),
    ),
    Case(
        "ln-variant-name-path",
        "launcher",
        "a variant named ../x (a name bitexact makes paths of; class 3)",
        (*launch_args, "--variant", "../x", "--print"),
        2,
        r"`variants`: '\.\./x' is not a recipe or variant name: lowercase letters, digits",
        variant("../x", {}),
    ),
    Case(
        "ln-recipe-name-path",
        "launcher",
        "a recipe named ../other/x (class 3)",
        (*launch_args, "--build-info"),
        2,
        r"`name`: '\.\./other/x' is not a recipe or variant name",
        recipe_with(name="../other/x"),
    ),
    Case(
        "ln-variant-shadows-preset",
        "launcher",
        "a variant named long (bitexact's preset of that name shadowed it)",
        (*launch_args, "--variant", "long", "--print"),
        2,
        r"variant `long`: the name is bitexact's own preset .*give the variant another name",
        variant("long", {"set": {"--context-length": "131072"}}),
    ),
    Case(
        "ln-host-not-an-address",
        "launcher",
        "--host 300.1.1.1 (taken for a host name)",
        ("--recipe", str(RECIPE), "--host", "300.1.1.1", "--print"),
        2,
        r"--host: not an address to bind: '300.1.1.1'",
    ),
    Case(
        "ln-log-dir-dangling-link",
        "launcher",
        "--log-dir a dangling link (--print passed, a start said File exists)",
        ("--recipe", str(RECIPE), "--replicas", "2", "--port", "30000", "--log-dir", "{tmp}/l", "--print"),
        2,
        r"log folder: .*/l is a symbolic link that leads nowhere \(to .*/nowhere, missing or a loop\)",
        link("l", "{tmp}/nowhere"),
    ),
]

SNAPSHOT_ARGS = ("weights", "Org/Name@" + REV, "--snapshot", "{tmp}/hub")
SMALL_HUB = hub_cache({"config.json": b"{}", "model.safetensors": b"w"})


def src_pin_at(rev: str) -> Setup:
    return pin(
        "nix/pins/sglang-src.json",
        {"owner": "sgl-project", "repo": "sglang", "rev": rev, "narHash": GOOD_SRI},
    )


CASES += [
    # pinlock: where a pin is written, and revisions that only look right -- review of classes 7 and 9
    Case(
        "pl-pin-target-folder",
        "pinlock",
        "a folder where the weights manifest belongs (it hashed every file, then named a temporary file)",
        ("--root", "{tmp}/repo", *SNAPSHOT_ARGS),
        1,
        r"cannot write the pin pkgs/weights/manifests/Org--Name.json: .*Org--Name.json is a directory, "
        r"where a JSON file belongs: remove it",
        both(checkout(mkdir("repo/pkgs/weights/manifests/Org--Name.json")), SMALL_HUB),
        env={"HF_HUB_OFFLINE": "1"},
    ),
    Case(
        "pl-pins-folder-file",
        "pinlock",
        "a file where the manifests folder belongs (it said File exists, after the hashing)",
        ("--root", "{tmp}/repo", *SNAPSHOT_ARGS),
        1,
        r"cannot write the pin .*: .*pkgs/weights/manifests is a file, where a folder belongs",
        both(checkout(write("repo/pkgs/weights/manifests", "")), SMALL_HUB),
        env={"HF_HUB_OFFLINE": "1"},
    ),
    Case(
        "pl-cache-dir-file",
        "pinlock",
        "--cache-dir naming a file (an internal error: FileExistsError)",
        ("--root", "{tmp}/repo", "--cache-dir", "{tmp}/f", *SNAPSHOT_ARGS),
        2,
        r"--cache-dir: .*/f is a file, where a folder belongs; give a folder",
        both(checkout(write("f", "x")), SMALL_HUB),
        env={"HF_HUB_OFFLINE": "1"},
    ),
    Case(
        "pl-root-absent",
        "pinlock",
        "--root naming nothing (told that the recipe is missing)",
        ("--root", "{tmp}/none", "status"),
        2,
        r"--root .*/none does not exist: give the flake's checkout",
    ),
    Case(
        "pl-src-rev-too-long",
        "pinlock",
        "a source pin whose rev has a 41st digit (shortened, it read as the recipe's)",
        ("--root", "{tmp}/repo", "status"),
        1,
        r"MALFORMED  nix/pins/sglang-src.json narHash: .*rev: '542a043f\w+' is 41 hex digits; a commit is 40",
        checkout(src_pin_at(ENGINE_REV + "0")),
    ),
    Case(
        "pl-src-rev-differs-late",
        "pinlock",
        "a source pin whose rev differs from the recipe's after the 12th digit (both shown alike)",
        ("--root", "{tmp}/repo", "status"),
        1,
        r"pins sgl-project/sglang@542a043f1b68796d269ef1ee11be7865f8d4a5f0, the recipe's engine is "
        r"sgl-project/sglang@542a043f1b68796d269ef1ee11be7865f8d4a5f1",
        checkout(src_pin_at(ENGINE_REV[:39] + "0")),
    ),
]

CASES += [
    Case(
        "pl-repo-double-dash",
        "pinlock",
        "a repo id with -- (a--b/c and a/b--c share one manifest: one replaced the other's pin)",
        ("--root", "{tmp}/repo", "weights", "a--b/c@" + REV),
        2,
        r"not a Hugging Face repo id: 'a--b/c' holds -- or \.\. or ends in \.git, which the Hub refuses",
        checkout(manifest("a/b--c", OTHER_REV)),
        check=unchanged_manifest("a/b--c", OTHER_REV),
    ),
]

CASES += [
    Case(
        "ln-log-dir-read-only",
        "launcher",
        "--log-dir on a read-only file system, as root (told that this user may not write there)",
        (
            "--recipe",
            str(RECIPE),
            "--replicas",
            "2",
            "--port",
            "30000",
            "--log-dir",
            "{tmp}/mnt/logs",
            "--print",
        ),
        2,
        r"log folder: .*mnt/logs cannot be made: .*mnt is on a read-only file system",
        fs="ro",
    ),
]

CASES += [
    Case(
        "pl-cargo-set-bad-hash",
        "pinlock",
        "cargo --set with a hash Nix would refuse (taken, and written into the pin after the download)",
        ("cargo", "--set", "foo-1.0=sha256-abc"),
        2,
        r"'foo-1.0=sha256-abc': 'sha256-abc' is not an SRI sha256 \(sha256- and 44 base64 characters",
    ),
]
