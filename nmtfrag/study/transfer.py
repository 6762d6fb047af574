"""`nmtfrag study import`: bring finished cells of another study directory into this one.

Why: a study may run its cells on different machines, each with its own OUT (a GPU lent
for minutes carries back a small OUT; the CPU goes on with the rest in another). One
report per domain needs them side by side. A cell is taken only if it means the same
thing here: its recorded settings equal this study's (model and data by SHA-256), and the
two baselines decoded the test set to the same output, so its significance tests against
the baseline hold here. Each imported cell remembers the machines it ran on, and the
report marks it. Only finished cells are taken, and never over a finished cell here; a
cell's unfinished steps here are discarded (the import names them).
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Any

from ..errors import InputError
from ..fileio import (lock_output_dir, read_json, release_output_lock, sha256_file,
                      write_json)
from .config import BASELINE, StudyConfig
from .machine import machine_text, read_machines
from .plan import EVALUATE, Paths, Planner
from .record import check_and_record, differences, read_record, settings_now

IMPORTED = "imported"  # the state.json key an imported cell carries


def import_cells(config: StudyConfig, out: str, source: str, cells: list[str]
                 ) -> list[str]:
    """Copy each named finished cell of study `source` into study `out`; returns one line
    per cell saying what was imported (and which unfinished steps here it replaced).
    Everything is checked before anything is copied; OUT's lock is held throughout."""
    here, there = Paths(out), Paths(source)
    if here.out == there.out:
        raise InputError(f"--from {source}: the same study directory as --out")
    rec_here, rec_there = read_record(out), read_record(source)
    for name in cells:
        _check_cell(config, name)
    now = settings_now(config, [BASELINE, *cells])
    lock_output_dir(here.out)
    try:
        _same_baseline(here, there)
        for name in (BASELINE, *cells):
            for who, rec, where in (("here", rec_here, out), ("there", rec_there, source)):
                recorded = (rec["cells"].get(name) or {}).get("settings")
                if recorded is None and who == "there":
                    raise InputError(f"{source}: cell {name!r} was never run there")
                diff = differences(recorded, now[name]) if recorded is not None else []
                if diff:
                    raise InputError(f"{where}: cell {name!r} was recorded with other "
                                     f"settings than {config.path}'s: {diff[0]}")
        replaced = {}
        for name in cells:
            if not Planner(config, there.out).plan(name).done:
                raise InputError(f"{source}: cell {name!r} is not finished there "
                                 f"(`nmtfrag study status`): only finished cells are "
                                 f"imported")
            plan_here = Planner(config, here.out).plan(name)
            if plan_here.done:
                raise InputError(f"{out}: cell {name!r} is finished here already; "
                                 f"nothing is replaced")
            replaced[name] = [s.name for s in plan_here.steps if os.path.isdir(s.out)]
        check_and_record(config, here.record, {n: now[n] for n in cells})  # now held here
        return [_copy_cell(here, there, name, replaced[name]) for name in cells]
    finally:
        release_output_lock(here.out)


def _check_cell(config: StudyConfig, name: str) -> None:
    if name == BASELINE:
        raise InputError("--cell baseline: every study runs its own baseline")
    try:
        config.cell(name)
    except KeyError:
        raise InputError(f"--cell {name}: no such cell in {config.path}") from None


def _same_baseline(here: Paths, there: Paths) -> None:
    """Both baselines done, and their test-set outputs identical."""
    digests = []
    for p in (here, there):
        hyp = os.path.join(p.step(BASELINE, EVALUATE), "hyp.txt")
        if not os.path.isfile(os.path.join(p.step(BASELINE, EVALUATE), "manifest.json")):
            raise InputError(f"{p.out}: its baseline is not evaluated yet (run `nmtfrag "
                             f"study run` there first)")
        digests.append(sha256_file(hyp))
    if digests[0] != digests[1]:
        raise InputError(f"{there.out}: its baseline's test output differs from this "
                         f"study's (sha256 {digests[1][:12]}… against {digests[0][:12]}…): its "
                         f"cells' significance tests were made against another baseline")


def machines_of(paths: Paths, name: str) -> list[dict[str, Any]]:
    """The machine entries of the runs of `paths` that ran cell `name` (an entry written
    before runs recorded their cells counts for every cell)."""
    return [m for m in read_machines(paths)
            if m.get("cells") is None or name in m["cells"]]


def _copy_cell(here: Paths, there: Paths, name: str, replaced: list[str]) -> str:
    """Copy the cell beside its place, then move it in. A failed copy leaves nothing; a
    kill between the two renames at the end leaves the cell absent (its unfinished steps
    here, in a dir named '.tmp-import-…', start afresh on the next run)."""
    cells_dir = os.path.dirname(here.cell(name))
    os.makedirs(cells_dir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".tmp-import-{name}-", dir=cells_dir)
    staged = os.path.join(tmp, name)
    machines = machines_of(there, name)
    try:
        shutil.copytree(there.cell(name), staged, symlinks=False)
        state_file = os.path.join(staged, "state.json")
        state = read_json(state_file) if os.path.isfile(state_file) else {"steps": {}}
        state[IMPORTED] = {"from": there.out, "machines": machines,
                           "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                           # what each step had cost there: CPU a step adds later
                           # (a rerun here) is this machine's
                           "cpu_seconds": {n: st.get("cpu_seconds", 0.0) for n, st in
                                           (state.get("steps") or {}).items()}}
        write_json(state_file, state)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, shutil.Error):  # copytree gathers its failures in one
            raise InputError(f"{there.cell(name)}: could not be copied into {cells_dir} "
                             f"({len(exc.args[0])} file(s) failed, e.g. "
                             f"{exc.args[0][0][2]}); nothing was imported") from None
        raise
    old = here.cell(name)
    if os.path.exists(old):
        os.replace(old, os.path.join(tmp, ".replaced"))
    os.replace(staged, old)
    shutil.rmtree(tmp, ignore_errors=True)
    ran = "; ".join(dict.fromkeys(machine_text(m) for m in machines)) or "an unrecorded machine"
    return (f"{name}: imported from {there.out} (ran on {ran})"
            + (f"; discarded its unfinished steps here: {', '.join(replaced)}" if replaced
               else ""))


def _cpu_there(state: dict[str, Any]) -> dict[str, float]:
    """Each step's CPU seconds on the machines an imported cell came from: the import's
    record of them (an import recorded before it kept one: every step's, as it is)."""
    imported = state.get(IMPORTED) or {}
    steps = state.get("steps") or {}
    there = imported.get("cpu_seconds")
    if there is None:
        there = {n: st.get("cpu_seconds", 0.0) for n, st in steps.items()}
    return {n: min(there.get(n, 0.0), st.get("cpu_seconds", 0.0)) for n, st in steps.items()}


def steps_run_here(state: dict[str, Any]) -> list[str]:
    """The steps of an imported cell that (also) ran in this study after the import, e.g.
    an audit rerun here; [] for a cell that was not imported."""
    if not state.get(IMPORTED):
        return []
    there = _cpu_there(state)
    return [n for n, st in (state.get("steps") or {}).items()
            if st.get("cpu_seconds", 0.0) > there[n]]


def cpu_seconds_elsewhere(state: dict[str, Any]) -> float:
    """CPU seconds of an imported cell's steps that were spent on the machines it came
    from (0 for a cell that was not imported)."""
    return sum(_cpu_there(state).values()) if state.get(IMPORTED) else 0.0
