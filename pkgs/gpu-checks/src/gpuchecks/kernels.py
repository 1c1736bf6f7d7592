"""The kernel phase: the kernel checks (checks/gpu) under pytest against the patched tree, selected by the
card and host the runner read (gpuchecks.selection), from a copy outside any checkout, as the flake's
sandbox has them (only the copy is there: the checks read the series and the trees from the runner's
inputs, never from paths beside them).

Verdict: 0 when every selected test passed; 1 when a selected test failed (a kernel differs); 2 when one
skipped (a check that cannot run here was selected: its declaration is wrong), errored, failed to
collect, or when nothing was selected (a phase that checked nothing never passes)."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuchecks.host import Host
from gpuchecks.selection import ENV as SELECTION_ENV
from gpuchecks.servers import kill_group


def copy_checks(source: Path, dest: Path) -> Path:
    """A fresh, writable copy of the kernel checks (pytest writes caches and bytecode beside them)."""
    if not (source / "conftest.py").is_file():
        raise FileNotFoundError(
            f"--kernel-checks {source}: no conftest.py there; give the kernel checks' folder (checks/gpu)"
        )
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for path in [dest, *dest.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    return dest


def verdict(report: dict[str, Any] | None, pytest_exit: int, log_tail: str) -> tuple[int, str]:
    """(exit, why) of the phase from the plugin's report."""
    if report is None:
        return 2, f"pytest exited {pytest_exit} without the selection report: {log_tail}"
    if report["collection_errors"]:
        first = report["collection_errors"][0]
        return 2, f"{len(report['collection_errors'])} kernel check file(s) failed to collect; first: {first}"
    skipped = {k: v for k, v in report["outcomes"].items() if v["outcome"] == "skipped"}
    errors = {k: v for k, v in report["outcomes"].items() if v["outcome"] == "error"}
    failed = {k: v for k, v in report["outcomes"].items() if v["outcome"] == "failed"}
    if report["selected"] == 0:
        return 2, (
            f"no kernel check was selected ({len(report['left_out'])} left out): a phase that checked "
            "nothing never passes"
        )
    if skipped:
        name, entry = next(iter(skipped.items()))
        return 2, (
            f"{len(skipped)} selected kernel check(s) skipped, e.g. {name}: {entry.get('reason')}; a check "
            "that applies to this card must run (declare what it needs with @pytest.mark.capability or "
            "@pytest.mark.host_feature)"
        )
    if errors:
        name = next(iter(errors))
        return 2, f"{len(errors)} kernel check(s) errored, e.g. {name}"
    if failed:
        return 1, f"{len(failed)} kernel check(s) failed: {', '.join(list(failed)[:10])}"
    if pytest_exit != 0:
        return 2, f"pytest exited {pytest_exit} though every reported test passed: {log_tail}"
    return 0, f"{report['selected']} selected, {report['passed']} passed, 0 skipped"


def left_out_summary(left_out: dict[str, str]) -> list[str]:
    """Left-out tests grouped by reason: 'N: reason' lines."""
    return [f"{n}: {reason}" for reason, n in Counter(left_out.values()).most_common()]


def run(
    *,
    checks: Path,
    python: list[str],
    env: dict[str, str],
    host: Host,
    out: Path,
    live: tuple[Callable[[Any], None], Callable[[Any], None]] | None = None,
) -> dict[str, Any]:
    """Run the kernel phase; its verdict entry (the plugin's report folded in). The copy of the checks and
    the Triton cache live in a scratch folder under $TMPDIR, removed afterwards (never in OUT: in the
    flake's run OUT is the store path). `live`: (hold, release) of the pytest process, so that an
    interrupted run can stop it."""
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpu-checks-kernels-"))
    try:
        return _run(checks, work, python, env, host, out, live)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(
    checks: Path,
    work: Path,
    python: list[str],
    env: dict[str, str],
    host: Host,
    out: Path,
    live: tuple[Callable[[Any], None], Callable[[Any], None]] | None,
) -> dict[str, Any]:
    copy = copy_checks(checks, work / "kernel-checks")
    report_path = out / "selection-report.json"
    report_path.unlink(missing_ok=True)
    selection = out / "selection.json"
    selection.write_text(
        json.dumps(
            {
                "capability": host.capability or "none",
                "features": host.features,
                "why": host.why,
                "report": str(report_path),
            },
            indent=1,
        )
        + "\n"
    )
    env = dict(env)
    env[SELECTION_ENV] = str(selection)
    env.setdefault("TRITON_CACHE_DIR", str(work / "triton-cache"))
    argv = [
        *python,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-p",
        "gpuchecks.selection",
        # prepend: pytest itself puts the copy's folder (no __init__.py) first on sys.path, as it imports
        # conftest.py and the test files, so the flat harness modules beside them (sglang_tree, series, ...)
        # import from the copy, on a card where the harness is not installed; importlib mode would not.
        "--import-mode=prepend",
        "--rootdir",
        str(copy),
        "-ra",
        "--junitxml",
        str(out / "junit.xml"),
        str(copy),
    ]
    log_path = out / "pytest.log"
    with log_path.open("w") as log_file:
        log_file.write("+ " + " ".join(argv) + "\n")
        log_file.flush()
        proc = subprocess.Popen(
            argv, cwd=copy, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
        )
        if live:
            live[0](proc)
        try:
            proc.wait()
        finally:
            if live:
                live[1](proc)
            if proc.poll() is None:
                kill_group(proc.pid)
                proc.wait()
    report = json.loads(report_path.read_text()) if report_path.is_file() else None
    tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-30:])
    code, why = verdict(report, proc.returncode, tail)
    entry: dict[str, Any] = {"exit": code, "why": why, "pytest_exit": proc.returncode}
    if report is not None:
        entry.update(
            {
                k: report[k]
                for k in ("selected", "passed", "failed", "error", "skipped", "capability", "features")
            }
        )
        entry["left_out"] = report["left_out"]
        entry["not_passed"] = {k: v for k, v in report["outcomes"].items() if v["outcome"] != "passed"}
    return entry
