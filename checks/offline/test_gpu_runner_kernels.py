"""The runner's kernel phase (gpuchecks.kernels with its pytest plugin gpuchecks.selection) on real pytest
runs: selection by the card's compute capability and the host's features, declared by markers; a selected
test that skips fails the phase, and so does an empty selection; a marker naming a feature the runner does
not probe is a usage error. Also the real checks/gpu, copied outside the checkout as the flake's sandbox
has it: it collects there (no path beside it is read) and, on this CPU machine, every selected check
skips, which the phase refuses."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from gpuchecks import kernels
from gpuchecks.host import Host

REPO = Path(__file__).resolve().parents[2]

CONFTEST = "def pytest_configure(config):\n    pass\n"
MARKED = """
import pytest

def test_everywhere():
    pass

@pytest.mark.capability("9.0")
def test_hopper():
    pass

@pytest.mark.capability("12.0", "12.1")
def test_blackwell():
    pass

@pytest.mark.host_feature("deepgemm-runs")
def test_deepgemm():
    pass
"""


def host(capability: str | None = "9.0", deepgemm: bool = False) -> Host:
    device = None if capability is None else {"name": "card", "capability": capability, "sm_count": 132}
    why = {"deepgemm-runs": "deep_gemm.bf16_gemm_nn failed: dim == 2 or dim == 3"}
    return Host("h100-sxm5-80gb", None, "2.11", device, {"deepgemm-runs": deepgemm}, why)


def checks_dir(tmp_path: Path, body: str) -> Path:
    folder = tmp_path / "checks"
    folder.mkdir()
    (folder / "conftest.py").write_text(CONFTEST)
    (folder / "test_marked.py").write_text(body)
    return folder


def run(tmp_path: Path, checks: Path, card: Host) -> dict:
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    return kernels.run(checks=checks, python=[sys.executable], env=env, host=card, out=tmp_path / "out")


def test_what_applies_runs_and_the_rest_is_listed_with_the_reason(tmp_path: Path) -> None:
    entry = run(tmp_path, checks_dir(tmp_path, MARKED), host("9.0", deepgemm=False))
    assert entry["exit"] == 0, entry
    assert (entry["selected"], entry["passed"], entry["skipped"]) == (2, 2, 0)
    left = {k.split("::")[1]: v for k, v in entry["left_out"].items()}
    assert left == {
        "test_blackwell": "applies to compute capability 12.0, 12.1; this card is 9.0",
        "test_deepgemm": "needs host feature deepgemm-runs: absent (deep_gemm.bf16_gemm_nn failed: "
        "dim == 2 or dim == 3)",
    }
    other = tmp_path / "b"
    other.mkdir()
    again = run(other, checks_dir(other, MARKED), host("12.0", deepgemm=True))
    assert again["exit"] == 0 and again["selected"] == 3
    assert set(again["left_out"]) == {"test_marked.py::test_hopper"}


def test_a_selected_test_that_skips_fails_the_phase(tmp_path: Path) -> None:
    body = MARKED + "\ndef test_skips():\n    pytest.skip('no CUDA here')\n"
    entry = run(tmp_path, checks_dir(tmp_path, body), host())
    assert entry["exit"] == 2 and entry["skipped"] == 1
    assert "1 selected kernel check(s) skipped, e.g. test_marked.py::test_skips" in entry["why"]


def test_an_empty_selection_fails_the_phase(tmp_path: Path) -> None:
    body = 'import pytest\n\n@pytest.mark.capability("12.0")\ndef test_blackwell():\n    pass\n'
    entry = run(tmp_path, checks_dir(tmp_path, body), host("9.0"))
    assert entry["exit"] == 2 and "no kernel check was selected (1 left out)" in entry["why"]


def test_a_failing_check_is_a_difference_and_an_erroring_one_an_error(tmp_path: Path) -> None:
    entry = run(tmp_path, checks_dir(tmp_path, "def test_bits():\n    assert 1 == 2\n"), host())
    assert entry["exit"] == 1 and "1 kernel check(s) failed: test_marked.py::test_bits" in entry["why"]
    other = tmp_path / "e"
    other.mkdir()
    body = "import pytest\n\n@pytest.fixture\ndef broken():\n    raise RuntimeError('x')\n\n"
    body += "def test_a(broken):\n    pass\n"
    entry = run(other, checks_dir(other, body), host())
    assert entry["exit"] == 2 and "errored" in entry["why"]


def test_a_body_that_raises_anything_but_an_assertion_is_an_error_not_a_difference(tmp_path: Path) -> None:
    """CUDA out of memory, a missing input: the check could not compare, so the phase is an error (run
    again on resume), never a difference."""
    body = "def test_oom():\n    raise RuntimeError('CUDA out of memory')\n"
    entry = run(tmp_path, checks_dir(tmp_path, body), host())
    assert entry["exit"] == 2 and entry["error"] == 1 and entry["failed"] == 0, entry


def test_a_feature_the_runner_does_not_probe_is_a_usage_error(tmp_path: Path) -> None:
    body = 'import pytest\n\n@pytest.mark.host_feature("deepgem-runs")\ndef test_typo():\n    pass\n'
    entry = run(tmp_path, checks_dir(tmp_path, body), host())
    assert entry["exit"] == 2
    log = (tmp_path / "out" / "pytest.log").read_text()
    assert "names no feature the runner probes (deepgemm-runs)" in log


def test_the_checks_import_the_flat_modules_beside_them(tmp_path: Path) -> None:
    """pytest (--import-mode=prepend) puts the copy's folder on the path: conftest.py and the tests import a
    module beside them that is installed nowhere, with no PYTHONPATH naming the folder."""
    folder = checks_dir(
        tmp_path, "import beside_harness\n\ndef test_beside():\n    assert beside_harness.VALUE == 7\n"
    )
    (folder / "conftest.py").write_text("import beside_harness\n\n" + CONFTEST)
    (folder / "beside_harness.py").write_text("VALUE = 7\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    entry = kernels.run(checks=folder, python=[sys.executable], env=env, host=host(), out=tmp_path / "out")
    assert entry["exit"] == 0 and (entry["selected"], entry["passed"]) == (1, 1), entry
    argv = (tmp_path / "out" / "pytest.log").read_text().splitlines()[0]
    assert "--import-mode=prepend" in argv


def test_the_kernel_checks_collect_from_a_copy_outside_the_checkout(tmp_path: Path) -> None:
    """checks/gpu copied where no patches/ or pkgs/ lies beside it: every file collects (nothing reads a
    path relative to the checkout), the declared checks are left out by their reasons, and the rest, which
    skip on this CPU machine, fail the phase."""
    outside = tmp_path / "sandbox" / "gpu"
    shutil.copytree(REPO / "checks" / "gpu", outside, ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("BITEXACT_")}
    env["BITEXACT_SGLANG_SERIES"] = str(REPO / "patches" / "sglang")
    entry = kernels.run(
        checks=outside,
        python=[sys.executable],
        env=env,
        host=host("9.0", deepgemm=False),
        out=tmp_path / "out",
    )
    report = (tmp_path / "out" / "selection-report.json").read_text()
    assert '"collection_errors": []' in report
    # Every test file of checks/gpu collected: each names at least one test in the phase's junit report.
    junit = (tmp_path / "out" / "junit.xml").read_text()
    files = sorted(p.stem for p in outside.glob("test_*.py"))
    assert len(files) >= 6 and [f for f in files if f'classname="{f}"' not in junit] == []
    assert entry["exit"] == 2 and entry["skipped"] == entry["selected"] > 200
    reasons = set(entry["left_out"].values())
    assert any(r.startswith("needs host feature deepgemm-runs") for r in reasons)
    assert "applies to compute capability 12.0, 12.1; this card is 9.0" in reasons
    assert not (tmp_path / "sandbox" / "patches").exists()


@pytest.mark.parametrize(("capability", "left"), [("9.0", 13), ("12.0", 40)])
def test_the_kernel_checks_declare_what_they_need(tmp_path: Path, capability: str, left: int) -> None:
    """On Hopper the checks that run DeepGEMM (9, where it does not run) and the sm_120 equality (4) are
    left out, as on the lent H100; on the recipe's card without DeepGEMM running, the sm_90-proven GEMM
    comparisons (27) and every check that needs DeepGEMM (13)."""
    entry = kernels.run(
        checks=REPO / "checks" / "gpu",
        python=[sys.executable],
        env={**os.environ, "BITEXACT_SGLANG_SERIES": str(REPO / "patches" / "sglang")},
        host=host(capability, deepgemm=False),
        out=tmp_path / "out",
    )
    assert len(entry["left_out"]) == left, entry["left_out"]
