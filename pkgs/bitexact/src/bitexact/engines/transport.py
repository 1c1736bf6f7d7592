"""One HTTP exchange with an engine, every way it can fail named for what it is (standard library only).

bitexact speaks to inference servers it is pointed at, directly (never through $http_proxy: a proxy in
between is what compresses, redirects and caches answers). Each exchange:

- has a deadline for the whole request, connect to last byte: a server that trickles a byte a second is
  timed out when the deadline passes, not when a single read waits too long (the socket's own timeout);
  a watchdog shuts the socket down at the deadline, whatever read is blocked;
- follows no redirect: a 3xx is named with where it points (urllib's follow turns a POST into a GET);
- asks for the body as it is (`Accept-Encoding: identity`); a body with a Content-Encoding it did not ask
  for (gzip from a proxy) is named, not read as garbage;
- names broken framing (a body shorter than its Content-Length, a broken chunk, a status line that is no
  HTTP), a connection closed without an answer, and TLS spoken to plain HTTP or the other way round,
  each apart from "the server is down" (an empty body is its reader's to name: engines/http.py).

`TransportFailure.retry` says whether asking again can help (a reset, a cut-off body, a timeout) or not
(a redirect, an encoding, TLS: the same answer would come again)."""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import Message
from types import TracebackType
from urllib.parse import urlsplit

TLS_RECORD_TYPES = (0x15, 0x16)  # a TLS alert or handshake record starts with one of these, then 0x03
READ_CHUNK = 1 << 16


