"""The offline suite's tests that need neither network nor Nix, run as a Nix build sandbox runs them.

The markers are checkhelpers.markers' (`network`, `nix`, `docker`, `browser`, `evidence`, `repository`);
this is the one place that names the selection.
The `python-offline-tests` flake check (nix/python-offline-tests.nix) runs this module over its filtered
source, and test_sandbox_selection.py runs it here over that same source without network and without Nix.
The repository's own packages (checkhelpers among them) are installed in the Python that runs it: the
flake check's Python environment, run.sh's venv, or the test's throwaway one; nothing is put on a path here.

Usage, from the repository root: python -m checkhelpers.sandbox_selection [--loopback-up] [PYTEST ARGS]
`--loopback-up` brings up `lo` first (a fresh network namespace has it down; Nix's sandbox brings it up,
and some tests serve HTTP on 127.0.0.1).
"""

from __future__ import annotations

import fcntl
import os
import socket
import struct
import sys

import pytest

MARK_EXPRESSION = "not network and not nix and not docker and not browser and not evidence and not repository"
# The same directories as checks/offline/run.sh.
PATHS = ("checks/offline", "checks/gpu")


def pytest_args(extra: list[str]) -> list[str]:
    """run.sh's pytest options, the sandbox's marker expression, unknown markers refused."""
    options = ["--rootdir", ".", "-p", "no:cacheprovider", "--import-mode=importlib", "-ra"]
    return [*options, "--strict-markers", "-m", MARK_EXPRESSION, *extra, *PATHS]


def bring_loopback_up() -> None:
    """`ip link set lo up` without iproute2: SIOCGIFFLAGS/SIOCSIFFLAGS on a struct ifreq (name, flags)."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    layout = "16sH22x"  # struct ifreq on Linux x86_64: 16-byte name, then a 24-byte union
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack(layout, b"lo", 0)
        _, flags = struct.unpack(layout, fcntl.ioctl(sock, siocgifflags, request))
        fcntl.ioctl(sock, siocsifflags, struct.pack(layout, b"lo", flags | iff_up))


def main(argv: list[str]) -> int:
    if argv[:1] == ["--loopback-up"]:
        bring_loopback_up()
        argv = argv[1:]
    if not os.path.isfile("checks/offline/pyproject.toml"):
        where = "checks/offline/pyproject.toml not found"
        print(f"sandbox_selection: run it from the repository root ({where})", file=sys.stderr)
        return 2
    return int(pytest.main(pytest_args(argv)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
