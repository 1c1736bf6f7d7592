"""The GPU batteries: nix/lib/gpu-batteries.nix evaluated with the real Nix, nix/gpu-checks.nix evaluated
against recording doubles of nixpkgs, and a battery's generated builder script run for real in bash with
stand-ins for the server, bitexact and curl (so server start-up, readiness, exit codes and shutdown are
exercised; the real server and GPU are not)."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hfcache_support import (
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
from net_support import free_port
from test_hfcache import DRAFTER_FILES, MODEL_FILES

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
    from released_wheels import unpacked_wheel

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


def gpu_checks(locked: dict[str, Path], port: int, kernels: bool, what: str) -> Any:
    weights = (
        f"import ./pkgs/weights/default.nix {{ {WEIGHTS_BUILDERS} "
        f"recipe = {READ_RECIPE}; manifestsDir = /. + {nix_str(str(locked['manifests']))}; }}"
    )
    kernel_args = 'kernelPython = "/fake-store/python"; sglangTree = "/fake-store/tree";' if kernels else ""
    return nix_eval(
        f"let d = {NIXPKGS_DOUBLES}; "
        "g = import ./nix/gpu-checks-build.nix { "
        "inherit (d) lib runCommand writeShellApplication curl coreutils gcc; "
        f"recipe = {READ_RECIPE}; recipeFile = ./nix/recipes/qwen3.8-27b-exact.json; "
        f'server = "/fake-store/server"; bitexact = "/fake-store/bitexact"; weights = {weights}; '
        f"port = {port}; {kernel_args} }}; in {what}"
    )


def test_every_gpu_check_needs_the_cuda_feature(locked: dict[str, Path]) -> None:
    # The step that runs on the card asks for `cuda`; the check (the verdict) only reads the step's
    # status file, so it asks for nothing and any builder can decide it.
    shown = (
        "builtins.mapAttrs (n: c: { verdict = c.requiredSystemFeatures or [ ]; "
        "run = c.run.requiredSystemFeatures or [ ]; }) g.checks"
    )
    without = gpu_checks(locked, 30000, False, shown)
    assert sorted(without) == sorted(batteries())
    with_kernels = gpu_checks(locked, 30000, True, shown)
    assert sorted(with_kernels) == sorted([*batteries(), "gpu-kernels"])
    assert all(c == {"verdict": [], "run": ["cuda"]} for c in with_kernels.values()), with_kernels
    references = gpu_checks(locked, 30000, True, "builtins.mapAttrs (n: r: r.requiredSystemFeatures) g.runs")
    assert set(map(tuple, references.values())) == {("cuda",)}


def test_record_golden_runs_the_plans_record_commands(locked: dict[str, Path], tmp_path: Path) -> None:
    """The app's record lines, run by a real bash with `bitexact` a function that prints its argv: the
    plan's goldenRecord commands (checks/e2e/batteries.json, which checks/e2e/goldens.py runs too), with
    the app's port and build-info file expanded and the app's own arguments after each."""
    app = gpu_checks(locked, 30000, False, "{ inherit (g.record-golden) name text; }")
    assert app["name"] == "record-golden"
    lines = [line for line in app["text"].splitlines() if line.startswith('"bitexact" "golden" "record"')]
    assert len(lines) == 2
    script = "\n".join(
        [
            'bitexact() { python3 -c "import json, sys; print(json.dumps(sys.argv[1:]))" "$@"; }',
            "port=30123 info='/tmp/build info.json'",  # a space: the app's quoting must hold it
            "set -- --build-id 'a b'",
            *lines,
        ]
    )
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
    ran = [json.loads(line) for line in done.stdout.splitlines()]
    plan = json.loads((Path(__file__).resolve().parents[2] / "checks/e2e/batteries.json").read_text())
    plan = plan["goldenRecord"]
    for argv, command in zip(ran, plan["commands"], strict=True):
        recipe = argv[argv.index("--recipe") + 1]
        assert recipe.endswith("qwen3.8-27b-exact.json")
        values = {"URL": "sglang+http://127.0.0.1:30123", "RECIPE": recipe, "GOLDEN_DIR": "checks/golden"}
        values |= {"BUILD_INFO": "/tmp/build info.json"}
        if "--tokenizer" in argv:
            values["MODEL_SNAPSHOT"] = argv[argv.index("--tokenizer") + 1]
            assert "/snapshots/" in values["MODEL_SNAPSHOT"]
        want = command[1:]
        for key, value in values.items():
            want = [a.replace(f"@{key}@", value) for a in want]
        assert argv == [*want, "--build-id", "a b"]
    assert "--long" not in ran[0] and ran[1][ran[1].index("--long") + 1] == "16k,64k,128k"


FAKE_SERVER = """#!{python}
import http.server, json, os, sys
args = sys.argv[1:]
if args == ["--build-info"]:  # as the real launcher: print the build, start nothing
    print(json.dumps({"server": "/fake-store/server", "sglang": "0.5.20"}))
    sys.exit(0)
