"""Errors that the CLI turns into exit codes (2: bad usage or input, 1: internal)."""
from __future__ import annotations


class InputError(Exception):
    """Bad input or usage the user can fix: reported as one `error:` line, exit 2."""


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
