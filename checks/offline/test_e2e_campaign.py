"""checks/e2e/campaign.sh, the background runner of a device session, run for real by bash here: the GPU
programs it starts are a stand-in Python that logs its arguments (no GPU here), so what is tested is the
script's own logic: the phases' order and arguments, the fallback of a failed perf server, the marker
and the collected tarball, and a refused plan."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Logs each call; run.py fails for stock-spec unless told --prefill-prompt 0 (the fallback's run).
STANDIN = """#!/bin/sh
echo "$*" >> "$CAMPAIGN_CALLS"
case "$*" in
  *run.py*--server\\ stock-spec*--prefill-prompt\\ 0*) exit 0 ;;
  *run.py*--server\\ stock-spec*) exit 2 ;;
esac
exit 0
"""


def _setup(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    repo = tmp_path / "repo"
    (repo / "checks" / "e2e").mkdir(parents=True)
    (repo / "checks" / "golden").mkdir()
    shutil.copy(REPO / "checks" / "e2e" / "campaign.sh", repo / "checks" / "e2e" / "campaign.sh")
    (repo / "checks" / "golden" / "README.md").write_text("goldens\n")
    standin = tmp_path / "python"
    standin.write_text(STANDIN)
    standin.chmod(0o755)
    env = dict(
        os.environ,
        PYTHON=str(standin),
        E2E_WORK=str(tmp_path / "work"),
        CAMPAIGN_DIR=str(tmp_path / "camp"),
        CAMPAIGN_CALLS=str(tmp_path / "calls.log"),
        OUT=str(tmp_path / "out"),
    )
    return repo, env


def _campaign(repo: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "checks/e2e/campaign.sh", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_perf_plan_runs_its_phases_in_order_and_collects(tmp_path: Path) -> None:
    repo, env = _setup(tmp_path)
    started = _campaign(repo, env, "start", "abc1234", "perf")
    assert started.returncode == 0, started.stderr
    done = _campaign(repo, env, "wait", "60")
    assert "CAMPAIGN DONE" in done.stdout, done.stdout + done.stderr
    calls = (tmp_path / "calls.log").read_text().splitlines()
    measures = [c for c in calls if "bench/perf/run.py measure" in c]
    servers = [c.split("--server ")[1].split()[0] for c in measures]
    # stock-spec failed once and ran again without the prefill profile; the others once each, in order
    assert servers == ["exact-spec", "stock-spec", "stock-spec", "exact-no-spec", "stock-no-spec"]
    assert "--prefill-prompt 0" in measures[2] and "--prefill-prompt" not in measures[1]
    assert all(f"--work {tmp_path / 'work'}" in c and "--start-timeout 600" in c for c in measures)
    rest = calls[len(measures) :]  # phase G after phase P, its two streams in either order
    golden = next(c for c in rest if "checks/e2e/goldens.py" in c)
    assert "--recipe nix/recipes/perf-27b-shape.json" in golden and "--build-id abc1234" in golden
    assert golden.endswith("record check:restart=patched")
    batteries = next(c for c in rest if "checks/e2e/batteries.py" in c)
    assert "--tree stock --no-deterministic" in batteries and "gpu-capacity-max-running-1" in batteries
    log = (tmp_path / "camp" / "campaign.log").read_text()
    assert log.index("phase P") < log.index("stock-spec exit 0") < log.index("phase G") < log.index("done")
    with tarfile.open(tmp_path / "out" / "campaign.tar.gz") as tar:
        names = tar.getnames()
    assert "campaign.log" in names and "res/golden/README.md" in names
    # the copy the phases ran from: the tree as it was at the start, without .git
    assert (tmp_path / "camp" / "repo" / "checks" / "e2e" / "campaign.sh").exists()


def test_an_unknown_plan_is_refused_before_anything_starts(tmp_path: Path) -> None:
    repo, env = _setup(tmp_path)
    refused = _campaign(repo, env, "start", "abc1234", "speed")
    assert (
        refused.returncode == 2
        and "unknown plan speed (e2e, perf, long, radix, recheck, targets, complete, batteries, "
        "parity-targets, four-servers, closing, finish, capacity-prefill, prefill-640 or loop-stages)"
        in refused.stderr
    )
    assert not (tmp_path / "camp").exists()


def test_the_e2e_plan_records_alone_then_runs_four_streams(tmp_path: Path) -> None:
    repo, env = _setup(tmp_path)
    (tmp_path / "work" / "router-site" / "sglang_router").mkdir(parents=True)  # the router's wheel, unpacked
    assert _campaign(repo, env, "start", "abc1234").returncode == 0  # plan e2e, the default
    done = _campaign(repo, env, "wait", "60")
    assert "CAMPAIGN DONE" in done.stdout, done.stdout + done.stderr
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert "record check:restart=patched" in calls[0] and "--port" not in calls[0]  # phase A, alone
    streams = calls[1:]
    assert sum("batteries.py" in c for c in streams) == 2 and sum("router.py" in c for c in streams) == 2
    assert all("--mem-fraction-static 0.2" in c for c in streams)
    drift = next(c for c in streams if "goldens.py" in c)
    assert "check:stock=stock" in drift and "check:revert-0003=revert-0003" in drift


def _run_plan(tmp_path: Path, plan: str) -> list[str]:
    """Start PLAN with the stand-in programs and no head starts, wait for it, return the calls in order."""
    repo, env = _setup(tmp_path)
    env["CAMPAIGN_WARM_HEAD_START"] = "0"
    env["CAMPAIGN_STAGGER"] = "0"
    assert _campaign(repo, env, "start", "abc1234", plan).returncode == 0
    done = _campaign(repo, env, "wait", "60")
    assert "CAMPAIGN DONE" in done.stdout, done.stdout + done.stderr
    return (tmp_path / "calls.log").read_text().splitlines()


def _measures(calls: list[str]) -> tuple[list[str], list[str]]:
    """Phase P's run.py measure calls, and the server each measured, in order."""
    measures = [c for c in calls if "run.py measure" in c]
    return measures, [c.split("--server ")[1].split()[0] for c in measures]