port = int(args[args.index("--port") + 1])
if os.environ.get("FAKE_SERVER_DIES"):
    print("fake server: dying on start", file=sys.stderr)
    sys.exit(3)
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health_generate" else 404)
        self.end_headers()
    def log_message(self, *a):
        pass
print("fake server:", " ".join(args), flush=True)
http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""
FAKE_CURL = """#!{python}
import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(sys.argv[-1], timeout=5)
except urllib.error.HTTPError:
    sys.exit(22)
except OSError:
    sys.exit(7)
"""
FAKE_BITEXACT = """#!/bin/sh
echo "$*" >> "$FAKE_CALLS"
echo "$BITEXACT_BUILD_INFO" >> "$FAKE_CALLS.build-info"
exit "${FAKE_BITEXACT_EXIT:-0}"
"""


REFERENCE_RUN = "/fake-store/reference-no-spec-run"


def run_battery(
    locked: dict[str, Path], tmp_path: Path, name: str, reference_status: str = "0", **env: str
) -> tuple[int, str, list[str]]:
    """Run a battery's step script as its builder would (stand-ins for server, bitexact and curl; the
    recording double's reference path pointed at a directory holding `reference_status`). Returns the
    recorded status, the step's log and the bitexact calls."""
    port = free_port()
    script = gpu_checks(locked, port, False, f"g.runs.{nix_str(name)}.script")
    reference = tmp_path / "reference-run"
    reference.mkdir()
    (reference / "status").write_text(reference_status + "\n")
    (reference / "log").write_text("reference log\n")
    script = script.replace(REFERENCE_RUN, str(reference))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for exe, body in (("bitexact-server", FAKE_SERVER), ("curl", FAKE_CURL), ("bitexact", FAKE_BITEXACT)):
        path = bin_dir / exe
        path.write_text(body.replace("{python}", sys.executable))
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    calls = tmp_path / "calls"
    out, tmp = tmp_path / "out", tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    full_env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "out": str(out),
        "TMPDIR": str(tmp),
        "FAKE_CALLS": str(calls),
        **env,
    }
    done = subprocess.run(["bash", "-c", script], env=full_env, capture_output=True, text=True, timeout=120)
    # The step itself always succeeds (its status is the verdict's business) and stops the server.
    assert done.returncode == 0, done.stderr
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0, "the server was left running"
    status = int((out / "status").read_text())
    return status, (out / "log").read_text(), calls.read_text().splitlines() if calls.exists() else []


def test_a_battery_passes_when_bitexact_says_equal(locked: dict[str, Path], tmp_path: Path) -> None:
    status, log, calls = run_battery(locked, tmp_path, "gpu-parity-inflight-8")
    assert status == 0, log
    assert len(calls) == 2
    reference = tmp_path / "reference-run" / "reference.json"
    assert (
        calls[0].startswith("golden check sglang+http://127.0.0.1:") and f"--golden {reference}" in calls[0]
    )
    assert calls[1].startswith("parity sglang+http://127.0.0.1:") and "--inflight-a 8" in calls[1]
    server_log = (tmp_path / "out" / "server-recipe.log").read_text()
    assert "fake server: --variant recipe --host 127.0.0.1" in server_log
    # every bitexact call saw the build the launcher described, written beside the step's output
    info = tmp_path / "out" / "build-info.json"
    assert (tmp_path / "calls.build-info").read_text().splitlines() == [str(info)] * 2
    assert json.loads(info.read_text())["server"] == "/fake-store/server"


