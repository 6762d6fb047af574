"""`nmtfrag study run`: every cell's steps, resumable, N cells side by side.

Order: the settings check (nothing runs if a recorded cell changed); the canaries; the
baseline's evaluation and the first report (before any training); the phrase releases,
one after another (they share the first one's alignment); then the cells, `jobs` at a
time (a DP release in its cell's turn, one at a time: they share the public aligner),
each with its share of the threads, the report rewritten after every finished cell. A
step whose output holds a manifest.json is skipped, a killed training step
resumes from its saved state, any other unfinished step starts again. One study process
holds OUT's lock (the kernel's flock: a killed run leaves none behind); steps die with it
(nmtfrag.study.child).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from ..errors import InputError
from ..outdir import check_output_dir
from .config import BASELINE, Cell, StudyConfig
from .machine import busy_warning, machine_load, machine_text, note_machine
from .plan import (EVALUATE, EVALUATE_LP, FINETUNE, LENPEN, RELEASE, CellPlan, Paths,
                   Planner, Step)
from .record import check_and_record, settings_now
from .state import cpu_of_live, hold_lock, resumable, settle_killed, update_state

if TYPE_CHECKING:
    from .adopt import ReadArgv

SAVE_CPU_EVERY = 60.0  # seconds between saves of a running step's CPU time


@dataclass
class Progress:
    """One line per step on stderr: clock, time since the start, cell, what happens."""
    t0: float = field(default_factory=time.time)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, message: str) -> None:
        e = int(time.time() - self.t0)
        with self.lock:
            print(f"[study {time.strftime('%H:%M:%S')} +{e // 3600}:{e % 3600 // 60:02d}:"
                  f"{e % 60:02d}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- steps
class Stopped(Exception):
    """The study was asked to stop (SIGTERM, Ctrl-C): steps keep what they saved."""


class StepFailed(Exception):
    pass


class Executor:
    """Runs steps as child processes, accounts their CPU time, stops them on request."""

    def __init__(self, paths: Paths, progress: Progress, read_argv: ReadArgv | None = None):
        self.paths, self.progress = paths, progress
        self.read_argv = read_argv  # from the CLI (None: no adopting)
        self.children: dict[int, subprocess.Popen] = {}
        self.stopping = False
        self._lock = threading.Lock()
        self.serial = threading.Lock()  # DP releases: one learns the shared public aligner

    def argv(self, step: Step, threads: int) -> list[str]:
        flags: list[str] = ["--out", step.out]
        if os.path.isdir(step.out) and os.listdir(step.out):
            flags.append("--resume" if step.resumable and resumable(step.out)
                         else "--overwrite")
        if step.threads:  # CPU threads, on a GPU machine too (jobs share its cores)
            flags += ["--threads", str(threads)]
        return [sys.executable, "-m", "nmtfrag.study.child", str(os.getpid()),
                *step.argv, *flags]

    def run(self, step: Step, threads: int) -> None:
        if self.stopping:
            raise Stopped()
        argv = self.argv(step, threads)
        how = " (resumed)" if "--resume" in argv else ""
        self.progress(f"{step.cell}: {step.name}{how} …")
        log = self.paths.log(step.cell, step.name)
        os.makedirs(os.path.dirname(log), exist_ok=True)
        t0 = time.time()
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"\n$ nmtfrag {' '.join(argv[4:])}\n")
            f.flush()
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=env)
            with self._lock:
                self.children[proc.pid] = proc
            update_state(self.paths, step.cell, lambda s: s.update(
                running={"step": step.name, "pid": proc.pid, "since": t0}))
            status, usage = self._wait(step, proc.pid, t0)
            proc.returncode = code = os.waitstatus_to_exitcode(status)
            with self._lock:
                self.children.pop(proc.pid, None)
        cpu, wall = usage.ru_utime + usage.ru_stime, time.time() - t0

        def record(s: dict) -> None:
            s.pop("running", None)
            st = s["steps"].setdefault(step.name, {"cpu_seconds": 0.0, "wall_seconds": 0.0,
                                                   "attempts": 0})
            st["cpu_seconds"] = round(st["cpu_seconds"] + cpu, 1)
            st["wall_seconds"] = round(st["wall_seconds"] + wall, 1)
            st["attempts"] += 1
            st["last_exit"] = code
            st["last_started"], st["last_ended"] = round(t0, 2), round(t0 + wall, 2)
            if code == 0:
                s.pop("failed", None)
        update_state(self.paths, step.cell, record)
        if code == 0 and step.done:
            self.progress(f"{step.cell}: {step.name} done ({_hms(wall)}, "
                          f"{cpu / 3600:.2f} CPU h)")
            return
        if self.stopping:
            raise Stopped()
        reason = _last_error(log) or f"exit {code}"
        update_state(self.paths, step.cell, lambda s: s.update(
            failed={"step": step.name, "exit": code, "reason": reason}))
        raise StepFailed(f"{step.cell}: {step.name} failed: {reason} (log: {log})")

    def _wait(self, step: Step, pid: int, t0: float) -> tuple[int, Any]:
        """Wait for the step's process; every minute save its CPU time so far, which a
        study killed outright would otherwise lose (state.settle_killed)."""
        last = time.time()
        while True:
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                return status, usage
            if time.time() - last >= SAVE_CPU_EVERY:
                last, cpu = time.time(), cpu_of_live(pid)
                update_state(self.paths, step.cell, lambda s: s.get("running", {}).update(
                    cpu_seconds=round(cpu, 1), seen=round(last, 2)))
            time.sleep(0.5)

    def adopt(self, step: Step, cell: Cell, seed: int, source: str) -> None:
        """A model trained earlier becomes the step's output, once its settings match."""
        from .adopt import adopt

        self.progress(f"{step.cell}: {step.name}: adopting {source} …")
        try:
            adopt(step, cell, seed, source, self.read_argv)
        except InputError as exc:
            update_state(self.paths, step.cell, lambda s: s.update(
                failed={"step": step.name, "exit": 2, "reason": str(exc)}))
            raise StepFailed(f"{step.cell}: {exc}") from None
        update_state(self.paths, step.cell, lambda s: s.update(adopted_from=source))
        self.progress(f"{step.cell}: {step.name} adopted (settings checked)")

    def stop(self) -> None:
        self.stopping = True
        with self._lock:
            for proc in self.children.values():
                try:
                    proc.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass


