"""Weights manifests from a local Hugging Face hub cache, read through huggingface_hub and verified
against the content before anything is pinned.

`--snapshot` names the hub cache (`~/.cache/huggingface/hub`), a repo in it (`models--ORG--NAME`) or one
of its snapshots (`models--ORG--NAME/snapshots/REV`). `scan_cache_dir` says which repos, revisions and
refs the cache holds and which blob each snapshot file links to; the repo and revision asked for must be
the ones found (a revision not given is the snapshot's, or what `refs/main` names). huggingface_hub names
a blob by its etag: the sha256 for an LFS file, the git blob id for the others, so every file is hashed
and must match its blob's name (a truncated download does not). Where huggingface_hub recorded the
commit's file listing (`get_cached_repo_tree`, written by `snapshot_download` from 1.x on), every listed
file must be present with its listed size; a `*.safetensors.index.json` must find all its shards.

A directory downloaded with `--local-dir` records no repo id, so it is refused: download into the cache.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import huggingface_hub
from huggingface_hub import scan_cache_dir
from huggingface_hub.utils import CachedRepoInfo, CachedRevisionInfo

from pinlock import hub
from pinlock.hf import HEX40, HEX64, content_ids, is_revision, manifest, revision_problem
from pinlock.pins import PinError, UsageError

_KINDS = ("models--", "datasets--", "spaces--")
# Files that hold weights, as the Hub's model repos store them.
# A shard of split weights, as transformers names them: `model-00001-of-00002.safetensors`.
SHARD = re.compile(r"(?P<stem>.+)-(?P<number>[0-9]+)-of-(?P<count>[0-9]+)(?P<ext>\.[A-Za-z0-9]+)")
INDEXED = (".safetensors", ".bin")  # shards loaded through an index file (`<stem><ext>.index.json`)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt", ".h5", ".msgpack")


@dataclass(frozen=True)
class Located:
    """The repo and revision a --snapshot path resolved to, in the cache that holds them."""

    cache: Path
    revision: CachedRevisionInfo

    @property
    def commit(self) -> str:
        return str(self.revision.commit_hash)


def folder_name(repo: str) -> str:
    """huggingface_hub's folder for a model repo: `models--ORG--NAME`."""
    return "models--" + repo.replace("/", "--")


def _fix(repo: str, revision: str | None) -> str:
    rev = f" --revision {revision}" if revision else ""
    return (
        f"download it into the hub cache (`hf download {repo}{rev}`) and point --snapshot at the cache "
        f"(~/.cache/huggingface/hub), at {folder_name(repo)} or at its snapshots/<rev>, or drop --snapshot "
        "to read the Hub"
    )


def _classify(path: Path) -> tuple[Path, Path | None, str | None]:
    """(cache, repo folder or None, revision named by the path or None) of a --snapshot path."""
    if path.parent.name == "snapshots" and path.parent.parent.name.startswith(_KINDS):
        return path.parents[2], path.parent.parent, path.name
    if path.name.startswith(_KINDS) and (path / "snapshots").is_dir():
        return path.parent, path, None
    if any(child.name.startswith(_KINDS) and child.is_dir() for child in path.iterdir()):
        return path, None, None
    return path, None, ""


def locate(path: Path, repo: str, revision: str | None) -> Located:
    """The snapshot of repo@revision that `path` names; UsageError when it names another repo or
    revision, or is no hub cache (the message names both and the fix)."""
    if not path.exists():
        raise UsageError(f"--snapshot {path} does not exist: {_fix(repo, revision)}")
    if not path.is_dir():
        raise UsageError(f"--snapshot {path} is not a directory: {_fix(repo, revision)}")
    cache, folder, path_revision = _classify(path.resolve())
    if path_revision == "":
        raise UsageError(
            f"--snapshot {path} is not a Hugging Face hub cache, nor a repo or a snapshot in one "
            f"(.../{folder_name(repo)}/snapshots/<rev>); a --local-dir download records no repo id, so "
            f"it cannot be checked: {_fix(repo, revision)}"
        )
    info = scan_cache_dir(cache)
    repos = {r.repo_path.resolve(): r for r in info.repos}
    if folder is not None and folder.name != folder_name(repo):
        found = repos.get(folder)
        other = found.repo_id if found is not None else folder.name
        raise UsageError(
            f"--snapshot {path} holds {other} ({folder.name}), not {repo} ({folder_name(repo)}): point "
            f"--snapshot at {cache / folder_name(repo)}, or ask for {other}"
        )
    target = repos.get((cache / folder_name(repo)).resolve())
    if target is None or target.repo_type != "model":
        _refuse_padded_refs(cache / folder_name(repo))
        corrupt = [w for w in info.warnings if folder_name(repo) in str(w)]
        gone = _dangling(cache / folder_name(repo))
        if gone:
            listed = "\n  ".join(
                f"{rev[:12]}/{rel} links to {blob}, which is gone: fetch it again with "
                f"`hf download {repo} {rel} --revision {rev}`"
                for rev, rel, blob in gone
            )
            raise PinError(
                f"{repo} in {cache}: {len(gone)} file(s) of its snapshots link to blobs that are no longer "
                "there (deleted, or the cache was copied without its blobs/ folder), nothing pinned:\n  "
                + listed
            )
        if corrupt:
            raise PinError(f"{repo} in {cache}: huggingface_hub finds the cache corrupted: {corrupt[0]}")
        held = sorted(r.repo_id for r in info.repos) or ["nothing"]
        raise UsageError(
            f"the hub cache {cache} holds no {repo} (it holds {', '.join(held)}): {_fix(repo, revision)}"
        )
    return Located(cache, _revision(path, target, path_revision, revision))


