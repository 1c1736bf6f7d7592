"""NAR serialisation and hashing of a filesystem tree, as `nix hash path` computes it (no Nix needed).

A NAR records, per node, only its type, the executable bit of regular files, file contents, symlink
targets and directory entries sorted by name (bytes). Every string is written as a little-endian u64
length, the bytes, and zero padding to a multiple of 8.
"""

from __future__ import annotations

import base64
import hashlib
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

_CHUNK = 1 << 20
# Nix's base32 alphabet (no e, o, u, t); digits are emitted from the last byte's end, see nix32().
_NIX32 = "0123456789abcdfghijklmnpqrsvwxyz"


def _pad(length: int) -> bytes:
    return b"\0" * (-length % 8)


def _str(data: bytes) -> bytes:
    return len(data).to_bytes(8, "little") + data + _pad(len(data))


def _file_contents(fd: int, path: Path, size: int) -> Iterator[bytes]:
    yield size.to_bytes(8, "little")
    written = 0
    with os.fdopen(fd, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            written += len(chunk)
            yield chunk
    if written != size:
        raise OSError(f"{path} changed size while being hashed ({size} -> {written} bytes)")
    yield _pad(size)


def _leaf(folder: int | None, name: bytes, path: Path, info: os.stat_result) -> Iterator[bytes]:
    """A node that holds no other (a symlink or a regular file), whole, with its closing parenthesis;
    `name` is opened relative to the descriptor `folder` (None: `name` is a path)."""
    yield _str(b"(")
    if stat.S_ISLNK(info.st_mode):
        target = os.readlink(name, dir_fd=folder)
        yield _str(b"type") + _str(b"symlink") + _str(b"target") + _str(os.fsencode(target))
    elif stat.S_ISREG(info.st_mode):
        yield _str(b"type") + _str(b"regular")
        if info.st_mode & stat.S_IXUSR:
            yield _str(b"executable") + _str(b"")
        yield _str(b"contents")
        yield from _file_contents(
            os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=folder), path, info.st_size
        )
    else:
        raise ValueError(f"{path}: a NAR holds only files, directories and symlinks")
    yield _str(b")")


def _open_folder(folder: int | None, name: bytes) -> tuple[int, list[bytes]]:
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=folder)
    return fd, sorted(os.fsencode(name) for name in os.listdir(fd))  # by bytes, as Nix sorts


def _node(path: Path) -> Iterator[bytes]:
    """The NAR of `path`, walked with a stack of open directories rather than by recursion, each entry
    opened relative to its folder's descriptor: a tree of any depth is hashed (a recursive walk stops with
    RecursionError about a thousand folders down; full paths past PATH_MAX cannot even be stat'ed)."""
    info = path.lstat()
    top = os.fsencode(path)
    if not stat.S_ISDIR(info.st_mode):
        yield from _leaf(None, top, path, info)
        return
    yield _str(b"(") + _str(b"type") + _str(b"directory")
    fd, names = _open_folder(None, top)
    stack: list[tuple[int, Path, Iterator[bytes]]] = [(fd, path, iter(names))]
    try:
        while stack:
            fd, folder, entries = stack[-1]
            name = next(entries, None)
            if name is None:
                os.close(fd)
                stack.pop()
                yield _str(b")")  # the directory's node
                if stack:
                    yield _str(b")")  # the entry that held it
                continue
            child = folder / os.fsdecode(name)
            yield _str(b"entry") + _str(b"(") + _str(b"name") + _str(name) + _str(b"node")
            info = os.lstat(name, dir_fd=fd)
            if stat.S_ISDIR(info.st_mode):
                yield _str(b"(") + _str(b"type") + _str(b"directory")
                child_fd, child_names = _open_folder(fd, name)
                stack.append((child_fd, child, iter(child_names)))
            else:
                yield from _leaf(fd, name, child, info)
                yield _str(b")")
    finally:
        for fd, _, _ in stack:
            os.close(fd)


def nar_stream(path: Path) -> Iterator[bytes]:
    """The NAR serialisation of `path` (not followed if it is a symlink), in chunks."""
    yield _str(b"nix-archive-1")
    yield from _node(path)


def nar_sha256(path: Path, progress: Callable[[int], None] | None = None) -> bytes:
    """sha256 digest of the NAR of `path`; `progress` gets the bytes hashed so far."""
    digest = hashlib.sha256()
    done = 0
    for chunk in nar_stream(path):
        digest.update(chunk)
        done += len(chunk)
        if progress is not None:
            progress(done)
    return digest.digest()


def sri(digest: bytes, algo: str = "sha256") -> str:
    """SRI form, e.g. `sha256-<base64>` (what flake.lock and `hash =` take)."""
    return f"{algo}-{base64.b64encode(digest).decode()}"


def nix32(digest: bytes) -> str:
    """Nix's base32 form (what `nix-hash --base32` prints)."""
    length = (len(digest) * 8 + 4) // 5
    out = []
    for n in range(length - 1, -1, -1):
        bit = n * 5
        i, j = divmod(bit, 8)
        c = digest[i] >> j
        if i + 1 < len(digest):
            c |= digest[i + 1] << (8 - j)
        out.append(_NIX32[c & 0x1F])
    return "".join(out)


def from_sri(text: str) -> bytes:
    """The digest in an SRI sha256 string; ValueError naming the problem otherwise."""
    algo, sep, b64 = text.partition("-")
    if algo != "sha256" or not sep:
        raise ValueError(f"not an SRI sha256 hash: {text!r}")
    digest = base64.b64decode(b64, validate=True)
    if len(digest) != 32:
        raise ValueError(f"not an SRI sha256 hash (digest is {len(digest)} bytes): {text!r}")
    return digest


def nar_hash(path: Path) -> str:
    """`nix hash path --type sha256 PATH`, in SRI form."""
    return sri(nar_sha256(path))
