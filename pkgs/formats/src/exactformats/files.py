"""One file reader for bitexact, the launcher and pinlock: the kind of file is checked before it is opened
(a named pipe would block the open until a writer comes; a device or a socket is no input file), the
bytes are read whole and decoded as UTF-8, and a leading UTF-8 byte-order mark is taken off (RFC 8259,
8.1, lets a JSON reader ignore it; editors on Windows add it). Every refusal is a FormatError whose
message names the file as the program names it (`what`: an option, or a role) and the fix."""

from __future__ import annotations

import errno
import os
import stat
import unicodedata
from pathlib import Path

BOM = b"\xef\xbb\xbf"


class FormatError(ValueError):
    """A file that cannot be read as what it should be. `kind` says which fault (missing, directory,
    special, unreadable, encoding, schema), for a program that treats one of them apart (pinlock reads a
    missing pin file as "not pinned yet")."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def shown(path: Path | str) -> str:
    """A path as a message shows it: as typed, or quoted with escapes where it holds a byte that is not
    UTF-8 or a character that would print invisibly (a carriage return copied with it, a tab)."""
    text = os.fspath(path)
    if any(0xDC80 <= ord(c) <= 0xDCFF for c in text) or any(
        unicodedata.category(c)[0] in "CZ" and c != " " for c in text
    ):
        return ascii(text)
    return text


def special_kind(mode: int) -> str | None:
    """What a non-regular file is, in words; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO): reading it would wait for a writer"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _missing(path: Path, what: str, expect: str) -> FormatError:
    if os.path.islink(path):
        target = shown(os.readlink(path))
        return FormatError(
            f"{what} {shown(path)} is a symbolic link to {target}, which does not exist; give {expect}",
            "missing",
        )
    hint = (
        " (the name holds a control character: was it copied with a line end?)"
        if shown(path) != str(path)
        else ""
    )
    return FormatError(f"{what} {shown(path)}: no such file{hint}; give {expect}", "missing")


def read_bytes(path: Path | str, what: str, expect: str) -> bytes:
    """The bytes of the regular file at `path` (links followed). The kind is checked by stat before the
    open and again on the open descriptor (opened without blocking), so that no FIFO, device or directory
    is ever read, however it got there."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise _missing(path, what, expect) from None
    except OSError as error:
        raise _os_error(path, what, expect, error) from None
    kind = special_kind(mode)
    if kind is not None:
        raise FormatError(
            f"{what} {shown(path)} is {kind}; give {expect}", "directory" if stat.S_ISDIR(mode) else "special"
        )
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except FileNotFoundError:
        raise _missing(path, what, expect) from None
    except OSError as error:
        raise _os_error(path, what, expect, error) from None
    try:
        opened = os.fstat(fd).st_mode
        kind = special_kind(opened)
        if kind is not None:  # replaced between the stat and the open
            raise FormatError(f"{what} {shown(path)} is {kind}; give {expect}", "special")
        os.set_blocking(fd, True)
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as error:
        raise _os_error(path, what, expect, error) from None
    finally:
        os.close(fd)


def _os_error(path: Path, what: str, expect: str, error: OSError) -> FormatError:
    reason = error.strerror or str(error)
    if error.errno == errno.ELOOP:
        return FormatError(
            f"{what} {shown(path)} is a symbolic link loop (it points at itself through other links); "
            f"give {expect}",
            "unreadable",
        )
    if error.errno == errno.ENOTDIR:
        return FormatError(
            f"{what} {shown(path)}: a folder on its way is a file; give {expect}", "unreadable"
        )
    elif error.errno in (errno.EACCES, errno.EPERM):
        reason += " (no permission to read it: make it readable, or give a copy you can read)"
    elif error.errno == errno.EIO:
        reason += " (the disk or the network file system failed; try again, or give a copy)"
    return FormatError(f"{what} {shown(path)}: cannot read it: {reason}", "unreadable")


def decode(data: bytes, path: Path | str, what: str, expect: str) -> str:
    """`data` as UTF-8 text without a leading byte-order mark; FormatError naming the first bad byte (a
    NUL byte included: UTF-8 allows it, but it is UTF-16's mark, and no JSON text holds one raw)."""
    if data.startswith(BOM):
        data = data[len(BOM) :]
    nul = data.find(b"\0")
    if nul >= 0:  # valid UTF-8, but no text format these programs read holds a raw NUL: UTF-16 does
        line = data[:nul].count(b"\n") + 1
        raise FormatError(
            f"{what} {shown(path)}: not UTF-8 text (byte {nul}, line {line}: a NUL byte; it is UTF-16, or "
            f"not text at all); give {expect}, saved as UTF-8",
            "encoding",
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        bad = data[error.start : error.start + 1]
        utf16 = data[:2] in (b"\xff\xfe", b"\xfe\xff")
        saved = " (it is UTF-16: save it as UTF-8)" if utf16 else ""
        raise FormatError(
            f"{what} {shown(path)}: not UTF-8 text (byte {error.start}, line {line}: {bad!r}){saved}; "
            f"give {expect}, saved as UTF-8",
            "encoding",
        ) from None


def read_text(path: Path | str, what: str, expect: str = "the file itself") -> str:
    """The UTF-8 text of the regular file at `path`, a leading byte-order mark taken off. `what` names the
    file in messages as its program does (`--recipe`, `golden`), `expect` says what belongs there: every
    fault is a FormatError naming both."""
    return decode(read_bytes(path, what, expect), path, what, expect)
