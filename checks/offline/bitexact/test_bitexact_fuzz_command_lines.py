"""The fuzzer's drawn command lines: every verb with options drawn, against real local servers (what
must hold for every draw: bx_fuzz_run.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from checkhelpers.bx_fuzz_run import HISTORY, PROMPTS, SETTINGS, cli, scratch, sound, tree
from checkhelpers.fuzz_settings import fuzz
from hypothesis import event, given
from hypothesis import strategies as st

# --- command lines ----------------------------------------------------------------------------------

OPTIONS = [
    "--prompts", "--long", "--limit", "--tokenizer", "--vocab-size", "--seed", "--max-new-tokens",
    "--top-logprobs", "--out", "--json", "--force", "--repeats", "-n", "--batch", "-b", "--preset",
    "--recipe", "--spec-a", "--inflight-a", "--name", "--allow-same-engine", "--card", "--recipe-name",
    "--variant", "--golden-dir", "--golden", "--history", "--no-history", "--inflight", "--new-card",
    "--lengths", "--new-tokens", "--warmup", "--runs", "--diff", "--max-new", "--rep", "--build-info",
    "--warm-passes", "--shared-prefix", "--spec", "--warm-pass", "--min-prompt-tokens",
]  # fmt: skip
FLAGS = {"--json", "--force", "--allow-same-engine", "--no-history", "--new-card"}
value = st.one_of(
    st.sampled_from(
        [
            "1",
            "2",
            "0",
            "-1",
            "3",
            "1e20",
            "inf",
            "nan",
            "1.5",
            "16k",
            "100000000000000000000",
            "bytes",
            "bytes:-1000",
            "bytes:3",
            "../x",
            "h200",
            "r",
            "p.jsonl",
            "g",
            "g/h200/r.json",
            "o",
            "x/../..",
            "recipe",
            "no-spec",
            "must",
            "B1",
            "",
            " ",
            "\r",
            "٣",
        ]  # fmt: skip
    ),
    st.text(max_size=6),
)


def bases(url: str, radix: str) -> list[list[str]]:
    """One command that runs to a verdict per verb (the golden dir holds golden `r` of card h200);
    `warm` against `radix`, a server with a prefix cache, alone and against the golden."""
    engine, common = f"sglang+{url}", ["--prompts", "p.jsonl", *SETTINGS]
    key = ["--card", "h200", "--golden-dir", "g"]
    return [
        ["parity", engine, f"{engine}?timeout=30", "--allow-same-engine", *common],
        ["repeat", engine, "-n", "2", "-b", "1", *common],
        ["golden", "record", engine, "--recipe-name", "r2", *key, *common],
        ["golden", "check", engine, "--recipe-name", "r", *key],
        ["bench", engine, "--lengths", "8", "--vocab-size", "50", "--new-tokens", "4", "--warmup", "0"],
        ["history", "h200", "--golden-dir", "g"],
        ["warm", f"sglang+{radix}", "--warm-passes", "2", "--inflight", "2", *common],
        ["warm", f"sglang+{radix}", "--recipe-name", "r", *key],
    ]


@st.composite
def command_line(draw: st.DrawFn, url: str, radix: str) -> list[str]:
    """A command that runs, with up to four edits: an option added (any value), a value replaced, a word
    dropped, an option given twice, an option abbreviated, the engine replaced."""
    argv = list(draw(st.sampled_from(bases(url, radix))))
    if draw(st.booleans()):
        argv += ["--out", "o"]
    port = url.rsplit(":", 1)[1]
    engines = [f"sglang+{url}?retries=0", f"sglang+{url}?timeout=inf", "sglang+http://127.0.0.1", "x",
               "openai+http://127.0.0.1:9/v1?retries=0", "hf:/nonexistent",
               f"sglang+http://localhost:{port}"]  # fmt: skip
    for _ in range(draw(st.integers(0, 4))):
        edit = draw(st.integers(0, 5))
        at = draw(st.integers(0, len(argv) - 1))
        if edit == 0:
            option = draw(st.sampled_from(OPTIONS))
            argv += [option] if option in FLAGS else [option, draw(value)]
        elif edit == 1 and argv[at].startswith("-") and at + 1 < len(argv):
            argv[at + 1] = draw(value)
        elif edit == 2 and len(argv) > 1:
            del argv[at]
        elif edit == 3 and argv[at].startswith("-") and at + 1 < len(argv):
            argv += [argv[at], argv[at + 1]]
        elif edit == 4 and argv[at].startswith("--") and len(argv[at]) > 4:
            argv[at] = argv[at][: draw(st.integers(3, len(argv[at]) - 1))]
        elif edit == 5 and len(argv) > 2 and "+" in argv[2 if argv[0] == "golden" else 1]:
            argv[2 if argv[0] == "golden" else 1] = draw(st.sampled_from(engines))
    return argv


@fuzz(examples=400)
@given(data=st.data())
def test_any_command_line_ends_in_a_verdict_or_a_clear_refusal(canned, radix, golden_bytes, data):
    argv = data.draw(command_line(canned.url, radix.url))
    with scratch() as root:
        (root / "p.jsonl").write_text(PROMPTS)
        (root / "g" / "h200").mkdir(parents=True)
        (root / "g" / "h200" / "r.json").write_bytes(golden_bytes)
        (root / "g" / "h200" / "history.jsonl").write_text(json.dumps(HISTORY) + "\n")
        outs = [root / argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--out"] + [root / "bitexact-out"]
        before = tree(root, outs)
        code, _, err = cli(argv, root)
        sound(code, err)
        verbs = ("parity", "repeat", "golden", "bench", "history", "warm")
        event(f"{argv[0] if argv and argv[0] in verbs else 'no verb'}: exit {code}")
        after = tree(root, outs)
        for name in sorted(set(before) | set(after)):
            if before.get(name) != after.get(name):
                assert allowed_change(root / name, before.get(name) is not None, argv), (
                    f"{name} changed outside --out: {argv}\n{err}"
                )
        shutil.rmtree(root / "bitexact-out", ignore_errors=True)


def _kind_of_lines(path: Path) -> set[Any]:
    """The `kind` of a JSON file, or of each line of a JSON Lines file."""
    try:
        text = path.read_text()
    except (OSError, ValueError):
        return {None}
    try:
        whole = json.loads(text)
        return {whole.get("kind") if isinstance(whole, dict) else None}
    except ValueError:
        pass
    try:
        return {json.loads(line).get("kind") for line in text.split("\n") if line.strip()}
    except (ValueError, AttributeError):
        return {None}


def allowed_change(path: Path, existed: bool, argv: list[str]) -> bool:
    """What a command may change outside --out: a history it appends to (or starts), and for
    `golden record` a new golden, or with --force a golden replaced by another."""
    if not path.exists():
        return False  # nothing is ever deleted
    if _kind_of_lines(path) == {"bitexact-history"}:
        return argv[0] == "golden" and (
            not existed or path.read_bytes().startswith((json.dumps(HISTORY) + "\n").encode())
        )
    if argv[:2] == ["golden", "record"] and _kind_of_lines(path) == {"bitexact-golden"}:
        return not existed or "--force" in argv
    return False
