"""pinlock's weights manifests: the Hub's tree API (fixture and a loopback server in its shape), and
manifests of local snapshots checked against hashes computed here with hashlib.

The tree API's shape follows huggingface_hub (1.32.0 read for this; the installed version is used
below): `HfApi.list_repo_tree` GETs `{endpoint}/api/models/{repo}/tree/{revision}` with `recursive` and
`expand`, follows `Link: <...>; rel="next"` pages (`utils/_pagination.py`), and builds `RepoFile(**entry)`
for `type == "file"` (path, size, oid -> blob_id, lfs {oid -> sha256, size, pointerSize -> pointer_size},
xetHash) and `RepoFolder` otherwise.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from huggingface_hub.hf_api import RepoFile
from pinlock import commands, net
from pinlock.cli import main as pinlock_main
from pinlock.hf import (
    ManifestError,
    TreeFile,
    manifest_filename,
    manifest_from_snapshot,
    manifest_from_tree,
    parse_tree,
    validate_manifest,
)

REPO = "Acme/Tiny-Model"
REV = "1d4bf0f2ff6012fd82039f2fa52739d0dd7c60c0"
SMALL = {
    ".gitattributes": b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n*.json -filter\n",
    "config.json": b'{"architectures": ["Qwen3ForCausalLM"], "hidden_size": 64}\n',
    "tokenizer/vocab.txt": b"a\nb\nc\n",
}
LARGE = {
    "model-00001-of-00002.safetensors": b"\x00" * 5000 + b"w1",
    "model-00002-of-00002.safetensors": b"w2" * 999,
}


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tree_entries() -> list[dict[str, Any]]:
    """Entries in the tree API's JSON shape (keys as the Hub sends them)."""
    entries: list[dict[str, Any]] = [{"type": "directory", "oid": "f" * 40, "size": 0, "path": "tokenizer"}]
    for path, data in SMALL.items():
        entries.append({"type": "file", "oid": git_blob_id(data), "size": len(data), "path": path})
    for path, data in LARGE.items():
        pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256(data)}\nsize {len(data)}\n"
        entries.append(
            {
                "type": "file",
                "oid": git_blob_id(pointer.encode()),
                "size": len(data),
                "path": path,
                "lfs": {"oid": sha256(data), "size": len(data), "pointerSize": len(pointer)},
                "xetHash": "e" * 64,
            }
        )
    return entries


def expected_manifest() -> dict[str, Any]:
    files = [{"path": p, "size": len(d), "sha256": sha256(d), "lfs": False} for p, d in SMALL.items()]
    files += [{"path": p, "size": len(d), "sha256": sha256(d), "lfs": True} for p, d in LARGE.items()]
    return {"repo": REPO, "revision": REV, "files": sorted(files, key=lambda f: f["path"])}


def test_fixture_has_the_shape_huggingface_hub_parses() -> None:
    files = parse_tree(tree_entries())
    theirs = {e["path"]: RepoFile(**e) for e in tree_entries() if e["type"] == "file"}
    assert sorted(theirs) == [f.path for f in files]
    for ours in files:
        repo_file = theirs[ours.path]
        assert (repo_file.size, repo_file.blob_id) == (ours.size, ours.git_oid)
        assert (repo_file.lfs.sha256 if repo_file.lfs else None) == ours.lfs_sha256


def test_manifest_from_tree_hashes_only_small_files() -> None:
    asked: list[str] = []

    def small(item: TreeFile) -> str:
        asked.append(item.path)
        return sha256(SMALL[item.path])

    manifest = manifest_from_tree(REPO, REV, parse_tree(tree_entries()), small)
    assert manifest == expected_manifest()
    assert sorted(asked) == sorted(SMALL)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"lfs": {"oid": "abc", "size": 3, "pointerSize": 1}}, "not a sha256"),
        ({"lfs": {"oid": "a" * 64, "size": 1, "pointerSize": 1}}, "differs from file size"),
        ({"path": "../escape"}, "unsafe file path"),
        ({"path": "/abs"}, "unsafe file path"),
        ({"type": "symlink"}, "unknown type"),
        ({"size": -1}, "bad size"),
    ],
)
def test_bad_tree_entries_are_refused(change: dict[str, Any], message: str) -> None:
    entry = {"type": "file", "oid": "0" * 40, "size": 3, "path": "x"} | change
    with pytest.raises(ManifestError, match=message):
        parse_tree([entry])


def test_missing_keys_and_duplicates_are_refused() -> None:
    with pytest.raises(ManifestError, match="lacks 'oid'"):
        parse_tree([{"type": "file", "size": 1, "path": "x"}])
    entry = {"type": "file", "oid": "0" * 40, "size": 1, "path": "x"}
    with pytest.raises(ManifestError, match="listed twice"):
        parse_tree([entry, entry])


