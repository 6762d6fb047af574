"""A study's shared state on disk: OUT's lock, and each cell's step records.

Why apart: the runner writes them, `status` and the report read them; none of those
imports another.
"""
from __future__ import annotations

import fcntl
import os
from typing import Any, Callable

from ..errors import InputError
from ..fileio import read_json, write_json
from .plan import Paths

LOCK = ".lock"


def hold_lock(out: str) -> int:
    """OUT's lock, held until this process ends (refused while another run holds it)."""
    os.makedirs(out, exist_ok=True)
    fd = os.open(os.path.join(out, LOCK), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise InputError(f"{out} is being run by another `nmtfrag study run` (pid {pid}); "
                         f"wait for it, or stop it and run again to resume") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


def lock_holder(out: str) -> int | None:
    """The pid of the live run holding OUT's lock, or None."""
    path = os.path.join(out, LOCK)
    if not os.path.exists(path):
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    except BlockingIOError:
        text = os.pread(fd, 32, 0).decode(errors="replace").strip()
        return int(text) if text.isdigit() else -1
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- cell state
def state_path(paths: Paths, cell: str) -> str:
    return os.path.join(paths.cell(cell), "state.json")


def read_state(paths: Paths, cell: str) -> dict[str, Any]:
    p = state_path(paths, cell)
    return read_json(p) if os.path.exists(p) else {"steps": {}}


def update_state(paths: Paths, cell: str, change: Callable[[dict], None]) -> None:
    state = read_state(paths, cell)
    change(state)
    os.makedirs(paths.cell(cell), exist_ok=True)
    write_json(state_path(paths, cell), state)


def resumable(out: str) -> bool:
    """A training run killed after its first save (fairseq's or DP-SGD's)."""
    return (os.path.isfile(os.path.join(out, "checkpoints", "checkpoint_last.pt"))
            or os.path.isfile(os.path.join(out, "owner", "dp-state.pt")))
