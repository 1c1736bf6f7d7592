"""The GPU checks in Nix: nix/lib/gpu-batteries.nix evaluated with the real Nix; nix/gpu-checks-build.nix and
nix/gpu-checks.nix evaluated against recording doubles of nixpkgs; the run's builder script run in bash with
a stand-in runner (its exit status kept), a check's builder run with the real runner's `verdict` over
results as the runner writes them, the record-golden app run with the runner's argv printed. The runner
itself runs whole against servers in SGLang's shapes in test_gpu_runner.py."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from checkhelpers.hfcache_support import (
    NIXPKGS_DOUBLES,
    RECIPE_PATH,
    WEIGHTS_BUILDERS,
    nix_error,
    nix_eval,
    nix_str,
    nix_value,
    shellcheck_as_nixpkgs,
    write_locked,
)
from checkhelpers.hub_files import DRAFTER_FILES, MODEL_FILES

pytestmark = pytest.mark.nix  # every test evaluates with the real nix-instantiate

RECIPE = json.loads(RECIPE_PATH.read_text())
PLAN = "(import ./nix/lib/gpu-batteries.nix)"
READ_RECIPE = "(builtins.fromJSON (builtins.readFile ./nix/recipes/qwen3.8-27b-exact.json))"


def batteries() -> dict[str, Any]:
    return {b["name"]: b for b in nix_eval(f"{PLAN}.batteries {READ_RECIPE}")}


def test_the_batteries_cover_the_recipes_claims() -> None:
    got = batteries()
    assert list(got) == [
        "gpu-parity-recipe",
        "gpu-parity-forced-reject",
        "gpu-parity-inflight-8",
        "gpu-parity-long",
        "gpu-repeat",
        "gpu-golden",
        *(f"gpu-capacity-{v}" for v in CAPACITY),
        *RADIX,
    ]
    assert {n: (b["variant"], b["reference"]) for n, b in got.items()} == {
        "gpu-parity-recipe": ("recipe", "short"),
        "gpu-parity-forced-reject": ("forced-reject", "short"),
        "gpu-parity-inflight-8": ("recipe", "short"),
        "gpu-parity-long": ("recipe", "long"),
        "gpu-repeat": ("recipe", None),
        "gpu-golden": ("recipe", None),
        **{f"gpu-capacity-{v}": (v, "short") for v in CAPACITY},
        **{n: ("radix-forced-reject" if n.endswith("forced-reject") else "radix", None) for n in RADIX},
    }
    (check,) = got["gpu-parity-forced-reject"]["commands"]
    assert check[:4] == ["bitexact", "golden", "check", "@URL@"]
    assert check[check.index("--variant") + 1] == "forced-reject"  # its speculation requirement: must
    assert check[check.index("--golden") + 1] == "@REF@"
    inflight = got["gpu-parity-inflight-8"]["commands"][1]
    assert inflight[:4] == ["bitexact", "parity", "@URL@", "@URL@"]
    assert inflight[inflight.index("--inflight-a") + 1] == str(
        RECIPE["variants"]["inflight-8"]["client"]["inflight"]
    )
    (repeat,) = got["gpu-repeat"]["commands"]
    assert repeat[repeat.index("--repeats") + 1] == "50"  # 24 prompts x 50 = the recipe's 1200 runs
    golden, golden_long = got["gpu-golden"]["commands"]  # the prompts, then the long prompts (<recipe>-long)
    for command in (golden, golden_long):
        assert command[command.index("--golden-dir") + 1] == "@GOLDEN_DIR@"
        assert command[command.index("--history") + 1] == "@OUT@/history.jsonl"  # the golden dir is read only
    assert "--long" not in golden
    assert golden_long[golden_long.index("--tokenizer") + 1] == "@MODEL_SNAPSHOT@"
    for name, battery in got.items():  # checks against a run's own reference keep no history
        for command in battery["commands"]:
            if "--golden" in command:
                assert "--no-history" in command, name


RADIX = [
    "gpu-radix-cold-warm",
    "gpu-radix-shared-prefix",
    "gpu-radix-long-extend",
    "gpu-radix-inflight-8",
    "gpu-radix-repeat",
    "gpu-radix-golden",
    "gpu-radix-forced-reject",
]


def test_radix_batteries_run_warm_on_the_recipe_with_the_cache_on() -> None:
    """The radix variants are the recipe less --disable-radix-cache (forced-reject's env for the one), and
    every radix battery command is `bitexact warm` against them, keyed by the variant it runs."""
    variants = RECIPE["variants"]
    assert variants["radix"] == {
        "description": variants["radix"]["description"],
        "speculative": True,
        "unset": ["--disable-radix-cache"],
    }
    assert variants["radix-forced-reject"]["env"] == variants["forced-reject"]["env"]
    assert variants["radix-forced-reject"]["unset"] == ["--disable-radix-cache"]
    for name in RADIX:
        battery = batteries()[name]
        assert battery["radix"] is True
        for command in battery["commands"]:
            assert command[:3] == ["bitexact", "warm", "@URL@"]
            assert command[command.index("--variant") + 1] == battery["variant"]


# The capacity variants: each sets one flag the recipe also sets (or, for the CUDA graphs, leaves to SGLang).
CAPACITY = {
    "max-running-1": ("--max-running-requests", "1"),
    "max-seqs-32": ("--max-running-requests", "32"),
    "chunked-prefill-4096": ("--chunked-prefill-size", "4096"),
    "chunked-prefill-16384": ("--chunked-prefill-size", "16384"),
    "cuda-graph-decode-bs-1": ("--cuda-graph-max-bs-decode", "1"),
    "cuda-graph-decode-bs-32": ("--cuda-graph-max-bs-decode", "32"),
}


def test_capacity_batteries_check_every_answer_against_one_reference_with_requests_in_flight() -> None:
    got = batteries()
    for variant, (flag, value) in CAPACITY.items():
        assert RECIPE["variants"][variant]["set"] == {flag: value}
        battery = got[f"gpu-capacity-{variant}"]
        assert battery["capacity"] == flag
        first = battery["commands"][0]
        assert (
            first[first.index("--golden") + 1] == "@REF@" and first[first.index("--variant") + 1] == variant
        )
        assert first[first.index("--inflight") + 1] == "32"
        chunked = flag == "--chunked-prefill-size"
        assert battery["longReference"] is chunked and len(battery["commands"]) == (2 if chunked else 1)
        if chunked:  # a prompt shorter than the chunk is never chunked: the long prompts are checked too
            long = battery["commands"][1]
            assert long[long.index("--golden") + 1] == "@REF_LONG@"


@pytest.mark.network
def test_capacity_variants_use_flags_sglang_0_5_20_parses() -> None:
    """The flags as the released 0.5.20 tree declares them: `--cuda-graph-max-bs` is gone there (its
    fields are cuda_graph_max_bs_decode/_prefill, in srt/arg_groups/fields/exec_.py)."""
    from checkhelpers.released_wheels import unpacked_wheel

    fields = unpacked_wheel("sglang", "0.5.20") / "sglang" / "srt" / "arg_groups" / "fields"
    declared = "".join(p.read_text() for p in fields.glob("*.py"))
    for flag, _ in CAPACITY.values():
        assert f"    {flag.removeprefix('--').replace('-', '_')}: " in declared, flag
    assert "    cuda_graph_max_bs: " not in declared


def test_references_record_no_spec() -> None:
    refs = nix_eval(f"{PLAN}.references")
    for key, long in (("short", False), ("long", True)):
        (command,) = refs[key]["commands"]
        assert refs[key]["variant"] == "no-spec"
        assert command[:4] == ["bitexact", "golden", "record", "@URL@"]
        assert command[command.index("--variant") + 1] == "no-spec"
        assert ("--long" in command) == long


def test_a_recipe_without_the_variants_is_refused() -> None:
    recipe = {**RECIPE, "variants": {k: v for k, v in RECIPE["variants"].items() if k != "forced-reject"}}
    assert "has no variant 'forced-reject'" in nix_error(f"{PLAN}.batteries {nix_value(recipe)}")


def test_fill() -> None:
    values = {"url": "U", "recipe": "R", "ref": "F", "goldenDir": "G", "out": ".", "modelSnapshot": "M"}
    filled = nix_eval(
        f'{PLAN}.fill {nix_value(values)} [ "@URL@" "@OUT@/x" "@REF@" "@GOLDEN_DIR@" "@MODEL_SNAPSHOT@" ]'
    )
    assert filled == ["U", "./x", "F", "G", "M"]


@pytest.fixture()
def locked(tmp_path: Path) -> dict[str, Path]:
    return write_locked(tmp_path, [(RECIPE["model"], MODEL_FILES), (RECIPE["drafter"], DRAFTER_FILES)])


def gpu_checks(locked: dict[str, Path], what: str, port: int = 30000) -> Any:
    weights = (
        f"import ./pkgs/weights/default.nix {{ {WEIGHTS_BUILDERS} "
        f"recipe = {READ_RECIPE}; manifestsDir = /. + {nix_str(str(locked['manifests']))}; }}"
    )
    return nix_eval(
        f"let d = {NIXPKGS_DOUBLES}; "
        "g = import ./nix/gpu-checks-build.nix { "
        "inherit (d) lib runCommand writeShellApplication writeText coreutils gcc gnupatch; "
        f"recipe = {READ_RECIPE}; recipeFile = ./nix/recipes/qwen3.8-27b-exact.json; "
        'server = "/fake-store/server"; stockServer = "/fake-store/stock-server"; '
        'runner = "/fake-store/runner"; bitexact = "/fake-store/bitexact"; '
        'kernelPython = "/fake-store/python"; sglangTree = "/fake-store/tree"; '
        f'stockTree = "/fake-store/stock-tree"; weights = {weights}; port = {port}; }}; in {what}'
    )


def step_names() -> list[str]:
    return nix_eval(f"{PLAN}.stepNames {READ_RECIPE}")


def test_every_step_but_the_references_is_a_check_reading_one_run_on_the_card(
    locked: dict[str, Path],
) -> None:
    """The checks are the plan's steps (the runner's list: test_e2e_plan.py), the references shown in the
    batteries that need them. Only the run asks for the `cuda` feature; a check reads its verdict."""
    got = gpu_checks(
        locked,
        "{ names = builtins.attrNames g.checks; features = builtins.mapAttrs (n: c: c.requiredSystemFeatures "
        "or [ ]) g.checks; run = g.run.requiredSystemFeatures; "
        "runs = builtins.mapAttrs (n: c: c.run.outPath) g.checks; }",
    )
    assert got["names"] == sorted(n for n in step_names() if not n.startswith("reference-"))
    assert "gpu-kernels" in got["names"] and "gpu-golden" in got["names"]
    assert set(map(tuple, got["features"].values())) == {()} and got["run"] == ["cuda"]
    assert set(got["runs"].values()) == {"/fake-store/gpu-checks-run"}


def test_the_run_calls_the_runner_whole_on_the_plan(locked: dict[str, Path]) -> None:
    """The run's builder is one call of `bitexact-gpu-checks run` with the plan Nix wrote for the recipe,
    both trees and their launchers, the kernel checks, the series and the goldens: the invocation a GPU
    host without Nix makes (lab/card/host.sh). Its exit status is kept, not raised."""
    got = gpu_checks(
        locked, "{ script = g.run.script; plan = g.planFile.text; inputs = g.run.nativeBuildInputs; }"
    )
    script = got["script"]
    (line,) = [line for line in script.splitlines() if "bitexact-gpu-checks run" in line]
    argv = shlex.split(line.split(">", 1)[0])
    assert argv[:2] == ["bitexact-gpu-checks", "run"] and "--only" not in argv
    pairs = dict(zip(argv[2::2], argv[3::2], strict=False))
    assert pairs["--plan"] == "/fake-store/gpu-plan-qwen3.8-27b-exact.json"
    assert json.loads(got["plan"]) == nix_eval(f"{PLAN}.plan {READ_RECIPE}")
    trees = [argv[i + 1] for i, a in enumerate(argv) if a == "--tree"]
    launchers = [argv[i + 1] for i, a in enumerate(argv) if a == "--launcher"]
    assert trees == ["patched=/fake-store/tree", "stock=/fake-store/stock-tree"]
    assert launchers == [
        "patched=/fake-store/server/bin/bitexact-server",
        "stock=/fake-store/stock-server/bin/bitexact-server",
    ]
    # the repository folders, copied into the store (checks/gpu, patches/sglang, checks/golden)
    assert pairs["--kernel-checks"].endswith("-gpu") and pairs["--series"].endswith("-sglang")
    assert pairs["--golden-dir"].endswith("-golden") and pairs["--python"] == "/fake-store/python/bin/python"
    assert (
        pairs["--bitexact"] == "/fake-store/bitexact/bin/bitexact"
        and "/snapshots/" in pairs["--model-snapshot"]
    )
    assert '--out "$out/results"' in line and 'echo "$?" > "$out/status"' in script
    assert "/fake-store/runner" in got["inputs"] and "/fake-store/gnupatch" in got["inputs"]


def run_script(script: str, tmp_path: Path, runner_exit: int) -> tuple[int, list[str]]:
    """The run's builder script in a real bash with a stand-in runner that records its argv and exits."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    stand_in = bin_dir / "bitexact-gpu-checks"
    stand_in.write_text(f'#!/bin/sh\necho "$@" > "$out/argv"\necho "a runner line"\nexit {runner_exit}\n')
    stand_in.chmod(0o755)
    out = tmp_path / "out"
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "out": str(out), "TMPDIR": str(tmp_path)}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr  # the run records the verdict, it does not fail the build
    assert "a runner line" in done.stdout and (out / "log").read_text() == "a runner line\n"
    return int((out / "status").read_text()), (out / "argv").read_text().split()