def _warm_calls(side: list[str]) -> list[str]:
    """The warm start among phase C's calls. It is started first, but with no head start (the stand-ins
    run at once) a battery's stand-in may log before it, so its place in the log is not asserted."""
    return [c for c in side if "run.py warm" in c]


def test_the_long_plan_benches_alone_checks_beside_the_warm_start_then_measures(tmp_path: Path) -> None:
    calls = _run_plan(tmp_path, "long")
    assert calls[0] == "bench/kernels/bench_attn_verify.py"  # phase K, alone
    measures = [c for c in calls if "run.py measure" in c]
    assert [c.split("--server ")[1].split()[0] for c in measures] == ["exact-spec", "exact-no-spec"]
    assert calls[-2:] == measures  # phase P last, one server after the other
    assert all("--prefill-prompt 0" in c for c in measures)
    assert "--profile-prompt 2200,131072" in measures[1] and "--profile-prompt" not in measures[0]
    side = calls[1:-2]  # phase C: the warm start, the checks, two battery streams, the golden check
    warm = next(c for c in side if "run.py warm" in c)
    assert "--server exact-spec" in warm and "--mem-fraction-static 0.5" in warm
    checks = next(c for c in side if "-m pytest" in c)
    assert "checks/gpu/test_attn_exact_verify.py checks/gpu/test_unified_extend.py" in checks
    batteries = [c for c in side if "checks/e2e/batteries.py" in c]
    assert len(batteries) == 2 and all("--mem-fraction-static 0.12" in c for c in batteries)
    golden = next(c for c in side if "checks/e2e/goldens.py" in c)
    parity = next(c for c in batteries if "gpu-parity-recipe" in c)
    assert side.index(parity) < side.index(golden)  # one stream: the parity batteries, then the goldens
    assert "check:new-kernels=patched" in golden and "--build-id abc1234" in golden
    log = (tmp_path / "camp" / "campaign.log").read_text()
    assert log.index("phase K") < log.index("phase C") < log.index("phase P") < log.index("done")


