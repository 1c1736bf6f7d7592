"""A golden write as one transaction: a lock on the golden for the whole record, every destination proven
writable before the engine runs, and the golden, its reports and its history line landing together or
not at all.

The lock is an flock(2) on `.<golden name>.lock` beside the golden, held from before the run to after the
write: a second record of the same card and recipe is refused at its start, naming the holder; the kernel
drops the lock when its holder exits however it exits, so a stale file never blocks. The lock file is
removed when the record ends (a lock taken on a file that was removed meanwhile is taken again), and so
is a card folder that only the lock had made: a failed record of a new card leaves no folder that would
make the card look known.

`Landing` stages every file under a temporary name in its own folder (a full disk shows here, while
nothing is placed), renames them into place in order, keeping a link to each file it replaces, and
appends the history line last. Any failure puts back what was there before (the old golden under
--force, the old reports), truncates a torn history line, and removes the temporary files: the fix the
error names is followed by the same command, which never meets "golden exists"."""

from __future__ import annotations

import datetime
import errno
import fcntl
import json
import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from bitexact.errors import UsageError
from bitexact.files import SHOWN, OutputError, describe_os_error, holder_text, shown

UNDONE = (
    "nothing of this record was kept (the golden, its reports and its history line land together or not "
    "at all; a golden it replaces is back in place); fix that and rerun the same command"
)


def _nearest_folder(path: Path) -> Path:
    """The nearest folder at or above `path` that exists (where the missing ones would be made)."""
    for folder in [path, *path.parents]:
        if folder.is_dir():
            return folder
    return Path("/")


def probe_folder(folder: Path, option: str, named: Path | None = None) -> None:
    """Prove, before anything runs, that a file can be written in `folder` (or, where it is missing, in
    the nearest folder above it, where it would be made): one byte, fsynced, then removed. A read-only
    or full file system, or a folder without write permission, is a UsageError naming `option` and the
    path given (`named`: the file to be made there, else the folder)."""
    where = _nearest_folder(folder)
    probe = where / f".bitexact-probe-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as error:
        raise UsageError(
            f"{option} {shown(named or folder)}: cannot write there: {describe_os_error(error, option)}; "
            "checked before the run, so nothing ran"
        ) from None
    finally:
        try:
            probe.unlink()
        except OSError:
            pass


def probe_append(path: Path, option: str) -> None:
    """An existing file that a line will be appended to can be opened for appending now (nothing is
    written: a full disk then shows at the landing, which undoes the record); a missing one is proven by
    its folder."""
    if not path.exists():
        probe_folder(path.parent, option, path)
        return
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_APPEND))
    except OSError as error:
        raise UsageError(
            f"{option} {shown(path)}: cannot append to it: {describe_os_error(error, option)}; checked "
            "before the run, so nothing ran"
        ) from None


def _make_folders(folder: Path, made: list[Path]) -> None:
    """mkdir -p, remembering (in `made`, outermost first) each folder it made."""
    missing = []
    for current in [folder, *folder.parents]:
        if current.is_dir():
            break
        missing.append(current)
    for current in reversed(missing):
        current.mkdir()
        made.append(current)


def _remove_made(made: list[Path]) -> None:
    """The folders in `made` that are still empty, innermost first."""
    for folder in reversed(made):
        try:
            folder.rmdir()
        except OSError:
            pass
    made.clear()


class GoldenLock:
    """One record per golden at a time: an exclusive flock on `.<name>.lock` beside it for the record's
    life, naming its holder (pid, host, start, command line)."""

    def __init__(self, golden: Path) -> None:
        self.golden = golden
        self.path = golden.with_name(f".{golden.name}.lock")
        self.fd: int | None = None
        self.made: list[Path] = []

    def __enter__(self) -> GoldenLock:
        try:
            _make_folders(self.path.parent, self.made)
        except OSError as error:
            raise UsageError(
                f"golden {shown(self.golden)}: cannot make its folder: "
                f"{describe_os_error(error, '--golden-dir/--golden')}"
            ) from None
        while True:
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 4096, 0).decode("utf-8", errors="replace")
                os.close(fd)
                _remove_made(self.made)
                raise UsageError(
                    f"golden {shown(self.golden)} is being recorded by another bitexact run "
                    f"({holder_text(holder)}); two records of one card and recipe at once would replace "
                    "each other: wait for it to finish (then pass --force to replace its golden, if meant)"
                ) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)  # its holder removed the file as we opened it: lock the one there now
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "command": " ".join(["bitexact", *sys.argv[1:]]),
        }
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
        except OSError as error:
            self._drop(fd)
            raise UsageError(
                f"golden {shown(self.golden)}: cannot write its lock {self.path.name}: "
                f"{describe_os_error(error, '--golden-dir/--golden')}"
            ) from None
        self.fd = fd
        return self

    def _open(self) -> int:
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:
            _remove_made(self.made)
            raise UsageError(
                f"golden {shown(self.golden)}: cannot create its lock {self.path.name}: "
                f"{describe_os_error(error, '--golden-dir/--golden')}"
            ) from None

    def _drop(self, fd: int) -> None:
        try:
            self.path.unlink()  # while still held: a waiter that opened it sees another inode and retries
        except OSError:
            pass
        os.close(fd)
        _remove_made(self.made)

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self.fd is not None:
            self._drop(self.fd)
            self.fd = None


