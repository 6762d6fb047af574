"""Where a `study run` ran: one JSON line per run in OUT/machines.jsonl, so the report says
which hardware produced which figures (a study may move between a CPU and a GPU machine;
the machine is never part of a cell's settings)."""
from __future__ import annotations

import json
import os
import time
from typing import Any

from .config import Machine
from .plan import Paths


def note_machine(paths: Paths, machine: Machine, jobs: int, per_job: int,
                 cells: list[str] | None = None) -> dict:
    """Append this run's hardware (and the cells it runs) to OUT/machines.jsonl: the
    report says which machine produced which figures, `status` which cells a live run
    left out; returns the entry."""
    entry: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "device": machine.device, "decode_device": machine.decoder,
        "cpus": os.cpu_count(), "jobs": jobs, "threads_per_job": per_job,
        "cells": cells}
    if "cuda" in (machine.device, machine.decoder):
        import torch

        entry["gpu"] = (torch.cuda.get_device_name(0) if torch.cuda.is_available()
                        else "none visible")
    with open(paths.machines, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")
    return entry


def device_text(m: dict) -> str:
    """'cuda (NVIDIA H100 80GB HBM3)' or 'cpu': where a run trained."""
    return m["device"] + (f" ({m['gpu']})" if m.get("gpu") else "")


def machine_text(m: dict) -> str:
    """One line: device (GPU name), where decoding ran, CPUs, jobs × threads."""
    where = device_text(m)
    if m.get("decode_device") not in (None, m["device"]):
        where += f", decoding on {m['decode_device']}"
    return (f"{where}; {m['cpus']} CPUs, {m['jobs']} job(s) × {m['threads_per_job']} "
            f"thread(s)")


def load_from(loadavg: str) -> float:
    """The load other programs put on the machine, from /proc/loadavg's text: the 1-minute
    average, but no more than the tasks runnable now besides the reader (the average
    lags: a run stopped a minute ago still counts in it)."""
    fields = loadavg.split()
    runnable = int(fields[3].split("/")[0]) - 1  # the reader is runnable while it reads
    return min(float(fields[0]), float(max(0, runnable)))


def machine_load() -> float:
    """load_from(/proc/loadavg) on Linux; the 1-minute average elsewhere (0 without one)."""
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return load_from(f.read())
    except (OSError, ValueError, IndexError):
        return os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0


def busy_warning(cpus: int, load: float, jobs: int, per_job: int) -> str | None:
    """A warning when the threads this run adds to the machine's load (machine_load())
    exceed its CPUs: another run already holds cores, every cell's steps share them and
    take longer in wall time (their CPU hours stay comparable). None otherwise."""
    wanted = jobs * per_job
    if load + wanted <= cpus + 0.5:
        return None
    return (f"the machine is already busy (load {load:.1f} on {cpus} CPUs): {jobs} job(s) "
            f"× {per_job} thread(s) will share cores with it, so each step takes longer "
            f"in wall time; fit --jobs and --threads to the CPUs left, or wait")


def read_machines(paths: Paths) -> list[dict]:
    """Every run's entry, in order."""
    if not os.path.isfile(paths.machines):
        return []
    with open(paths.machines, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