def test_the_radix_plan_benches_alone_runs_the_batteries_beside_then_measures_reuse(tmp_path: Path) -> None:
    calls = _run_plan(tmp_path, "radix")
    assert calls[0] == "bench/kernels/bench_attn_verify.py --quick"  # phase K, alone
    assert "run.py measure" in calls[-1]  # phase P, last and alone: both radix servers' reuse
    assert "--server exact-spec-radix --server stock-spec-radix" in calls[-1]
    side = calls[1:-1]
    warm = next(c for c in side if "run.py warm" in c)
    assert "--server exact-spec-radix" in warm and "--mem-fraction-static 0.5" in warm
    checks = next(c for c in side if "-m pytest" in c)
    assert "checks/gpu/test_gdn_prefix_snapshot.py" in checks and "snapshot or tile_plans or draft" in checks
    runs = [c for c in side if "batteries.py" in c]
    batteries = {c.split("--tree ")[1].split()[0] + ":" + c.split("--only ")[1].split()[0] for c in runs}
    assert len(batteries) == 3
    patched_radix = next(b for b in batteries if b.startswith("patched:gpu-radix"))
    assert "gpu-radix-golden" in patched_radix and "gpu-radix-repeat" in patched_radix
    assert "stock:gpu-radix-cold-warm,gpu-radix-shared-prefix" in batteries
    assert any(
        b.startswith("patched:gpu-parity-recipe") and "cuda-graph-decode-bs-32" in b for b in batteries
    )
    radix_call = next(c for c in side if "--out" in c and "e2e-radix " in c + " ")
    assert "--golden-dir" in radix_call
    assert all("--mem-fraction-static 0.15" in c for c in runs)
    log = (tmp_path / "camp" / "campaign.log").read_text()
    assert log.index("phase K") < log.index("phase C") < log.index("phase P") < log.index("done")


def test_the_recheck_plan_runs_the_checks_and_both_trees_batteries_side_by_side(tmp_path: Path) -> None:
    calls = _run_plan(tmp_path, "recheck")
    assert not any("bench_attn_verify" in c or "run.py" in c for c in calls)  # nothing timed
    checks = next(c for c in calls if "-m pytest" in c)
    assert "checks/gpu/test_attn_exact_verify.py" in checks and " -k " not in checks
    runs = [c for c in calls if "batteries.py" in c]
    batteries = {c.split("--tree ")[1].split()[0] + ":" + c.split("--only ")[1].split()[0] for c in runs}
    assert "stock:gpu-radix-cold-warm,gpu-radix-shared-prefix" in batteries
    patched = [b for b in batteries if b.startswith("patched:")]
    assert len(patched) == 3 and any("gpu-radix-golden" in b for b in patched)
    assert "patched:gpu-radix-forced-reject" in batteries  # its own server, its own stream
    assert any("gpu-repeat" in b and "gpu-parity-long" in b for b in patched)
    assert len({c.split("--port ")[1].split()[0] for c in runs}) == len(runs)
    assert all("--mem-fraction-static 0.15" in c for c in runs)
    log = (tmp_path / "camp" / "campaign.log").read_text()
    assert log.index("phase C") < log.index("done")


