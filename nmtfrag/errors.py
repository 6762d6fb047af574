"""Errors that the CLI turns into exit codes (2: bad usage or input, 1: internal)."""
from __future__ import annotations


import errno
import os


class InputError(Exception):
    """Bad input or usage the user can fix: reported as one `error:` line, exit 2."""


class ToolFailed(Exception):
    """An external tool (eflomal, fairseq, ...) gave no usable output, e.g. fewer
    lines than it was given: one `error:` line, exit 1. Why: a failed write was read as
    "no alignment links" and made a finished, empty release."""


# A write that failed for want of room or permission on the file system: the user can
# fix it (free space, another --out or --work-dir), so one `error: PATH: reason` line,
# exit 2, and no finished output.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG})


def is_disk_error(exc: BaseException) -> bool:
    """True for an OSError of DISK_ERRNOS (full disk, quota, read-only, file too large)."""
    return isinstance(exc, OSError) and exc.errno in DISK_ERRNOS


def with_path(exc: OSError, path: str | os.PathLike[str]) -> OSError:
    """`exc` with `path` as its file name when it has none (a write through a file
    object names no file): the same errno and reason, raised `from exc` by the caller."""
    if exc.filename is not None or exc.errno is None:
        return exc
    named = OSError(exc.errno, exc.strerror or os.strerror(exc.errno), os.fspath(path))
    named.__traceback__ = exc.__traceback__
    return named


def note_interruption(exc: BaseException, note: str) -> None:
    """Say on an interruption (KeyboardInterrupt from SIGINT, SystemExit from SIGTERM)
    what the stopped run kept and how to continue it; the CLI prints the note after
    "error: interrupted: ". The innermost stage that knows says it: a note already
    there is kept."""
    if not interruption_note(exc):
        setattr(exc, "nmtfrag_note", note)


def interruption_note(exc: BaseException) -> str | None:
    """The note `note_interruption` left on `exc`, or None."""
    return getattr(exc, "nmtfrag_note", None)