def test_a_difference_fails_the_battery(locked: dict[str, Path], tmp_path: Path) -> None:
    status, _, calls = run_battery(locked, tmp_path, "gpu-parity-inflight-8", FAKE_BITEXACT_EXIT="1")
    assert status == 1 and len(calls) == 1  # the first failing command stops the battery


def test_a_server_that_dies_fails_the_battery(locked: dict[str, Path], tmp_path: Path) -> None:
    status, log, calls = run_battery(locked, tmp_path, "gpu-parity-forced-reject", FAKE_SERVER_DIES="1")
    assert status == 2 and calls == []
    assert "the forced-reject server did not come up" in log and "fake server: dying on start" in log


def test_a_failed_reference_stops_the_battery_before_its_server(
    locked: dict[str, Path], tmp_path: Path
) -> None:
    status, log, calls = run_battery(locked, tmp_path, "gpu-parity-recipe", reference_status="2")
    assert status == 2 and calls == [] and "the no-spec reference could not be recorded" in log
    assert not (tmp_path / "out" / "server-recipe.log").exists()


def test_steps_run_one_after_another(locked: dict[str, Path]) -> None:
    """Every step's run takes the previous one as an input, so Nix never runs two on the card at once."""
    chain = gpu_checks(
        locked, 30000, True, "builtins.mapAttrs (n: r: { inherit (r) after; out = r.outPath; }) g.runs"
    )
    order = ["gpu-kernels", "reference-no-spec-long", "reference-no-spec", *batteries()]
    assert sorted(chain) == sorted(order)
    ordered = sorted(chain, key=lambda n: order.index(n))
    assert ordered == order
    assert chain[order[0]]["after"] == ""
    for before, step in zip(order, order[1:], strict=False):
        assert chain[step]["after"] == chain[before]["out"], step


def verdict(locked: dict[str, Path], tmp_path: Path, status: str) -> subprocess.CompletedProcess[str]:
    script = gpu_checks(locked, 30000, False, 'g.checks."gpu-repeat".script')
    run = tmp_path / f"run-{status}"
    run.mkdir()
    (run / "status").write_text(status + "\n")
    (run / "log").write_text("repeat: 1200/1200 identical\n" if status == "0" else "repeat: 3 divergences\n")
    script = script.replace("/fake-store/gpu-repeat-run", str(run))
    env = {**os.environ, "out": str(tmp_path / f"verdict-{status}")}
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], env=env, capture_output=True, text=True)


def test_the_check_fails_exactly_when_its_step_did(locked: dict[str, Path], tmp_path: Path) -> None:
    passed = verdict(locked, tmp_path, "0")
    assert passed.returncode == 0 and (tmp_path / "verdict-0").resolve() == (tmp_path / "run-0")
    failed = verdict(locked, tmp_path, "1")
    assert failed.returncode == 1
    assert "gpu-repeat failed (exit 1)" in failed.stderr and "repeat: 3 divergences" in failed.stderr


