"""Resumable DP-SGD runs: the saved state of an interrupted `finetune --dp` run.

Why: a 10-epoch private run takes hours on a CPU; a stop must cost nothing, and a
resumed run must be the run it continues — the same privacy history (so the same ε),
the same Poisson samples and the same noise as an uninterrupted run. So every
`save_every` noisy steps (and every few minutes: nmtfrag.resume_clock) the whole training
state is written atomically to OUT/owner/dp-state.pt (mode 0600, inside the owner-only
folder, never shipped): the trained parameters, the optimizer's state, the step, the
accountant's history, the per-step records, and the states of the sampling generator
(numpy), the noise generator (torch) and torch's global generator (dropout masks). The
generator states are as secret as the noise itself: they stay with the owner, and the
file is removed once the run has finished. A seeded run's seed goes to
OUT/owner/dp-run.json with the rest of the run's identity.

A run stopped by SIGINT (Ctrl-C) or SIGTERM (`kill`, a scheduler) saves the same state
on its way out, as of its last whole noisy step (nmtfrag.dp.sgd.train_dp): signals wait
while a step's update is under way (`signals_held`), and the generators' states are
those the step began with, so the resumed run draws that step's Poisson sample, dropout
masks and noise again, exactly as an uninterrupted run draws them. The saved history is
the steps taken, nothing more. `interruption_note` says what OUT keeps.

The identity (hashes of the model and data files, every setting that changes what is
trained or how) is written to OUT/owner/dp-run.json before training; `--resume` with
different settings is refused with an error naming what differs.
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Optional, Protocol

from ..errors import InputError
from ..resume_clock import ResumeClock

if TYPE_CHECKING:  # torch and numpy are imported where a state is captured or restored
    import numpy as np
    import torch

    from ..train.job import FineTuneJob
    from ..train.trainable import TrainableSet

State = dict[str, Any]  # what `capture` returns and `torch.save` writes
# The accountant's history: [noise multiplier, sampling rate, steps] per stretch of steps.
History = list[list[Any]]

STATE = "dp-state.pt"
IDENTITY = "dp-run.json"
COUNT = "dp-count.json"  # the DP unit count ñ the run drew (owner-only), reused on resume


def _owner_file(out: str, name: str) -> str:
    """OUT/owner/NAME (without creating the folder: a check must not write)."""
    from ..fileio import OWNER_DIR

    return os.path.join(out, OWNER_DIR, name)


def state_path(out: str) -> str:
    return _owner_file(out, STATE)


def identity_path(out: str) -> str:
    return _owner_file(out, IDENTITY)


class RunSettings(Protocol):
    """What `run_identity` reads of a training method's settings (a dataclass such as
    nmtfrag.dp.config.DPConfig: named here as a protocol, any such dataclass will do)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]
    params: TrainableSet


def run_identity(config: RunSettings, job: FineTuneJob,
                 hashes: Mapping[str, str]) -> dict[str, Any]:
    """What makes two runs the same run: input hashes and every setting that changes
    the trained model or its randomness (not threads, device, logging or saving)."""
    import dataclasses

    cfg = dataclasses.asdict(config)
    for f in dataclasses.fields(config):  # e.g. whether an option was given or defaulted
        if f.metadata.get("identity") is False:
            cfg.pop(f.name, None)
    cfg["params"] = config.params.public_record()
    return {"inputs_sha256": dict(hashes), "config": cfg,
            "job": {k: getattr(job, k) for k in (
                "src_lang", "tgt_lang", "pretokenized", "checkpoint", "tags", "dropout",
                "label_smoothing", "world_size", "train_fraction")}}


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def setting_defaults(config: RunSettings) -> dict[str, Any]:
    """{'config.NAME': default} of the settings with a plain default (what a run saved
    before the setting existed behaved as)."""
    import dataclasses

    return {f"config.{f.name}": f.default for f in dataclasses.fields(config)
            if f.default is not dataclasses.MISSING}


def identity_differences(saved: Mapping[str, Any], now: Mapping[str, Any],
                         defaults: Mapping[str, Any] | None = None) -> list[str]:
    """['name: was X, now Y', …] for every setting or input that differs. A setting the
    saved run does not name (added to the code since) is the same when it now holds its
    default, in `defaults` (setting_defaults)."""
    a, b = _flatten(saved), _flatten(now)
    defaults = defaults or {}
    return [f"{k}: was {a.get(k)!r}, now {b.get(k)!r}"
            for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)
            and not (k not in a and k in defaults and b.get(k) == defaults[k])]


def check_resumable(out: str, identity: Mapping[str, Any],
                    defaults: Mapping[str, Any] | None = None) -> None:
    """Refuse `--resume` without an interrupted run in `out`, or with other settings
    (identity_differences, `defaults` for settings added since)."""
    import json

    from ..fileio import MANIFEST

    if os.path.isfile(os.path.join(out, MANIFEST)):
        raise InputError(f"{out}: run already finished (manifest.json); nothing to resume")
    if not (os.path.isfile(state_path(out)) and os.path.isfile(identity_path(out))):
        raise InputError(f"{out}: no interrupted DP run to resume (needs owner/{STATE} "
                         f"and owner/{IDENTITY}; a run saves its state every "
                         "--dp-save-every steps)")
    with open(identity_path(out), encoding="utf-8") as f:
        saved = json.load(f)
    diff = identity_differences(saved, json.loads(json.dumps(identity)), defaults)
    if diff:
        raise InputError(f"{out}: --resume with other settings than the interrupted run "
                         f"({'; '.join(diff)}); resume with the same ones, or start "
                         "again with --overwrite")


