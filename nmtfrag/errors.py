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


# --- the Python API's argument checks -------------------------------------------------
# Why: a stage called from Python with a wrong type failed late with a bare TypeError
# naming no argument (max_len="4"), a path object broke a manifest after files were
# written, and tag="no" made a tagged release (any string is true). Checked first, a
# wrong type is a TypeError and an out-of-range value a ValueError, each naming the
# argument, before anything is read or written.

def check_bool(name: str, value: object) -> bool:
    """`value` if it is a bool (True/False, not a truthy string or number)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def check_int(name: str, value: object, low: int | None = None) -> int:
    """`value` if it is an int (not a bool) of at least `low`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if low is not None and value < low:
        raise ValueError(f"{name} must be ≥ {low}, got {value}")
    return value


def check_number(name: str, value: object, low: float | None = None,
                 low_open: bool = False) -> float:
    """`value` if it is a finite int or float (not a bool) ≥ `low` (> `low` if
    `low_open`)."""
    import math

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if low is not None and (value <= low if low_open else value < low):
        raise ValueError(f"{name} must be {'>' if low_open else '≥'} {low:g}, got {value}")
    return value


def check_str(name: str, value: object) -> str:
    """`value` if it is a str."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, got {value!r}")
    return value


def as_path(name: str, value: object) -> str:
    """A path given as a str or an os.PathLike, as a str (os.fspath); an empty path is a
    ValueError: it means the current directory, which no caller means."""
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or os.PathLike), got {value!r}")
    path = os.fspath(value)
    if not isinstance(path, str):
        raise TypeError(f"{name} must be a text path, got {value!r}")
    if not path:
        raise ValueError(f"{name} must not be an empty path")
    return path


def as_optional_path(name: str, value: object) -> str | None:
    """as_path, with None kept (an option not given)."""
    return None if value is None else as_path(name, value)
