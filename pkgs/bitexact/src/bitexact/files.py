"""Files the verbs read and write, with every ordinary I/O fault turned into an error that names the file,
the option it came from and the fix: a directory where a file belongs, text that is not UTF-8, a
read-only or full file system, and two runs writing into one --out at once."""

from __future__ import annotations

import codecs
import datetime
import errno
import fcntl
import json
import os
import socket
import stat
import sys
import unicodedata
from pathlib import Path
from types import TracebackType
from typing import Any

import exactformats

from bitexact.errors import UsageError

LOCK_NAME = ".bitexact.lock"


class OutputError(UsageError):
    """A file could not be written; what was written before is kept."""


def describe_os_error(error: OSError, option: str = "--out") -> str:
    """`strerror` with a hint for the faults a user can fix; `option` is where the path came from."""
    reason = error.strerror or str(error)
    hints = {
        errno.ENOSPC: f"free space on that file system or give another {option}",
        errno.EDQUOT: f"free space on that file system or give another {option}",
        errno.EROFS: f"the file system is mounted read-only; give a writable {option}",
        errno.EACCES: "no permission; give a directory you can write to",
        errno.EPERM: "no permission; give a directory you can write to",
    }
    hint = hints.get(error.errno or 0)
    return f"{reason} ({hint})" if hint else reason


# The one way bitexact turns text that may hold a path into text it can write (a report, a results
# line, a crash report, the verdict on stdout). Linux allows any bytes but "/" and NUL in a name, and
# Python holds the bytes of a name that are not UTF-8 as lone surrogates (U+DC80..U+DCFF, PEP 383),
# which no UTF-8 writer takes: with this error handler each such byte is written as `\xNN` (and any
# other lone surrogate as `\uNNNN`), so a path is shown escaped and never breaks a write.
SHOWN = "bitexact-shown"


