"""`nmtfrag study export` and `import`: run cells of a study on another machine, and bring
the finished cells back.

Why: a study may run its cells on different machines, each with its own OUT (a GPU lent
for minutes carries back a small OUT; the CPU goes on with the rest in another). One
report per domain needs them side by side. A cell is taken only if it means the same
thing here: its recorded settings equal this study's (model and data by SHA-256), and the
two baselines decoded the test set to the same output, so its significance tests against
the baseline hold here. Each imported cell remembers the machines it ran on, and the
report marks it. Only finished cells are taken, and never over a finished cell here; a
cell's unfinished steps here are discarded (the import names them).

The other machine starts from an export: a new study directory holding what its cells
need of this one and nothing more (the record, the owner's shared inputs, the finished
baseline, the finished releases they start from), so it spends its time on training,
not on what is done here already (a GPU lent for minutes cannot afford the baseline's).
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Any

from ..errors import InputError
from ..fileio import read_json, sha256_file, write_json
from ..outlock import lock_output_dir, output_lock_holder, release_output_lock
from .config import BASELINE, StudyConfig
from .machine import machine_text, read_machines
from .plan import EVALUATE, RELEASE, Paths, Planner
from .record import check_and_record, differences, read_record, settings_now
from .state import read_state, state_path

IMPORTED = "imported"  # the state.json key an imported cell carries
EXPORTED = "exported"  # a step's key in state.json: the step was copied from the export's
                       # source (its CPU is that machine's, not the one the cell ran on)


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
            replaced[name] = [s.name for s in plan_here.steps
                              if os.path.isdir(s.out) and not s.done]
        check_and_record(config, here.record, {n: now[n] for n in cells})  # now held here
        return [_copy_cell(here, there, name, replaced[name]) for name in cells]
    finally:
        release_output_lock(here.out)


def export_seed(config: StudyConfig, out: str, to: str, cells: list[str]) -> list[str]:
    """Write the new study directory `to` from study `out`, for another machine to run
    `cells` in (`study run --out TO`) before they are imported here; returns lines saying
    what it holds and what to run. Only finished outputs are copied (a live study may go
    on meanwhile: it never rewrites them); `to` appears whole or not at all."""
    here = Paths(out)
    read_record(out)  # a study directory
    for name in cells:
        _check_cell(config, name)
        if config.cell(name).adopt:
            raise InputError(f"--cell {name}: it adopts a finished run of this machine "
                             f"({config.cell(name).adopt}); run it here")
    # every recorded cell, as `study run` there will check them against the record
    check_and_record(config, here.record,
                     settings_now(config, [BASELINE] + [c.name for c in config.cells]),
                     write=False)
    planner = Planner(config, here.out)
    shared = planner.canary_step()
    if not planner.plan(BASELINE).done or (shared is not None and not shared.done):
        raise InputError(f"{out}: its baseline is not finished (`nmtfrag study status`): "
                         f"run the study there first (every cell is tested against it)")
    for name in cells:
        if planner.plan(name).done:
            raise InputError(f"{out}: cell {name!r} is finished here: nothing to run "
                             f"elsewhere")
    seed = _new_study_dir(to, here.out)
    tmp = tempfile.mkdtemp(prefix=".tmp-export-", dir=os.path.dirname(seed))
    try:
        staged = Paths(tmp)
        shutil.copy2(here.record, staged.record)
        os.makedirs(os.path.join(tmp, "owner"), mode=0o700)
        copied = []
        for d, what in ((here.owner_data, "the owner's training corpus with its canaries"),
                        (here.align_model, "the DP releases' public aligner")):
            if os.path.isfile(os.path.join(d, "manifest.json")):
                shutil.copytree(d, os.path.join(tmp, os.path.relpath(d, here.out)))
                copied.append(what)
        shutil.copytree(here.cell(BASELINE), staged.cell(BASELINE))
        releases = [n for n in dict.fromkeys([*planner.release_cells(cells), *cells])
                    if (step := planner.plan(n).step(RELEASE)) is not None and step.done]
        for name in releases:
            _copy_release(here, staged, name)
        if os.path.lexists(seed):  # made meanwhile
            raise InputError(f"--to {seed}: exists already; name a new directory")
        os.rename(tmp, seed)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):  # shutil.Error among them; not an InputError
            raise InputError(f"--to {seed}: could not be written ({exc}); nothing was "
                             f"exported") from None
        raise
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(seed) for f in fs)
    names = " ".join(f"--cell {n}" for n in cells)
    lines = [f"{seed}: {size / 2**20:.1f} MiB: the study's record, its baseline, "
             + ", ".join(copied + [f"{len(releases)} finished release(s)"
                                   + (f" ({', '.join(releases)})" if releases else "")]),
             f"warning: {seed}/owner holds the owner's training pairs and canary secrets, "
             f"and the machine that runs it also needs {config.path}'s model and data "
             f"files (the owner's corpus among them): use only a machine the owner trusts, "
             f"and delete them there once imported"]
    holder = output_lock_holder(here.out)
    if holder is not None:
        lines.append(f"warning: a study run (pid {holder}) holds {out}: if it may reach "
                     f"these cells, restart it with --cell naming the others (an import "
                     f"never replaces a cell finished here)")
    return lines + [
        f"there: nmtfrag study run CONFIG --out {seed} {names}   (SEED copied to that path)",
        f"here:  nmtfrag study import {config.path} --out {here.out} --from {seed} {names}"]


def _new_study_dir(to: str, out: str) -> str:
    """`to` as an absolute path that names nothing yet, outside study `out` (and not
    holding it); its parent is created."""
    to = os.path.abspath(to)
    if os.path.lexists(to):
        raise InputError(f"--to {to}: exists already; name a new directory")
    real = os.path.join(os.path.realpath(os.path.dirname(to)), os.path.basename(to))
    if os.path.commonpath([real, os.path.realpath(out)]) in (real, os.path.realpath(out)):
        raise InputError(f"--to {to}: inside the study directory {out} (or holding it)")
    os.makedirs(os.path.dirname(to), exist_ok=True)
    return to


def _copy_release(here: Paths, staged: Paths, name: str) -> None:
    """A cell's finished release step, its log, and its state's record of that step only
    (a cell's other steps run there afresh)."""
    shutil.copytree(here.step(name, RELEASE), staged.step(name, RELEASE))
    log = here.log(name, RELEASE)
    if os.path.isfile(log):
        os.makedirs(os.path.dirname(staged.log(name, RELEASE)), exist_ok=True)
        shutil.copy2(log, staged.log(name, RELEASE))
    steps = read_state(here, name).get("steps") or {}
    if RELEASE in steps:  # marked: an import counts its CPU as this machine's again
        write_json(state_path(staged, name),
                   {"steps": {RELEASE: dict(steps[RELEASE], **{EXPORTED: True})}})


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
                           "cpu_seconds": {n: 0.0 if st.get(EXPORTED) else
                                           st.get("cpu_seconds", 0.0) for n, st in
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
            if st.get("cpu_seconds", 0.0) > there[n] and not st.get(EXPORTED)]


def cpu_seconds_elsewhere(state: dict[str, Any]) -> float:
    """CPU seconds of an imported cell's steps that were spent on the machines it came
    from (0 for a cell that was not imported)."""
    return sum(_cpu_there(state).values()) if state.get(IMPORTED) else 0.0
