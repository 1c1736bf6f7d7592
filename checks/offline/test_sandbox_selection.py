"""The sandbox selection (sandbox_selection.py: the tests marked neither `network` nor `nix`) passes
where the `python-offline-tests` flake check runs it: in a fresh network namespace (`unshare --net`,
loopback only), with every `nix*` executable hidden from PATH, an empty wheel cache and an empty HOME.
A test that downloads or runs Nix without its marker fails here rather than in the flake check."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from sandbox_selection import SANDBOXED_VAR

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "checks" / "offline" / "sandbox_selection.py"
# Areas whose Nix-free, network-free tests must run (not merely be collected) in the selection.
MUST_RUN = {
    "bitexact (tiny transformers models and fake servers)": "checks.bitexact.tests.",
    "launcher": "checks.offline.test_launcher_",
    "image entrypoint": "checks.offline.test_entrypoint",
    "lock tool": "checks.offline.test_lock_",
}


def path_without_nix(bin_dir: Path) -> str:
    """A PATH of one directory linking every executable on the current PATH except `nix*`."""
    bin_dir.mkdir()
    for entry in os.environ["PATH"].split(os.pathsep):
        directory = Path(entry)
        if not directory.is_dir():
            continue
        for exe in sorted(directory.iterdir()):
            link = bin_dir / exe.name
            if exe.name.startswith("nix") or link.exists() or not os.access(exe, os.X_OK):
                continue
            link.symlink_to(exe)
    return str(bin_dir)


def network_namespace() -> list[str] | None:
    """The unshare command that gives a new network namespace here (root, else a user namespace)."""
    for command in (["unshare", "--net"], ["unshare", "--net", "--map-root-user"]):
        try:
            probe = subprocess.run([*command, "true"], capture_output=True, timeout=30)
        except FileNotFoundError:
            return None
        if probe.returncode == 0:
            return command
    return None


def test_the_selection_passes_without_network_or_nix(tmp_path: Path) -> None:
    if os.environ.get(SANDBOXED_VAR):
        pytest.skip("this run is the sandbox selection itself")
    unshare = network_namespace()
    if unshare is None:
        pytest.skip("cannot make a network namespace here (unshare --net needs root or user namespaces)")
    env = {
        **os.environ,
        "PATH": path_without_nix(tmp_path / "bin"),
        "HOME": str(tmp_path / "home"),
        "BITEXACT_ARTIFACTS": str(tmp_path / "artifacts"),  # no wheels downloaded earlier
        "HF_HOME": str(tmp_path / "hf"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    junit = tmp_path / "junit.xml"
    command = [*unshare, sys.executable, str(SCRIPT), "--loopback-up", "-q", f"--junitxml={junit}"]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-4000:]

    cases = list(ET.parse(junit).getroot().iter("testcase"))
    skipped = [(c.get("classname", ""), s.get("message", "")) for c in cases for s in c.iter("skipped")]
    passed = [c.get("classname", "") for c in cases if not any(c.iter("skipped"))]
    # A test that needs Nix but skips when it is missing would pass silently without its marker.
    assert not [s for s in skipped if re.search(r"\bnix", s[1], re.IGNORECASE)], skipped
    for area, prefix in MUST_RUN.items():
        assert any(name.startswith(prefix) for name in passed), f"no {area} test ran: {sorted(set(passed))}"
