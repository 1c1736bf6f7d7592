"""A resume is keyed by what is compared, and never rests on a row a refusal rests on; end to end, in
process, against real local HTTP servers in SGLang's shape (canned_sglang.py) and real files.

- `--prompts` (and any other option that names a file) keys --out and its results by the file it
  names, not by its spelling: `p.jsonl`, `./p.jsonl`, `d/../p.jsonl`, an absolute path and a link to it
  are one file, and a rerun spelled otherwise resumes (sends nothing) instead of being refused as
  another command; a copy of the file elsewhere is another file, and is refused as before.
- A `warm` run refused because its cold pass shows cache hits (the flush failed) withdraws those stored
  answers: once the flush works, the same command asks them again and comes to a verdict, where a
  resume of them would refuse again on every rerun."""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

from bitexact.cli import main
from checkhelpers.bx_cli import SETTINGS
from checkhelpers.canned_sglang import CannedSGLang
from checkhelpers.fuzz_settings import fuzz
from hypothesis import given
from hypothesis import strategies as st

PROMPTS = '{"id": "p0", "input_ids": [5, 6, 7]}\n{"id": "p1", "input_ids": [9, 10, 11, 12]}\n'


def _cli(argv: list[str], cwd: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    before = Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    finally:
        os.chdir(before)
    return code, out.getvalue(), err.getvalue()


def spellings(root: Path) -> list[str]:
    """Ways to name `root/p.jsonl` from `root`: relative, dotted, through a folder and back, absolute,
    doubled slashes, and through a link."""
    return [
        "p.jsonl",
        "./p.jsonl",
        "d/../p.jsonl",
        ".//p.jsonl",
        "./d/./../p.jsonl",
        str(root / "p.jsonl"),
        str(root / "d" / ".." / "p.jsonl"),
        "link.jsonl",
        "d/link-up.jsonl",
    ]


@fuzz(examples=25)
@given(first=st.integers(0, 8), second=st.integers(0, 8), verb=st.sampled_from(["repeat", "parity"]))
def test_a_rerun_that_names_the_same_prompt_file_otherwise_resumes(first, second, verb, tmp_path_factory):
    root = tmp_path_factory.mktemp("spell")
    (root / "p.jsonl").write_text(PROMPTS)
    (root / "d").mkdir()
    (root / "link.jsonl").symlink_to("p.jsonl")
    (root / "d" / "link-up.jsonl").symlink_to("../p.jsonl")
    (root / "copy").mkdir()
    (root / "copy" / "p.jsonl").write_text(PROMPTS)
    names = spellings(root)
    with CannedSGLang("normal") as server:
        engine = f"sglang+{server.url}"
        sides = ["repeat", engine, "-n", "2", "-b", "1"] if verb == "repeat" else ["parity", engine, engine]
        if verb == "parity":
            sides.append("--allow-same-engine")
        base = [*sides, *SETTINGS, "--out", "o", "--json"]
        code, out, err = _cli([*base, "--prompts", names[first]], root)
        sent = len(server.requests)
        again, out_again, err_again = _cli([*base, "--prompts", names[second]], root)
        resent = len(server.requests) - sent
        copy, _, err_copy = _cli([*base, "--prompts", "copy/p.jsonl"], root)
    assert code == 0 and sent > 0, err
    assert again == 0 and resent == 0, (
        f"{names[first]} then {names[second]}: exit {again}, {resent} sent\n{err_again}"
    )
    assert json.loads(out_again) == json.loads(out)  # the same verdict on the same stored answers
    assert copy == 2 and "holds the run of another" in err_copy and "prompts" in err_copy, err_copy


def test_a_warm_refusal_withdraws_the_answers_it_rests_on(tmp_path: Path) -> None:
    """The flush is absent: the second cold prompt finds the shared prefix in the cache, and warm is
    refused. With the flush working, the same command resumes what it can and asks again what the
    refusal rested on: a verdict (EQUAL), and the withdrawn rows are kept aside, never deleted."""
    from checkhelpers.bx_tiny_models import write_prompts  # the conftest's prompt writer

    prompts = write_prompts(tmp_path / "prompts.jsonl", [5, 23, 11, 40, 17, 31])
    with CannedSGLang("radix", flush="absent") as server:
        argv = ["warm", f"sglang+{server.url}", "--prompts", str(prompts), "--out", "o", *SETTINGS]
        argv += ["--shared-prefix", "37", "--vocab-size", "90", "--json"]
        code, _, err = _cli(argv, tmp_path)
        asked = len(server.requests)
        server.flush = "ok"
        again, out, err_again = _cli(argv, tmp_path)
        reasked = [r["body"]["input_ids"] for r in server.requests[asked:]]
    assert code == 2 and "the cold pass took prompt tokens from the cache" in err, err
    assert "stored answers it rests on are withdrawn" in err
    withdrawn = list((tmp_path / "o" / "replaced").glob("*.withdrawn"))
    assert len(withdrawn) == 1 and withdrawn[0].read_text().count("\n") >= 5
    assert again == 0 and json.loads(out)["differ"] == 0, err_again
    assert 0 < len(reasked) < asked  # what the refusal rested on is asked again, the rest resumed