def test_the_outputs_adapter() -> None:
    """nix/gpu-checks.nix as nix/outputs.nix calls it: every battery plus gpu-kernels, all needing the
    cuda feature, and the record-golden app on gpu-golden's passthru."""
    got = nix_eval(
        f"let d = {NIXPKGS_DOUBLES}; out = import ./nix/gpu-checks.nix {{ pkgs = d; recipe = {READ_RECIPE}; "
        'packages.bitexact = "/fake-store/bitexact"; python = d.python312; '
        'mkServer = args: { outPath = "/fake-store/server"; '
        'passthru = { venv = "/fake-store/venv"; sglang = "/fake-store/sglang"; }; }; }; '
        "in { names = builtins.attrNames out; "
        "features = builtins.mapAttrs (n: c: c.run.requiredSystemFeatures) out; "
        'kernelPython = (builtins.head (builtins.filter (p: (p.name or "") == "python") '
        "out.gpu-kernels.run.nativeBuildInputs)).text; "
        # nix/outputs.nix reads it as gpu-golden.recordGolden (passthru lands on the derivation).
        "app = out.gpu-golden.recordGolden.name; "
        "tree = out.gpu-kernels.run.BITEXACT_SGLANG_TREE; "
        "python = out.gpu-kernels.run.script; "
        'bitexact = (builtins.head (builtins.filter (p: (p.name or "") == "bitexact") '
        "out.gpu-parity-long.run.nativeBuildInputs)).text; }"
    )
    assert got["names"] == sorted([*batteries(), "gpu-kernels"])
    assert set(map(tuple, got["features"].values())) == {("cuda",)}
    assert got["app"] == "record-golden"
    assert got["tree"] == "/fake-store/sglang/lib/python3.12/site-packages"
    assert "python -m pytest" in got["python"] and "--junitxml" in got["python"]
    # The kernel tests start under the launcher's driver discovery (the driver on the library path
    # from the start, TRITON_LIBCUDA_PATH set); no step looks for a host binary (nvidia-smi).
    assert "/fake-store/server/bin/bitexact-driver exec \\\n  python -m pytest" in got["python"]
    assert "TRITON_LIBCUDA_PATH=" not in got["python"] and "/run/opengl-driver/bin" not in got["python"]
    # bitexact runs on the server venv's Python (its transformers tokenizes the long prompts), built for
    # that Python (3.12), not nixpkgs' default python3.
    assert "exec /fake-store/venv/bin/python -m bitexact" in got["bitexact"]
    assert "export PYTHONPATH=/fake-store/bitexact/lib/python3.12/site-packages" in got["bitexact"]
    # The kernel tests' Python: the venv's packages ahead of nixpkgs' pytest (and its packaging, ...).
    pythonpath = got["kernelPython"].split("export PYTHONPATH=", 1)[1].split("${", 1)[0].split(":")
    assert pythonpath[0] == "/fake-store/venv/lib/python3.12/site-packages", pythonpath
    assert pythonpath[1:] == ["/fake-store/pytest/lib/python3.12/site-packages"], pythonpath
    assert "exec /fake-store/venv/bin/python" in got["kernelPython"]


def test_gpu_kernels_fails_on_skipped_or_missing_tests(tmp_path: Path) -> None:
    """The guard in gpu-kernels' script, run on real pytest JUnit output: a skip (what every GPU test
    does without CUDA) must fail the check; all tests run must pass it."""
    script = nix_eval(
        f"let d = {NIXPKGS_DOUBLES}; out = import ./nix/gpu-checks.nix {{ pkgs = d; recipe = {READ_RECIPE}; "
        'packages.bitexact = "/b"; python = d.python312; mkServer = a: { outPath = "/s"; '
        'passthru = { venv = "/v"; sglang = "/g"; }; }; }; in out.gpu-kernels.run.script'
    )
    guard = script.split("<<'EOF'\n", 1)[1].split("\nEOF", 1)[0]
    cases = {"skipped": "@pytest.mark.skip(reason='no CUDA')\ndef test_b():\n    pass\n", "ran": ""}
    for name, extra in cases.items():
        tests = tmp_path / name
        tests.mkdir()
        (tests / "test_k.py").write_text("import pytest\n\ndef test_a():\n    pass\n\n" + extra)
        junit = tests / "junit.xml"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                f"--junitxml={junit}",
                str(tests),
            ],
            capture_output=True,
        )
        done = subprocess.run([sys.executable, "-", str(junit)], input=guard, capture_output=True, text=True)
        if name == "skipped":
            assert done.returncode == 1 and "2 tests, 1 skipped" in done.stderr
        else:
            assert done.returncode == 0, done.stderr


def test_the_record_golden_app_passes_shellcheck(locked: dict[str, Path], tmp_path: Path) -> None:
    """writeShellApplication runs shellcheck when it builds; a finding would break the app."""
    text = gpu_checks(locked, 30000, False, "g.record-golden.text")
    done = shellcheck_as_nixpkgs(text, tmp_path)
    assert done.returncode == 0, done.stdout


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
