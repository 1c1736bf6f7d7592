"""Catalogue rows of bitexact's HTTP exchange beyond a refused connection and a 5xx (engines/transport.py):
a redirect, a body compressed unasked, a body shorter than its Content-Length, an empty body, TLS
answering plain HTTP, a server that trickles its answer. Each row's setup starts a raw server
(bx_raw_server.py) in a thread of the catalogue's process, on a port it hands the command
through `{raw_port}`; the server closes itself after a minute."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
from pathlib import Path

from checkhelpers.bx_raw_server import RawServer, Request, head
from checkhelpers.reliability_setup import Case, Setup, both, common, prompts

BODY = b'{"text": "ok"}'


def raw(send: object) -> Setup:
    """A RawServer answering every request with `send`, its port written for the command's {raw_port}."""

    def setup(tmp: Path) -> None:
        server = RawServer(send).__enter__()  # type: ignore[arg-type]
        closer = threading.Timer(60, server.__exit__, args=(None, None, None))
        closer.daemon = True
        closer.start()
        (tmp / ".case-values.json").write_text(json.dumps({"raw_port": str(server.port)}))

    return setup


def redirect(conn: socket.socket, request: Request) -> None:
    conn.sendall(
        head("307 Temporary Redirect", {"Location": "http://127.0.0.1:1/generate", "Content-Length": "0"})
    )


def gzipped(conn: socket.socket, request: Request) -> None:
    data = gzip.compress(BODY)
    conn.sendall(head("200 OK", {"Content-Encoding": "gzip", "Content-Length": str(len(data))}) + data)


def short(conn: socket.socket, request: Request) -> None:
    conn.sendall(head("200 OK", {"Content-Length": "400"}) + BODY)


def empty(conn: socket.socket, request: Request) -> None:
    conn.sendall(head("200 OK", {"Content-Length": "0"}))


def tls_alert(conn: socket.socket, request: Request) -> None:
    conn.sendall(b"\x15\x03\x03\x00\x02\x02\x46")


def trickle(conn: socket.socket, request: Request) -> None:
    conn.sendall(head("200 OK", {"Content-Length": str(len(BODY))}))
    for byte in BODY:
        conn.sendall(bytes([byte]))
        time.sleep(0.5)


ENGINE = "sglang+http://127.0.0.1:{raw_port}"


def repeat(query: str = "?retries=1") -> tuple[str, ...]:
    return ("repeat", ENGINE + query, *common)


CASES: list[Case] = [
    Case(
        "http-redirect",
        "bitexact",
        "a server that redirects (urllib followed it, a POST becoming a GET)",
        repeat(),
        2,
        r"answered HTTP 307 Temporary Redirect, a redirect to http://127.0.0.1:1/generate: bitexact follows "
        r"no redirect .*; give the address it redirects to as the engine's URL",
        both(prompts, raw(redirect)),
    ),
    Case(
        "http-gzip",
        "bitexact",
        "an answer compressed with gzip though none was asked for",
        repeat(),
        2,
        r"answered a body with Content-Encoding: gzip, which bitexact did not ask for \(it sends "
        r"Accept-Encoding: identity\); something between bitexact and the server compresses",
        both(prompts, raw(gzipped)),
    ),
    Case(
        "http-short-body",
        "bitexact",
        "an answer shorter than its Content-Length (it was told: is the server still running?)",
        repeat(),
        2,
        r"failed 2 times \(last error: the answer broke off: 14 of the 400 bytes its framing promised came "
        r"before the connection closed \(IncompleteRead\)\); the server closed the connection mid-answer",
        both(prompts, raw(short)),
    ),
    Case(
        "http-empty-body",
        "bitexact",
        "an answer of 200 with an empty body",
        repeat(),
        2,
        r"failed 2 times \(last error: answered HTTP 200 with an empty body\); the server \(or something in "
        r"front of it\) answered nothing",
        both(prompts, raw(empty)),
    ),
    Case(
        "http-tls-answer",
        "bitexact",
        "a TLS server given as http:// (its alert read as a status line)",
        repeat(),
        2,
        r"answered in TLS \(https\) to a plain HTTP request; give the engine with https:// instead of http://",
        both(prompts, raw(tls_alert)),
    ),
    Case(
        "http-trickle",
        "bitexact",
        "a server that trickles a byte every 0.5 s under ?timeout=2 (each read was in time, so no timeout)",
        repeat("?timeout=2&retries=0"),
        2,
        r"no complete answer within 2 s \(the deadline of one request, 2 s gone; \d+ bytes of the answer "
        r"came\)",
        both(prompts, raw(trickle)),
    ),
]