def _escape_unencodable(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    bad = error.object[error.start : error.end]
    escaped = "".join(
        f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF else f"\\u{ord(c):04x}" for c in bad
    )
    return escaped, error.end


codecs.register_error(SHOWN, _escape_unencodable)


def displayable(text: str) -> str:
    """`text` with every character UTF-8 cannot hold escaped (SHOWN): safe for any UTF-8 writer."""
    return text.encode("utf-8", SHOWN).decode("utf-8")


def shown(path: Path | str | bytes) -> str:
    """A path as messages and reports show it: as typed; its bytes that are not UTF-8 as `\\xNN`; and
    quoted with escapes where it holds a character that would print invisibly (a carriage return from a
    file written on Windows, a tab)."""
    text = displayable(os.fsdecode(path))
    return repr(text) if any(unicodedata.category(c)[0] in "CZ" and c != " " for c in text) else text


def env_value(name: str) -> str | None:
    """An environment variable that names a file or a build: None when unset or empty, a UsageError
    when it holds a control character (`BITEXACT_RECIPE` ending in "\\r" names a file that looks right
    and is not there)."""
    value = os.environ.get(name)
    if not value:
        return None
    bad = [c for c in value if unicodedata.category(c) == "Cc"]
    if bad:
        raise UsageError(
            f"${name} is {value!r}: it holds the control character {bad[0]!r} (a line end copied with "
            f'it?); set it to the value alone, e.g. export {name}="$(printf %s "${name}" | tr -d \'\\r\')"'
        )
    return value


def env_path(name: str) -> Path | None:
    value = env_value(name)
    return None if value is None else Path(value)


def path_state(path: Path) -> str:
    """What is at `path`, in the words a message needs: "file", "directory", "missing", "a symbolic link
    to X, which does not exist", "a symbolic link loop", or another kind in exactformats' words (a named
    pipe, a device, a socket)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if path.is_symlink():
            return f"a symbolic link to {shown(os.readlink(path))}, which does not exist"
        return "missing"
    except OSError as error:
        if error.errno == errno.ELOOP:
            return "a symbolic link loop (it points at itself through other links)"
        if error.errno == errno.ENOTDIR:
            return "missing"
        raise
    if stat.S_ISDIR(mode):
        return "directory"
    return "file" if stat.S_ISREG(mode) else exactformats.special_kind(mode) or "not a regular file"


def blocked_folder(path: Path) -> str | None:
    """Why no file can be made at a missing `path`, in words (the nearest folder above it that exists is
    not a folder: a file, a dangling link, a loop), or None when that folder is one. Checked before a
    run, so that a golden or a history line never fails to be written after the engine has run (with
    "File exists" or "Not a directory" about a temporary file)."""
    for folder in path.absolute().parents:
        state = path_state(folder)
        if state == "directory":
            return None
        if state != "missing":
            return f"its folder {shown(folder)} is {'a file' if state == 'file' else state}"
    return None


def read_text(path: Path, option: str, expect: str) -> str:
    """The UTF-8 text of `path`, named by `option` in every error; `expect` says what belongs there. The
    reader the launcher and pinlock share (exactformats): the kind of file is checked before it is opened
    (a FIFO never blocks), and a leading byte-order mark is taken off."""
    try:
        return exactformats.read_text(path, option, expect)
    except exactformats.FormatError as error:
        raise UsageError(str(error)) from None


def prepare_out(out: Path, option: str = "--out") -> Path:
    """Create the output directory and prove it is writable now, before any engine runs."""
    state = path_state(out)
    if state == "file":
        raise UsageError(f"{option} {shown(out)} is a file; give a directory (it is created if missing)")
    if state not in ("directory", "missing"):
        raise UsageError(f"{option} {shown(out)} is {state}; give a directory (it is created if missing)")
    blocked = blocked_folder(out) if state == "missing" else None
    if blocked is not None:
        raise UsageError(f"{option} {shown(out)}: {blocked}; give a directory (it is created if missing)")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".bitexact-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise UsageError(f"{option} {out}: cannot write there: {describe_os_error(error, option)}") from None
    return out


def atomic_write_text(path: Path, text: str, option: str = "--out") -> None:
    """Write `text` to `path` through a temporary file beside it and a rename: readers see the old file or
    the new one, never half of one, and a failed write (a full disk) leaves no temporary file behind."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tmp.open("w", encoding="utf-8", errors=SHOWN) as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        tmp.replace(path)
    except OSError as error:
        tmp.unlink(missing_ok=True)
        raise OutputError(f"cannot write {path} ({option}): {describe_os_error(error, option)}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def append_line(path: Path, text: str, kept: str, option: str = "--out") -> None:
    """Append whole lines with one write(2) on an O_APPEND descriptor, fsynced: an interrupt lands before
    or after it, never inside, and each line starts where the previous one ended. `kept` says, in the
    error, what a failed append leaves (the lines written before it)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, text.encode("utf-8", SHOWN))
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as error:
        raise OutputError(f"cannot append to {path}: {describe_os_error(error, option)}; {kept}") from None


def dumps(value: object, **options: object) -> str:
    """Standard JSON only: a NaN or an infinity is a bug upstream, never written as `NaN`."""
    return json.dumps(value, allow_nan=False, **options)  # type: ignore[arg-type]


class OutLock:
    """One bitexact run per --out: an exclusive lock on `<out>/.bitexact.lock` for the run's life. The lock
    file names its holder (pid, host, start, command line) so that a second run can say who holds it; the
    kernel drops the lock when the holder exits, however it exits, so a stale file never blocks."""

    def __init__(self, out: Path) -> None:
        self.path = out / LOCK_NAME
        self.fd: int | None = None

    def __enter__(self) -> OutLock:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:
            raise UsageError(
                f"--out {self.path.parent}: cannot create its lock: {describe_os_error(error)}"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode("utf-8", errors="replace")
            os.close(fd)
            raise UsageError(
                f"--out {self.path.parent} is in use by another bitexact run ({holder_text(holder)}); "
                "wait for it to finish, or give this run another --out"
            ) from None
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "command": " ".join(["bitexact", *sys.argv[1:]]),
        }
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
        except OSError as error:  # a full file system shows here first: the lock is the first block written
            os.close(fd)
            raise UsageError(
                f"--out {self.path.parent}: cannot write its lock {LOCK_NAME}: {describe_os_error(error)}"
            ) from None
        self.fd = fd
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self.fd is not None:
            os.close(self.fd)  # releases the lock; the file stays, naming the last holder
            self.fd = None


def holder_text(raw: str) -> str:
    """Who holds a lock, in words, from the lock file's JSON (pid, host, start, command)."""
    try:
        holder = json.loads(raw)
        return f"pid {holder['pid']} on {holder['host']}, started {holder['started']}: `{holder['command']}`"
    except (json.JSONDecodeError, KeyError, TypeError):
        return "its holder did not say who it is"


# Options that name one file each, in one role: a path given for one is never accepted for another
# (`--history` pointed at the golden would append to the golden; `--golden` at the prompts would
# replace them).
FILE_OPTIONS = {
    "prompts": "--prompts",
    "recipe": "--recipe",
    "golden": "--golden",
    "history": "--history",
    "build_info": "--build-info",
}


def distinct_roles(options: dict[str, Any]) -> None:
    """UsageError when two of a command's file options (`options`: name to value, as parsed) name one
    file (after links are followed), or one names the --out folder."""
    seen: dict[str, str] = {}
    out = options.get("out")
    if out is not None:
        seen[os.path.realpath(out)] = "--out"  # realpath, not resolve(): a link loop is no crash here
    for dest, option in FILE_OPTIONS.items():
        value = options.get(dest)
        if value is None:
            continue
        real = os.path.realpath(value)
        if real in seen:
            raise UsageError(
                f"{option} {shown(value)} and {seen[real]} name the same file ({real}): one file cannot be "
                f"both; give each its own"
            )
        seen[real] = option