def test_the_targets_plan_warms_beside_the_batteries_then_measures_four_servers(tmp_path: Path) -> None:
    calls = _run_plan(tmp_path, "targets")
    measures, servers = _measures(calls)
    assert servers == [
        "exact-spec",
        "exact-no-spec",
        "stock-spec",
        "stock-no-spec",
    ]
    assert calls[-4:] == measures  # phase P last, one server after the other
    assert all("--prefill-prompt 0" in c and "--start-timeout 900" in c for c in measures)
    assert "--profile-prompt" not in measures[0] and "--no-profile" not in measures[0]  # every context
    assert "--profile-prompt 131072" in measures[1]
    assert all("--no-profile" in c for c in measures[2:])
    assert "--long-lengths" in measures[3] and "--long-lengths" not in measures[2]
    side = calls[:-4]
    (warm,) = _warm_calls(side)
    assert "--server exact-spec " in warm + " "
    assert not any("-m pytest" in c or "bench_attn_verify" in c for c in side)
    runs = [c for c in side if "batteries.py" in c]
    batteries = {c.split("--tree ")[1].split()[0] + ":" + c.split("--only ")[1].split()[0] for c in runs}
    assert "stock:gpu-radix-cold-warm,gpu-radix-shared-prefix" in batteries
    assert "patched:gpu-radix-forced-reject" in batteries
    assert any("gpu-repeat" in b and "gpu-parity-long" in b for b in batteries)
    assert len({c.split("--port ")[1].split()[0] for c in runs + [warm]}) == len(runs) + 1
    log = (tmp_path / "camp" / "campaign.log").read_text()
    assert log.index("phase C") < log.index("phase P") < log.index("stock-no-spec exit 0") < log.index("done")


def test_the_complete_plan_is_targets_with_every_capacity_battery_beside(tmp_path: Path) -> None:
    calls = _run_plan(tmp_path, "complete")
    measures, servers = _measures(calls)
    assert servers == ["exact-spec", "exact-no-spec", "stock-spec", "stock-no-spec"]
    assert calls[-4:] == measures  # phase P last, one server after the other
    side = calls[:-4]
    (warm,) = _warm_calls(side)
    runs = [c for c in side if "batteries.py" in c]
    only = [c.split("--only ")[1].split()[0].split(",") for c in runs]
    capacity = sorted(b for names in only for b in names if b.startswith("gpu-capacity-"))
    assert capacity == sorted(
        "gpu-capacity-" + s
        for s in (
            "max-running-1",
            "max-seqs-32",
            "chunked-prefill-4096",
            "chunked-prefill-16384",
            "cuda-graph-decode-bs-1",
            "cuda-graph-decode-bs-32",
        )
    )  # each once
    (parity,) = [names for names in only if "gpu-repeat" in names]
    assert {"gpu-parity-long", "gpu-capacity-max-running-1"} <= set(parity)  # one run shares references
    (reject,) = [names for names in only if "gpu-radix-forced-reject" in names]
    assert "gpu-capacity-chunked-prefill-16384" in reject
    assert all("--tree patched" in c for c in runs if "gpu-capacity-" in c)
    assert len({c.split("--port ")[1].split()[0] for c in runs + [warm]}) == len(runs) + 1 == 6
    log = (tmp_path / "camp" / "campaign.log").read_text()
    assert log.index("phase C") < log.index("phase P") < log.index("stock-no-spec exit 0") < log.index("done")


def test_the_batteries_plan_is_completes_batteries_alone(tmp_path: Path) -> None:
    calls = _run_plan(tmp_path, "batteries")
    assert not _measures(calls)[0] and not _warm_calls(calls)
    runs = [c for c in calls if "batteries.py" in c]
    assert len(runs) == 5 and sum(c.count("gpu-capacity-") for c in runs) == 6
    log = (tmp_path / "camp" / "campaign.log").read_text()
    assert "phase P" not in log and log.index("phase C") < log.index("done")


