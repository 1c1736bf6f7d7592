"""pinlock's weights manifests against huggingface_hub itself, offline: a stand-in Hub on 127.0.0.1 serving
real git repositories (checkhelpers/hub_standin.py, written from huggingface_hub's source), hub caches
written by huggingface_hub (the server lock's 1.32.0 from its released wheel, and the installed version),
and expected manifests computed here with hashlib from the bytes served."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from checkhelpers.hub_standin import HubRepo, HubStandIn
from checkhelpers.released_wheels import unpacked_wheel
from pinlock import commands, hub, net
from pinlock.cli import main as pinlock_main
from pinlock.hf import ManifestError, manifest_filename, validate_manifest
from pinlock.pins import PinError

REPO = "Acme/Tiny-Model"
OTHER = "Acme/Other-Model"
SHARDS = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
SMALL = {
    ".gitattributes": b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n",
    "config.json": b'{"architectures": ["Qwen3ForCausalLM"], "hidden_size": 64}\n',
    "tokenizer/vocab.txt": b"a\nb\nc\n",
    "model.safetensors.index.json": json.dumps({"weight_map": {"a": SHARDS[0], "b": SHARDS[1]}}).encode(),
}
LARGE = {SHARDS[0]: b"\x00" * 5000 + b"w1", SHARDS[1]: b"w2" * 999}
OTHER_FILES = {".gitattributes": SMALL[".gitattributes"], "model.safetensors": b"other weights"}
# The cache writers: the installed huggingface_hub (nixpkgs' in the Nix sandbox), and the server lock's.
WRITERS = ["installed", pytest.param("1.32.0", marks=pytest.mark.network)]


def expected_manifest(repo: str, revision: str, files: dict[str, bytes], lfs: set[str]) -> dict[str, Any]:
    rows = [
        {"path": p, "size": len(d), "sha256": hashlib.sha256(d).hexdigest(), "lfs": p in lfs}
        for p, d in files.items()
    ]
    return {"repo": repo, "revision": revision, "files": sorted(rows, key=lambda f: f["path"])}


@pytest.fixture(scope="module")
def repos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, HubRepo]:
    root = tmp_path_factory.mktemp("hub-git")
    return {
        REPO: HubRepo.create(root, REPO, SMALL | LARGE, set(LARGE)),
        OTHER: HubRepo.create(root, OTHER, OTHER_FILES, {"model.safetensors"}),
    }


def expected(repos: dict[str, HubRepo], name: str = REPO) -> dict[str, Any]:
    repo = repos[name]
    return expected_manifest(name, repo.commit, repo.contents, set(repo.lfs))


@pytest.fixture
def hub_server(repos: dict[str, HubRepo], monkeypatch: pytest.MonkeyPatch) -> Iterator[HubStandIn]:
    with HubStandIn(list(repos.values())) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
        monkeypatch.setattr(hub, "RETRY_DELAY", 0.0)
        yield server


def write_cache(writer: str, server: HubStandIn, target: Path, repo: str, how: str = "snapshot") -> Path:
    """A hub cache (or a --local-dir folder) written by huggingface_hub `writer`, in a fresh process
    (huggingface_hub reads HF_ENDPOINT at import); returns the path huggingface_hub returned."""
    code = (
        "import sys, huggingface_hub as h\n"
        "how, repo, target = sys.argv[1:4]\n"
        "if how == 'snapshot': print(h.snapshot_download(repo, revision='main', cache_dir=target))\n"
        "elif how == 'local-dir': print(h.snapshot_download(repo, revision='main', local_dir=target))\n"
        "else:\n"
        "    for name in sys.argv[4:]:\n"
        "        print(h.hf_hub_download(repo, name, revision='main', cache_dir=target))\n"
    )
    # PYTHONPATH names a released huggingface_hub unpacked for the test (an upstream package under test),
    # or nothing: the installed one
    path = str(unpacked_wheel("huggingface_hub", writer)) if writer != "installed" else ""
    env = {
        **os.environ,
        "HF_ENDPOINT": server.url,
        "HF_HOME": str(target.parent / "hf-home"),
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "PYTHONPATH": path,
    }
    files = [*SMALL, *LARGE] if how == "files" else []
    done = subprocess.run(
        [sys.executable, "-c", code, how, repo, str(target), *files], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return Path(done.stdout.splitlines()[-1])


def _checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "nix" / "recipes").mkdir(parents=True, exist_ok=True)
    return root


def _pin(tmp_path: Path, target: str, *args: str) -> int:
    return pinlock_main(
        ["--root", str(_checkout(tmp_path)), "--cache-dir", str(tmp_path / "c"), "weights", target, *args]
    )


def _written(tmp_path: Path, repo: str = REPO) -> Path:
    return _checkout(tmp_path) / "pkgs" / "weights" / "manifests" / manifest_filename(repo)


def test_validate_manifest_schema(repos: dict[str, HubRepo]) -> None:
    good = expected(repos)
    assert validate_manifest(good, "m") == good
    for broken, message in [
        (good | {"extra": 1}, "exactly repo, revision, files"),
        (good | {"revision": "main"}, "40 lower-case hex"),
        (good | {"repo": "no-slash"}, "org/name"),
        (good | {"files": []}, "non-empty"),
        (good | {"files": list(reversed(good["files"]))}, "sorted"),
        (good | {"files": [good["files"][0] | {"sha256": "A" * 64}]}, "lowercase hex"),
        (good | {"files": [good["files"][0] | {"lfs": "yes"}]}, "true or false"),
        (good | {"files": [good["files"][0] | {"path": "../escape"}]}, "unsafe file path"),
    ]:
        with pytest.raises(ManifestError, match=message):
            validate_manifest(broken, "m")
    assert manifest_filename("Qwen/Qwen3.8-27B") == "Qwen--Qwen3.8-27B.json"


# The Hub path: list_repo_tree and hf_hub_download against the stand-in.


def test_hub_manifest_takes_lfs_oids_and_downloads_only_small_files(
    hub_server: HubStandIn, repos: dict[str, HubRepo], tmp_path: Path
) -> None:
    assert _pin(tmp_path, f"{REPO}@{repos[REPO].commit}") == 0
    assert json.loads(_written(tmp_path).read_text()) == expected(repos)
    paths = [p for _, p, _, _ in hub_server.requests]
    assert sum("/tree/" in p for p in paths) >= 3  # every page of the listing (3 entries a page)
    assert not any(p.startswith("/cdn/") for p in paths)  # LFS files: their oid, no download


def test_hub_retries_a_failed_listing_and_resumes_a_cut_download(
    hub_server: HubStandIn, repos: dict[str, HubRepo], tmp_path: Path
) -> None:
    commit = repos[REPO].commit
    hub_server.fail_once[f"/api/models/{REPO}/tree/{commit}"] = 503
    hub_server.cut_once.add(f"/{REPO}/resolve/{commit}/config.json")
    assert _pin(tmp_path, f"{REPO}@{commit}") == 0
    assert json.loads(_written(tmp_path).read_text()) == expected(repos)
    # Fetched again after the cut (huggingface_hub resumes with a Range from its 10 MB chunk boundaries;
    # a smaller file starts over), and the bytes pinned are the whole file's.
    config = [r for r in hub_server.requests if r[0] == "GET" and r[1].endswith("/config.json")]
    assert len(config) == 2


def test_hub_file_differing_from_the_tree_is_refused(
    hub_server: HubStandIn, repos: dict[str, HubRepo], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A download whose bytes are not the tree's blob (same size, other content) is not pinned."""
    served = repos[REPO].contents["config.json"]
    repos[REPO].contents["config.json"] = served.replace(b"64", b"65")
    try:
        assert _pin(tmp_path, f"{REPO}@{repos[REPO].commit}") == 1
    finally:
        repos[REPO].contents["config.json"] = served
    err = capsys.readouterr().err
    assert f"{REPO}/config.json: downloaded {len(served)} bytes with git blob id" in err
    assert "the cached copy was removed: run again" in err
    assert not _written(tmp_path).exists()