def test_validate_manifest_schema() -> None:
    good = expected_manifest()
    assert validate_manifest(good, "m") == good
    for broken, message in [
        (good | {"extra": 1}, "exactly repo, revision, files"),
        (good | {"revision": "main"}, "40 hex"),
        (good | {"repo": "no-slash"}, "org/name"),
        (good | {"files": []}, "non-empty"),
        (good | {"files": list(reversed(good["files"]))}, "sorted"),
        (good | {"files": [good["files"][0] | {"sha256": "A" * 64}]}, "lowercase hex"),
        (good | {"files": [good["files"][0] | {"lfs": "yes"}]}, "true or false"),
    ]:
        with pytest.raises(ManifestError, match=message):
            validate_manifest(broken, "m")
    assert manifest_filename("Qwen/Qwen3.8-27B") == "Qwen--Qwen3.8-27B.json"


# Local snapshots: an HF cache layout (snapshots/<rev>/* -> ../../blobs/<etag>) and a plain directory.


def hf_cache_snapshot(root: Path) -> Path:
    repo_dir = root / f"models--{REPO.replace('/', '--')}"
    snapshot = repo_dir / "snapshots" / REV
    (repo_dir / "blobs").mkdir(parents=True)
    for path, data in {**SMALL, **LARGE}.items():
        etag = sha256(data) if path in LARGE else git_blob_id(data)  # huggingface_hub names blobs by etag
        (repo_dir / "blobs" / etag).write_bytes(data)
        link = snapshot / path
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(Path(*([".."] * (len(Path(path).parts) + 1))) / "blobs" / etag)
    (repo_dir / "refs").mkdir()
    (repo_dir / "refs" / "main").write_text(REV)
    return snapshot


def test_snapshot_manifest_matches_independent_hashes(tmp_path: Path) -> None:
    snapshot = hf_cache_snapshot(tmp_path)
    assert manifest_from_snapshot(REPO, REV, snapshot) == expected_manifest()


def test_snapshot_manifest_sees_a_corrupted_blob(tmp_path: Path) -> None:
    snapshot = hf_cache_snapshot(tmp_path)
    blob = (snapshot / "config.json").resolve()
    blob.write_bytes(blob.read_bytes().replace(b"64", b"65"))
    assert manifest_from_snapshot(REPO, REV, snapshot) != expected_manifest()


def test_plain_directory_uses_gitattributes_and_skips_metadata(tmp_path: Path) -> None:
    for path, data in {**SMALL, **LARGE}.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_bytes(data)
    (tmp_path / ".cache" / "huggingface").mkdir(parents=True)
    (tmp_path / ".cache" / "huggingface" / "x.metadata").write_text("local_dir bookkeeping")
    assert manifest_from_snapshot(REPO, REV, tmp_path) == expected_manifest()


def test_incomplete_snapshot_is_refused(tmp_path: Path) -> None:
    snapshot = hf_cache_snapshot(tmp_path)
    (snapshot / "config.json").resolve().unlink()
    with pytest.raises(ManifestError, match="dangling link"):
        manifest_from_snapshot(REPO, REV, snapshot)


def test_cli_snapshot_infers_revision_and_writes_the_manifest(tmp_path: Path) -> None:
    root = tmp_path / "checkout"
    (root / "nix" / "recipes").mkdir(parents=True)
    snapshot = hf_cache_snapshot(tmp_path / "hub")
    args = [
        "--root",
        str(root),
        "--cache-dir",
        str(tmp_path / "c"),
        "weights",
        REPO,
        "--snapshot",
        str(snapshot),
    ]
    assert pinlock_main(args) == 0
    written = root / "pkgs" / "weights" / "manifests" / "Acme--Tiny-Model.json"
    assert json.loads(written.read_text()) == expected_manifest()
    assert written.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in written.parent.iterdir()] == [written.name]  # no temp files left behind


# The networked path against a loopback server that answers like the Hub.


