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


def _file_contents(path: Path, size: int) -> Iterator[bytes]:
    yield size.to_bytes(8, "little")
    written = 0
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            written += len(chunk)
            yield chunk
    if written != size:
        raise OSError(f"{path} changed size while being hashed ({size} -> {written} bytes)")
    yield _pad(size)


def _node(path: Path) -> Iterator[bytes]:
    info = path.lstat()
    yield _str(b"(")
    if stat.S_ISLNK(info.st_mode):
        yield _str(b"type") + _str(b"symlink") + _str(b"target") + _str(os.fsencode(os.readlink(path)))
    elif stat.S_ISREG(info.st_mode):
        yield _str(b"type") + _str(b"regular")
        if info.st_mode & stat.S_IXUSR:
            yield _str(b"executable") + _str(b"")
        yield _str(b"contents")
        yield from _file_contents(path, info.st_size)
    elif stat.S_ISDIR(info.st_mode):
        yield _str(b"type") + _str(b"directory")
        for name in sorted(os.listdir(os.fsencode(path))):
            yield _str(b"entry") + _str(b"(") + _str(b"name") + _str(name) + _str(b"node")
            yield from _node(path / os.fsdecode(name))
            yield _str(b")")
    else:
        raise ValueError(f"{path}: a NAR holds only files, directories and symlinks")
    yield _str(b")")


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