def _beside_first_start_then_four_servers(tmp_path: Path, plan: str) -> list[str]:
    """PLAN's shape as plans parity-targets and closing share it: phase C beside exact-spec's first
    start, then plan targets' four servers last, one after the other. Returns phase C's calls."""
    calls = _run_plan(tmp_path, plan)
    measures, servers = _measures(calls)
    assert servers == ["exact-spec", "exact-no-spec", "stock-spec", "stock-no-spec"]
    assert calls[-4:] == measures
    side = calls[:-4]
    (warm,) = _warm_calls(side)
    assert "--server exact-spec " in warm
    log = (tmp_path / "camp" / "campaign.log").read_text()
    assert log.index("phase C") < log.index("phase P") < log.index("stock-no-spec exit 0") < log.index("done")
    return side


def test_the_parity_targets_plan_runs_one_parity_stream_beside_the_first_start_then_four_servers(
    tmp_path: Path,
) -> None:
    side = _beside_first_start_then_four_servers(tmp_path, "parity-targets")
    (stream,) = [c for c in side if "batteries.py" in c]
    assert "--only gpu-parity-recipe,gpu-parity-inflight-8,gpu-parity-long,gpu-repeat " in stream


def test_the_four_servers_plan_is_plan_targets_phase_p_alone(tmp_path: Path) -> None:
    calls = _run_plan(tmp_path, "four-servers")
    measures, servers = _measures(calls)
    assert calls == measures  # nothing beside, no warm start: exact-spec's own start compiles
    assert servers == ["exact-spec", "exact-no-spec", "stock-spec", "stock-no-spec"]
    assert all("--start-timeout 900" in c for c in measures)
    assert "--profile-prompt 131072" in measures[1] and "--no-profile" in measures[2]
    log = (tmp_path / "camp" / "campaign.log").read_text()
    assert "phase C" not in log and log.index("phase P") < log.index("stock-no-spec exit 0") < log.index(
        "done"
    )


def test_the_closing_plan_runs_the_last_two_batteries_beside_the_first_start_then_four_servers(
    tmp_path: Path,
) -> None:
    side = _beside_first_start_then_four_servers(tmp_path, "closing")
    battery, golden = [c for c in side if "batteries.py" in c or "goldens.py" in c]  # one stream, in order
    assert "--tree patched --only gpu-parity-forced-reject " in battery and "--port 30000" in battery
    assert golden.endswith("check:loop-stages=patched") and "--build-id abc1234" in golden
    assert f"--golden-dir {tmp_path / 'camp' / 'res' / 'golden'}" in golden


def test_the_finish_plan_warms_beside_one_battery_stream_then_measures_five_servers(tmp_path: Path) -> None:
    calls = _run_plan(tmp_path, "finish")
    measures, servers = _measures(calls)
    assert servers == [
        "exact-spec",
        "exact-no-spec",
        "stock-spec",
        "stock-no-spec",
        "exact-spec-window",
    ]
    assert calls[-5:] == measures  # phase P last, one server after the other, the window last
    window = measures[-1]
    assert "--lengths 32768 --long-lengths 131072 --profile-prompt 131072" in window
    assert all("--prefill-prompt 0" in c and "--start-timeout 900" in c for c in measures)
    side = calls[:-5]
    (warm,) = _warm_calls(side)
    assert "--mem-fraction-static 0.5" in warm
    runs = [c for c in side if "batteries.py" in c]
    assert len(side) == 2 and len(runs) == 1  # one stream: one tiny server at a time
    assert "--only gpu-radix-golden,gpu-radix-forced-reject " in runs[0] and "--golden-dir" in runs[0]
    log = (tmp_path / "camp" / "campaign.log").read_text()
    assert log.index("phase C") < log.index("phase P") < log.index("stock-no-spec exit 0")
    assert log.index("stock-no-spec exit 0") < log.index("exact-spec-window exit 0") < log.index("done")