def refuse_unfinished(out: str, overwrite: bool) -> None:
    """Without --resume, an interrupted run is kept unless --overwrite says otherwise."""
    from ..fileio import MANIFEST

    if (os.path.isfile(state_path(out)) and not overwrite
            and not os.path.isfile(os.path.join(out, MANIFEST))):
        raise InputError(f"{out} holds an interrupted DP run: pass --resume to continue "
                         "it or --overwrite to start again")


def write_identity(out: str, identity: Mapping[str, Any]) -> None:
    from ..fileio import write_owner_json

    write_owner_json(out, identity, name=IDENTITY)


def save_count(out: str, n_hat: float, sigma: Optional[float] = None,
               accountant: Optional[str] = None) -> None:
    """Keep the DP unit count ñ (nmtfrag.dp.unit_count) so a resumed run plans with the
    same one: drawing it again would change the rates and spend the count twice. Once
    planned, the noise multiplier σ and the accountant that set it are kept beside it:
    a resumed run continues with that σ, never a recalibrated one."""
    from ..fileio import write_owner_json

    rec: dict[str, Any] = {"noisy_count": n_hat}
    if sigma is not None:
        rec.update(noise_multiplier=sigma, accountant=accountant)
    write_owner_json(out, rec, name=COUNT)


def saved_count(out: str) -> Optional[float]:
    """ñ of the interrupted run, or None."""
    from ..fileio import read_json

    path = _owner_file(out, COUNT)
    return float(read_json(path)["noisy_count"]) if os.path.isfile(path) else None


def saved_sigma(out: str) -> Optional[float]:
    """σ the interrupted run planned (and its saved history used), or None (a run saved
    before σ was kept here: it is planned again, with the run's recorded accountant)."""
    from ..fileio import read_json

    path = _owner_file(out, COUNT)
    sigma = read_json(path).get("noise_multiplier") if os.path.isfile(path) else None
    return None if sigma is None else float(sigma)


def saved_accountant(out: str) -> Optional[str]:
    """The accountant in the interrupted run's identity (OUT/owner/dp-run.json), or None."""
    import json

    if not os.path.isfile(identity_path(out)):
        return None
    with open(identity_path(out), encoding="utf-8") as f:
        acc = (json.load(f).get("config") or {}).get("accountant")
    return acc if isinstance(acc, str) else None


def discard(out: str) -> None:
    """Remove the saved state (a finished run, or a run started again)."""
    for p in (state_path(out), identity_path(out), _owner_file(out, COUNT)):
        if os.path.exists(p):
            os.unlink(p)


def prepare(out: str, identity: Mapping[str, Any], resuming: bool, overwrite: bool,
            defaults: Mapping[str, Any] | None = None) -> None:
    """Before training: check a resume against the interrupted run, or start afresh
    (refusing to drop an interrupted run without --overwrite) and record the identity;
    `defaults`: of the settings (setting_defaults), for a run saved before one existed."""
    _remove_partial_saves(out)
    if resuming:
        check_resumable(out, identity, defaults)
        return
    refuse_unfinished(out, overwrite)
    discard(out)
    write_identity(out, identity)


def _remove_partial_saves(out: str) -> None:
    """A kill during a save leaves its temp file (fileio.atomic_writer) in OUT/owner/."""
    from ..fileio import OWNER_DIR

    owner = os.path.join(out, OWNER_DIR)
    for name in os.listdir(owner) if os.path.isdir(owner) else ():
        if name.startswith(".tmp-"):
            os.unlink(os.path.join(owner, name))


class Interrupted(BaseException):
    """Raised by Checkpointer.stop_after (tests): a kill at a chosen step."""


def generator_states(rng: np.random.Generator, generator: torch.Generator) -> State:
    """Copies of the states of the sampling generator (numpy), the noise generator and
    torch's global generators, as `capture` saves them."""
    import torch

    return {"sampling_rng": rng.bit_generator.state,
            "noise_generator": generator.get_state(),
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": (torch.cuda.get_rng_state_all() if torch.cuda.is_available()
                         else None)}