class FakeHub(http.server.BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}
    requests: list[tuple[str, str | None, str | None]] = []
    ignore_range = False
    gated_token: str | None = None

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        FakeHub.requests.append((self.path, self.headers.get("Authorization"), self.headers.get("Range")))
        if FakeHub.gated_token and self.headers.get("Authorization") != f"Bearer {FakeHub.gated_token}":
            self.send_response(401)
            self.end_headers()
            return
        tree_prefix = f"/api/models/{REPO}/tree/{REV}?recursive=true&expand=false"
        if self.path.startswith(tree_prefix):
            entries = tree_entries()
            second = self.path.endswith("&cursor=2")
            page = entries[3:] if second else entries[:3]
            body = json.dumps(page).encode()
            self.send_response(200)
            if not second:
                host = f"http://127.0.0.1:{self.server.server_address[1]}"
                self.send_header("Link", f'<{host}{tree_prefix}&cursor=2>; rel="next"')
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if self.path.startswith("/redirect-to/"):
            self.send_response(302)
            self.send_header("Location", "http://" + self.path[len("/redirect-to/") :])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        prefix = f"/{REPO}/resolve/{REV}/"
        data = FakeHub.files.get(self.path[len(prefix) :]) if self.path.startswith(prefix) else None
        if data is None:
            self.send_response(404)
            self.end_headers()
            return
        start = 0
        if self.headers.get("Range") and not FakeHub.ignore_range:
            start = int(self.headers["Range"].split("=")[1].rstrip("-"))
            self.send_response(206)
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        self.wfile.write(data[start:])


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    FakeHub.files = dict(SMALL) | dict(LARGE)
    FakeHub.requests, FakeHub.ignore_range, FakeHub.gated_token = [], False, None
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    yield endpoint
    server.shutdown()
    server.server_close()


def _ctx(tmp_path: Path) -> commands.Context:
    root = tmp_path / "checkout"
    (root / "nix" / "recipes").mkdir(parents=True, exist_ok=True)
    return commands.Context(root=root, cache=tmp_path / "cache")


def test_hub_manifest_follows_pages_and_downloads_only_small_files(hub: str, tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    commands.lock_weights(ctx, REPO, REV)
    written = ctx.root / "pkgs" / "weights" / "manifests" / manifest_filename(REPO)
    assert json.loads(written.read_text()) == expected_manifest()
    paths = [p for p, _, _ in FakeHub.requests]
    assert sum("/tree/" in p for p in paths) == 2  # both pages
    assert not any(name in p for p in paths for name in LARGE)  # LFS oids need no download


def test_gated_repo_uses_the_token_and_never_stores_it(
    hub: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    FakeHub.gated_token = "hf_secret_for_test"
    ctx = _ctx(tmp_path)
    with pytest.raises(net.NetError, match="HF_TOKEN"):
        commands.lock_weights(ctx, REPO, REV)
    monkeypatch.setenv("HF_TOKEN", "hf_secret_for_test")
    commands.lock_weights(ctx, REPO, REV)
    for path in [*ctx.root.rglob("*"), *ctx.cache.rglob("*")]:
        if path.is_file():
            assert b"hf_secret_for_test" not in path.read_bytes(), path
    assert net.hf_headers("https://example.org/x") == {}  # the token goes to the Hub's host only


@pytest.mark.parametrize("ignore_range", [False, True])
def test_download_resumes_a_partial_file(hub: str, tmp_path: Path, ignore_range: bool) -> None:
    FakeHub.ignore_range = ignore_range
    data = LARGE["model-00001-of-00002.safetensors"]
    dest = tmp_path / "model.safetensors"
    dest.with_name(dest.name + ".part").write_bytes(data[:1234])
    net.download(net.hf_file_url(REPO, REV, "model-00001-of-00002.safetensors"), dest, "t")
    assert dest.read_bytes() == data
    assert not dest.with_name(dest.name + ".part").exists()
    assert [r for _, _, r in FakeHub.requests] == ["bytes=1234-"]  # asked to resume either way


def test_missing_file_is_a_clear_error(hub: str, tmp_path: Path) -> None:
    with pytest.raises(net.NetError, match="HTTP 404.*check the repo name"):
        net.download(net.hf_file_url(REPO, REV, "nope.json"), tmp_path / "x", "t")


def test_token_is_not_carried_across_a_redirect_to_another_host(
    hub: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_secret_for_test")
    port = hub.rsplit(":", 1)[1]
    file_path = f"{REPO}/resolve/{REV}/config.json"
    same_host = f"{hub}/redirect-to/127.0.0.1:{port}/{file_path}"
    other_host = f"{hub}/redirect-to/localhost:{port}/{file_path}"
    for url, name in ((same_host, "a"), (other_host, "b")):
        net.download(url, tmp_path / name, name, net.hf_headers(url))
        assert (tmp_path / name).read_bytes() == SMALL["config.json"]
    auth = {path: token for path, token, _ in FakeHub.requests}
    assert auth[f"/{file_path}"] is None  # the last request: localhost, after the cross-host redirect
    assert [token for path, token, _ in FakeHub.requests].count("Bearer hf_secret_for_test") == 3
