"""A study's shared state on disk: OUT's lock, and each cell's step records.

Why apart: the runner writes them, `status` and the report read them; none of those
imports another.
"""
from __future__ import annotations

import os
from typing import Any, Callable

from ..fileio import lock_output_dir, read_json, write_json
from .plan import Paths


def hold_lock(out: str) -> None:
    """OUT's lock, held until this process ends: the lock every command takes on the OUT
    it writes (fileio.lock_output_dir; a killed run's never blocks); refused, naming the
    pid, while another run holds it."""
    os.makedirs(out, exist_ok=True)
    lock_output_dir(out)


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