def _dangling(folder: Path) -> list[tuple[str, str, str]]:
    """(revision, file, blob) for each snapshot file of a repo folder whose link leads to no file."""
    out = []
    snapshots = folder / "snapshots"
    if not snapshots.is_dir():
        return out
    for rev in sorted(os.listdir(snapshots)):
        for here, _, names in os.walk(snapshots / rev):  # os.walk iterates: no depth limit
            for name in sorted(names):
                path = Path(here) / name
                if path.is_symlink() and not path.exists():
                    rel = path.relative_to(snapshots / rev).as_posix()
                    out.append((rev, rel, os.path.normpath(os.path.join(here, os.readlink(path)))))
    return out


def _refuse_padded_refs(folder: Path) -> None:
    """huggingface_hub (2.4) reads a ref byte for byte: `refs/main` written with a trailing newline names no
    commit it has, and it drops the whole repo from the scan. Say so, naming the file."""
    refs = folder / "refs"
    if not refs.is_dir():
        return
    for ref in sorted(p for p in refs.rglob("*") if p.is_file()):
        raw = ref.read_bytes()
        if raw != raw.strip():
            name = ref.relative_to(refs).as_posix()
            raise UsageError(
                f"{ref} holds {raw!r}: a commit with white space around it, which huggingface_hub reads as "
                f"another name and so drops {folder.name} from the cache; write it without the newline "
                f"(`printf %s {raw.strip().decode(errors='replace')} > {ref}`) and run again (ref {name})"
            )


def _revision(
    path: Path, repo: CachedRepoInfo, path_revision: str | None, asked: str | None
) -> CachedRevisionInfo:
    cached = {str(r.commit_hash): r for r in repo.revisions}
    refs = {name: str(r.commit_hash) for name, r in repo.refs.items()}
    listing = ", ".join(c[:12] + "".join(f" ({n})" for n in sorted(cached[c].refs)) for c in sorted(cached))
    if path_revision is not None:
        if not is_revision(path_revision):
            raise UsageError(
                f"--snapshot {path}: snapshots/{path_revision}: {revision_problem(path_revision)}"
            )
        if asked is not None and asked != path_revision:
            raise UsageError(
                f"--snapshot {path} is {repo.repo_id}@{path_revision}, not the revision asked for, {asked}: "
                f"point --snapshot at {repo.repo_path / 'snapshots' / asked}, or ask for @{path_revision}"
            )
        asked = path_revision
    elif asked is None:
        asked = refs.get("main")
        if asked is None:
            raise UsageError(
                f"{repo.repo_path} has no refs/main to say which revision: give {repo.repo_id}@REV "
                f"(cached: {listing or 'none'})"
            )
    if asked not in cached:
        raise UsageError(
            f"{repo.repo_id}@{asked} is not in {repo.repo_path} (cached: {listing or 'none'}): "
            f"`hf download {repo.repo_id} --revision {asked}`"
        )
    return cached[asked]


def _listing(located: Located, repo: str) -> dict[str, int] | None:
    """{path: size} of the commit as huggingface_hub recorded it, or None where it recorded none."""
    reader = getattr(huggingface_hub, "get_cached_repo_tree", None)  # huggingface_hub >= 1.x
    if reader is None:
        return None
    try:
        files = reader(repo, revision=located.commit, cache_dir=located.cache)
    except Exception:  # CachedRepoTreeNotFoundError: downloaded file by file, never listed
        return None
    return {f.path: f.size for f in files}


