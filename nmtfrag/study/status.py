"""`nmtfrag study status`: where every cell stands, what it has cost, how far it has to go.

Why: a study runs for days across sessions; whoever picks it up needs, without starting
anything, each cell's state (done, running, interrupted and resumable, failed, pending),
its CPU time so far and, where the records tell, its progress against its cap or plan.
"""
from __future__ import annotations

import json
import math
import os
import re
import statistics
from typing import Any

from ..fileio import read_json
from .config import BASELINE, FIXED_PASSES, Cell, StudyConfig
from .plan import FINETUNE, CellPlan, Paths, Planner
from ..outlock import output_lock_holder
from .machine import device_text, read_machines
from .record import check_same_study
from .state import cpu_of_live, read_state, resumable
from .training_end import how_training_ended
from .transfer import IMPORTED, cpu_seconds_elsewhere


def training_progress(paths: Paths, cell: str, config: StudyConfig) -> str | None:
    """'DP step 40 of 100' (DP-SGD, from its owner log); for fairseq, once trained, how
    the run ended (finetune's manifest), else 'epoch 3 of ≤ 10' (from train.log)."""
    ft = paths.step(cell, FINETUNE)
    dp_log = os.path.join(ft, "owner", "train.log")
    if os.path.isfile(dp_log):
        with open(dp_log, encoding="utf-8") as f:
            steps = [ln for ln in f if ln.strip()]
        total = None
        log = paths.log(cell, FINETUNE)
        if os.path.isfile(log):
            with open(log, encoding="utf-8", errors="replace") as f:
                found = re.findall(r"(\d+) noisy steps", f.read())
            total = int(found[-1]) if found else None
        return f"DP step {len(steps)} of {total or '?'}" + _dp_time_left(steps, total)
    # after the DP branch: a DP-SGD run's manifest describes no fairseq training
    rule = config.training_rule(cell)
    ended = finished_training(ft, rule)
    if ended:
        return ended
    log = os.path.join(ft, "train.log")
    if not os.path.isfile(log):
        return None
    epoch = updates = None
    losses: list[tuple[float, float]] = []  # (validation loss, best so far), in order
    with open(log, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.search(r"\| epoch (\d+)", line)
            u = re.search(r"num_updates[= ](\d+)", line)
            epoch = int(m.group(1)) if m else epoch
            updates = int(u.group(1)) if u else updates
            v = re.search(r"valid on 'valid' subset \| loss ([\d.]+) .*\| best_loss ([\d.]+)",
                          line)
            if v:
                losses.append((float(v.group(1)), float(v.group(2))))
    if epoch is None:
        return None
    fixed = rule.approach in FIXED_PASSES
    cap = rule.passes if fixed else rule.training.max_epochs
    cap_u = 0 if fixed else rule.training.max_updates
    return (f"epoch {epoch} of ≤ {cap}" + (f", {updates:,} updates" if updates else "")
            + (f" of ≤ {cap_u:,}" if cap_u else "")
            + ("" if fixed else _early_stop_text(losses, rule.training.patience)))


def _dp_time_left(steps: list[str], total: int | None, last: int = 10) -> str:
    """', about 2.9 h left at 2.0 min a step (median of the last 10)', from the wall
    seconds each DP step's record gives (its noisy step: a validation or a save after it
    is not counted): the median, as a step stretched by a pause or a session's end says
    nothing of the pace; the pace is the machine's as shared now."""
    if not total or len(steps) >= total:
        return ""
    seconds = []
    for line in steps[-last:]:
        try:
            s = json.loads(line).get("seconds")
        except (ValueError, AttributeError):
            continue
        if isinstance(s, (int, float)) and 0 < s < math.inf:
            seconds.append(float(s))
    if not seconds:
        return ""
    pace = statistics.median(seconds)
    left = (total - len(steps)) * pace
    when = f"{left / 3600:.1f} h" if left >= 3600 else f"{max(1, round(left / 60))} min"
    each = f"{pace / 60:.1f} min" if pace >= 60 else f"{pace:.0f} s"
    return f", about {when} left at {each} a step (median of the last {len(seconds)})"


def finished_training(ft: str, rule: Cell) -> str | None:
    """How a finished fairseq run ended, from its manifest (written only when finetune
    finishes: a step is done when it exists), in the report's words: train.log's last
    lines tell only the epoch it stopped inside and rounded losses (a run early-stopped
    on a loss equal to the best at three decimals read as "1 of 2 validations since")."""
    try:
        manifest = read_json(os.path.join(ft, "manifest.json")) or {}
    except (OSError, ValueError):
        return None
    result = manifest.get("result") or {}
    how = how_training_ended(rule, manifest)
    updates, epochs = result.get("num_updates"), result.get("epochs_completed")
    if how is None or updates is None:
        return None
    text = f"{how}: {updates:,} updates" + (
        f" ({epochs} epoch{'s' * (epochs != 1)} completed)" if epochs is not None else "")
    best, loss = result.get("best_checkpoint_updates"), result.get("valid_loss_best")
    if rule.approach not in FIXED_PASSES and best is not None:
        text += f", best at {best:,}" + (f" (valid loss {loss:.3f})" if loss is not None
                                         else "")
    return text


def _early_stop_text(losses: list[tuple[float, float]], patience: int) -> str:
    """How near early stopping a run is: its best validation loss and how many of the
    `patience` validations fairseq waits for an improvement have passed without one."""
    if not losses or patience <= 0:
        return ""
    best = losses[-1][1]
    since = 0
    for loss, _ in reversed(losses):
        if loss <= best:
            break
        since += 1
    return (f"; best valid loss {best:.3f}, {since} of {patience} validations since "
            f"without a better one")


def cell_status(paths: Paths, plan: CellPlan, config: StudyConfig, live: bool,
                in_run: bool = True) -> dict[str, Any]:
    state = read_state(paths, plan.cell)
    cpu = sum(s.get("cpu_seconds", 0.0) for s in state.get("steps", {}).values())
    running: dict[str, Any] = state.get("running") or {}
    alive = bool(running) and live and os.path.exists(f"/proc/{running['pid']}")
    if running and not alive:
        cpu += running.get("cpu_seconds", 0.0)  # killed outright: its last saved figure
    done = [s.name for s in plan.steps if s.done]
    if plan.done:
        what = "done" + (f" (imported; ran on {_devices(state[IMPORTED])})"
                         if state.get(IMPORTED) else "")
    elif alive:
        what = f"running: {running['step']}"
        cpu += cpu_of_live(int(running["pid"]))
    elif state.get("failed"):
        f = state["failed"]
        what = f"failed at {f['step']}: {f['reason']}"
    elif done or any(os.path.isdir(s.out) for s in plan.steps):
        nxt = next(s for s in plan.steps if not s.done)
        how = "resumes" if nxt.resumable and resumable(nxt.out) else "starts"
        what = (f"waiting: {nxt.name} {how} in its turn" if live and in_run else
                f"interrupted: {nxt.name} {how} on the next run that runs it")
    else:
        what = "waiting" if live and in_run else "pending"
    if live and not in_run and not plan.done:
        what += " (not in the live run's --cell list)"
    return {"cell": plan.cell, "approach": plan.approach, "state": what,
            "imported": bool(state.get(IMPORTED)),
            "steps_done": f"{len(done)}/{len(plan.steps)}", "cpu_hours": cpu / 3600,
            "cpu_hours_elsewhere": cpu_seconds_elsewhere(state) / 3600,
            "progress": (training_progress(paths, plan.cell, config)
                         if plan.cell != BASELINE else None)}


def _devices(imported: dict[str, Any]) -> str:
    """'cuda (NVIDIA H100 80GB HBM3)': where an imported cell ran."""
    seen = dict.fromkeys(device_text(m) for m in imported.get("machines") or ())
    return ", ".join(seen) or "an unrecorded machine"


def study_status(config: StudyConfig, out: str) -> tuple[int | None, list[dict[str, Any]]]:
    """(pid of the live run or None, one record per cell); InputError for a config that
    is not OUT's study (its cells would show as pending, OUT's real ones hidden)."""
    paths = Paths(out)
    if os.path.isfile(paths.record):
        check_same_study(config, out)
    holder = output_lock_holder(paths.out)
    planner = Planner(config, paths.out)
    runs = read_machines(paths)
    chosen = runs[-1].get("cells") if holder is not None and runs else None
    return holder, [cell_status(paths, p, config, holder is not None,
                                chosen is None or p.cell in chosen or p.cell == BASELINE)
                    for p in planner.all_plans()]


def render(out: str, holder: int | None, rows: list[dict[str, Any]]) -> str:
    head = (f"study {out}: " + (f"running (pid {holder})" if holder else "not running"))
    width = max(len(r["cell"]) for r in rows)
    lines = [head]
    for r in rows:
        extra = f"; {r['progress']}" if r["progress"] else ""
        lines.append(f"  {r['cell']:<{width}}  {r['steps_done']:>5} steps  "
                     f"{r['cpu_hours']:6.2f} CPU h  {r['state']}{extra}")
    elsewhere = sum(r.get("cpu_hours_elsewhere", 0.0) for r in rows)
    total = sum(r["cpu_hours"] for r in rows) - elsewhere
    lines.append(f"  total {total:.2f} CPU h" + (f" here (imported cells: {elsewhere:.2f} "
                                                 f"CPU h on their machines)" if elsewhere
                                                 else ""))
    return "\n".join(lines)
