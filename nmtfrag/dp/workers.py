"""The processes that run DP-SGD: the device, the model made opacus-ready, the owner's
step log, and training in this process or in `world_size` spawned ones
(torch.distributed; everything handed to a spawned process is picklable: the log is a
class, the rate of each step a partial of a module-level function, nmtfrag.dp.rates).
"""
from __future__ import annotations

import functools
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InputError, note_interruption
from ..fileio import atomic_writer, owner_path
from ..randomness import Seed
from ..train import trainable
from ..train.job import FineTuneJob
from . import resume
from .config import DPConfig
from .planning import NoisePlan
from .simulate import RunMode

if TYPE_CHECKING:
    import torch


def dp_device(device: str | None = None) -> torch.device:
    """The torch device of a DP run: `device`, else cuda if available, else cpu."""
    import torch

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda: no CUDA device is available")
    return torch.device(device)


@dataclass
class ModelSetup:
    """The model as DP-SGD trains it: the trained set applied, the clipping method and
    the pairs per forward/backward pass."""
    model: torch.nn.Module
    n_trainable: int
    clipping: str
    clipping_why: str
    physical_batch: int
    smaller: str | None


def set_up_model(model: torch.nn.Module, config: DPConfig, seed: Seed,
                 device: torch.device) -> ModelSetup:
    """Apply the trained set, move to `device`, make the model opacus-ready (refusing
    unsupported layers before training) and choose the clipping."""
    from . import clipping as clipping_choice
    from . import fairseq_opacus

    n_trainable, _ = trainable.apply(model, config.params,
                                     seed=seed.value if seed.reproducible else 0)
    model = model.to(device)
    fairseq_opacus.prepare_model(model)
    clipping, why = clipping_choice.choose_clipping(model, config.clipping, config.unit,
                                                    config.physical_batch)
    physical_batch, smaller = config.physical_batch, None
    if clipping == "hooks":  # fewer pairs per pass where their gradients would not fit
        physical_batch, smaller = clipping_choice.fitting_physical_batch(
            model, config.physical_batch)
    return ModelSetup(model, n_trainable, clipping, why, physical_batch, smaller)


class StepLog:
    """One JSON line per noisy step into the owner-only train.log, and a progress line on
    stderr every `interval` steps. A class, not a closure, so spawned processes get it."""

    def __init__(self, path: str, steps: int, interval: int = 50, quiet: bool = False):
        self.path, self.steps, self.interval, self.quiet = path, steps, interval, quiet
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))

    def restart(self, records: list[dict]) -> None:
        """A resumed run: the log holds exactly the saved steps' records."""
        with atomic_writer(self.path, private=True) as f:
            f.writelines(json.dumps(rec) + "\n" for rec in records)

    def __call__(self, rec: dict) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")
        if not self.quiet and (rec["step"] % self.interval == 0 or rec["step"] == 1):
            print(f"dp step {rec['step']}/{self.steps}: {rec['examples']} pairs, "
                  f"loss/pair {rec['mean_loss']:.2f}, SNR {rec['snr']:.3f}, "
                  f"{rec['seconds']:.1f}s", file=sys.stderr)


@dataclass
class RunRecord:
    """What training measured: per-step records, the privacy history, timings and the
    validation losses before and after (bits per target token)."""
    records: list[dict]
    history: list
    train_seconds: float
    before: float | None = None
    after: float | None = None
    wall_seconds: float = 0.0


