"""A TCP server on 127.0.0.1 that answers each HTTP request with raw bytes a test scripts: the misbehaviours
an HTTP client meets beyond a refused connection and a 5xx (redirects, a Content-Encoding not asked for,
bodies shorter than their Content-Length, broken chunks, empty bodies, status lines that are not HTTP, a
TLS record, a body trickled a byte at a time, a TLS server). It reads each request whole (headers and a
Content-Length body) and records it, so a test can say what the client sent, and how many times."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


Script = Callable[[socket.socket, Request], None]


def _read_request(conn: socket.socket) -> Request | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
        if data[:1] == b"\x16":  # a TLS ClientHello: a plain server says 400, as uvicorn's h11 does
            conn.sendall(head("400 Bad Request", {"Content-Length": "0"}))
            return None
    top, _, body = data.partition(b"\r\n\r\n")
    lines = top.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length") or 0)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return Request(method, path, headers, body)


class RawServer:
    """`with RawServer(script) as server:` serves at server.url until the block ends; `server.requests`
    lists what came. `tls`: an ssl.SSLContext to speak TLS with (the script then writes into it)."""

    def __init__(self, script: Script, tls: ssl.SSLContext | None = None) -> None:
        self.script = script
        self.tls = tls
        self.requests: list[Request] = []
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> RawServer:
        self.thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.done.set()
        self.listener.close()
        self.thread.join(timeout=5)

    def _serve(self) -> None:
        self.listener.settimeout(0.1)
        while not self.done.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            request = _read_request(conn)
            if request is None:
                return
            self.requests.append(request)
            self.script(conn, request)
        except (OSError, ssl.SSLError, ValueError):
            pass  # the client went away, or spoke another protocol: the test asserts what it saw
        finally:
            conn.close()


def head(status: str, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers.items()), "Connection: close"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
