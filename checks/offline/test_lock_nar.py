"""pinlock.nar against Debian's real Nix: `nix-store --dump`, `nix hash path`, `nix-hash --base32`."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from checkhelpers.lock_testing import nix
from pinlock.nar import from_sri, nar_hash, nar_sha256, nar_stream, nix32, sri


def build_tree(root: Path) -> Path:
    """Every kind of node a NAR records, with names whose byte order differs from other orders."""
    root.mkdir()
    (root / "empty-file").write_bytes(b"")
    (root / "seven").write_bytes(b"1234567")  # padding to 8
    (root / "eight").write_bytes(b"12345678")  # no padding
    (root / "big.bin").write_bytes(os.urandom(3 * (1 << 20) + 5))  # several read chunks
    tool = root / "bin" / "tool"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\necho hi\n")
    tool.chmod(0o755)
    (root / "bin" / "group-exec-only").write_text("x")
    (root / "bin" / "group-exec-only").chmod(0o654)  # Nix looks at the owner's x bit only
    nested = root / "a" / "b" / "c"
    nested.mkdir(parents=True)
    (nested / "deep.txt").write_text("deep\n")
    (root / "empty-dir").mkdir()
    (root / "a" / "empty-inner").mkdir()
    for name in ("B", "a.b", "a-b", "a_b", "Z", "\u00e4", "10", "9"):
        (root / "names").mkdir(exist_ok=True)
        (root / "names" / name).write_text(name)
    (root / "link-rel").symlink_to("a/b/c/deep.txt")
    (root / "link-dir").symlink_to("a/b")
    (root / "link-abs").symlink_to("/etc/hostname")
    (root / "link-dangling").symlink_to("does/not/exist")
    return root


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tree(tmp_path_factory.mktemp("nar") / "tree")


@pytest.mark.nix
def test_nar_bytes_equal_nix_store_dump(tree: Path) -> None:
    assert b"".join(nar_stream(tree)) == subprocess_dump(tree)


@pytest.mark.nix
def test_sri_equals_nix_hash_path(tree: Path) -> None:
    assert nar_hash(tree) == nix("nix", "hash", "path", "--type", "sha256", str(tree))


@pytest.mark.nix
def test_base32_equals_nix_hash(tree: Path) -> None:
    expected = nix("nix-hash", "--type", "sha256", "--base32", str(tree))
    assert nix32(nar_sha256(tree)) == expected


@pytest.mark.nix
@pytest.mark.parametrize("name", ["empty-file", "big.bin", "bin/tool", "empty-dir", "a", "link-rel"])
def test_subpaths_equal_nix(tree: Path, name: str) -> None:
    path = tree / name
    assert nar_hash(path) == nix("nix", "hash", "path", str(path))


@pytest.mark.nix
def test_executable_bit_and_content_change_the_hash(tree: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(tree, copy, symlinks=True)
    assert nar_hash(copy) == nar_hash(tree)
    (copy / "seven").chmod(0o755)
    flipped = nar_hash(copy)
    assert flipped != nar_hash(tree)
    assert flipped == nix("nix", "hash", "path", str(copy))
    (copy / "seven").chmod(0o644)
    (copy / "seven").write_bytes(b"1234568")
    assert nar_hash(copy) != nar_hash(tree)


@pytest.mark.nix
def test_nix32_of_random_digests_equals_nix() -> None:
    for _ in range(5):
        digest = hashlib.sha256(os.urandom(16)).digest()
        expected = nix("nix", "hash", "to-base32", sri(digest))
        assert nix32(digest) == expected


def test_from_sri_round_trip_and_errors() -> None:
    digest = hashlib.sha256(b"x").digest()
    assert from_sri(sri(digest)) == digest
    for bad in ("sha512-" + sri(digest)[7:], "sha256-AAAA", "nope", "sha256-!!!"):
        with pytest.raises(ValueError):
            from_sri(bad)


def test_sockets_and_fifos_are_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ValueError, match="only files, directories and symlinks"):
        nar_hash(tmp_path)


def subprocess_dump(path: Path) -> bytes:
    """`nix-store --dump PATH`: Nix's own NAR serialisation (binary, so not through nix())."""
    nix("nix-store", "--version")
    return subprocess.run(["nix-store", "--dump", str(path)], check=True, capture_output=True).stdout