@dataclass
class _Placed:
    final: Path
    tmp: Path
    option: str
    backup: Path | None = None
    placed: bool = False


class Landing:
    """Files and history lines that land together: `file()` and `line()` name them, `land()` writes."""

    def __init__(self) -> None:
        self.files: list[tuple[Path, str, str]] = []
        self.lines: list[tuple[Path, str, str]] = []

    def file(self, path: Path, text: str, option: str) -> None:
        self.files.append((path, text, option))

    def line(self, path: Path, text: str, option: str) -> None:
        self.lines.append((path, text, option))

    def land(self) -> None:
        made: list[Path] = []
        staged: list[_Placed] = []
        appended: list[tuple[Path, int]] = []
        try:
            for path, text, option in self.files:
                try:
                    _make_folders(path.parent, made)
                    entry = _Placed(path, path.with_name(f".{path.name}.{os.getpid()}.tmp"), option)
                    staged.append(entry)
                    _write_synced(entry.tmp, text.encode("utf-8", SHOWN))
                except OSError as error:
                    raise _failed(path, error, option) from None
            for entry in staged:
                try:
                    if entry.final.exists():
                        entry.backup = entry.final.with_name(f".{entry.final.name}.{os.getpid()}.old")
                        os.link(entry.final, entry.backup)
                    entry.tmp.replace(entry.final)
                    entry.placed = True
                except OSError as error:
                    raise _failed(entry.final, error, entry.option) from None
            for path, text, option in self.lines:
                appended.append(_append(path, text.encode("utf-8", SHOWN), option))
            _sync_folders({entry.final.parent for entry in staged})
        except BaseException:
            _undo(staged, appended)
            _remove_made(made)
            raise
        for entry in staged:
            if entry.backup is not None:
                entry.backup.unlink(missing_ok=True)


def _write_synced(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _append(path: Path, data: bytes, option: str) -> tuple[Path, int]:
    """One line appended whole (the size before it returned, for an undo), or none of it: a short write
    (a file size limit, a full disk) is cut back and raised."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as error:
        raise _failed(path, error, option) from None
    try:
        size = os.fstat(fd).st_size
        try:
            written = os.write(fd, data)
            if written != len(data):
                os.write(fd, data[written:])  # raises the reason the first write stopped short
                raise OSError(errno.EIO, "a short write")
            os.fsync(fd)
        except OSError as error:
            os.ftruncate(fd, size)
            raise _failed(path, error, option) from None
    finally:
        os.close(fd)
    return path, size


def _failed(path: Path, error: OSError, option: str) -> OutputError:
    return OutputError(f"cannot write {shown(path)} ({option}): {describe_os_error(error, option)}; {UNDONE}")


def _undo(staged: list[_Placed], appended: list[tuple[Path, int]]) -> None:
    """Put back what was there: history lines cut off, placed files replaced by their old selves (or
    removed), temporary files removed. Each step is tried on its own, so one that fails stops no other."""
    for path, size in reversed(appended):
        try:
            os.truncate(path, size)
        except OSError:
            pass
    for entry in reversed(staged):
        try:
            if entry.placed and entry.backup is not None:
                entry.backup.replace(entry.final)
            elif entry.placed:
                entry.final.unlink()
            entry.tmp.unlink(missing_ok=True)
            if entry.backup is not None:
                entry.backup.unlink(missing_ok=True)
        except OSError:
            pass


def _sync_folders(folders: set[Path]) -> None:
    """The renames made durable (a crash after this keeps them); a file system without it is no error."""
    for folder in folders:
        try:
            fd = os.open(folder, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)