def test_hub_errors_name_the_fix(hub_server: HubStandIn, repos: dict[str, HubRepo], tmp_path: Path) -> None:
    ctx = commands.Context(root=_checkout(tmp_path), cache=tmp_path / "c")
    with pytest.raises(PinError, match="the Hub has no such revision"):
        commands.lock_weights(ctx, REPO, "1" * 40)
    with pytest.raises(PinError, match="no such repo .or it is private: set HF_TOKEN"):
        commands.lock_weights(ctx, "Acme/Nope", repos[REPO].commit)


def test_gated_repo_uses_the_token_and_never_stores_it(
    hub_server: HubStandIn, repos: dict[str, HubRepo], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub_server.gated_token = "hf_secret_for_test"
    ctx = commands.Context(root=_checkout(tmp_path), cache=tmp_path / "c")
    with pytest.raises(PinError, match="gated repo: accept its terms on the Hub and set HF_TOKEN"):
        commands.lock_weights(ctx, REPO, repos[REPO].commit)
    monkeypatch.setenv("HF_TOKEN", "hf_secret_for_test")
    commands.lock_weights(ctx, REPO, repos[REPO].commit)
    for path in [*ctx.root.rglob("*"), *ctx.cache.rglob("*")]:
        if path.is_file():
            assert b"hf_secret_for_test" not in path.read_bytes(), path
    assert all(auth is None for _, p, auth, _ in hub_server.requests if p.startswith("/cdn/"))


# Hub caches written by huggingface_hub: --snapshot at the cache, a repo in it, or a snapshot.


@pytest.mark.parametrize("writer", WRITERS)
def test_snapshot_of_a_real_cache_pins_what_the_hub_serves(
    writer: str, hub_server: HubStandIn, repos: dict[str, HubRepo], tmp_path: Path
) -> None:
    cache = tmp_path / "hub-cache"
    snapshot = write_cache(writer, hub_server, cache, REPO)
    assert snapshot == cache / "models--Acme--Tiny-Model" / "snapshots" / repos[REPO].commit
    for i, (given, target) in enumerate(
        [
            (snapshot, REPO),  # the revision from the path
            (cache / "models--Acme--Tiny-Model", REPO),  # ... from refs/main
            (cache, f"{REPO}@{repos[REPO].commit}"),  # the whole cache, the revision given
        ]
    ):
        here = tmp_path / str(i)
        assert _pin(here, target, "--snapshot", str(given)) == 0, given
        assert json.loads(_written(here).read_text()) == expected(repos), given


@pytest.mark.parametrize("writer", WRITERS)
def test_snapshot_of_another_repo_or_revision_is_refused_naming_both(
    writer: str,
    hub_server: HubStandIn,
    repos: dict[str, HubRepo],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cache = tmp_path / "hub-cache"
    snapshot = write_cache(writer, hub_server, cache, REPO)
    other = repos[OTHER].commit
    assert _pin(tmp_path, f"{OTHER}@{other}", "--snapshot", str(snapshot)) == 2
    err = capsys.readouterr().err
    assert f"holds {REPO} (models--Acme--Tiny-Model), not {OTHER} (models--Acme--Other-Model)" in err
    assert f"point --snapshot at {cache.resolve() / 'models--Acme--Other-Model'}" in err
    assert _pin(tmp_path, f"{REPO}@{other}", "--snapshot", str(snapshot)) == 2
    err = capsys.readouterr().err
    assert f"is {REPO}@{repos[REPO].commit}, not the revision asked for, {other}" in err
    assert _pin(tmp_path, f"{OTHER}@{other}", "--snapshot", str(cache)) == 2
    assert f"holds no {OTHER} (it holds {REPO})" in capsys.readouterr().err
    assert _pin(tmp_path, f"{REPO}@{other}", "--snapshot", str(cache)) == 2
    assert f"{REPO}@{other} is not in" in capsys.readouterr().err
    assert not _written(tmp_path, OTHER).exists() and not _written(tmp_path).exists()


@pytest.mark.parametrize("writer", WRITERS)
def test_truncated_lfs_blob_is_refused_naming_the_file(
    writer: str,
    hub_server: HubStandIn,
    repos: dict[str, HubRepo],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    snapshot = write_cache(writer, hub_server, tmp_path / "hub-cache", REPO)
    blob = (snapshot / SHARDS[0]).resolve()
    assert blob.name == hashlib.sha256(LARGE[SHARDS[0]]).hexdigest()  # huggingface_hub's naming
    blob.write_bytes(LARGE[SHARDS[0]][:1000])
    assert _pin(tmp_path, REPO, "--snapshot", str(snapshot)) == 1
    err = capsys.readouterr().err
    assert f"{SHARDS[0]}: 1000 bytes whose sha256 is" in err
    assert f"huggingface_hub named its blob {blob.name}" in err and "a truncated or corrupted download" in err
    assert f"delete {blob}" in err and "nothing pinned" in err
    assert not _written(tmp_path).exists()


def test_missing_blob_is_refused_as_huggingface_hub_sees_it(
    hub_server: HubStandIn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = write_cache("installed", hub_server, tmp_path / "hub-cache", REPO)
    (snapshot / SHARDS[0]).resolve().unlink()  # the link stays, dangling
    assert _pin(tmp_path, REPO, "--snapshot", str(snapshot)) == 1
    err = capsys.readouterr().err
    assert "1 file(s) of its snapshots link to blobs that are no longer there" in err
    assert f"{SHARDS[0]} links to " in err and f"`hf download {REPO} {SHARDS[0]} --revision " in err


@pytest.mark.parametrize("writer", WRITERS)
def test_edited_small_file_is_refused_by_its_git_blob_id(
    writer: str, hub_server: HubStandIn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = write_cache(writer, hub_server, tmp_path / "hub-cache", REPO)
    blob = (snapshot / "config.json").resolve()
    blob.write_bytes(SMALL["config.json"].replace(b"64", b"65"))  # same size, other bytes
    assert _pin(tmp_path, REPO, "--snapshot", str(snapshot)) == 1
    assert f"config.json: {len(SMALL['config.json'])} bytes whose git blob id is" in capsys.readouterr().err


@pytest.mark.parametrize("writer", WRITERS)
def test_incomplete_snapshot_is_refused(
    writer: str, hub_server: HubStandIn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file never downloaded: named from huggingface_hub's record of the commit's files where it kept one
    (snapshot_download, 1.x on), else from the Hub's listing (reachable here), and by the shard index."""
    cache = tmp_path / "hub-cache"
    snapshot = write_cache(writer, hub_server, cache, REPO)
    (snapshot / SHARDS[1]).unlink()
    assert _pin(tmp_path, REPO, "--snapshot", str(snapshot)) == 1
    err = capsys.readouterr().err
    assert f"model.safetensors.index.json names {SHARDS[1]}, which the snapshot lacks" in err
    if list((cache / "models--Acme--Tiny-Model" / "trees").glob("*.json")):
        assert f"the commit's cached listing names 1 file(s) the snapshot lacks: {SHARDS[1]}" in err
    else:
        assert f"the Hub's listing of the commit names 1 file(s) the snapshot lacks: {SHARDS[1]}" in err


def test_cache_written_file_by_file_is_checked_against_the_hub_or_pinned_with_a_note(
    hub_server: HubStandIn,
    repos: dict[str, HubRepo],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """hf_hub_download records no listing of the commit: the Hub's listing is asked once (here the stand-in
    answers, and everything is there); with the Hub out of reach the files present are pinned, and stderr
    says that a file never downloaded can only be noticed through the shard index."""
    last_file = write_cache("installed", hub_server, tmp_path / "hub-cache", REPO, how="files")
    assert last_file.name == SHARDS[1]
    assert _pin(tmp_path, REPO, "--snapshot", str(last_file.parent)) == 0
    assert json.loads(_written(tmp_path).read_text()) == expected(repos)
    assert "recorded no file listing" not in capsys.readouterr().err
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert _pin(tmp_path, REPO, "--snapshot", str(last_file.parent), "--force") == 0
    err = capsys.readouterr().err
    assert (
        "recorded no file listing for this commit and the Hub could not be asked (HF_HUB_OFFLINE is set)"
        in err
    )


def test_a_snapshot_without_its_weights_is_refused(
    hub_server: HubStandIn,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A model of which only config.json was downloaded (file by file, no listing kept). With the Hub
    reachable its listing names what is missing; offline, a snapshot with no weight file at all is refused."""
    config = write_cache("installed", hub_server, tmp_path / "hub-cache", REPO, how="files")
    for name in SHARDS:
        (config.parent / name).unlink()
    (config.parent / "model.safetensors.index.json").unlink()
    assert _pin(tmp_path, REPO, "--snapshot", str(config.parent)) == 1
    err = capsys.readouterr().err
    assert (
        "the Hub's listing of the commit names 3 file(s) the snapshot lacks" in err
        and "nothing pinned" in err
    )
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert _pin(tmp_path, REPO, "--snapshot", str(config.parent)) == 1
    err = capsys.readouterr().err
    assert "it holds no weights" in err and f"`hf download {REPO} --revision" in err
    assert not _written(tmp_path).exists()


def test_snapshot_usage_errors(
    hub_server: HubStandIn, repos: dict[str, HubRepo], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _pin(tmp_path, REPO, "--snapshot", str(tmp_path / "nope")) == 2
    err = capsys.readouterr().err
    assert f"--snapshot {tmp_path / 'nope'} does not exist" in err and "not an HF cache" not in err
    local = write_cache("installed", hub_server, tmp_path / "local", REPO, how="local-dir")
    assert _pin(tmp_path, REPO, "--snapshot", str(local)) == 2
    err = capsys.readouterr().err
    assert "is not a Hugging Face hub cache" in err and "a --local-dir download records no repo id" in err
    assert f"hf download {REPO}" in err
    assert not _written(tmp_path).exists()


def test_snapshot_without_refs_main_needs_the_revision(
    hub_server: HubStandIn, repos: dict[str, HubRepo], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "hub-cache"
    write_cache("installed", hub_server, cache, REPO)
    (cache / "models--Acme--Tiny-Model" / "refs" / "main").unlink()
    assert _pin(tmp_path, REPO, "--snapshot", str(cache / "models--Acme--Tiny-Model")) == 2
    assert f"has no refs/main to say which revision: give {REPO}@REV (cached: {repos[REPO].commit[:12]})" in (
        capsys.readouterr().err
    )
    assert _pin(tmp_path, f"{REPO}@{repos[REPO].commit}", "--snapshot", str(cache)) == 0


# Downloads that are not the Hub's (GitHub tarballs, wheels): retried and resumed by pinlock.net.


def test_net_download_retries_and_resumes_a_cut_transfer(
    hub_server: HubStandIn, repos: dict[str, HubRepo], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(net, "RETRY_DELAY", 0.0)
    sha = hashlib.sha256(LARGE[SHARDS[0]]).hexdigest()
    hub_server.cut_once.add(f"/cdn/{sha}")
    dest = net.download(f"{hub_server.cdn_url}/cdn/{sha}", tmp_path / "shard", "shard")
    assert dest.read_bytes() == LARGE[SHARDS[0]]
    ranges = [r for m, p, _, r in hub_server.requests if p == f"/cdn/{sha}"]
    assert ranges == [None, f"bytes={len(LARGE[SHARDS[0]]) // 2}-"]
    hub_server.fail_once["/cdn/" + "0" * 64] = 503
    with pytest.raises(net.NetError, match="HTTP 404"):  # 503 retried, then a 404 is final
        net.download(f"{hub_server.cdn_url}/cdn/{'0' * 64}", tmp_path / "absent", "absent")
    assert not (tmp_path / "absent").exists()


@pytest.mark.network  # the released wheel
def test_pinlock_runs_on_the_server_locks_huggingface_hub(
    hub_server: HubStandIn, repos: dict[str, HubRepo], tmp_path: Path
) -> None:
    """The same command lines in a process whose huggingface_hub is 1.32.0 (nixpkgs ships its own version;
    the installed one runs everything above)."""
    cache = tmp_path / "hub-cache"
    snapshot = write_cache("1.32.0", hub_server, cache, REPO)
    wheel = unpacked_wheel("huggingface_hub", "1.32.0")
    # PYTHONPATH names the released huggingface_hub unpacked for this test, an upstream package under test
    # that nothing installs; pinlock is installed in this interpreter (sys.executable).
    env = {**os.environ, "HF_ENDPOINT": hub_server.url, "PYTHONPATH": str(wheel)}
    code = "import sys, huggingface_hub as h\nfrom pinlock.cli import main\n"
    code += "print(h.__version__)\nsys.exit(main())"
    for i, args in enumerate([[f"{REPO}@{repos[REPO].commit}"], [REPO, "--snapshot", str(snapshot)]]):
        here = tmp_path / str(i)
        argv = ["--root", str(_checkout(here)), "--cache-dir", str(here / "c"), "weights", *args]
        done = subprocess.run([sys.executable, "-c", code, *argv], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["1.32.0"]
        assert json.loads(_written(here).read_text()) == expected(repos)


def test_hashing_a_snapshot_shows_each_file_against_its_size(
    hub_server: HubStandIn, repos: dict[str, HubRepo], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Progress on stderr while a snapshot is read: each file by name, what was read of its size."""
    snapshot = write_cache(WRITERS[0], hub_server, tmp_path / "hub-cache", REPO)
    capsys.readouterr()
    assert _pin(tmp_path / "p", REPO, "--snapshot", str(snapshot)) == 0
    err = capsys.readouterr().err
    assert f"hashing and verifying every file of {snapshot}" in err
    for entry in expected(repos)["files"]:
        if entry["size"]:
            line = next(ln for ln in err.splitlines() if f"hashing {entry['path']} " in ln)
            assert " of " in line and line.rstrip().endswith("/s"), line
