"""pinlock against the operating system, as a real program on real files:

- drawn trees of any depth (past Python's recursion limit, and past PATH_MAX) are hashed; where Nix is
  installed, every drawn tree it can read hashes as `nix hash path` says;
- drawn snapshots with drawn files whose blobs are gone: each such file is named with the command that
  fetches it again, and no other;
- a full disk (a real tmpfs, where this machine lets a test mount one) is named with the pin's path, and
  the pin as it was is kept;
- offline, `weights` from the Hub says within seconds that the Hub cannot be reached (a name that does
  not resolve, a port nothing listens on), not after every retry of every request.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from checkhelpers.fuzz_settings import fuzz
from checkhelpers.reliability_setup import hub_cache
from hypothesis import given
from hypothesis import strategies as st
from pinlock.nar import nar_hash

REPO = Path(__file__).resolve().parents[2]
REV = "a" * 40
NIX = shutil.which("nix")


def pinlock(
    args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 120
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "BITEXACT_"))}
    clean.update(XDG_CACHE_HOME=str(cwd / "cache"), **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "pinlock.cli", *args], capture_output=True, text=True, env=clean, cwd=cwd,
        timeout=timeout,
    )  # fmt: skip


def checkout(root: Path) -> Path:
    (root / "nix" / "recipes").mkdir(parents=True)
    shutil.copy(REPO / "nix" / "recipes" / "qwen3.8-27b-exact.json", root / "nix" / "recipes")
    return root


# --- deep trees ---------------------------------------------------------------------------------------------


def build_tree(top: Path, depth: int, names: list[str], extras: list[tuple[int, str]]) -> None:
    """A chain of `depth` folders (named in turn from `names`) with, at level i, an extra file, link or
    empty folder for each (i, kind) in `extras`; made through folder descriptors, so no path is ever
    longer than a name."""
    top.mkdir()
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for level in range(depth + 1):
            for at, kind in extras:
                if at != level:
                    continue
                if kind == "file":
                    handle = os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
                    os.write(handle, b"level %d\n" % level)
                    os.close(handle)
                elif kind == "exec":
                    handle = os.open("x", os.O_WRONLY | os.O_CREAT, 0o755, dir_fd=fd)
                    os.close(handle)
                elif kind == "link":
                    os.symlink("../f", "l", dir_fd=fd)
                elif kind == "empty":
                    os.mkdir("e", dir_fd=fd)
            if level == depth:
                break
            name = names[level % len(names)]
            os.mkdir(name, dir_fd=fd)
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
    finally:
        os.close(fd)


@contextmanager
def deep_folder() -> Iterator[Path]:
    """A temporary folder removed by `rm -rf` (Python's rmtree recurses, and stops a thousand folders
    down)."""
    temp = Path(tempfile.mkdtemp())
    try:
        yield temp
    finally:
        subprocess.run(["rm", "-rf", str(temp)], check=True)


trees = st.tuples(
    st.one_of(st.integers(0, 5), st.integers(990, 1300)),
    st.lists(st.sampled_from(["d", "a", "zz", "\u00e9"]), min_size=1, max_size=3),
    st.lists(st.tuples(st.integers(0, 1300), st.sampled_from(["file", "exec", "link", "empty"])), max_size=6),
)


@fuzz(10)
@given(trees)
def test_a_drawn_tree_of_any_depth_hashes_as_nix_does(
    tree: tuple[int, list[str], list[tuple[int, str]]],
) -> None:
    depth, names, extras = tree
    with deep_folder() as temp:
        top = temp / "t"
        build_tree(top, depth, names, sorted({(min(at, depth), kind) for at, kind in extras}))
        ours = nar_hash(top)  # a RecursionError here was the fault
        assert ours.startswith("sha256-")
        if NIX is not None:
            done = subprocess.run(
                [NIX, "--extra-experimental-features", "nix-command", "hash", "path", str(top)],
                capture_output=True, text=True,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            assert done.stdout.strip() == ours


def test_a_tree_deeper_than_path_max_is_hashed_by_the_program() -> None:
    with deep_folder() as tmp_path:
        build_tree(tmp_path / "t", 3000, ["d"], [(3000, "file")])
        done = pinlock(["hash-path", str(tmp_path / "t")], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("sha256-") and "RecursionError" not in done.stderr


# --- snapshots whose blobs are gone ------------------------------------------------------------------------

FILES = ["config.json", "model.safetensors", "tokenizer.json", "generation_config.json", "vocab.txt"]


@fuzz(10)
@given(st.sets(st.sampled_from(FILES), min_size=1))
def test_each_file_whose_blob_is_gone_is_named_with_its_fix(gone: set[str]) -> None:
    with tempfile.TemporaryDirectory() as temp:
        tmp = Path(temp)
        checkout(tmp / "repo")
        hub_cache({name: f"content of {name}".encode() for name in FILES})(tmp)
        snap = tmp / "hub" / "models--Org--Name" / "snapshots" / REV
        for name in gone:
            (snap / name).resolve().unlink()
        done = pinlock(
            ["--root", str(tmp / "repo"), "weights", f"Org/Name@{REV}", "--snapshot", str(tmp / "hub")], tmp
        )
    assert done.returncode == 1, done.stderr
    assert f"{len(gone)} file(s) of its snapshots link to blobs that are no longer there" in done.stderr
    for name in FILES:
        fix = f"`hf download Org/Name {name} --revision {REV}`"
        assert (fix in done.stderr) == (name in gone), (name, done.stderr)


# --- a full disk --------------------------------------------------------------------------------------------


def _can_mount() -> bool:
    if shutil.which("unshare") is None:
        return False
    return (
        subprocess.run(
            ["unshare", "-m", "sh", "-c", "mount -t tmpfs tmpfs /mnt"], capture_output=True
        ).returncode
        == 0
    )


@pytest.mark.skipif(not _can_mount(), reason="mounting a tmpfs needs root (or user namespaces)")
def test_a_full_disk_names_the_pin_and_keeps_it(tmp_path: Path) -> None:
    root = checkout(tmp_path / "repo")
    manifests = root / "pkgs" / "weights" / "manifests"
    manifests.mkdir(parents=True)
    hub_cache({"config.json": b"{}", "model.safetensors": b"w"})(tmp_path)
    command = [
        sys.executable,
        "-m",
        "pinlock.cli",
        "--root",
        str(root),
        "weights",
        f"Org/Name@{REV}",
        "--snapshot",
        str(tmp_path / "hub"),
    ]
    script = (
        f"mount -t tmpfs -o size=64k tmpfs {manifests} && "
        f'(head -c 1M /dev/zero > {manifests}/.filler 2>/dev/null || true) && exec "$@"'
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script, "sh", *command],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert (
        f"cannot write {manifests}/Org--Name.json: No space left on device (the file system is full: free "
        "space on it); the file as it was is kept"
    ) in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


# --- offline ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("endpoint", "said"),
    [
        ("https://hub.invalid", "the name hub.invalid does not resolve"),
        ("http://127.0.0.1:1", "127.0.0.1:1: Connection refused"),
    ],
)
def test_offline_weights_fail_within_seconds_naming_the_hub(endpoint: str, said: str, tmp_path: Path) -> None:
    checkout(tmp_path / "repo")
    started = time.monotonic()
    env = {"HF_ENDPOINT": endpoint, "no_proxy": "*", "NO_PROXY": "*"}
    done = pinlock(["--root", str(tmp_path / "repo"), "weights", f"Org/Name@{REV}"], tmp_path, env)
    took = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    assert f"the Hub at {endpoint} cannot be reached from here: {said}" in done.stderr, done.stderr
    assert "is this machine online?" in done.stderr
    assert "--snapshot" in done.stderr and "retrying" not in done.stderr, done.stderr
    assert took < 20, f"{took:.1f}s"