@pytest.mark.parametrize("code", [0, 1, 2, 130])
def test_the_run_keeps_the_runners_exit_status(locked: dict[str, Path], tmp_path: Path, code: int) -> None:
    script = gpu_checks(locked, "g.run.script")
    status, argv = run_script(script, tmp_path, code)
    assert status == code and argv[0] == "run"


def test_a_check_is_its_steps_verdict_in_the_run(locked: dict[str, Path], tmp_path: Path) -> None:
    """A check's builder, run in bash with the real runner (`python -m gpuchecks verdict`) over a run's
    results as the runner writes them: it passes exactly when its step passed."""
    script = gpu_checks(locked, 'g.checks."gpu-repeat".script')
    results = tmp_path / "run" / "results"
    results.mkdir(parents=True)
    (results / "run.json").write_text(json.dumps({"identity": {}, "out": str(results)}))
    (tmp_path / "run" / "log").write_text("the run's log\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "bitexact-gpu-checks").write_text(f'#!/bin/sh\nexec {sys.executable} -m gpuchecks "$@"\n')
    (bin_dir / "bitexact-gpu-checks").chmod(0o755)
    script = script.replace("/fake-store/gpu-checks-run", str(tmp_path / "run"))
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}

    def verdict(exit_code: int | None, **extra: Any) -> subprocess.CompletedProcess[str]:
        entry = {"step": "gpu-repeat", "tree": "patched", "kind": "battery", "exit": exit_code, **extra}
        (results / "verdicts.jsonl").write_text(json.dumps(entry) + "\n")
        out = tmp_path / f"out-{exit_code}"
        return subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script], env={**env, "out": str(out)}, capture_output=True,
            text=True,
        )  # fmt: skip

    passed = verdict(0, results=[])
    assert passed.returncode == 0 and "PASS       patched/gpu-repeat" in passed.stdout, passed.stderr
    assert (tmp_path / "out-0").resolve() == (tmp_path / "run").resolve()
    differs = verdict(1, results=[])
    assert (
        differs.returncode == 1
        and "gpu-repeat failed" in differs.stderr
        and "the run's log" in differs.stderr
    )
    left_out = verdict(None, left_out="needs 131136 tokens in one request; the recipe server holds 52000")
    assert (
        left_out.returncode == 0 and "LEFT-OUT   patched/gpu-repeat: needs 131136 tokens" in left_out.stdout
    )
    (results / "verdicts.jsonl").write_text("")
    missing = subprocess.run(
        ["bash", "-c", script], env={**env, "out": str(tmp_path / "o")}, capture_output=True, text=True
    )
    assert missing.returncode == 1 and "no verdict for step 'gpu-repeat'" in missing.stderr


