"""The kernel phase's pytest plugin (`-p gpuchecks.selection`): selection by card and host, declared.

A kernel check declares what it needs with markers:
- `@pytest.mark.capability("12.0", "12.1")`: it applies on these compute capabilities only;
- `@pytest.mark.host_feature("deepgemm-runs")`: it applies where the runner's probe found the feature
  (gpuchecks.host.FEATURES; a name outside them is a usage error, never a silent deselection).

The runner writes what it read of the host to a JSON file named by $BITEXACT_GPU_SELECTION
({"capability", "features", "why", "report"}); this plugin runs what applies, deselects the rest with the
reason, and writes the outcome of every selected test to the report file. The runner, not pytest,
decides the verdict from the report: a selected test that skips fails the phase, and so does an empty
selection."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

ENV = "BITEXACT_GPU_SELECTION"
MARKERS = (
    "capability(*versions): the compute capabilities (e.g. '9.0', '12.0') a kernel check applies to",
    "host_feature(*names): host features a kernel check needs (gpuchecks.host.FEATURES)",
)


class _State:
    def __init__(self, data: dict[str, Any]) -> None:
        self.capability = str(data["capability"])
        self.features: dict[str, bool] = {str(k): bool(v) for k, v in data["features"].items()}
        self.why: dict[str, str] = {str(k): str(v) for k, v in data.get("why", {}).items()}
        self.report = Path(data["report"])
        self.left_out: dict[str, str] = {}
        self.outcomes: dict[str, dict[str, Any]] = {}
        self.collection_errors: list[str] = []

    def not_applicable(self, item: pytest.Item) -> str | None:
        for mark in item.iter_markers("capability"):
            wanted = [str(v) for v in mark.args]
            if not wanted:
                raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.capability names no capability")
            if self.capability not in wanted:
                return f"applies to compute capability {', '.join(wanted)}; this card is {self.capability}"
        for mark in item.iter_markers("host_feature"):
            for name in map(str, mark.args):
                if name not in self.features:
                    known = ", ".join(sorted(self.features))
                    raise pytest.UsageError(
                        f"{item.nodeid}: @pytest.mark.host_feature({name!r}) names no feature the runner "
                        f"probes ({known})"
                    )
                if not self.features[name]:
                    return f"needs host feature {name}: absent ({self.why.get(name, 'no reason given')})"
        return None


_STATE: _State | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _STATE
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    path = os.environ.get(ENV)
    if not path:
        raise pytest.UsageError(
            f"gpuchecks.selection needs ${ENV}: the runner writes it (bitexact-gpu-checks)"
        )
    _STATE = _State(json.loads(Path(path).read_text()))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    assert _STATE is not None
    kept, dropped = [], []
    for item in items:
        reason = _STATE.not_applicable(item)
        if reason is None:
            kept.append(item)
        else:
            _STATE.left_out[item.nodeid] = reason
            dropped.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed and _STATE is not None:
        _STATE.collection_errors.append(f"{report.nodeid}: {str(report.longrepr)[-1500:]}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A test body that fails by an assertion (or pytest.fail) found a difference; one that raises anything
    else (CUDA out of memory, a missing input) could not check: an error, run again on resume."""
    outcome = yield
    report = outcome.get_result()
    excinfo = call.excinfo
    if call.when == "call" and report.failed and excinfo is not None:
        checked = excinfo.errisinstance((AssertionError, pytest.fail.Exception))
        report.user_properties.append(("bitexact_failure", "failed" if checked else "error"))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    assert _STATE is not None
    entry = _STATE.outcomes.setdefault(report.nodeid, {"outcome": "passed"})
    if report.skipped:
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        entry.update(outcome="skipped", reason=str(reason))
    elif report.failed and entry["outcome"] != "skipped":
        kind = dict(report.user_properties).get("bitexact_failure", "failed")
        outcome = kind if report.when == "call" else "error"
        if entry["outcome"] != "failed":
            entry["outcome"] = outcome
        entry.setdefault("detail", str(report.longrepr)[-2000:])


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _STATE is None:
        return
    counts: dict[str, int] = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    for entry in _STATE.outcomes.values():
        counts[entry["outcome"]] += 1
    report = {
        "capability": _STATE.capability,
        "features": _STATE.features,
        "selected": len(_STATE.outcomes),
        **counts,
        "outcomes": _STATE.outcomes,
        "left_out": _STATE.left_out,
        "collection_errors": _STATE.collection_errors,
        "pytest_exit": int(exitstatus),
    }
    _STATE.report.write_text(json.dumps(report, indent=1) + "\n")
