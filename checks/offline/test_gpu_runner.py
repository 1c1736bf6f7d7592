"""The one runner (`bitexact-gpu-checks`, pkgs/gpu-checks) run whole, as a process, against servers in
SGLang's shapes: each tree's launcher is a stand-in (standin_launcher.py, answering --print and
--build-info as exactlaunch.cli does) that starts canned_sglang.py; the runner, bitexact, the plan, the
ports, the HTTP, the verdict files and the signals are real. The card is an H200 as NVML reports it
through the driver stand-ins (driver_standins.py), so bitexact keys goldens as on the lent card."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from checkhelpers.driver_standins import H200, install_driver, nvml_env
from checkhelpers.net_support import free_port

REPO = Path(__file__).resolve().parents[2]
PLAN = REPO / "checks" / "plans" / "e2e-tiny-hybrid.json"
RECIPE = REPO / "nix" / "recipes" / "e2e-tiny-hybrid.json"
# The long prompts and prefixes shortened to what the canned server holds (its /server_info says 2042
# tokens a request), so that every command of the plan runs; needs are recomputed as the plan's rule
# (nix/lib/gpu-batteries.nix needsIn) does.
SHORT = {"16k,64k,128k": "64,300", "64k": "600", "65537": "601"}
NEW_TOKENS = 64


def lengths(text: str) -> int:
    return max(int(p[:-1]) * 1024 if p.endswith("k") else int(p) for p in text.split(","))


def needs(step: dict[str, Any], command: list[str]) -> int | None:
    if "--long" in command:
        return lengths(command[command.index("--long") + 1]) + NEW_TOKENS
    if "--shared-prefix" in command:
        return lengths(command[command.index("--shared-prefix") + 1]) + NEW_TOKENS
    if "@REF_LONG@" in command or (step.get("reference") == "long" and "@REF@" in command):
        return lengths(SHORT["16k,64k,128k"]) + NEW_TOKENS
    return None


def short_plan(dest: Path, stock: dict[str, str] | None = None) -> Path:
    plan = json.loads(PLAN.read_text())
    steps = [*plan["references"].values(), *plan["batteries"]]
    for step in steps:
        step["commands"] = [[SHORT.get(a, a) for a in c] for c in step["commands"]]
        step["commandNeeds"] = [needs(step, c) for c in step["commands"]]
        if step["name"] in (stock or {}):
            step["stock"] = stock[step["name"]]  # type: ignore[index]
    record = plan["goldenRecord"]
    record["commands"] = [[SHORT.get(a, a) for a in c] for c in record["commands"]]
    dest.write_text(json.dumps(plan))
    return dest


@pytest.fixture(scope="module")
def card(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    driver = install_driver(tmp_path_factory.mktemp("driver") / "lib")
    return {"BITEXACT_DRIVER_LIB": str(driver), **nvml_env(H200)}


@pytest.fixture()
def host(tmp_path: Path, card: dict[str, str]) -> dict[str, Any]:
    """Two trees (patched carries the series' manifest, stock none), their stand-in launchers, goldens."""
    made: dict[str, Any] = {"root": tmp_path}
    for tree in ("patched", "stock"):
        (tmp_path / tree / "sglang" / "srt").mkdir(parents=True)
        launcher = tmp_path / f"launch-{tree}"
        launcher.write_text(
            f'#!/bin/sh\nSTANDIN_TREE={tree} exec {sys.executable} -m checkhelpers.standin_launcher "$@"\n'
        )
        launcher.chmod(0o755)
        made[tree] = launcher
    (tmp_path / "patched" / "sglang" / "srt" / "bitexact_manifest.json").write_text("{}\n")
    (tmp_path / "golden").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BITEXACT_", "STANDIN_"))}
    env.pop("LD_LIBRARY_PATH", None)
    made["env"] = {**env, **card}
    return made


def runner(
    host: dict[str, Any], verb: str, plan: Path, *extra: str, behaviours: dict[str, str] | None = None,
    port: int | None = None, stock: bool = True, start_timeout: str = "60",
) -> list[str]:  # fmt: skip
    root = host["root"]
    argv = [sys.executable, "-m", "gpuchecks", verb, "--plan", str(plan), "--recipe", str(RECIPE)]
    argv += ["--tree", f"patched={root / 'patched'}", "--launcher", f"patched={host['patched']}"]
    if stock and verb == "run":
        argv += ["--tree", f"stock={root / 'stock'}", "--launcher", f"stock={host['stock']}"]
    argv += [
        "--golden-dir",
        str(root / "golden"),
        "--model-snapshot",
        "bytes",
        "--port",
        str(port or free_port()),
    ]
    argv += ["--start-timeout", start_timeout, *extra]
    host["env"]["STANDIN_BEHAVIOURS"] = json.dumps(behaviours or {})
    return argv


def run(host: dict[str, Any], argv: list[str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=host["root"], env=host["env"], capture_output=True, text=True, timeout=timeout
    )


def verdicts(out: Path) -> dict[tuple[str, str], dict[str, Any]]:
    lines = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    return {(e["tree"], e["step"]): e for e in lines}


BATTERIES = [b["name"] for b in json.loads(PLAN.read_text())["batteries"]]
# The canned server's cache moves every answer that took tokens from it (radix-drift), the shared
# prefix's questions too: the released tree's real cache does not (docs/e2e.md), so this plan says so.
STOCK = {"stock:recipe": "drift", "stock:radix": "radix-drift"}


def test_the_whole_plan_passes_and_the_stock_tree_meets_its_expectations(host: dict[str, Any]) -> None:
    """This card's goldens recorded with the runner's `record`, then every battery of the plan on the
    patched tree (two lanes), the stock tree's expectations checked, every verdict written, exit 0."""
    plan = short_plan(host["root"] / "plan.json", {"gpu-radix-shared-prefix": "differs"})
    record = run(
        host, runner(host, "record", plan, "--out", str(host["root"] / "record"), "--", "--build-id", "t")
    )
    assert record.returncode == 0, record.stderr[-3000:]
    golden = host["root"] / "golden" / "h200"
    assert sorted(p.name for p in golden.glob("*.json")) == [
        "e2e-tiny-hybrid-long.json",
        "e2e-tiny-hybrid.json",
    ]
    out = host["root"] / "out"
    port = free_port()
    argv = runner(host, "run", plan, "--out", str(out), "--only", ",".join(BATTERIES), "--lanes", "2",
                  "--mem-fraction-static", "0.3", behaviours=STOCK, port=port)  # fmt: skip
    done = run(host, argv)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    got = verdicts(out)
    assert {step for tree, step in got if tree == "patched"} == {
        *BATTERIES, "reference-no-spec", "reference-no-spec-long"
    }  # fmt: skip
    assert all(e["exit"] == 0 for (tree, _), e in got.items() if tree == "patched")
    stock = {step: e for (tree, step), e in got.items() if tree == "stock" and e["kind"] == "battery"}
    assert set(stock) == {"gpu-parity-recipe", "gpu-radix-cold-warm", "gpu-radix-shared-prefix"}
    assert all(e["exit"] == 1 and e["met"] for e in stock.values())
    # the recipe copy at the lanes' share keeps the recipe's name (its goldens key alike)
    copy = json.loads((out / "recipe.json").read_text())
    assert copy["name"] == "e2e-tiny-hybrid" and "0.3" in copy["launch"]["argv"]
    assert "verdict: exit 0" in done.stdout
    # each step's flake check reads the same folder
    for step in ("gpu-golden", "gpu-radix-cold-warm"):
        one = run(host, [sys.executable, "-m", "gpuchecks", "verdict", str(out), step])
        assert one.returncode == 0 and "PASS" in one.stdout, one.stdout + one.stderr


def test_a_stock_tree_that_passes_where_it_must_differ_fails_the_run(host: dict[str, Any]) -> None:
    out = host["root"] / "out"
    argv = runner(host, "run", PLAN, "--out", str(out), "--only", "gpu-parity-recipe")
    done = run(host, argv)
    assert done.returncode == 1, done.stderr[-3000:]
    entry = verdicts(out)[("stock", "gpu-parity-recipe")]
    assert entry["exit"] == 0 and entry["expect"] == "differs" and entry["met"] is False
    assert "UNEXPECTED stock/gpu-parity-recipe: stock must differ" in done.stdout


def test_a_difference_on_the_patched_tree_exits_1_and_names_the_battery(host: dict[str, Any]) -> None:
    out = host["root"] / "out"
    argv = runner(host, "run", PLAN, "--out", str(out), "--only", "gpu-parity-forced-reject",
                  behaviours={"patched:forced-reject": "drift"})  # fmt: skip
    done = run(host, argv)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "DIFFERS    patched/gpu-parity-forced-reject" in done.stdout
    one = run(host, [sys.executable, "-m", "gpuchecks", "verdict", str(out), "gpu-parity-forced-reject"])
    assert one.returncode == 1


def test_what_the_server_cannot_hold_is_left_out_with_the_reason(host: dict[str, Any]) -> None:
    """The plan as committed (128k-token prompts) against a server whose /server_info holds 2042 tokens a
    request: the long reference and the long commands are left out, named; the rest runs and passes."""
    out = host["root"] / "out"
    only = "gpu-parity-long,gpu-capacity-chunked-prefill-4096"
    argv = runner(host, "run", PLAN, "--out", str(out), "--only", only, stock=False)
    done = run(host, argv)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    got = verdicts(out)
    long_ref = got[("patched", "reference-no-spec-long")]
    assert (
        long_ref["exit"] is None
        and "needs 131136 tokens" in long_ref["left_out"]
        and "holds 2042" in long_ref["left_out"]
    )
    parity_long = got[("patched", "gpu-parity-long")]
    assert parity_long["exit"] is None and "long reference, which was left out" in parity_long["left_out"]
    chunked = got[("patched", "gpu-capacity-chunked-prefill-4096")]
    assert chunked["exit"] == 0 and len(chunked["results"]) == 1 and len(chunked["left_out_commands"]) == 1
    assert "LEFT-OUT   patched/gpu-parity-long" in done.stdout


def test_ctrl_c_exits_130_stops_the_servers_and_a_rerun_resumes(host: dict[str, Any]) -> None:
    out = host["root"] / "out"
    port = free_port()
    argv = runner(host, "run", PLAN, "--out", str(out), "--only", "gpu-parity-recipe,gpu-repeat", port=port,
                  stock=False)  # fmt: skip
    proc = subprocess.Popen(
        argv, cwd=host["root"], env=host["env"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        path = out / "verdicts.jsonl"
        if path.exists() and '"gpu-parity-recipe"' in path.read_text():
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-3000:]
    assert "verdict: exit 130 (interrupted)" in stdout
    from gpuchecks import ports

    assert ports.port_free(port), f"a server was left on {port}: {ports.listeners(port)}"
    kept = verdicts(out)
    assert kept[("patched", "gpu-parity-recipe")]["exit"] == 0
    assert ("patched", "gpu-repeat") not in kept  # cut off: never recorded half done
    unfinished = run(host, [sys.executable, "-m", "gpuchecks", "summary", str(out)])
    assert unfinished.returncode == 2 and "did not finish" in unfinished.stdout
    again = run(host, argv)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "gpu-parity-recipe: verdict already in" in again.stderr
    assert verdicts(out)[("patched", "gpu-repeat")]["exit"] == 0


def test_a_resume_with_other_inputs_is_refused(host: dict[str, Any]) -> None:
    out = host["root"] / "out"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"identity": {"plan_sha256": "0" * 64}}))
    done = run(host, runner(host, "run", PLAN, "--out", str(out), "--only", "gpu-repeat", stock=False))
    assert done.returncode == 2 and "holds a run of other inputs (" in done.stderr
    assert not (out / "verdicts.jsonl").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--lanes", "3"], "--lanes 3 puts 3 servers on one card: give --mem-fraction-static"),
        (["--lanes", "3", "--mem-fraction-static", "0.4"], "3 x F <= 0.9"),
        (["--only", "gpu-nothing"], "--only names gpu-nothing, which the plan does not hold"),
        (["--server-env", "SGLANG_BATCH_INVARIANT_OPS_SMALL_M_TRITON=1"], "the recipe sets it"),
        (["--only", "gpu-kernels"], "needs --kernel-checks DIR (checks/gpu) and --series DIR"),
    ],
)
def test_bad_inputs_are_refused_before_anything_starts(
    host: dict[str, Any], extra: list[str], message: str
) -> None:
    out = host["root"] / "out"
    done = run(host, runner(host, "run", PLAN, "--out", str(out), *extra))
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not (out / "verdicts.jsonl").exists()


