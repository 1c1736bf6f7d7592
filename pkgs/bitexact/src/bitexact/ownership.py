"""Which files in an --out are bitexact's: those its manifest lists, never those whose names look like
bitexact's. Every file bitexact writes in --out (results, reports, a crash report, the `replaced/` folder
that keeps what a run set aside) is entered in `<out>/.bitexact-files` before it is first written,
so a crash after the write still finds it listed. The manifest is JSON Lines, a header and one line
per file, each appended whole (one write): taking a file costs no rewrite, and a line torn by a crash
names nothing. A file in --out that the manifest does not list is the
user's, whatever its name (`parity-notes.md` beside `parity.md`, a `golden-record.md` of their own):
bitexact never writes over it, and `--force` never moves it; a run that would need its name is refused,
naming the file and saying it stays untouched.

The manifest, the run record (`.bitexact-run.json`) and the lock (`.bitexact.lock`) are bitexact's own
control files, known by their fixed names; they are read only if they hold what bitexact writes."""

from __future__ import annotations

from pathlib import Path

from bitexact import strictjson
from bitexact.errors import UsageError
from bitexact.files import append_line, atomic_write_text, dumps, path_state, shown

MANIFEST = ".bitexact-files"
KIND = "bitexact-files"
ASIDE = "replaced"  # the folder in --out that keeps what bitexact set aside (its results, a --force move)


def owned(out: Path) -> set[str]:
    """The names (entries directly in `out`) that bitexact's manifest there lists; none without one. A
    manifest that is not bitexact's (unreadable, another kind) lists nothing: nothing is taken for ours."""
    path = out / MANIFEST
    if path_state(path) != "file":
        return set()
    try:
        lines = strictjson.lines(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, OSError):
        return set()
    entries = []
    for _, line in lines:
        try:
            entries.append(strictjson.loads(line))
        except strictjson.StrictJSONError:
            entries.append(None)  # a line torn by a crash: it names nothing
    if not entries or not isinstance(entries[0], dict) or entries[0].get("kind") != KIND:
        return set()
    names = (entry.get("file") for entry in entries[1:] if isinstance(entry, dict))
    return {name for name in names if isinstance(name, str) and name and "/" not in name}


def _line(name: str) -> str:
    return dumps({"file": name}) + "\n"


def _header() -> str:
    return dumps({"kind": KIND}) + "\n"


def _write(out: Path, names: set[str]) -> None:
    atomic_write_text(out / MANIFEST, _header() + "".join(_line(name) for name in sorted(names)))


def _refusal(path: Path) -> UsageError:
    return UsageError(
        f"--out {shown(path.parent)}: {shown(path.name)} is there and is not bitexact's (no bitexact run "
        f"entered it in {MANIFEST}), so it stays untouched and this run cannot write its file of that "
        "name; give another --out, or move that file out of the way yourself"
    )


def take(path: Path) -> Path:
    """Make `path` (an entry directly in an --out) bitexact's before it is first written: entered in the
    manifest if nothing is there; a UsageError if something is there that the manifest does not list."""
    out, name = path.parent, path.name
    names = owned(out)
    if name in names:
        return path
    if path.exists() or path.is_symlink():
        raise _refusal(path)
    manifest = out / MANIFEST
    fresh = not names and (path_state(manifest) != "file" or manifest.stat().st_size == 0)
    if not names and not fresh:  # a manifest bitexact cannot read lists nothing: start it anew
        _write(out, set())
    append_line(manifest, (_header() if fresh else "") + _line(name), "bitexact's earlier files stay listed")
    return path


def aside_folder(out: Path) -> Path:
    """`<out>/replaced`, bitexact's: taken as `take` takes a file (a folder of the user's of that name is
    refused, never written into)."""
    return take(out / ASIDE)


def ours_there(out: Path) -> list[Path]:
    """The entries of `out` its manifest lists that are there (its control files aside)."""
    names = owned(out)
    return [out / name for name in sorted(names) if (out / name).exists() or (out / name).is_symlink()]


def not_ours(out: Path, skip: tuple[str, ...]) -> list[str]:
    """The names in `out` that the manifest does not list (the user's), bitexact's control files aside."""
    names = owned(out)
    return sorted(e.name for e in out.iterdir() if e.name not in names and e.name not in (*skip, MANIFEST))


def forget(out: Path, gone: set[str]) -> None:
    """The manifest without `gone` (moved aside by --force: no longer in --out)."""
    _write(out, owned(out) - gone)
