"""pinlock's wheel-stub step: the real uv.lock's sdist-only packages, the real cuda-tile sdist from PyPI,
PEP 503 index parsing and wheel selection, and the step end to end against a loopback index."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from checkhelpers.released_wheels import cache_dir
from pinlock import commands, net
from pinlock.hf import sha256_file
from pinlock.nar import sri
from pinlock.stubs import IndexFile, parse_simple_index, sdist_only, sdist_pyproject, select_wheel, stub_index

REPO = Path(__file__).resolve().parents[2]
UV_LOCK = REPO / "pkgs" / "server-env" / "uv.lock"


def test_the_locked_closure_has_one_sdist_only_package() -> None:
    (only,) = sdist_only(UV_LOCK.read_text())
    assert (only.name, only.version) == ("cuda-tile", "1.6.0rc5")
    assert only.url.endswith("/cuda_tile-1.6.0rc5.tar.gz") and len(only.sha256) == 64


@pytest.mark.network
def test_the_real_cuda_tile_sdist_is_a_wheel_stub() -> None:
    (only,) = sdist_only(UV_LOCK.read_text())
    archive = net.download(only.url, cache_dir() / "sdists" / only.url.rsplit("/", 1)[-1], only.name)
    assert sha256_file(archive) == only.sha256  # what uv.lock pinned
    index = stub_index(sdist_pyproject(archive))
    assert index is not None and index.startswith("https://")


def test_a_real_sdist_is_not_a_stub() -> None:
    assert (
        stub_index('[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n')
        is None
    )
    with pytest.raises(ValueError, match="index_url"):
        stub_index('[build-system]\nbuild-backend = "wheel_stub.buildapi"\n')


W = "cuda_tile-1.6.0rc5-"
ANCHORS = [
    f'<a href="{W}cp312-cp312-manylinux_2_28_x86_64.whl#sha256={"a" * 64}">{W}cp312...</a>',
    f'<a href="{W}cp312-cp312-manylinux_2_34_x86_64.whl#sha256={"b" * 64}" data-requires-python="3">x</a>',
    f'<a href="{W}cp312-cp312-musllinux_1_2_x86_64.whl#sha256={"c" * 64}">x</a>',
    f'<a href="{W}cp312-cp312-manylinux_2_28_aarch64.whl#sha256={"c" * 64}">x</a>',
    f'<a href="{W}cp311-cp311-manylinux_2_28_x86_64.whl#sha256={"c" * 64}">x</a>',
    '<a href="../other/cuda_tile-1.6.0rc4-py3-none-manylinux_2_28_x86_64.whl">x</a>',
    f'<a href="https://files.example.invalid/{W}py3-none-manylinux2014_x86_64.whl">x</a>',
]
# PEP 503 project page shape: one anchor per file, href relative or absolute, `#sha256=` fragment.
PAGE = (
    "<!DOCTYPE html><html><body><h1>Links for cuda-tile</h1>\n" + "<br/>\n".join(ANCHORS) + "</body></html>"
)


def test_parse_simple_index() -> None:
    files = parse_simple_index(PAGE, "https://index.example.invalid/cuda-tile/")
    assert files[0] == IndexFile(
        "cuda_tile-1.6.0rc5-cp312-cp312-manylinux_2_28_x86_64.whl",
        "https://index.example.invalid/cuda-tile/cuda_tile-1.6.0rc5-cp312-cp312-manylinux_2_28_x86_64.whl",
        "a" * 64,
    )
    assert (
        files[5].url
        == "https://index.example.invalid/other/cuda_tile-1.6.0rc4-py3-none-manylinux_2_28_x86_64.whl"
    )
    assert files[5].sha256 is None and len(files) == 7


def test_select_wheel_prefers_exact_tags_then_newest_manylinux() -> None:
    files = parse_simple_index(PAGE, "https://index.example.invalid/cuda-tile/")
    assert select_wheel(files, "cuda-tile", "1.6.0rc5", "cp312", "x86_64").sha256 == "b" * 64
    assert select_wheel(files, "cuda_tile", "1.6.0rc5", "cp313", "x86_64").filename.endswith(
        "py3-none-manylinux2014_x86_64.whl"
    )
    assert select_wheel(files, "cuda-tile", "1.6.0rc5", "cp311", "x86_64").sha256 == "c" * 64
    with pytest.raises(ValueError, match="no cuda-tile==1.6.0 wheel"):
        select_wheel(files, "cuda-tile", "1.6.0", "cp312", "x86_64")
    twins = [
        IndexFile("x-1-py3-none-linux_x86_64.whl", "u1", None),
        IndexFile("x-1-1-py3-none-linux_x86_64.whl", "u2", None),
    ]
    with pytest.raises(ValueError, match="several equally suitable"):
        select_wheel(twins, "x", "1", "cp312", "x86_64")


# End to end: a stub sdist (file://) whose index is a loopback server.


class FakeIndex(http.server.BaseHTTPRequestHandler):
    page = ""
    wheel = b""

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = FakeIndex.page.encode() if self.path == "/tiny-stub/" else FakeIndex.wheel
        if self.path not in ("/tiny-stub/", "/files/tiny_stub-2.0-py3-none-manylinux_2_17_x86_64.whl"):
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def index() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeIndex)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def _stub_checkout(tmp_path: Path, index_url: str, wrong_hash: bool = False) -> Path:
    pyproject = "\n".join(
        [
            "[build-system]",
            'build-backend = "wheel_stub.buildapi"',
            "[tool.wheel_stub]",
            f'index_url = "{index_url}"',
            "",
        ]
    )
    sdist = tmp_path / "tiny_stub-2.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        info = tarfile.TarInfo("tiny_stub-2.0/pyproject.toml")
        info.size = len(pyproject)
        tar.addfile(info, io.BytesIO(pyproject.encode()))
    digest = "0" * 64 if wrong_hash else hashlib.sha256(sdist.read_bytes()).hexdigest()
    root = tmp_path / "checkout"
    (root / "nix" / "recipes").mkdir(parents=True)
    (root / "nix" / "recipes" / "qwen3.8-27b-exact.json").write_text(
        (REPO / "nix" / "recipes" / "qwen3.8-27b-exact.json").read_text()
    )
    (root / "pkgs" / "server-env").mkdir(parents=True)
    (root / "pkgs" / "server-env" / "uv.lock").write_text(
        f'version = 1\n[[package]]\nname = "tiny-stub"\nversion = "2.0"\n'
        f'sdist = {{ url = "{sdist.as_uri()}", hash = "sha256:{digest}", size = 1 }}\n'
    )
    return root


@pytest.mark.parametrize("fragment", [True, False])
def test_wheel_stub_step_end_to_end(index: str, tmp_path: Path, fragment: bool) -> None:
    FakeIndex.wheel = b"PK real wheel bytes"
    wheel_sha = hashlib.sha256(FakeIndex.wheel).hexdigest()
    href = "../files/tiny_stub-2.0-py3-none-manylinux_2_17_x86_64.whl" + (
        f"#sha256={wheel_sha}" if fragment else ""
    )
    FakeIndex.page = f'<a href="{href}">w</a>'
    root = _stub_checkout(tmp_path, index)
    ctx = commands.Context(root=root, cache=tmp_path / "cache")
    assert ("nix/pins/wheel-stubs.json tiny-stub (sdist only)", "ABSENT", "") in commands.status(ctx)
    commands.lock_wheel_stubs(ctx)
    pin = json.loads((root / "nix" / "pins" / "wheel-stubs.json").read_text())
    assert pin == {
        "tiny-stub": {
            "version": "2.0",
            "url": f"{index}files/tiny_stub-2.0-py3-none-manylinux_2_17_x86_64.whl",
            "hash": sri(bytes.fromhex(wheel_sha)),
        }
    }
    assert ("nix/pins/wheel-stubs.json tiny-stub (sdist only)", "pinned", "") in commands.status(ctx)


def test_wheel_stub_step_refuses_a_changed_sdist(index: str, tmp_path: Path) -> None:
    root = _stub_checkout(tmp_path, index, wrong_hash=True)
    with pytest.raises(commands.PinError, match="sha256 differs from uv.lock"):
        commands.lock_wheel_stubs(commands.Context(root=root, cache=tmp_path / "cache"))
    assert not (root / "nix" / "pins" / "wheel-stubs.json").exists()
