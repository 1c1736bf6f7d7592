"""A fingerprint of a local model folder, so results made with other weights or configs are not reused.

Files up to 1 MiB (configs, tokenizers) are hashed whole; larger ones (weights) by size, modification
time and their first and last 64 KiB (a safetensors header names every tensor, dtype and offset):
hashing tens of GB on every run would take minutes, and a rewrite in place changes the mtime."""

from __future__ import annotations

import hashlib
from pathlib import Path

WHOLE_LIMIT = 1 << 20
EDGE = 64 << 10


def model_fingerprint(folder: str | Path) -> str | None:
    """sha256 over the folder's files (hidden ones skipped); None when it is not a local folder."""
    root = Path(folder)
    if not root.is_dir():
        return None
    digest = hashlib.sha256()
    files = sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )
    for path in files:
        stat = path.stat()
        digest.update(f"{path.relative_to(root).as_posix()}\0{stat.st_size}\0".encode())
        with path.open("rb") as handle:
            if stat.st_size <= WHOLE_LIMIT:
                digest.update(hashlib.sha256(handle.read()).digest())
            else:
                head = handle.read(EDGE)
                handle.seek(-EDGE, 2)
                digest.update(f"{stat.st_mtime_ns}\0".encode() + head + handle.read(EDGE))
    return digest.hexdigest()
