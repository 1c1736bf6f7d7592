"""Whether two engine strings reach one engine: decided from what the engines say about themselves, not
from the strings (`127.0.0.1` and `localhost`, an ssh tunnel, a second port forwarded to the first all
name one server). A server that reports its start (SGLang's `/server_info` `startup_time`, also behind
its OpenAI-compatible API and its router's workers) is one engine with another exactly when it reports
the same identity and the same start; asked through two APIs (`sglang+` and `openai+`), when the
server itself reports the same build, arguments and start. One that reports none is known by its
address as the resolver sees it (every IP the host name resolves to, the port, the path); an in-process
engine by its model folder's real path and its options."""

from __future__ import annotations

import os
import socket
from typing import Any
from urllib.parse import urlsplit

from bitexact.engines.spec import HTTP_KINDS, EngineSpec

# Identity fields that describe where an engine was reached (the same engine answers with other ones
# under another name): left out when two identities are compared.
WHERE = ("url", "launch_command")


def _addresses(spec: EngineSpec) -> set[tuple[str, int, str]]:
    parts = urlsplit(spec.target)
    host, port = parts.hostname or "", parts.port or 0
    try:
        ips = {info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)}
    except (socket.gaierror, UnicodeError):
        ips = {host}
    return {(ip, port, parts.path.rstrip("/")) for ip in ips}


def _in_process(spec: EngineSpec) -> tuple[str, str, tuple[tuple[str, str], ...]]:
    return spec.kind, os.path.realpath(spec.target), tuple(sorted(spec.canonical_params().items()))


# What a server says of itself, whichever API asks (SGLang's native one and its OpenAI-compatible one
# both read /server_info): equal, with a start time, only for one server.
SERVER_FIELDS = (
    "version",
    "model_path",
    "revision",
    "weight_version",
    "server_args_sha256",
    "env_vars_sha256",
    "started",
)


def one_server(ident_a: dict[str, Any] | None, ident_b: dict[str, Any] | None) -> bool:
    """Whether two identities, got through any API, are one server's: the same start and the same
    server fields (SERVER_FIELDS)."""
    if not ident_a or not ident_b or ident_a.get("started") is None:
        return False
    return all(ident_a.get(k) == ident_b.get(k) for k in SERVER_FIELDS)


def same_engine(
    a: EngineSpec, ident_a: dict[str, Any] | None, b: EngineSpec, ident_b: dict[str, Any] | None
) -> str | None:
    """Why engines `a` and `b` are one engine, in words, or None when they are not. `ident_a` and
    `ident_b`: what each HTTP engine said about itself (None for in-process engines)."""
    if a.kind != b.kind:
        if a.kind in HTTP_KINDS and b.kind in HTTP_KINDS and one_server(ident_a, ident_b):
            return (
                f"one server, reached through two APIs ({a.kind} and {b.kind}): the same build, server "
                "arguments and start time"
            )
        return None
    if a.kind not in HTTP_KINDS:
        same = _in_process(a) == _in_process(b)
        return f"one model folder, {os.path.realpath(a.target)}, with the same options" if same else None
    if a.canonical_params() != b.canonical_params():
        return None  # another served model (?model=) behind one server is another engine
    if ident_a is not None and ident_b is not None:
        started_a, started_b = ident_a.get("started"), ident_b.get("started")
        if started_a is not None and started_b is not None:
            keep = lambda ident: {k: v for k, v in ident.items() if k not in WHERE}  # noqa: E731
            same = started_a == started_b and keep(ident_a) == keep(ident_b)
            return "one server: the same identity and the same start time" if same else None
    shared = sorted(_addresses(a) & _addresses(b))
    return f"one address, {shared[0][0]} port {shared[0][1]}" if shared else None
