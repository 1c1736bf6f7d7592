"""lab/card/host.sh, the GPU host's way to the runner without Nix, run for real by bash here: the Python it
calls is a stand-in that logs its arguments (no GPU, no trees here), so what is tested is the script's own
logic: the runner's arguments for `record` and `run`, the background run (record, then run, then the
marker), collecting, and the refusals on a fresh machine."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Logs each call; sleeps as long as $STANDIN_SLEEP says (a background run that lives a while).
STANDIN = """#!/bin/sh
echo "$*" >> "$HOST_CALLS"
sleep "${STANDIN_SLEEP:-0}"
exit 0
"""


def _setup(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    repo = tmp_path / "repo"
    (repo / "lab" / "card").mkdir(parents=True)
    (repo / "checks" / "golden" / "h200").mkdir(parents=True)
    shutil.copy(REPO / "lab" / "card" / "host.sh", repo / "lab" / "card" / "host.sh")
    (repo / "checks" / "golden" / "README.md").write_text("goldens\n")
    standin = tmp_path / "python"
    standin.write_text(STANDIN)
    standin.chmod(0o755)
    env = dict(
        os.environ,
        PYTHON=str(standin),
        E2E_WORK=str(tmp_path / "work"),
        HOST_CALLS=str(tmp_path / "calls.log"),
        OUT=str(tmp_path / "out"),
    )
    return repo, env


def _host(repo: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "lab/card/host.sh", *args], cwd=repo, env=env, capture_output=True, text=True, timeout=120
    )


def _calls(tmp_path: Path) -> list[list[str]]:
    return [line.split() for line in (tmp_path / "calls.log").read_text().splitlines()]


def test_run_and_record_call_the_runner_on_the_plan_and_the_assembled_trees(tmp_path: Path) -> None:
    repo, env = _setup(tmp_path)
    work = tmp_path / "work"
    assert _host(repo, env, "run", "--lanes", "4", "--mem-fraction-static", "0.2").returncode == 0
    assert _host(repo, env, "record", "--", "--force").returncode == 0
    run, record = _calls(tmp_path)
    for call, verb in ((run, "run"), (record, "record")):
        assert call[:3] == ["-m", "gpuchecks", verb]
        assert call[call.index("--plan") + 1] == "checks/plans/e2e-tiny-hybrid.json"
        assert call[call.index("--recipe") + 1] == "nix/recipes/e2e-tiny-hybrid.json"
        assert call[call.index("--deps") + 1] == f"{work}/deps"
        assert "SGLANG_SKIP_SGL_KERNEL_VERSION_CHECK=1" in call
    # the run meets the committed goldens (a copy, for its history lines); the record writes elsewhere,
    # never into what the run checks against
    assert run[run.index("--golden-dir") + 1] == f"{work}/golden"
    assert record[record.index("--golden-dir") + 1] == f"{work}/recorded"
    assert [run[i + 1] for i, a in enumerate(run) if a == "--tree"] == [
        f"patched={work}/patched",
        f"stock={work}/stock",
    ]
    assert run[run.index("--kernel-checks") + 1] == "checks/gpu" and run[-4:] == [
        "--lanes",
        "4",
        "--mem-fraction-static",
        "0.2",
    ]
    assert "--kernel-checks" not in record and record[-2:] == ["--", "--force"]
    assert (work / "golden" / "README.md").exists() and (work / "golden" / "h200").is_dir()


def test_start_records_then_runs_in_the_background_and_wait_collects(tmp_path: Path) -> None:
    repo, env = _setup(tmp_path)
    env["STANDIN_SLEEP"] = "2"
    env["HOST_RUN_ARGS"] = "--lanes 2 --mem-fraction-static 0.3"
    started = _host(repo, env, "start", "abc1234")
    assert started.returncode == 0 and "started in the background" in started.stdout
    early = _host(repo, env, "collect")
    assert early.returncode == 1 and "BACKGROUND RUN DONE" not in early.stdout  # still running
    again = _host(repo, env, "start", "abc1234")
    assert again.returncode == 2 and "a background run is going" in again.stderr
    done = _host(repo, env, "wait", "60")
    assert done.returncode == 0 and "BACKGROUND RUN DONE (the run's exit: 0)" in done.stdout, done.stderr
    record, run = _calls(tmp_path)
    assert record[2] == "record" and record[-3:] == ["--", "--build-id", "abc1234"]
    assert run[2] == "run" and run[-4:] == ["--lanes", "2", "--mem-fraction-static", "0.3"]
    with tarfile.open(tmp_path / "out" / "results.tar.gz") as tar:
        names = tar.getnames()
    assert "log" in names and any(n.startswith("recorded") for n in names)


def test_wait_and_collect_on_a_machine_without_a_background_run_fail_at_once(tmp_path: Path) -> None:
    """A later device call that lands on a fresh machine (warm: false) has no run to wait for."""
    repo, env = _setup(tmp_path)
    for step in (["wait", "60"], ["collect"]):
        started = time.monotonic()
        result = _host(repo, env, *step)
        assert result.returncode == 3 and time.monotonic() - started < 10
        assert "no background run on this machine" in result.stderr and "warm: false" in result.stderr


def test_wait_stops_when_the_background_run_is_gone_without_the_marker(tmp_path: Path) -> None:
    repo, env = _setup(tmp_path)
    bg = tmp_path / "work" / "background"
    bg.mkdir(parents=True)
    (bg / "log").write_text("record exit 0\n")
    gone = subprocess.Popen(["true"])
    gone.wait()  # reaped: its PID names no live process
    (bg / "pid").write_text(f"{gone.pid} 1\n")
    started = time.monotonic()
    result = _host(repo, env, "wait", "60")
    assert result.returncode == 4 and time.monotonic() - started < 10
    assert f"the background run ({gone.pid}) ended without finishing" in result.stderr
    assert "record exit 0" in result.stdout


def test_build_on_a_machine_with_nothing_stashed_names_the_stash_step(tmp_path: Path) -> None:
    repo, env = _setup(tmp_path)
    result = _host(repo, env, "build")
    assert result.returncode == 3
    assert (
        f"nothing stashed under {tmp_path / 'work'}/wheels" in result.stderr
        and "host.sh stash" in result.stderr
    )
    assert not (tmp_path / "calls.log").exists()  # assemble.py never ran
