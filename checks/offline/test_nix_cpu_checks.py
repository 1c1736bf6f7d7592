"""The builtins-only test checks of nix/cpu-checks.nix (`nix-lib`, `nix-lib-weights-images`), evaluated
with the real Nix against recording doubles of nixpkgs; their builder scripts run in bash, passing on a
clean test set and failing on a failed one."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from checkhelpers.hfcache_support import NIXPKGS_DOUBLES, nix_eval

pytestmark = pytest.mark.nix  # evaluates with the real nix-instantiate

CHECKS = (
    f"let d = {NIXPKGS_DOUBLES}; "
    "in import ./nix/cpu-checks.nix { pkgs = d; inherit (d) lib; "
    "deep-gemm = null; sglangSrc = null; sglangPatches = [ ]; }"
)


def run_script(script: str, failures: str, count: str, out: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "failures": failures, "count": count, "out": str(out)}
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)


@pytest.mark.parametrize(
    ("check", "drv", "what", "tests"),
    [
        ("nix-lib", "nix-lib-tests", "nix/lib", "./nix/lib/tests"),
        (
            "nix-lib-weights-images",
            "nix-lib-weights-images-tests",
            "weights/images nix/lib",
            "./nix/lib/tests/weights-images.nix",
        ),
    ],
)
def test_lib_test_check(check: str, drv: str, what: str, tests: str, tmp_path: Path) -> None:
    got = nix_eval(f"let c = ({CHECKS}).{check}; in {{ inherit (c) name failures count script; }}")
    expected_count = nix_eval(f"(import {tests}).count")
    assert got["name"] == drv
    assert (got["failures"], got["count"]) == ("[]", str(expected_count))
    assert expected_count > 0

    passed = run_script(got["script"], got["failures"], got["count"], tmp_path / "out")
    assert passed.returncode == 0, passed.stderr
    assert (tmp_path / "out").read_text() == f"{expected_count} {what} tests passed\n"

    failed = run_script(got["script"], '["case-a"]', got["count"], tmp_path / "out2")
    assert failed.returncode == 1
    assert failed.stderr == f'{what} tests failed: ["case-a"]\n'
    assert not (tmp_path / "out2").exists()