def test_the_capacity_prefill_plan_runs_the_capacity_stream_then_profiles_the_640_token_prefills(
    tmp_path: Path,
) -> None:
    calls = _run_plan(tmp_path, "capacity-prefill")
    measures, servers = _measures(calls)
    assert servers == ["exact-no-spec", "stock-no-spec"]
    assert calls[-2:] == measures  # phase P last, one server after the other
    assert all(
        "--lengths 640 --long-lengths  --profile-prompt 640 --prefill-prompt 640" in c for c in measures
    )
    side = calls[:-2]
    (warm,) = _warm_calls(side)
    assert "--server exact-no-spec " in warm and "--mem-fraction-static 0.5" in warm
    (stream,) = [c for c in side if "batteries.py" in c]  # one stream: one tiny server at a time
    assert len(side) == 2 and "--port 30000" in stream and "--port 30030" in warm
    assert stream.split("--only ")[1].split()[0].split(",") == [
        "gpu-capacity-" + name
        for name in (
            "max-running-1",
            "max-seqs-32",
            "chunked-prefill-4096",
            "chunked-prefill-16384",
            "cuda-graph-decode-bs-1",
            "cuda-graph-decode-bs-32",
        )
    ]
    log = (tmp_path / "camp" / "campaign.log").read_text()
    assert log.index("phase C") < log.index("phase P") < log.index("stock-no-spec exit 0") < log.index("done")


def test_the_prefill_640_plan_is_capacity_prefills_phase_p_alone(tmp_path: Path) -> None:
    calls = _run_plan(tmp_path, "prefill-640")
    measures, servers = _measures(calls)
    assert (
        servers == ["exact-no-spec", "stock-no-spec"] and calls == measures
    )  # nothing beside, no warm start
    assert all(
        "--lengths 640 --long-lengths  --profile-prompt 640 --prefill-prompt 640" in c for c in measures
    )
    log = (tmp_path / "camp" / "campaign.log").read_text()
    assert "phase C" not in log
    assert log.index("phase P") < log.index("exact-no-spec exit 0") < log.index("stock-no-spec exit 0")
    assert log.index("stock-no-spec exit 0") < log.index("done")


def test_the_loop_stages_plan_checks_beside_the_first_start_then_times_the_no_spec_servers(
    tmp_path: Path,
) -> None:
    calls = _run_plan(tmp_path, "loop-stages")
    measures, servers = _measures(calls)
    assert servers == ["exact-no-spec", "stock-no-spec"]
    assert calls[-2:] == measures  # phase P last, one server after the other
    assert all(
        "--lengths 640,2200 --long-lengths  --profile-prompt 640 --prefill-prompt 0" in c for c in measures
    )
    side = calls[:-2]
    (warm,) = _warm_calls(side)
    assert "--server exact-no-spec " in warm and "--mem-fraction-static 0.5" in warm
    (checks,) = [c for c in side if "-m pytest" in c]
    assert checks.endswith("checks/gpu/test_attn_exact_verify.py")
    (stream,) = [c for c in side if "batteries.py" in c]
    assert "--tree patched --only gpu-parity-recipe " in stream and "--port 30000" in stream
    log = (tmp_path / "camp" / "campaign.log").read_text()
    assert log.index("phase C") < log.index("phase P") < log.index("exact-no-spec exit 0")
    assert log.index("exact-no-spec exit 0") < log.index("stock-no-spec exit 0") < log.index("done")


def test_wait_and_collect_on_a_machine_without_the_campaign_fail_at_once(tmp_path: Path) -> None:
    """A later device call that lands on a fresh machine (warm: false) has no campaign: once, a wait of
    585 s spent itself on one. Both steps now say so and stop before any waiting."""
    repo, env = _setup(tmp_path)
    for step in (["wait", "60"], ["collect"]):
        started = time.monotonic()
        result = _campaign(repo, env, *step)
        assert result.returncode == 3 and time.monotonic() - started < 10
        assert "no campaign on this machine" in result.stderr and "warm: false" in result.stderr
        assert not (tmp_path / "out" / "campaign.tar.gz").exists()