def test_record_golden_calls_the_runners_record(locked: dict[str, Path], tmp_path: Path) -> None:
    """The app, run by a real bash with the runner a function that prints its argv: the runner's `record`
    on the plan, the patched tree and its launcher, the repository's goldens, the app's arguments after
    `--` for each bitexact command."""
    app = gpu_checks(locked, "{ inherit (g.record-golden) name text; }")
    assert app["name"] == "record-golden"
    (tmp_path / "flake.nix").write_text("{}")
    (tmp_path / "checks" / "golden").mkdir(parents=True)
    script = (
        'bitexact-gpu-checks() { python3 -c "import json, sys; print(json.dumps(sys.argv[1:]))" "$@"; }\n'
        "set -- --build-id 'a b'\n" + app["text"].replace("exec bitexact-gpu-checks", "bitexact-gpu-checks")
    )
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, check=True)
    argv = json.loads(done.stdout)
    assert argv[0] == "record" and argv[argv.index("--plan") + 1].endswith("gpu-plan-qwen3.8-27b-exact.json")
    assert (
        argv[argv.index("--golden-dir") + 1] == "checks/golden" and argv[argv.index("--port") + 1] == "30000"
    )
    assert (
        argv[argv.index("--tree") + 1] == "patched=/fake-store/tree"
        and "stock=/fake-store/stock-tree" not in argv
    )
    assert argv[-3:] == ["--", "--build-id", "a b"]