def _last_error(log: str) -> str | None:
    """The last attempt's `error:` line (else its last line): the log keeps every attempt,
    each after its `$ nmtfrag …` line."""
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            lines = [ln.strip() for ln in f if ln.strip()]
    except OSError:
        return None
    starts = [k for k, ln in enumerate(lines) if ln.startswith("$ nmtfrag ")]
    lines = lines[starts[-1] + 1:] if starts else lines
    errors = [ln for ln in lines if ln.startswith("error:")]
    return (errors or lines)[-1] if lines else None


def _hms(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


# --------------------------------------------------------------------------- the study
def run_study(config: StudyConfig, out: str, jobs: int | None = None,
              threads: int | None = None, cells: list[str] | None = None,
              write_report: Callable[[StudyConfig, str], Any] | None = None,
              read_argv: ReadArgv | None = None, wait: bool = False) -> int:
    """Run (or continue) the study in `out`. Returns 0, or 1 when a cell failed (143
    when stopped by a signal); raises InputError before running anything on a bad
    request or a changed setting. `write_report`: nmtfrag.study.report's by default;
    `read_argv`: how a finetune command line reads (adopt.ReadArgv; `nmtfrag study run`
    passes the command's own), needed only by cells that adopt a finished run; `wait`:
    while another run holds `out`, wait for it to end instead of refusing (a queue of
    `--cell` runs in an order of one's own)."""
    if write_report is None:
        from .report import write_report as default_report
        write_report = default_report
    names = [c.name for c in config.cells]
    for name in cells or ():
        if name not in names and name != BASELINE:
            raise InputError(f"--cell {name}: no such cell in {config.path} "
                             f"(cells: {', '.join(names)})")
    chosen = [n for n in names if not cells or n in cells]
    check_study_out(config, out)
    paths = Paths(out)
    jobs = jobs or config.machine.jobs
    total_threads = threads or config.machine.threads or os.cpu_count() or 1
    per_job = max(1, total_threads // min(jobs, max(1, len(chosen))))
    now = settings_now(config, [BASELINE] + names)
    check_and_record(config, paths.record, now, write=False)  # before OUT is touched
    hold_lock(paths.out, wait=wait)
    check_and_record(config, paths.record, now)  # again: a waited-for run may have recorded
    progress = Progress()
    for what in settle_killed(paths, [BASELINE] + names):
        progress(f"{what}: the last run was killed outright; its CPU time so far is counted")
    ex = Executor(paths, progress, read_argv)
    planner = Planner(config, paths.out)
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

    def on_signal(signum: int, frame: Any) -> None:
        progress(f"stopping (signal {signum}): each step keeps what it saved")
        ex.stop()
    for sig in previous:
        signal.signal(sig, on_signal)
    report = _Reporter(config, paths.out, write_report, progress)
    failed: list[str] = []
    try:
        progress(f"study {config.title!r} in {paths.out}: {len(chosen)} cells + the "
                 f"baseline, {jobs} at a time, {per_job} thread(s) each")
        progress("machine: " + machine_text(note_machine(paths, config.machine, jobs, per_job,
                                                         chosen)))
        busy = (busy_warning(os.cpu_count() or 1, machine_load(), jobs, per_job)
                if config.machine.device == "cpu" else None)  # a GPU run trains elsewhere
        if busy:
            progress("warning: " + busy)
        _data_checks(config, progress)
        _shared_inputs(planner, ex, total_threads)
        base = planner.plan(BASELINE)
        # the baseline's BLEU first, and its decode with the public-chosen length penalty
        # (every cell's own such decode is tested against it)
        _run_steps(ex, [s for s in base.steps if s.name in (EVALUATE, LENPEN, EVALUATE_LP)],
                   total_threads)
        report()
        failed += _releases(planner, ex, chosen)
        plans = [base] + [planner.plan(n) for n in chosen if n not in failed]
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            for name, error in zip([p.cell for p in plans], pool.map(
                    lambda p: _run_cell(ex, config, p, per_job, report), plans)):
                if error:
                    failed.append(name)
                    progress(f"error: {error}")
        if ex.stopping:
            raise Stopped()
    except Stopped:
        progress("stopped: run the same command again to continue where each cell stands")
        return 143
    except StepFailed as exc:  # a step every cell needs (canaries, the baseline's BLEU)
        progress(f"error: {exc}; no cell can run without it: fix the cause and run again")
        return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    report()
    if failed:
        progress(f"error: {len(failed)} cell(s) failed: {', '.join(failed)}; fix the cause "
                 f"(see each cell's log) and run again: finished steps are kept")
        return 1
    progress(f"done: {os.path.join(paths.report, 'report.md')}")
    return 0


def check_study_out(config: StudyConfig, out: str) -> None:
    """Refuse, before anything is written, an OUT that holds another command's output
    (a release, a model), lies inside one, or is, holds or lies inside the study's
    model or data (outdir.check_output_dir; InputError). A study directory itself has no
    manifest.json, so continuing one passes. Why: `study run --out RELEASE` wrote
    study.json and cells/ into a finished release, then failed."""
    d = config.data
    data = [d.files(p) for p in (d.train, d.valid, d.test, d.public_align, d.public_train,
                                 d.public_valid) if p]
    check_output_dir(os.path.abspath(out), [config.model, data], kind=None)


def _run_steps(ex: Executor, steps: list[Step], threads: int) -> None:
    for step in steps:
        if not step.done:
            ex.run(step, threads)


def _data_checks(config: StudyConfig, progress: Progress) -> None:
    """What would distort the comparison (a target holding its copied source, all caps,
    duplicated pairs, test pairs also in train): said before anything trains."""
    from ..data.stats import describe_corpora, stats_inputs

    d = config.data
    inputs = stats_inputs(train=list(d.files(d.train)), test=list(d.files(d.test)),
                          src_lang=d.src_lang, tgt_lang=d.tgt_lang)
    for w in describe_corpora(inputs, src_lang=d.src_lang, tgt_lang=d.tgt_lang).warnings():
        progress(f"warning: {w}")
    if d.public_train:
        from ..train.public_mix import lines_also_public

        public_src = d.files(d.public_train)[0]
        for split in ("train", "test"):
            shared, n = lines_also_public(public_src, d.files(getattr(d, split))[0])
            if shared:
                progress(f"warning: {shared:,} of the {n:,} {split} sources are also in "
                         f"[data] public_train: a cell trained on public pairs may owe "
                         f"part of its gain to them")


def _shared_inputs(planner: Planner, ex: Executor, threads: int) -> None:
    """The canaried training corpus every cell trains on."""
    step = planner.canary_step()
    if step is not None:
        _run_steps(ex, [step], threads)


def _releases(planner: Planner, ex: Executor, chosen: list[str]) -> list[str]:
    """The releases `chosen` needs first (Planner.release_cells: the first phrase cell's
    alignment first, the other phrase cells reuse it, even when that cell itself is not
    chosen; and the DP or composed releases a public control's public draw is sized by);
    the cells whose release failed. A chosen cell's own DP release is made in its turn
    (its aligner is public: nothing to share but its model)."""
    broken: list[str] = []  # cells without a release
    first = planner.first_phrase_cell()
    for name in planner.release_cells(chosen):
        if name in broken:
            continue
        step = planner.plan(name).step(RELEASE)
        if step is None or step.done:
            continue
        try:
            ex.run(step, 1)
        except StepFailed as exc:
            ex.progress(f"error: {exc}")
            broken.append(name)
            if name == first:  # the other phrase cells reuse its alignment
                broken += [c.name for c in planner.c.cells if c.approach == "phrases"]
    # a chosen cell fails with its release, a public control with its like-cell's
    return [n for n in chosen if n in broken or (
        planner.c.cell(n).approach == "public" and planner.c.cell(n).like in broken)]


def _run_cell(ex: Executor, config: StudyConfig, plan: CellPlan, threads: int,
              report: "_Reporter") -> str | None:
    """One cell's remaining steps; the report after its evaluation and at its end.
    Returns the error, or None."""
    ran = False
    try:
        for step in plan.steps:
            if step.done:
                continue
            if step.name == RELEASE:
                with ex.serial:
                    ex.run(step, threads)
            elif step.name == FINETUNE and plan.adopt:
                ex.adopt(step, config.cell(plan.cell), config.seed, plan.adopt)
            else:
                ex.run(step, threads)
            ran = True
            if step.name == EVALUATE:
                report()
        if ran:
            report()
        return None
    except StepFailed as exc:
        return str(exc)
    except Stopped:
        return None


class _Reporter:
    """Rewrites the report, one writer at a time; a failure to write it is said, and
    the study goes on (the report can be rewritten with `nmtfrag study report`)."""

    def __init__(self, config: StudyConfig, out: str, write: Callable, progress: Progress):
        self.config, self.out, self.write, self.progress = config, out, write, progress
        self.lock = threading.Lock()

    def __call__(self) -> None:
        with self.lock:
            try:
                rows = self.write(self.config, self.out)
                self.progress(f"report: {len(rows)} cell(s) -> "
                              f"{os.path.join(self.out, 'report', 'report.md')}")
            except Exception as exc:  # noqa: BLE001 — the study must not die for its report
                self.progress(f"warning: the report could not be written: "
                              f"{type(exc).__name__}: {exc}")