def test_wait_stops_when_the_runner_is_gone_without_the_done_marker(tmp_path: Path) -> None:
    repo, env = _setup(tmp_path)
    camp = tmp_path / "camp"
    (camp / "res").mkdir(parents=True)
    (camp / "campaign.log").write_text("phase C 10:00:00\n")
    gone = subprocess.Popen(["true"])
    gone.wait()  # reaped: its PID names no live process
    (camp / "pid").write_text(f"{gone.pid}\n")
    started = time.monotonic()
    result = _campaign(repo, env, "wait", "60")
    assert result.returncode == 4 and time.monotonic() - started < 10
    assert f"runner ({gone.pid}) ended without finishing" in result.stderr
    assert "phase C 10:00:00" in result.stdout and "CAMPAIGN DONE" not in result.stdout
    assert (tmp_path / "out" / "campaign.tar.gz").exists()  # what there is still comes back


def _start_time(pid: int) -> str:
    """Field 22 of /proc/PID/stat, as campaign.sh's runner records it beside its PID."""
    return (Path("/proc") / str(pid) / "stat").read_text().rsplit(") ", 1)[1].split()[19]


def test_a_started_campaign_records_its_runner_and_wait_keeps_waiting_while_it_lives(tmp_path: Path) -> None:
    repo, env = _setup(tmp_path)
    env["CAMPAIGN_WARM_HEAD_START"] = "5"  # plan targets' first step sleeps: the runner lives for a while
    started = _campaign(repo, env, "start", "abc1234", "targets")
    assert started.returncode == 0 and started.stderr == ""  # nothing said about a missing pid file
    # start returns only once the log and the runner's record exist: a wait right after finds both
    pid, start = (tmp_path / "camp" / "pid").read_text().split()
    assert (tmp_path / "camp" / "campaign.log").exists() and start == _start_time(int(pid))
    early = _campaign(repo, env, "wait", "1")
    assert early.returncode == 1 and "CAMPAIGN DONE" not in early.stdout  # still running
    assert "ended without finishing" not in early.stderr
    again = _campaign(repo, env, "start", "abc1234", "targets")  # not over a live runner
    assert again.returncode == 2 and f"a campaign is running (its runner is pid {pid})" in again.stderr
    done = _campaign(repo, env, "wait", "60")
    assert done.returncode == 0 and "CAMPAIGN DONE" in done.stdout, done.stderr


def test_a_zombie_or_a_reused_pid_is_not_the_runner(tmp_path: Path) -> None:
    repo, env = _setup(tmp_path)
    camp = tmp_path / "camp"
    camp.mkdir()
    (camp / "campaign.log").write_text("phase P 10:00:00\n")
    zombie = subprocess.Popen(["true"])  # exits and stays unreaped until .wait(): a zombie
    try:
        for _ in range(100):
            if (Path("/proc") / str(zombie.pid) / "stat").read_text().rsplit(") ", 1)[1][0] == "Z":
                break
            time.sleep(0.05)
        (camp / "pid").write_text(f"{zombie.pid} {_start_time(zombie.pid)}\n")
        assert _campaign(repo, env, "collect").returncode == 4
    finally:
        zombie.wait()
    # a live process whose start time is not the recorded one: the PID was given to another process
    (camp / "pid").write_text(f"{os.getpid()} 1\n")
    result = _campaign(repo, env, "wait", "60")
    assert result.returncode == 4 and "ended without finishing" in result.stderr


def test_build_on_a_machine_with_nothing_stashed_names_the_stash_step(tmp_path: Path) -> None:
    repo, env = _setup(tmp_path)
    shutil.copy(REPO / "checks" / "e2e" / "h200.sh", repo / "checks" / "e2e" / "h200.sh")
    result = subprocess.run(
        ["bash", "checks/e2e/h200.sh", "build"], cwd=repo, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 3
    assert f"nothing stashed under {tmp_path / 'work'}/wheels" in result.stderr
    assert "h200.sh stash" in result.stderr
    assert not (tmp_path / "calls.log").exists()  # assemble.py never ran