def train(job: FineTuneJob, config: DPConfig, plan: NoisePlan, setup: ModelSetup,
          seed: Seed, train_ds: object, valid_ds: object, units: list[list[int]] | None,
          out: str, work: str, device: torch.device,
          public_ds: object | None = None) -> RunRecord:
    """DP-SGD (nmtfrag.dp.sgd.train_dp) with the planned noise, in one process or
    `job.world_size`; its per-step log goes to OUT/owner/train.log. `public_ds`: the
    public pairs every logical batch takes `config.public_batch` of."""
    from .batches import PublicBatches

    ls = job.label_smoothing
    log = StepLog(owner_path(out, "train.log"), plan.steps, max(1, job.log_interval or 50),
                  job.quiet)
    t_train = time.time()
    checkpointer = resume.Checkpointer(resume.state_path(out), job.save_every, job.resume)
    train_kwargs = dict(
        steps=plan.steps, rate_of_step=config.rate.step_rates(
            plan.train_segments, plan.n_plan, resized=config.simulate_batch is not None),
        divisor_units=plan.n_plan,
        noise_multiplier=plan.train_sigma, max_grad_norm=config.max_grad_norm,
        physical_batch=setup.physical_batch, max_tokens=config.physical_max_tokens,
        lr=config.lr,
        weight_decay=config.weight_decay, seed=seed, label_smoothing=ls, log=log,
        valid_fn=(None if job.world_size > 1 or valid_ds is None
                  else functools.partial(valid_bits, valid_ds, ls)),
        valid_every=config.valid_every, clipping=setup.clipping,
        checkpointer=checkpointer,
        warmup_steps=config.warmup_steps, clip_mode=config.clip_mode, loss=config.loss,
        allow_zero_noise=config.mode is RunMode.CONTROL,
        public=(PublicBatches(public_ds, config.public_batch, config.public_weight)
                if public_ds is not None else None),
        public_only=config.public_only)
    try:
        records, history = run_training(setup.model, train_ds, units, train_kwargs,
                                        world_size=job.world_size, device=device,
                                        work=work, threads=job.threads)
    except (KeyboardInterrupt, SystemExit) as exc:  # train_dp saved its last whole step
        note_interruption(exc, resume.interruption_note(out, job.out, checkpointer.step,
                                                        plan.steps))
        raise
    return RunRecord(records, history, time.time() - t_train)


def run_training(model: torch.nn.Module, dataset: object, units: list[list[int]] | None,
                 train_kwargs: dict, *, world_size: int, device: torch.device, work: str,
                 threads: int | None = None) -> tuple[list[dict], list]:
    """train_dp in this process, or in `world_size` processes through torch.distributed
    (torch.multiprocessing.spawn; gloo on CPU, nccl with one GPU per process). Returns
    (records, history); `model` holds the trained weights afterwards."""
    from .sgd import train_dp

    if world_size <= 1:
        records, history, _ = train_dp(model, dataset, units=units, **train_kwargs)
        return records, history
    import torch
    import torch.multiprocessing as mp

    if device.type == "cuda" and torch.cuda.device_count() < world_size:
        raise InputError(f"{world_size} processes on CUDA need {world_size} GPUs; "
                         f"{torch.cuda.device_count()} found")
    result = os.path.join(work, "dp-result.pt")
    mp.spawn(_worker, nprocs=world_size, join=True,
             args=(world_size, os.path.join(work, "dist-init"), model.cpu(), dataset, units,
                   train_kwargs, device.type, threads, result))
    out = torch.load(result, weights_only=False)
    os.unlink(result)
    model.load_state_dict(out["state"])
    return out["records"], out["history"]


def _worker(rank, world_size, init_file, model, dataset, units, train_kwargs, device_type,
            threads, result):
    """One DP-SGD process; rank 0 logs and saves the trained weights for the parent."""
    import copy

    import torch
    import torch.distributed as dist

    from . import fairseq_opacus
    from .sgd import train_dp

    if threads:
        torch.set_num_threads(threads)
    dist.init_process_group("nccl" if device_type == "cuda" else "gloo",
                            init_method=f"file://{init_file}", rank=rank,
                            world_size=world_size)
    try:
        # spawn hands CPU tensors over in shared memory: every process needs its own
        model = copy.deepcopy(model)
        if device_type == "cuda":
            torch.cuda.set_device(rank)
            model = model.to(torch.device("cuda", rank))
        kwargs = dict(train_kwargs, log=train_kwargs["log"] if rank == 0 else None)
        records, history, _ = train_dp(model, dataset, units=units, **kwargs)
        if rank == 0:
            fairseq_opacus.restore_model(model)
            torch.save({"state": {k: v.detach().cpu() for k, v in model.state_dict().items()},
                        "records": records, "history": history}, result)
    except BaseException:
        dist.destroy_process_group()
        raise
    leave_process_group()


def leave_process_group() -> None:
    """End a spawned process whose work is done and on disk: wait for the others (none
    tears the group down while another still uses it), destroy the group, and exit
    without the interpreter's teardown, in which a gloo process can abort ('terminate
    called without an active exception', seen once in CI) and spawn would report a
    finished run as failed."""
    import torch.distributed as dist

    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def valid_bits(dataset, label_smoothing, model):
    """The validation loss in bits per target token (label-smoothed)."""
    from .sgd import valid_loss

    return valid_loss(model, dataset, label_smoothing=label_smoothing) / math.log(2)
