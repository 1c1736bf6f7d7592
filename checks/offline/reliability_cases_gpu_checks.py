"""Catalogue rows for the GPU checks' runner (`bitexact-gpu-checks`). Their inputs and checks are built
with reliability_setup.py's helpers; reliability_catalogue.py joins every program's rows."""

from __future__ import annotations

from reliability_setup import Case, both, gc_args, gc_golden, gc_nothing_written, gc_ready, gc_tree, write

CASES: list[Case] = [
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
]