def test_a_tree_that_is_not_what_its_name_says_is_refused(host: dict[str, Any]) -> None:
    root = host["root"]
    (root / "stock" / "sglang" / "srt" / "bitexact_manifest.json").write_text("{}\n")
    done = run(host, runner(host, "run", PLAN, "--out", str(root / "out")))
    assert (
        done.returncode == 2
        and "carries the series' manifest: it is a patched tree, not stock" in done.stderr
    )
    (root / "stock" / "sglang" / "srt" / "bitexact_manifest.json").unlink()
    done = run(host, runner(host, "run", PLAN, "--out", str(root / "out"), "--tree", f"extra={root}"))
    assert done.returncode == 2 and "the trees are patched, stock" in done.stderr


def test_a_server_that_never_gets_ready_is_stopped_and_its_steps_are_errors(host: dict[str, Any]) -> None:
    """A start past --start-timeout: the steps it serves end in an error naming it, and the process is gone
    (a server left running would hold the card and the port for every later job)."""
    marker = f"standin-hang-{os.getpid()}-{time.monotonic_ns()}"
    host["env"]["STANDIN_MARKER"] = marker
    out = host["root"] / "out"
    argv = runner(host, "run", PLAN, "--out", str(out), "--only", "gpu-repeat", start_timeout="4",
                  behaviours={"patched:recipe": "hang"}, stock=False)  # fmt: skip
    done = run(host, argv)
    assert done.returncode == 2, done.stderr[-2000:]
    entry = verdicts(out)[("patched", "gpu-repeat")]
    assert entry["exit"] == 2 and "was not ready after 4 s" in entry["error"]
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    assert left.stdout.strip() == "", f"the server that never got ready is still running: {left.stdout}"


def test_a_step_without_a_verdict_on_the_patched_tree_does_not_pass(host: dict[str, Any]) -> None:
    """The flake check of a step reads the patched tree's verdict; the stock tree's alone proves nothing of
    the build under test."""
    out = host["root"] / "out"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"identity": {}, "out": str(out)}))
    stock_only = {"step": "gpu-radix-cold-warm", "tree": "stock", "kind": "battery", "exit": 1,
                  "expect": "differs", "met": True, "results": []}  # fmt: skip
    (out / "verdicts.jsonl").write_text(json.dumps(stock_only) + "\n")
    done = run(host, [sys.executable, "-m", "gpuchecks", "verdict", str(out), "gpu-radix-cold-warm"])
    assert (
        done.returncode == 2
        and "no verdict for step 'gpu-radix-cold-warm' on the patched tree" in done.stderr
    )
