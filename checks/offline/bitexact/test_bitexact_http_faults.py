"""HTTP beyond a refused connection and a 5xx, against real sockets (bx_raw_server.py): Hypothesis draws a
misbehaviour (a redirect of any 3xx code, with or without a Location; a Content-Encoding not asked for; a
body shorter than its Content-Length; a broken chunk; an empty body; a status line that is not HTTP, a
TLS record among them; a connection closed unanswered) and the method, and bitexact's client
(engines/http.py over engines/transport.py) must name it for what it is:

- a redirect is named with where it points and never followed (no second request reaches any server,
  a POST never becomes a GET), and not retried;
- an unasked encoding is named (the client asked for `identity`), and not retried;
- broken framing, an empty body and a status line that is not HTTP are named so, retried, and never
  told "is the server still running?";
- TLS is named both ways against a real TLS server (Python's ssl with a certificate openssl makes here);
- `?timeout` is a deadline per request: a server that trickles its status line or its body a byte at a
  time is timed out when the deadline passes.

One real process: `bitexact parity` against a redirecting server exits 2 naming the redirect."""

from __future__ import annotations

import gzip
import shutil
import socket
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from bitexact.engines.http import HttpClient
from bitexact.errors import EngineError
from checkhelpers.bx_raw_server import RawServer, Request, head
from checkhelpers.fuzz_settings import fuzz
from hypothesis import given
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[3]
BODY = b'{"text": "ok", "meta_info": {}}'
STILL_RUNNING = "is the server still running"


@dataclass(frozen=True)
class Fault:
    kind: str
    detail: object = None

    def send(self, conn: socket.socket, request: Request) -> None:
        detail = self.detail
        if self.kind == "redirect":
            status, location = detail  # type: ignore[misc]
            headers = {"Content-Length": "0"} | ({"Location": location} if location else {})
            conn.sendall(head(f"{status} Moved", headers))
        elif self.kind == "encoding":
            data = gzip.compress(BODY)
            conn.sendall(head("200 OK", {"Content-Encoding": str(detail), "Content-Length": str(len(data))}))
            conn.sendall(data)
        elif self.kind == "short":
            sent, missing = detail  # type: ignore[misc]
            conn.sendall(head("200 OK", {"Content-Length": str(sent + missing)}) + BODY[:sent])
        elif self.kind == "chunk":
            conn.sendall(head("200 OK", {"Transfer-Encoding": "chunked"}) + bytes(detail) + b"\r\n")  # type: ignore[call-overload]
        elif self.kind == "empty":
            conn.sendall(head("200 OK", {"Content-Length": "0"} if detail == "length0" else {}))
        elif self.kind == "status":
            conn.sendall(bytes(detail) + b"\r\n\r\n")  # type: ignore[call-overload]
        elif self.kind == "closed":
            pass  # read, then closed unanswered
        else:
            raise AssertionError(self.kind)


faults = st.one_of(
    st.builds(
        Fault,
        st.just("redirect"),
        st.tuples(
            st.sampled_from([300, 301, 302, 303, 307, 308]),
            st.sampled_from([None, "/elsewhere", "http://127.0.0.1:1/generate", "https://x.invalid/"]),
        ),
    ),
    st.builds(Fault, st.just("encoding"), st.sampled_from(["gzip", "GZIP", "x-gzip", "deflate", "br"])),
    st.builds(Fault, st.just("short"), st.tuples(st.integers(0, len(BODY) - 1), st.integers(1, 5000))),
    st.builds(Fault, st.just("chunk"), st.sampled_from([b"zz", b"-1", b"1g", b"8\r\nab"])),
    st.builds(Fault, st.just("empty"), st.sampled_from(["length0", "close"])),
    st.builds(
        Fault,
        st.just("status"),
        st.sampled_from(
            [
                b"hello",
                b"SSH-2.0-OpenSSH_9.6",
                b"HTTP/9 x",
                b"\x15\x03\x03\x00\x02\x02\x46",
                b"\x16\x03\x01\x00",
            ]
        ),
    ),
    st.builds(Fault, st.just("closed")),
)

# what the last message must say, and whether a retry is made (retries=1: two requests, or one)
EXPECT = {
    "redirect": ("a redirect to", False),
    "encoding": ("which bitexact did not ask for (it sends Accept-Encoding: identity)", False),
    "short": ("the answer broke off", True),
    "chunk": ("the answer's chunked framing broke after", True),
    "empty": ("with an empty body", True),
    "status": ("the answer is not HTTP", True),
    "closed": ("closed the connection without an answer", True),
}


def expected(fault: Fault) -> tuple[str, bool]:
    if fault.kind == "status" and bytes(fault.detail)[:1] in (b"\x15", b"\x16"):  # type: ignore[call-overload]
        return "answered in TLS (https) to a plain HTTP request", False
    return EXPECT[fault.kind]


