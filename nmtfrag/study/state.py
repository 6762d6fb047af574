"""A study's shared state on disk: OUT's lock, and each cell's step records.

Why apart: the runner writes them, `status` and the report read them; none of those
imports another.
"""
from __future__ import annotations

import os
from typing import Any, Callable

from ..fileio import read_json, write_json
from ..outlock import lock_output_dir
from .plan import Paths


def hold_lock(out: str, wait: bool = False) -> None:
    """OUT's lock, held until this process ends: the lock every command takes on the OUT
    it writes (outlock.lock_output_dir; a killed run's never blocks); refused, naming the
    pid, while another run holds it, or with `wait` taken when that run ends."""
    os.makedirs(out, exist_ok=True)
    lock_output_dir(out, wait=wait)


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


def cpu_of_live(pid: int) -> float:
    """CPU seconds of a live process and its live children so far (Linux /proc), else 0."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/stat", encoding="ascii") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            with open(f"/proc/{p}/task/{p}/children", encoding="ascii") as f:
                todo += [int(c) for c in f.read().split()]
        except (OSError, ValueError, IndexError):
            continue
    return total


def settle_killed(paths: Paths, cells: list[str]) -> list[str]:
    """A study killed outright (SIGKILL, a machine stopping) never recorded the steps it
    was running: fold the CPU and wall time each last saved (`running`, refreshed every
    minute by the runner) into that step's totals, as an attempt that ended killed.
    Call it holding OUT's lock (no runner is alive then); returns 'cell: step' of each."""
    settled = []
    for cell in cells:
        state = read_state(paths, cell)
        run = state.get("running")
        if not run:
            continue

        def fold(s: dict, run: dict = run) -> None:
            s.pop("running", None)
            st = s["steps"].setdefault(run["step"], {"cpu_seconds": 0.0,
                                                     "wall_seconds": 0.0, "attempts": 0})
            st["cpu_seconds"] = round(st["cpu_seconds"] + run.get("cpu_seconds", 0.0), 1)
            wall = run.get("seen", run["since"]) - run["since"]
            st["wall_seconds"] = round(st["wall_seconds"] + max(0.0, wall), 1)
            st["attempts"] += 1
            st["last_exit"] = "killed"
        update_state(paths, cell, fold)
        settled.append(f"{cell}: {run['step']}")
    return settled


def resumable(out: str) -> bool:
    """A training run killed after its first save (fairseq's or DP-SGD's)."""
    return (os.path.isfile(os.path.join(out, "checkpoints", "checkpoint_last.pt"))
            or os.path.isfile(os.path.join(out, "owner", "dp-state.pt")))
