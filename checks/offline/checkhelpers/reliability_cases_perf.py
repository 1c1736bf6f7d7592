"""Catalogue rows for the perf lab's programs (bench/perf: router.py, run.py, prefill.py). Their inputs and
checks are built with reliability_setup.py's helpers; reliability_catalogue.py joins every program's
rows."""

from __future__ import annotations

from checkhelpers.reliability_setup import TRACE_WITHOUT_SHAPES, Case, write

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
    Case(
        "router-tree-escapes",
        "perf-router",
        "a router tree name leading out of --work",
        ("--work", "{tmp}/w", "--tree", "../x", "--out", "{tmp}/o", "--router-site", "{tmp}/site"),
        2,
        r"argument --tree: '../x' is not a name",
    ),
]