class TransportFailure(Exception):
    """An exchange that brought no usable answer. `kind`: refused, timeout, closed, framing, tls, redirect,
    encoding or network; `hint`: the fix, said once after the last retry."""

    def __init__(self, message: str, kind: str, *, retry: bool, hint: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.retry = retry
        self.hint = hint


@dataclass
class Answer:
    status: int
    reason: str
    headers: Message
    body: bytes


def _tls_speaker(host: str, port: int, wait_s: float) -> bool:
    """Whether host:port completes a TLS handshake: asked only after a plain HTTP request was closed
    unanswered, to tell an https server from a crashed one."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=wait_s) as raw:
            with context.wrap_socket(raw, server_hostname=host):
                return True
    except (OSError, ssl.SSLError):
        return False


class Exchange:
    """One request and its answer, under one deadline: `with Exchange(...) as ex: ex.body()` or
    `ex.lines()` (a stream). Every failure is a TransportFailure."""

    def __init__(
        self, url: str, method: str, body: bytes | None, headers: dict[str, str], timeout_s: float
    ) -> None:
        self.url = url
        self.method = method
        self.data = body
        self.headers = {**headers, "Accept-Encoding": "identity"}
        self.timeout_s = timeout_s
        parts = urlsplit(url)
        self.tls = parts.scheme == "https"
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.tls else 80)
        self.target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.expired = False
        self.received = 0
        self.started = 0.0
        self.conn: http.client.HTTPConnection | None = None
        self.sock: socket.socket | None = None
        self.response: http.client.HTTPResponse | None = None
        self.watchdog: threading.Timer | None = None

    # --- the deadline ---------------------------------------------------------------------------------

    def _expire(self) -> None:
        self.expired = True
        sock = self.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes any blocked read: the request is over
            except OSError:
                pass

    def _timed_out(self) -> TransportFailure:
        took = time.monotonic() - self.started
        got = f"; {self.received} bytes of the answer came" if self.received else ""
        return TransportFailure(
            f"no complete answer within {self.timeout_s:.0f} s (the deadline of one request, "
            f"{took:.0f} s gone{got})",
            "timeout",
            retry=True,
            hint="set ?timeout=SECONDS to wait longer, or see why the server is this slow",
        )

    # --- opening ---------------------------------------------------------------------------------------

    def __enter__(self) -> Exchange:
        self.started = time.monotonic()
        self.watchdog = threading.Timer(self.timeout_s, self._expire)
        self.watchdog.daemon = True
        self.watchdog.start()
        try:
            self._open()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if self.watchdog is not None:
            self.watchdog.cancel()
        if self.response is not None:
            self.response.close()
        if self.conn is not None:
            self.conn.close()
        if self.sock is not None:
            self.sock.close()

    def _open(self) -> None:
        if self.tls:
            context = ssl.create_default_context()
            self.conn = http.client.HTTPSConnection(
                self.host, self.port, timeout=self.timeout_s, context=context
            )
        else:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
        try:
            self.conn.connect()
            self.sock = self.conn.sock  # http.client lets go of it once an answer says Connection: close
            if self.expired:
                raise TimeoutError
            self.conn.request(self.method, self.target, body=self.data, headers=self.headers)
            self.response = self.conn.getresponse()
        except BaseException as error:
            raise self._failure(error) from None
        self._check_head(self.response)

    def _check_head(self, response: http.client.HTTPResponse) -> None:
        if 300 <= response.status < 400:
            where = response.getheader("Location") or "nowhere (no Location header)"
            raise TransportFailure(
                f"answered HTTP {response.status} {response.reason}, a redirect to {where}: bitexact follows "
                "no redirect (it would turn a POST into a GET, or send the prompts to another server)",
                "redirect",
                retry=False,
                hint="give the address it redirects to as the engine's URL",
            )
        encoding = (response.getheader("Content-Encoding") or "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise TransportFailure(
                f"answered a body with Content-Encoding: {encoding}, which bitexact did not ask for "
                "(it sends Accept-Encoding: identity)",
                "encoding",
                retry=False,
                hint="something between bitexact and the server compresses answers (a proxy?): turn it off, "
                "or give the server's own address",
            )

    # --- reading ---------------------------------------------------------------------------------------

    @property
    def status(self) -> int:
        assert self.response is not None
        return self.response.status

    def body(self) -> Answer:
        """The whole body, checked against its framing (an empty one is the reader's to judge: a flush
        answers nothing, a generate request never does)."""
        assert self.response is not None
        chunks = []
        try:
            while chunk := self.response.read(READ_CHUNK):
                self.received += len(chunk)
                chunks.append(chunk)
        except BaseException as error:
            raise self._failure(error) from None
        if self.expired:
            raise self._timed_out()
        data = b"".join(chunks)
        if self.response.length:  # http.client ends a read by size at the close, short or not
            raise self._failure(http.client.IncompleteRead(data, self.response.length))
        return Answer(self.response.status, self.response.reason, self.response.headers, data)

    def lines(self) -> Iterator[bytes]:
        """The body line by line (server-sent events), under the same deadline."""
        assert self.response is not None
        try:
            while line := self.response.readline():
                self.received += len(line)
                yield line
        except BaseException as error:
            raise self._failure(error) from None
        if self.expired:
            raise self._timed_out()

    # --- naming a failure ---------------------------------------------------------------------------------

    def _failure(self, error: BaseException) -> BaseException:
        """`error` as a TransportFailure naming what happened (KeyboardInterrupt and the like pass)."""
        if not isinstance(error, Exception):
            return error
        if self.expired:
            return self._timed_out()
        if isinstance(error, ssl.SSLError):
            if "WRONG_VERSION_NUMBER" in str(error) or "record layer failure" in str(error):
                return TransportFailure(
                    f"no TLS at {self.host}:{self.port}: the server answers plain HTTP, not https ({error})",
                    "tls",
                    retry=False,
                    hint="give the engine with http:// instead of https://",
                )
            if isinstance(error, ssl.SSLEOFError) or "EOF" in str(error):
                return TransportFailure(
                    f"the TLS handshake with {self.host}:{self.port} got no answer: the server closed the "
                    f"connection ({error})",
                    "tls",
                    retry=False,
                    hint="does the server speak https? If not, give the engine with http://",
                )
            return TransportFailure(
                f"the TLS handshake failed ({error})",
                "tls",
                retry=False,
                hint="check the server's certificate (bitexact verifies it as any https client does)",
            )
        if (
            isinstance(error, http.client.IncompleteRead)
            and self.response is not None
            and self.response.chunked
        ):
            return TransportFailure(
                f"the answer's chunked framing broke after {self.received + len(error.partial)} bytes "
                "(a chunk size that is no hexadecimal number, or a chunk cut short) (IncompleteRead)",
                "framing",
                retry=True,
                hint="the server or a proxy in front of it sent a malformed answer; see its log",
            )
        if isinstance(error, http.client.IncompleteRead):
            expected = "" if error.expected is None else f" of the {len(error.partial) + error.expected}"
            return TransportFailure(
                f"the answer broke off: {len(error.partial)}{expected} bytes its framing promised came "
                "before the connection closed (IncompleteRead)",
                "framing",
                retry=True,
                hint="the server closed the connection mid-answer: see its log (a crash, a proxy's limit)",
            )
        cut = isinstance(error, ConnectionResetError | ConnectionAbortedError | BrokenPipeError)
        if cut and not self.tls and self.received == 0 and _tls_speaker(self.host, self.port, 5.0):
            return TransportFailure(
                f"{self.host}:{self.port} speaks TLS (https), and the request was plain HTTP: the server "
                "closed it unanswered",
                "tls",
                retry=False,
                hint="give the engine with https:// instead of http://",
            )
        if isinstance(error, http.client.RemoteDisconnected):
            return TransportFailure(
                "the server closed the connection without an answer (RemoteDisconnected)",
                "closed",
                retry=True,
                hint="did the server crash or restart? see its log; is it still running?",
            )
        if isinstance(error, http.client.BadStatusLine):
            line = error.line if isinstance(error.line, str) else repr(error.line)
            raw = line.encode("latin-1", errors="replace")
            if len(raw) >= 2 and raw[0] in TLS_RECORD_TYPES and raw[1] == 0x03:
                return TransportFailure(
                    f"{self.host}:{self.port} answered in TLS (https) to a plain HTTP request",
                    "tls",
                    retry=False,
                    hint="give the engine with https:// instead of http://",
                )
            return TransportFailure(
                f"the answer is not HTTP: its status line is {line[:80]!r} (BadStatusLine)",
                "framing",
                retry=True,
                hint="is another kind of server listening on that port?",
            )
        if isinstance(error, http.client.HTTPException | ValueError):  # a broken chunk, a header too long
            return TransportFailure(
                f"the answer broke HTTP's framing ({type(error).__name__}: {error})",
                "framing",
                retry=True,
                hint="the server or a proxy in front of it sent a malformed answer; see its log",
            )
        if isinstance(error, ConnectionRefusedError):
            return TransportFailure(
                f"connection refused by {self.host}:{self.port} (ConnectionRefusedError)",
                "refused",
                retry=True,
                hint="is the server still running? Is it listening on that port?",
            )
        if isinstance(error, TimeoutError | socket.timeout):
            return self._timed_out()
        if isinstance(error, socket.gaierror):
            return TransportFailure(
                f"the host {self.host!r} cannot be resolved ({error})",
                "network",
                retry=True,
                hint="check the host name in the engine's URL",
            )
        if isinstance(error, OSError):
            return TransportFailure(
                f"{type(error).__name__}: {error}",
                "network",
                retry=True,
                hint="is the server still running? Is it reachable from here?",
            )
        return error


def exchange(url: str, method: str, body: bytes | None, headers: dict[str, str], timeout_s: float) -> Answer:
    """One whole exchange: the answer with its body, or a TransportFailure."""
    with Exchange(url, method, body, headers, timeout_s) as ex:
        return ex.body()
