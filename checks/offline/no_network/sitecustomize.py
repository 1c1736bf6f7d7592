"""Refuses every connection that leaves the machine, in every process of a Python whose site-packages
holds this file (site imports it at start-up). test_sandbox_selection copies it into its throwaway
environment where no network namespace can be made (a container without CAP_SYS_ADMIN or user namespaces):
weaker than `unshare --net` (programs that are not Python are not stopped), but downloads through pip,
urllib and httpx fail as they would in a build sandbox.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

_connect = socket.socket.connect
_connect_ex = socket.socket.connect_ex


def _stays_local(address: Any) -> bool:
    if not isinstance(address, tuple):
        return True  # AF_UNIX paths
    try:
        return ipaddress.ip_address(address[0]).is_loopback
    except ValueError:
        return address[0] == "localhost"


def _refuse(address: Any) -> None:
    if not _stays_local(address):
        raise OSError(101, f"network is unreachable (blocked by checks/offline/no_network): {address}")


def connect(self: socket.socket, address: Any) -> None:
    _refuse(address)
    _connect(self, address)


def connect_ex(self: socket.socket, address: Any) -> int:
    _refuse(address)
    return _connect_ex(self, address)


socket.socket.connect = connect  # type: ignore[method-assign]
socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