def test_the_record_golden_app_passes_shellcheck(locked: dict[str, Path], tmp_path: Path) -> None:
    """writeShellApplication runs shellcheck when it builds; a finding would break the app."""
    text = gpu_checks(locked, "g.record-golden.text")
    done = shellcheck_as_nixpkgs(text, tmp_path)
    assert done.returncode == 0, done.stdout


def test_the_outputs_adapter() -> None:
    """nix/gpu-checks.nix as nix/outputs.nix calls it: every step's check, the run needing the cuda
    feature, the runner on the server venv's Python, the stock server from mkStockServer, and the
    record-golden app on gpu-golden's passthru."""
    server = (
        'args: { outPath = "/fake-store/server"; passthru = { venv = "/fake-store/venv"; '
        'sglang = "/fake-store/sglang"; }; }'
    )
    stock = (
        'args: { outPath = "/fake-store/stock-server"; passthru = { venv = "/fake-store/venv"; '
        'sglang = "/fake-store/stock-sglang"; }; }'
    )
    got = nix_eval(
        f"let d = {NIXPKGS_DOUBLES}; out = import ./nix/gpu-checks.nix {{ pkgs = d; recipe = {READ_RECIPE}; "
        'packages = { bitexact = "/fake-store/bitexact"; gpu-checks = "/fake-store/gpu-checks"; }; '
        f"python = d.python312; mkServer = {server}; mkStockServer = {stock}; }}; "
        "in { names = builtins.attrNames out; run = out.gpu-kernels.run.requiredSystemFeatures; "
        "app = out.gpu-golden.recordGolden.name; "
        'runner = (builtins.head (builtins.filter (p: (p.name or "") == "bitexact-gpu-checks") '
        "out.gpu-kernels.run.nativeBuildInputs)).text; }"
    )
    assert got["names"] == sorted(n for n in step_names() if not n.startswith("reference-"))
    assert got["run"] == ["cuda"] and got["app"] == "record-golden"
    assert "exec /fake-store/venv/bin/python -m gpuchecks" in got["runner"]
    assert "export PYTHONPATH=/fake-store/gpu-checks/lib/python3.12/site-packages" in got["runner"]


def test_every_battery_command_parses_with_the_real_bitexact_cli() -> None:
    """The flags the batteries pass exist in `bitexact` (its own argparse parser), so a
    drift between the two fails here rather than on a GPU builder."""
    from bitexact.cli import build_parser

    values = {
        "url": "sglang+http://127.0.0.1:30000",
        "recipe": str(RECIPE_PATH),
        "ref": "/tmp/reference.json",
        "goldenDir": "checks/golden",
        "out": ".",
        "modelSnapshot": "/tmp/snapshot",
    }
    commands = [c for b in batteries().values() for c in b["commands"]]
    commands += [c for r in nix_eval(f"{PLAN}.references").values() for c in r["commands"]]
    filled = nix_eval(f"map ({PLAN}.fill {nix_value(values)}) {nix_value(commands)}")
    parser = build_parser()
    for command in filled:
        assert command[0] == "bitexact"
        args = parser.parse_args(command[1:])
        assert callable(args.run), command
