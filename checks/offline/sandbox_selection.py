"""The offline suite's tests that need neither network nor Nix, run as a Nix build sandbox runs them.

The markers are checks/conftest.py's (`network`, `nix`, `docker`, `browser`, `evidence`, `repository`);
this is the one place that names the selection.
The `python-offline-tests` flake check (nix/python-offline-tests.nix) runs this file over its filtered
source, and test_sandbox_selection.py runs it here over that same source without network and without Nix.

Usage, from the repository root: python checks/offline/sandbox_selection.py [--loopback-up] [PYTEST ARGS]
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
# The repository's own Python packages, imported from this tree (no install step in a sandbox).
SOURCES = (
    "pkgs/formats/src",
    "pkgs/gpuhost/src",
    "pkgs/server/src",
    "pkgs/lock/src",
    "pkgs/bitexact/src",
    "pkgs/gpu-checks/src",
    "images/entrypoint/src",
)


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
    if not os.path.isfile("checks/conftest.py"):
        where = "checks/conftest.py not found"
        print(f"sandbox_selection: run it from the repository root ({where})", file=sys.stderr)
        return 2
    sources = [os.path.abspath(s) for s in SOURCES]
    sys.path[:0] = sources
    # Subprocesses (`python -m pinlock.cli`, the image entrypoint) import them too.
    os.environ["PYTHONPATH"] = os.pathsep.join([*sources, *filter(None, [os.environ.get("PYTHONPATH")])])
    return int(pytest.main(pytest_args(argv)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