@fuzz(50)
@given(faults, st.sampled_from(["GET", "POST"]))
def test_every_misbehaviour_is_named_for_what_it_is(fault: Fault, method: str) -> None:
    with RawServer(fault.send) as server:
        client = HttpClient(server.url, timeout=10, retries=1, backoff=0)
        started = time.monotonic()
        with pytest.raises(EngineError) as error:
            if method == "GET":
                client.get_json("/server_info")
            else:
                client.post_json("/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 1}})
        took = time.monotonic() - started
    message = str(error.value)
    words, retried = expected(fault)
    assert words in message, message
    assert len(server.requests) == (2 if retried else 1), (server.requests, message)
    assert {r.method for r in server.requests} == {method}  # a POST never became a GET
    assert all(r.headers.get("accept-encoding") == "identity" for r in server.requests)
    if fault.kind != "closed":
        assert STILL_RUNNING not in message, message
    if fault.kind == "redirect":
        location = fault.detail[1]  # type: ignore[index]
        assert (location or "nowhere (no Location header)") in message and "give the address" in message
    assert took < 9, f"{took:.1f}s"


def _trickle(part: str) -> RawServer:
    def send(conn: socket.socket, request: Request) -> None:
        data = head("200 OK", {"Content-Length": str(len(BODY))}) + BODY
        start = 0 if part == "status line" else len(data) - len(BODY)
        conn.sendall(data[:start])
        for byte in data[start:]:
            conn.sendall(bytes([byte]))
            time.sleep(0.25)

    return RawServer(send)


@pytest.mark.parametrize("part", ["status line", "body"])
def test_timeout_is_a_deadline_for_the_whole_request(part: str) -> None:
    """A byte every 0.25 s keeps every single read under any per-read timeout; the answer would take
    about 8 s (the body) or 25 s (the whole answer). The deadline of 2 s ends it at 2 s."""
    with _trickle(part) as server:
        client = HttpClient(server.url, timeout=2, retries=0, backoff=0)
        started = time.monotonic()
        with pytest.raises(EngineError, match=r"no complete answer within 2 s \(the deadline of one request"):
            client.post_json("/generate", {"text": "hi"})
        took = time.monotonic() - started
    assert 1.9 < took < 4, f"{took:.1f}s"


@pytest.fixture(scope="module")
def tls_context(tmp_path_factory: pytest.TempPathFactory) -> ssl.SSLContext:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a certificate")
    folder = tmp_path_factory.mktemp("tls")
    key, cert = folder / "key.pem", folder / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


def _ok(conn: socket.socket, request: Request) -> None:
    conn.sendall(head("200 OK", {"Content-Length": str(len(BODY))}) + BODY)


def test_plain_http_to_a_tls_server_is_named(tls_context: ssl.SSLContext) -> None:
    with RawServer(_ok, tls=tls_context) as server:
        client = HttpClient(server.url, timeout=10, retries=2, backoff=0)
        with pytest.raises(EngineError) as error:
            client.get_json("/server_info")
    message = str(error.value)
    assert "speaks TLS (https), and the request was plain HTTP" in message, message
    assert "give the engine with https:// instead of http://" in message and STILL_RUNNING not in message


def test_https_to_a_plain_server_is_named() -> None:
    with RawServer(_ok) as server:
        client = HttpClient(server.url.replace("http:", "https:"), timeout=10, retries=2, backoff=0)
        with pytest.raises(EngineError) as error:
            client.get_json("/server_info")
    message = str(error.value)
    assert "the server answers plain HTTP, not https" in message, message
    assert "give the engine with http:// instead of https://" in message
    assert server.connections == 1  # not retried: it would answer the same


def test_a_redirect_is_refused_by_the_real_program(tmp_path: Path) -> None:
    """`bitexact parity` as a process against a server that redirects every request: exit 2, the
    redirect named with its target, the target never asked."""

    def redirect(conn: socket.socket, request: Request) -> None:
        conn.sendall(
            head("307 Temporary Redirect", {"Location": f"{target.url}/generate", "Content-Length": "0"})
        )

    with RawServer(_ok) as target, RawServer(redirect) as server:
        prompts = tmp_path / "p.jsonl"
        prompts.write_text('{"id": "p0", "input_ids": [1, 2, 3]}\n')
        url = f"sglang+{server.url}?retries=0"
        command = ["parity", url, url, "--prompts", str(prompts), "--out", str(tmp_path / "o")]
        done = subprocess.run(
            [sys.executable, "-m", "bitexact", *command], capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 2, done.stderr
    assert f"a redirect to {target.url}/generate: bitexact follows no redirect" in done.stderr, done.stderr
    assert target.requests == []
