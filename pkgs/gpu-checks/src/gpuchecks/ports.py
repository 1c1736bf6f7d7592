"""Who listens on a local TCP port, read from /proc (Linux): so that a server start fails when the port is
taken, naming the holder, and the runner can prove that the server answering is the process it started (a
server left behind by a run cut short once answered a later run of another tree)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's `st` column


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could bind `host:port` now, as SGLang's uvicorn binds (SO_REUSEADDR: connections
    of a server that has exited, left in TIME_WAIT, do not hold the port; a listener does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _listening_inodes(port: int, proc: Path) -> set[str]:
    inodes = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def listeners(port: int, proc: Path = Path("/proc")) -> dict[int, str]:
    """{pid: command line} of the processes holding a listening socket on `port` (those this user may see)."""
    inodes = _listening_inodes(port, proc)
    found: dict[int, str] = {}
    if not inodes:
        return found
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            links = {os.readlink(fd) for fd in (entry / "fd").iterdir()}
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if any(link == f"socket:[{inode}]" for link in links for inode in inodes):
            found[int(entry.name)] = cmdline
    return found


def describe(holders: dict[int, str]) -> str:
    if not holders:
        return "a process this user cannot see"
    return "; ".join(f"pid {pid}: {cmd[:200]}" for pid, cmd in sorted(holders.items()))


def in_group(pid: int, group: int) -> bool:
    """Whether `pid` belongs to process group `group` (a server started with its own session leads one)."""
    try:
        return os.getpgid(pid) == group
    except ProcessLookupError:
        return False