def capture(step: int, params: Sequence[torch.Tensor], optimizer: torch.optim.Optimizer,
            rng: np.random.Generator, generator: torch.Generator,
            history: Iterable[Iterable[float]], records: Iterable[dict],
            generators: Optional[State] = None,
            lrs: Optional[Sequence[float]] = None) -> State:
    """Everything a later process needs to continue after noisy step `step`.

    `generators` (from `generator_states`) and `lrs` (each parameter group's learning
    rate) are the ones noted when step `step` ended, for a run stopped during the next
    step: the generators have moved since, and the learning rate may have been set for
    it (a resumed run sets it again; kept as the periodic save keeps it)."""
    opt_state = optimizer.state_dict()
    for group, lr in zip(opt_state["param_groups"], lrs or ()):
        group["lr"] = lr  # state_dict's groups are copies: the optimizer is unchanged
    state: State = {"step": step, "params": [p.detach().cpu().clone() for p in params],
                    "optimizer": opt_state, "history": [list(h) for h in history],
                    "records": list(records)}
    state.update(generators if generators is not None else generator_states(rng, generator))
    return state


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block ends, then act as they would have: a noisy
    step's update (noise drawn, parameters and optimizer moved, history and records
    extended) is whole, or not begun, when a run stops. A second signal during the block
    acts at once (the state saved on the way out is then the last periodic one). Outside
    the main thread, or where a handler was not set from Python, the block runs as is."""
    import signal
    import threading

    signums = (signal.SIGINT, signal.SIGTERM)
    old = {s: signal.getsignal(s) for s in signums}
    if threading.current_thread() is not threading.main_thread() or \
            any(h is None for h in old.values()):
        yield
        return
    pending: list[signal.Signals] = []

    def hold(signum, frame):
        if pending:  # asked twice: stop now
            _deliver(signum, old[signum], frame)
        pending.append(signal.Signals(signum))

    try:
        for s in signums:
            signal.signal(s, hold)
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
    if pending:
        _deliver(pending[0], old[pending[0]], None)


def _deliver(signum, handler, frame):
    """Act on `signum` as `handler` (the one signals_held replaced) would have."""
    import signal

    signal.signal(signum, handler)
    if callable(handler):
        handler(signum, frame)  # Python's KeyboardInterrupt, the CLI's SystemExit
    elif handler == signal.SIG_DFL:
        signal.raise_signal(signum)


def interruption_note(out: str, shown: str, step: Optional[int] = None,
                      total: Optional[int] = None) -> str:
    """What an interrupted DP run left in OUT (`shown`: OUT as the user gave it) and how
    to continue it; `step`: the step of the state this process saved or loaded, if any."""
    if os.path.isfile(state_path(out)):
        at = (f"at step {step}" + (f" of {total}" if total else "")
              if step is not None else "as last saved")
        return (f"{shown} keeps the DP run's state {at}; continue with --resume (the "
                f"same command and options)")
    return (f"{shown} holds no saved state of the DP run (it stopped before its first "
            f"noisy step, or --dp-save-every is 0): run the same command again, without "
            f"--resume, to start over")


def restore(state: Mapping[str, Any], params: Sequence[torch.Tensor],
            optimizer: torch.optim.Optimizer, rng: np.random.Generator,
            generator: torch.Generator) -> tuple[int, History, list[dict]]:
    """Put a captured state back; returns (next step, history, records)."""
    import torch

    if len(state["params"]) != len(params) or any(
            a.shape != b.shape for a, b in zip(state["params"], params)):
        raise InputError("the saved DP state does not match the trained parameters")
    with torch.no_grad():
        for p, saved in zip(params, state["params"]):
            p.copy_(saved.to(p.device, p.dtype))
    optimizer.load_state_dict(state["optimizer"])
    rng.bit_generator.state = state["sampling_rng"]
    generator.set_state(state["noise_generator"])
    torch.set_rng_state(state["torch_rng"])
    if state.get("cuda_rng") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    return state["step"], [list(h) for h in state["history"]], list(state["records"])


class Checkpointer:
    """Saves the training state every `every` steps (and when nmtfrag.resume_clock says a
    point is due) to `path`; `load()` gives the saved state back. Only rank 0 writes.
    A class, not a closure, so spawned processes get it."""

    stop_after: Optional[int] = None  # tests set it: raise Interrupted after this step (a kill)

    def __init__(self, path: str, every: Optional[int] = 10, resume: bool = False) -> None:
        self.path, self.every, self.resume = path, int(every or 0), resume
        self.clock = ResumeClock()
        self.step: Optional[int] = None  # of the state in `path` this process saved or loaded

    def load(self) -> Optional[State]:
        import torch

        if not self.resume:
            return None
        state = torch.load(self.path, map_location="cpu", weights_only=False)
        self.step = state["step"]
        return state

    def after_step(self, step: int, total: int, get_state: Callable[[], State],
                   rank: int = 0) -> None:
        """Save after `step` when due (not after the last one: the run then finishes)."""
        due = self.every and (step % self.every == 0 or self.clock.due())
        if rank == 0 and due and step < total:
            self.save(get_state())
        if self.stop_after is not None and step >= self.stop_after:
            raise Interrupted(f"stopped after step {step} (test hook)")

    def save(self, state: State) -> None:
        import torch

        from ..fileio import atomic_writer

        with self.clock.timing(), atomic_writer(self.path, "wb", private=True) as f:
            torch.save(state, f)
        self.step = state["step"]

    def save_interrupted(self, state: State, rank: int = 0) -> None:
        """Save the state of the last whole step of a run stopped by a signal (unless
        saving is off: `every` 0). Only rank 0 writes."""
        if rank == 0 and self.every:
            self.save(state)
