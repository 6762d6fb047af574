"""Quiet by default: one place that filters third-party noise off the terminal.

Why: fairseq, hydra, torch and opacus print dozens of deprecation warnings and INFO lines
per command (the demo printed ~250 of them; `translate` 11 around one translation), and
they bury our own summary lines and `error:` messages. Nothing of theirs is needed to use
nmtfrag: fine-tuning keeps fairseq's full log in OUT/train.log anyway.

`install(verbose)` is called once by the `nmtfrag` entry point (and by the toy-model
script), before any heavy import:
- root logging goes to stderr (never stdout, where `translate` writes translations) at
  WARNING for third-party loggers, INFO for nmtfrag's own; it is set up before fairseq's
  `logging.basicConfig(stream=sys.stdout, level=INFO)`, which then does nothing;
- UserWarning / FutureWarning / DeprecationWarning are ignored (nmtfrag itself raises
  errors, it does not warn), also in child processes (PYTHONWARNINGS);
- `silence_stderr()` mutes C-level chatter (fastBPE's "Loading codes from …").
With `-v/--verbose` everything is shown as before.
"""
from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from typing import IO, Iterator

NOISY_CATEGORIES = (UserWarning, FutureWarning, DeprecationWarning)
_state: dict[str, bool] = {"verbose": True}  # nothing filtered unless install() said so


class _OwnInfoOrWarnings(logging.Filter):
    """Pass nmtfrag's own records at any level, everybody else's at WARNING or above."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or record.name.split(".")[0] == "nmtfrag"


class _Stderr(logging.StreamHandler):
    """A handler on whatever sys.stderr is at the time of the record (tests swap it)."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self) -> IO[str]:
        return sys.stderr

    @stream.setter
    def stream(self, value: IO[str]) -> None:
        pass


def install(verbose: bool = False) -> None:
    """Set up the console for one command: quiet unless `verbose`.

    The root handler is added only where nobody set one up yet (a fresh `nmtfrag`
    process); a host that did (pytest calling `cli.main`, an embedding program) keeps
    its own. Calling it again replaces what the previous call installed."""
    _state["verbose"] = bool(verbose)
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Stderr)]:
        root.removeHandler(old)
    if not root.handlers:
        handler = _Stderr()
        handler.setFormatter(logging.Formatter("%(levelname)s: %(name)s: %(message)s"))
        if not verbose:
            handler.addFilter(_OwnInfoOrWarnings())
        root.addHandler(handler)
        root.setLevel(logging.INFO)
    if verbose:
        return
    for category in NOISY_CATEGORIES:
        warnings.filterwarnings("ignore", category=category)
    names = {UserWarning: "UserWarning", FutureWarning: "FutureWarning",
             DeprecationWarning: "DeprecationWarning"}
    extra = ",".join(f"ignore::{names[c]}" for c in NOISY_CATEGORIES)
    before = os.environ.get("PYTHONWARNINGS")
    if not before:
        os.environ["PYTHONWARNINGS"] = extra
    elif extra not in before:  # once, however often a host calls install()
        os.environ["PYTHONWARNINGS"] = f"{before},{extra}"


def verbose() -> bool:
    """True when third-party output should reach the console (-v, or install() not run)."""
    return _state["verbose"]


@contextlib.contextmanager
def silence_stderr() -> Iterator[None]:
    """Mute file descriptor 2 for a block of C code that prints there (unless verbose).

    Python-level writes to sys.stderr are flushed first so nothing of ours is lost."""
    if verbose():
        yield
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no real fd 2 (embedded, captured)
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