def manifest_from_cache(
    located: Located,
    repo: str,
    progress: Callable[[str, int], Callable[[int], None]] | None = None,
    note: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The manifest of the located snapshot, every file verified; PinError naming each file that fails."""
    snapshot = Path(located.revision.snapshot_path)
    problems: list[str] = []
    files: list[dict[str, Any]] = []
    for cached in sorted(located.revision.files, key=lambda f: str(f.file_path)):
        rel = Path(cached.file_path).relative_to(snapshot).as_posix()
        blob = Path(cached.blob_path)
        path = Path(cached.file_path)
        report = progress(rel, path.stat().st_size) if progress else None
        sha256, blob_id, size = content_ids(path, report)
        etag = blob.name
        if HEX64.fullmatch(etag):
            lfs, matches, kind = True, sha256 == etag, "sha256"
        elif HEX40.fullmatch(etag):
            lfs, matches, kind = False, blob_id == etag, "git blob id"
        else:
            problems.append(f"{rel}: its blob {blob} is named neither by a sha256 nor by a git blob id")
            continue
        if not matches:
            got = sha256 if lfs else blob_id
            problems.append(
                f"{rel}: {size} bytes whose {kind} is {got}, but huggingface_hub named its blob {etag} (the "
                f"{kind} the Hub gave): a truncated or corrupted download, or an edit; delete {blob} and run "
                f"`hf download {repo} {rel} --revision {located.commit}`"
            )
        files.append({"path": rel, "size": size, "sha256": sha256, "lfs": lfs})
    problems += _completeness(located, repo, {f["path"]: f["size"] for f in files}, snapshot, note)
    if problems:
        raise PinError(f"{repo}@{located.commit} in {snapshot}, nothing pinned:\n  " + "\n  ".join(problems))
    if not files:
        raise PinError(f"{snapshot} holds no files: {_fix(repo, located.commit)}")
    return manifest(repo, located.commit, files, str(snapshot))


def _completeness(
    located: Located, repo: str, sizes: dict[str, int], snapshot: Path, note: Callable[[str], None] | None
) -> list[str]:
    problems = []
    listing, source = _listing(located, repo), "the commit's cached listing"
    if listing is None:
        listing, why = hub.listing_once(repo, located.commit)
        source = "the Hub's listing of the commit"
        if listing is None and note:
            note(
                f"{snapshot}: huggingface_hub recorded no file listing for this commit and the Hub could "
                f"not be asked ({why}), so a file never downloaded can only be noticed through the "
                "snapshot's own safetensors index and its shards' names"
            )
    if listing is None:
        if not any(p.endswith(WEIGHT_SUFFIXES) for p in sizes):
            problems.append(
                f"it holds no weights ({', '.join(sorted(sizes)) or 'no files'}; none ends with "
                f"{', '.join(WEIGHT_SUFFIXES)}): a partial download; `hf download {repo} --revision "
                f"{located.commit}` fetches the rest"
            )
        # Without a listing, the shards' own names say how many there are and which index loads them.
        problems += [
            f"{p}; `hf download {repo} --revision {located.commit}` fetches it" for p in shards_by_name(sizes)
        ]
    else:
        missing = sorted(set(listing) - set(sizes))
        if missing:
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            problems.append(
                f"{source} names {len(missing)} file(s) the snapshot lacks: {shown}; "
                f"`hf download {repo} --revision {located.commit}` fetches them"
            )
        for path in sorted(set(sizes) & set(listing)):
            if sizes[path] != listing[path]:
                problems.append(f"{path}: {sizes[path]} bytes, {source} says {listing[path]}")
        for path in sorted(set(sizes) - set(listing)):
            problems.append(f"{path} is not in {source}")
    for path in sorted(p for p in sizes if p.endswith(".safetensors.index.json")):
        problems += _shards_missing(snapshot, path, sizes)
    return problems


def shards_by_name(present: dict[str, int] | set[str]) -> list[str]:
    """What a set of sharded weights (`model-00001-of-00002.safetensors`) lacks by its names: the other
    shards, and the index (`model.safetensors.index.json`) through which transformers and SGLang find them."""
    groups: dict[tuple[str, str, str], set[int]] = {}
    for path in present:
        found = SHARD.fullmatch(path)
        if found:
            groups.setdefault((found["stem"], found["ext"], found["count"]), set()).add(int(found["number"]))
    problems = []
    for (stem, ext, count), numbers in sorted(groups.items()):
        total, width = int(count), len(count)
        strays = sorted(n for n in numbers if not 1 <= n <= total)
        if strays:
            problems.append(f"{stem}-{strays[0]:0{width}d}-of-{count}{ext} is no shard of {total}")
        lacking = total - len(numbers) + len(strays)
        if lacking > 0:
            absent = itertools.islice((n for n in range(1, total + 1) if n not in numbers), 5)
            shown = ", ".join(f"{stem}-{n:0{width}d}-of-{count}{ext}" for n in absent)
            more = f" and {lacking - 5} more" if lacking > 5 else ""
            problems.append(f"the shards' names say there are {total}, the snapshot lacks {shown}{more}")
        index = f"{stem}{ext}.index.json"
        if ext in INDEXED and index not in present:
            problems.append(f"sharded weights {stem}-*-of-{count}{ext} without their index {index}")
    return problems


def _shards_missing(snapshot: Path, index: str, present: dict[str, int]) -> list[str]:
    try:
        weight_map = json.loads((snapshot / index).read_text())["weight_map"]
        shards = sorted(set(weight_map.values()))
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        return [f"{index}: not a safetensors index ({error})"]
    base = str(Path(index).parent)
    named = [shard if base == "." else f"{base}/{shard}" for shard in shards]
    return [f"{index} names {shard}, which the snapshot lacks" for shard in named if shard not in present]
