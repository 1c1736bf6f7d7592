"""Unpack a source tarball the way Nix's fetchers see it: one top-level directory stripped, only the
executable bit kept, symlinks as they are. The tree is then NAR-hashed (nar.py).
"""

from __future__ import annotations

import os
import posixpath
import shutil
import tarfile
from pathlib import Path

from pinlock.pins import write_problem


class UnpackError(ValueError):
    """The archive cannot be unpacked safely or does not have the expected shape."""


def _member_path(name: str) -> str:
    """The member's path, normalised; refuses absolute paths and `..` escapes."""
    clean = posixpath.normpath(name)
    if clean.startswith("/") or clean == ".." or clean.startswith("../"):
        raise UnpackError(f"archive member {name!r} escapes the destination")
    return clean


def unpack_tarball(archive: Path, dest: Path) -> Path:
    """Unpack `archive` (any compression tarfile knows) under `dest`; return the single top-level
    directory (as Nix's unpack does for GitHub tarballs). `dest` must not exist yet."""
    dest.mkdir(parents=True)
    root = dest.resolve()
    files: dict[str, Path] = {}
    with tarfile.open(archive, "r:*") as tar:
        for member in tar:
            rel = _member_path(member.name)
            if rel == ".":
                continue
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.parent.resolve().is_relative_to(root):
                raise UnpackError(f"archive member {member.name!r} is written through a symlink")
            if member.isdir():
                target.mkdir(exist_ok=True)
            elif member.issym():
                if target.exists() or target.is_symlink():
                    target.unlink()
                os.symlink(member.linkname, target)
            elif member.islnk():
                source = files.get(_member_path(member.linkname))
                if source is None:
                    raise UnpackError(f"hard link {member.name!r} points to unknown {member.linkname!r}")
                shutil.copyfile(source, target, follow_symlinks=False)
                target.chmod(0o755 if source.stat().st_mode & 0o100 else 0o644)
                files[rel] = target
            elif member.isreg():
                extracted = tar.extractfile(member)
                if extracted is None:
                    raise UnpackError(f"cannot read {member.name!r} from {archive}")
                try:
                    with extracted, target.open("wb") as out:
                        shutil.copyfileobj(extracted, out, 1 << 20)
                except OSError as error:
                    raise UnpackError(f"unpacking {archive}: {write_problem(error, target)}") from None
                target.chmod(0o755 if member.mode & 0o100 else 0o644)
                files[rel] = target
            else:
                raise UnpackError(f"{archive}: member {member.name!r} is neither file, directory nor link")
    entries = list(dest.iterdir())
    if len(entries) != 1 or not entries[0].is_dir() or entries[0].is_symlink():
        names = sorted(e.name for e in entries)[:5]
        raise UnpackError(f"{archive}: expected one top-level directory, found {names}")
    return entries[0]


def git_export_caveats(tree: Path) -> list[str]:
    """Reasons a tarball's tree may differ from a git checkout of the same commit (fetchgit's view):
    export-ignore / export-subst attributes rewrite the archive, and submodules are not in it."""
    reasons: list[str] = []
    for attributes in tree.rglob(".gitattributes"):
        text = attributes.read_text(errors="replace")
        for word in ("export-ignore", "export-subst"):
            if word in text:
                reasons.append(f"{attributes.relative_to(tree)} uses {word}")
    if (tree / ".gitmodules").exists():
        reasons.append(".gitmodules: the repository has submodules, which a tarball lacks")
    return reasons
