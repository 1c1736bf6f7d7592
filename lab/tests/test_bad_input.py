"""The lab's programs refuse bad input clearly: each case runs one command line of a real program
(`python -m lab.perf.router`, `lab.perf.run`, `lab.perf.prefill`, `lab.card.assemble`) in a fresh folder,
against real files, and asserts its exit code, a message naming the thing and the fix, no traceback, and
what must hold afterwards. The rows are built as the product's catalogue builds its own
(checkhelpers.reliability_setup); the lab's are not on the product's page (docs/reliability.md)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from checkhelpers.reliability_setup import Case, write

PROGRAMS = {
    "perf-router": "lab.perf.router",
    "perf-run": "lab.perf.run",
    "perf-prefill": "lab.perf.prefill",
    "e2e-assemble": "lab.card.assemble",
}

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

CASES: list[Case] = [
    Case(
        "router-no-site",
        "perf-router",
        "a router site without SGLang's router in it",
        ("--work", "{tmp}/w", "--tree", "patched", "--out", "{tmp}/o", "--router-site", "{tmp}/site"),
        2,
        r"--router-site .*site: no sglang_router in it; install the wheel there",
        write("w/patched/sglang/__init__.py", ""),
    ),
    # the measuring lab (lab/perf)
    Case(
        "pf-bare-machine",
        "perf-run",
        "a measurement on a machine where the trees were never assembled",
        ("measure", "--work", "{tmp}/w", "--results", "{tmp}/r", "--server", "exact-spec"),
        2,
        r"not assembled: .*patched/sglang.* missing\. Run `bash lab/card/host\.sh stash",
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
    Case(
        "router-tree-escapes",
        "perf-router",
        "a router tree name leading out of --work",
        ("--work", "{tmp}/w", "--tree", "../x", "--out", "{tmp}/o", "--router-site", "{tmp}/site"),
        2,
        r"argument --tree: '../x' is not a name",
    ),
    # the end-to-end tree assembler (lab/card/assemble.py)
    Case(
        "e2e-tree-unknown-patch",
        "e2e-assemble",
        "a tree without a patch the series does not have",
        ("tree", "--wheels", "{tmp}", "--work", "{tmp}/w", "--name", "t", "--without", "0009"),
        2,
        r"--without 0009: no such patch in the series \(0001-bitexact-marker.patch, ",
    ),
    Case(
        "e2e-assemble-name-escapes",
        "e2e-assemble",
        "a tree name leading out of --work",
        ("tree", "--wheels", "{tmp}", "--work", "{tmp}/w", "--name", "../x"),
        2,
        r"argument --name: '../x' is not a name",
    ),
]


def test_every_program_has_a_case() -> None:
    ids = [case.id for case in CASES]
    assert len(set(ids)) == len(ids), [i for i in ids if ids.count(i) > 1]
    assert {case.tool for case in CASES} == set(PROGRAMS)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_bad_input_is_refused_clearly(case: Case, tmp_path: Path) -> None:
    assert case.server is None and case.fs is None, "the lab's cases need neither a server nor a mount"
    if case.setup is not None:
        case.setup(tmp_path)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in case.argv]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BITEXACT_", "HF_"))}
    env |= {"XDG_CACHE_HOME": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    env |= {k: v.replace("{tmp}", str(tmp_path)) for k, v in case.env.items()}
    done = subprocess.run(
        [sys.executable, "-m", PROGRAMS[case.tool], *argv],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = done.stderr + done.stdout
    assert "Traceback" not in output, output
    assert re.search(case.expect, output), f"no message matching {case.expect!r} in:\n{output}"
    assert done.returncode == case.exit, f"exit {done.returncode}, not {case.exit}:\n{output}"
    assert case.check is None or case.check(tmp_path) is None, case.check(tmp_path)
