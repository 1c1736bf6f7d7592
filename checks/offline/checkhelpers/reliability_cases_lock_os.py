"""Catalogue rows of pinlock against the operating system: a snapshot whose blob is gone, a tree deeper
than Python's recursion (and PATH_MAX), and the Hub out of reach. A full disk is
test_lock_oserrors.py's (it mounts a full tmpfs over the pins' folder, which the catalogue's runner
cannot place inside a checkout)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from checkhelpers.reliability_setup import REV, SMALL_HUB, Case, both, checkout

SNAPSHOT = ("--root", "{tmp}/repo", "weights", "Org/Name@" + REV, "--snapshot", "{tmp}/hub")


def blob_gone(tmp: Path) -> None:
    """The snapshot's model.safetensors links to a blob that was deleted."""
    link = tmp / "hub" / "models--Org--Name" / "snapshots" / REV / "model.safetensors"
    link.resolve().unlink()


def deep_tree(tmp: Path) -> None:
    """{tmp}/t: a chain of 3000 folders with a file at the bottom, made through folder descriptors."""
    (tmp / "t").mkdir()
    fd = os.open(tmp / "t", os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(3000):
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    os.close(fd)


def remove_deep_tree(tmp: Path) -> str | None:
    """Python's rmtree recurses: the runner's cleanup would stop in the tree; rm -rf does not."""
    subprocess.run(["rm", "-rf", str(tmp / "t")], check=True)
    return None


CASES: list[Case] = [
    Case(
        "pl-blob-gone",
        "pinlock",
        "--snapshot of a cache whose blob was deleted (named without the fix)",
        SNAPSHOT,
        1,
        r"Org/Name in .*/hub: 1 file\(s\) of its snapshots link to blobs that are no longer there .*"
        r"aaaaaaaaaaaa/model.safetensors links to .*/blobs/[0-9a-f]{40}, which is gone: fetch it again with "
        r"`hf download Org/Name model.safetensors --revision a{40}`",
        both(checkout(), SMALL_HUB, blob_gone),
    ),
    Case(
        "pl-deep-tree",
        "pinlock",
        "hash-path of a tree 3000 folders deep (a RecursionError)",
        ("hash-path", "{tmp}/t"),
        0,
        r"^sha256-[A-Za-z0-9+/]{43}=$",
        deep_tree,
        check=remove_deep_tree,
    ),
    Case(
        "pl-hub-unreachable",
        "pinlock",
        "weights from the Hub on a machine that cannot reach it (it took 4.5 minutes to say so)",
        ("--root", "{tmp}/repo", "weights", "Org/Name@" + REV),
        1,
        r"the Hub at https://hub.invalid cannot be reached from here: the name hub.invalid does not resolve "
        r".*; is this machine online\? Run where the Hub is reachable, or pin from a local hub cache: "
        r"pinlock weights Org/Name@a{40} --snapshot",
        checkout(),
        env={"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "https://hub.invalid", "no_proxy": "*", "NO_PROXY": "*"},
    ),
]
