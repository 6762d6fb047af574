"""The DP fine-tuning façade: a typed config and one entry point, `dp_finetune`.

Why: in the style of opacus' `PrivacyEngine`, the DP track is usable from Python without
argparse; `nmtfrag finetune --dp` only turns its options into a `FineTuneJob`
(nmtfrag.cli.finetune) and a `DPConfig` (nmtfrag.cli.dp_options). The mechanism itself is nmtfrag.dp.sgd; accounting
is nmtfrag.dp.accounting; which parameters train is nmtfrag.train.trainable.

    from nmtfrag.dp.engine import DPConfig, FineTuneJob, dp_finetune
    from nmtfrag.train.trainable import TrainableSet
    job = FineTuneJob(model="wmt19.de-en/", train=("train.de", "train.en"),
                      valid_src="valid.de", valid_tgt="valid.en", out="dp-model/")
    dp_finetune(job, DPConfig(delta=1e-5, target_epsilon=8, logical_batch=1024,
                              steps=40, params=TrainableSet("lora")))

Both training methods share the job (`FineTuneJob`, defined in nmtfrag.train.job and
importable from here) and the training data (nmtfrag.train.data: input resolution,
preprocessing, binarising, the output layout); only the method is this module's.

OUT gets what may be shared (model files, privacy.json, a manifest of public parameters)
and OUT/owner/ (never to be shared): the owner's manifest (paths, hashes, exact counts,
the number of units n, validation losses, seed) and train.log (per-step non-private
statistics). Nothing shared gives n: rates and steps come from a DP count ñ
(nmtfrag.dp.unit_count), composed into the certificate. The private work
dir holding the corpus lives in the system's temp dir, never inside OUT.
"""
from __future__ import annotations

import functools
import json
import math
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from ..train import trainable, data as training_data
from ..train.binarize import fairseq_log_level
from ..data.corpus import scan_text_file
from ..errors import InputError, is_disk_error, note_interruption, with_path
from ..fileio import (MANIFEST, OWNER_DIR, atomic_writer, owner_path, prepare_output_dir,
                      private_workdir, read_json, tool_versions, write_json,
                      write_owner_json)
from ..train.job import FineTuneJob
from ..model_dir import ModelDir, allow_full_checkpoint_load, load_state
from ..randomness import Seed, resolve_seed
from ..train.trainable import TrainableSet
from ..train.data import (MODEL_KIND, TagPolicy, TrainingSources, WorkLayout, model_files,
                             write_finetuned_model)
from . import accounting, recipe, resume, schedule, simulate, unit_count

if TYPE_CHECKING:
    import torch
    from fairseq.tasks.translation import TranslationTask

# Below this many privacy units a DP guarantee is refused unless asked for explicitly:
# each noisy step averages at most that many clipped gradients, so noise that gives a
# meaningful ε drowns the signal (EMEA train has 17 documents).
MIN_UNITS = 100
UNITS = ("sentence", "document")


@dataclass
class DPConfig:
    """The mechanism and its budget: everything the certificate is about."""
    delta: float
    target_epsilon: Optional[float] = None
    noise_multiplier: Optional[float] = None
    max_grad_norm: float = 1.0
    logical_batch: Optional[int] = None        # expected units per noisy step
    sample_rate: Optional[float] = None        # public Poisson rate q (instead of a batch)
    batch_schedule: Optional[str] = None       # "SIZE:FROM_STEP,..." (overrides it)
    physical_batch: int = 32                   # pairs per forward/backward pass
    physical_max_tokens: Optional[int] = 4096  # and padded (source+target) tokens
    steps: Optional[int] = None
    epochs: Optional[float] = None             # used when steps is None
    accountant: str = accounting.DEFAULT_ACCOUNTANT  # calibrates σ, states the ε
    # False: --accountant was left out, so --resume continues with the interrupted run's
    # (a run recorded with "rdp" keeps it). Not part of the run's identity.
    accountant_given: bool = field(default=True, metadata={"identity": False})
    lr: float = recipe.DEFAULT.lr
    weight_decay: float = 0.0
    params: TrainableSet = field(default_factory=recipe.DEFAULT.trainable)
    unit: str = "sentence"
    documents: Optional[str] = None            # one document id per training line
    dedup: bool = False
    allow_few_units: bool = False
    seed: Optional[int] = None                 # None: secret randomness
    valid_every: int = 0
    clipping: str = "auto"                     # auto, ghost or hooks (fairseq_opacus)
    clip_mode: str = "clip"                    # clip, or normalize (automatic clipping)
    loss: str = "sum"                          # each pair's token loss: sum or mean
    warmup_steps: int = 0                      # linear lr warm-up over these steps
    simulate_batch: Optional[int] = None       # not private: nmtfrag.dp.simulate
    control: bool = False                      # σ = 0, not private: nmtfrag.dp.simulate

    def __post_init__(self) -> None:
        """Left out, the rate and the length of the run are the default recipe's
        (nmtfrag.dp.recipe), as are the lr and the trained set above."""
        if self.sample_rate is None and not (self.logical_batch or self.batch_schedule):
            self.sample_rate = recipe.DEFAULT.sample_rate
        if self.steps is None and self.epochs is None:
            self.epochs = recipe.DEFAULT.epochs

    def check(self) -> None:
        """Refuse configurations that would void (or silently change) the guarantee."""
        if self.delta is None:
            raise InputError("--dp needs --delta: a DP guarantee without δ is void")
        if (self.target_epsilon is None) == (self.noise_multiplier is None):
            raise InputError("--dp needs exactly one of --epsilon and "
                             "--noise-multiplier")
        if self.max_grad_norm is None or not self.max_grad_norm > 0:
            raise InputError("--max-grad-norm must be positive")
        if self.physical_max_tokens is not None and self.physical_max_tokens < 1:
            raise InputError("--max-tokens must be ≥ 1")
        if self.physical_batch is None or self.physical_batch < 1:
            raise InputError("--physical-batch must be ≥ 1")
        self.check_rates()
        if self.unit not in UNITS:
            raise InputError(f"--privacy-unit must be one of {UNITS}, got {self.unit!r}")
        if (self.unit == "document") != (self.documents is not None):
            raise InputError("--privacy-unit document needs --documents FILE (one document "
                             "id per training line), and --documents needs it")
        from .clipping import CLIPPING

        if self.clipping not in CLIPPING:
            raise InputError(f"--dp-clipping must be one of {CLIPPING}, "
                             f"got {self.clipping!r}")
        from .clipping import CLIP_MODES, LOSSES

        if self.clip_mode not in CLIP_MODES:
            raise InputError(f"--dp-clip-mode must be one of {CLIP_MODES}")
        if self.loss not in LOSSES:
            raise InputError(f"--dp-loss must be one of {LOSSES}")
        if self.warmup_steps is None or self.warmup_steps < 0:
            raise InputError("--dp-warmup-steps must be ≥ 0")
        simulate.check(self)
        if self.unit == "document" and self.dedup:
            raise InputError("--dedup with --privacy-unit document: a document is the "
                             "unit, so its repeated pairs are already protected with it")


    @property
    def unit_key(self) -> str:
        """The certificate's unit (nmtfrag.dp.accounting.unit_key)."""
        return accounting.unit_key(self.unit, self.dedup)

    def check_rates(self) -> None:
        """--sample-rate Q (q public, fixed in advance) or a logical batch (q = B/ñ,
        chosen from the DP count: only a target ε can be certified, by basic
        composition with a budget fixed before ñ is drawn)."""
        batch = bool(self.batch_schedule or self.logical_batch)
        if self.sample_rate is not None:
            if batch:
                raise InputError("--sample-rate excludes --logical-batch and "
                                 "--batch-schedule: give the rate or the batch")
            if not 0.0 < self.sample_rate <= 1.0:
                raise InputError(f"--sample-rate must be in (0, 1], got {self.sample_rate}")
            return
        if self.noise_multiplier is not None and self.simulate_batch is None \
                and not self.control:  # a simulation or control has no certificate
            raise InputError("--noise-multiplier with --logical-batch/--batch-schedule: "
                             "q = B/ñ comes from the DP count, so the training's ε would "
                             "depend on it and no bound is fixed in advance; use "
                             "--sample-rate Q, or --epsilon")
        accounting.check_delta(self.delta)
        if self.target_epsilon is not None:
            eps_count = unit_count.basic_split(self.delta)[0]
            if not self.target_epsilon > eps_count:
                raise InputError(
                    f"--epsilon {self.target_epsilon} does not exceed the DP unit "
                    f"count's ε_count = {eps_count:.4f} (at δ/10): nothing would be left "
                    "for training; raise it, or use --sample-rate Q (the count then "
                    "costs far less by RDP composition)")


def dp_device(device: str | None = None) -> torch.device:
    """The torch device of a DP run: `device`, else cuda if available, else cpu."""
    import torch

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda: no CUDA device is available")
    return torch.device(device)


def total_steps(config: DPConfig, segments: Sequence[schedule.Segment], n: float) -> int:
    """Noisy steps of the run: `steps`, else enough for `epochs` passes over n units
    (with --sample-rate Q: ceil(epochs / Q), no n needed)."""
    if config.steps:
        return int(config.steps)
    if not config.epochs:
        raise InputError("give a DP training budget: --dp-steps, --max-updates or "
                         "--max-epochs")
    if config.sample_rate is not None:
        return math.ceil(config.epochs / config.sample_rate)
    steps, seen = 0, 0.0
    while seen < config.epochs * n:
        seen += schedule.batch_at(segments, steps)
        steps += 1
    return steps


def plan_noise(config: DPConfig, n_units: float, fixed: Sequence[tuple] = ()
               ) -> tuple[float, list, int, list, dict]:
    """(σ, schedule segments, steps, rate segments, composition) for n_units privacy
    units (in a run: the DP planning count of nmtfrag.dp.unit_count, never the exact n).

    --sample-rate: q and the steps do not depend on n_units, so the training's curve is
    fixed in advance and a target ε is reached with the `fixed` segments (the count's)
    composed in front (RDP composition). Logical batch: q = B/n_units is chosen from the
    count, so σ makes the training alone reach E − ε_count at δ_train (basic
    composition; the split is fixed in advance, whatever n_units is)."""
    if config.sample_rate is not None:
        steps = total_steps(config, (), n_units)  # a fixed rate: no batch segments
        no_batch: list[tuple[int, int | None]] = [(0, None)]
        rate_segs = [(float(config.sample_rate), steps)]
        comp = accounting.composition_record(accounting.RDP_COMPOSITION, config.delta)
        if config.noise_multiplier is not None:
            return float(config.noise_multiplier), no_batch, steps, rate_segs, comp
        assert config.target_epsilon is not None  # DPConfig: σ or a target ε, not neither
        sigma = accounting.noise_multiplier_for(config.target_epsilon, config.delta,
                                                rate_segs, config.accountant, fixed=fixed)
        return sigma, no_batch, steps, rate_segs, comp
    segs = schedule.parse_schedule(config.batch_schedule or f"{config.logical_batch}:0")
    steps = total_steps(config, segs, n_units)
    rate_segs = schedule.rate_segments(segs, steps, n_units)
    if config.noise_multiplier is not None:  # only a simulation or control: no certificate
        comp = accounting.composition_record(accounting.RDP_COMPOSITION, config.delta)
        return float(config.noise_multiplier), segs, steps, rate_segs, comp
    eps_count, d_count, d_train = unit_count.basic_split(config.delta)
    assert config.target_epsilon is not None  # DPConfig: σ or a target ε, not neither
    bound = config.target_epsilon - eps_count  # > 0: DPConfig.check_rates
    while eps_count + bound > config.target_epsilon:  # the certificate is ≤ E, not E + ulp
        bound = math.nextafter(bound, 0.0)
    sigma = accounting.noise_multiplier_for(bound, d_train, rate_segs, config.accountant)
    comp = accounting.composition_record(accounting.BASIC_COMPOSITION, config.delta,
                                         epsilon_train_bound=bound, delta_count=d_count)
    return sigma, segs, steps, rate_segs, comp


def largest_batch(config: DPConfig, n: int) -> int:
    """The largest scheduled logical batch; refused when above the n units (the owner's
    terminal only: q = batch / ñ is then clamped to 1 at most). With --sample-rate no
    rate comes from ñ: 1 (ñ only scales the update)."""
    if config.sample_rate is not None:
        return 1
    size = max(s for _, s in schedule.parse_schedule(config.batch_schedule
                                                     or f"{config.logical_batch}:0"))
    if size > n:
        raise InputError(f"logical batch {size} exceeds the {n} training {config.unit}s "
                         "(sampling rate would be > 1)")
    return size


def early_unit_count(config: DPConfig, src_path: str, documents: list[str] | None) -> int:
    """Units before preprocessing (lines, or distinct document ids): an upper bound on
    the n training will see, enough to refuse δ ≥ 1/n before any expensive step."""
    return len(set(documents)) if documents is not None else scan_text_file(src_path)


def read_documents(path: str, n_lines: int | None = None) -> list[str]:
    """Document ids, one per training line (as `nmtfrag split` writes them)."""
    scan_text_file(path)  # missing, empty or not UTF-8: InputError naming the file/line
    with open(path, encoding="utf-8") as f:
        ids = [ln.strip() for ln in f]
    if n_lines is not None and len(ids) != n_lines:
        raise InputError(f"--documents {path}: {len(ids)} lines, but the training data has "
                         f"{n_lines}: it must give one document id per training line")
    if any(not i for i in ids):
        raise InputError(f"--documents {path}: line {ids.index('') + 1} has no document id")
    return ids


def check_enough_units(config: DPConfig, n_units: int) -> None:
    """Refuse a guarantee over fewer than MIN_UNITS units, saying what it would cost."""
    if n_units >= MIN_UNITS or config.allow_few_units:
        return
    sigma, segs = plan_noise(config, n_units)[:2]
    batch = (max(config.sample_rate * n_units, 1.0) if config.sample_rate is not None
             else min(segs[0][1], n_units))  # segments are (from_step, size)
    raise InputError(
        f"only {n_units} {config.unit}s: a DP guarantee over so few units is refused. "
        f"Each noisy step averages at most {n_units} clipped gradients; this plan needs "
        f"σ = {sigma:.2f}, so the noise of each averaged step has standard deviation "
        f"{sigma / batch:.2f}·C per coordinate, against a signal of norm at most C. Use a "
        f"smaller unit or more data, or pass --allow-few-units to train anyway")


def units_of_rows(train_lines: Sequence[int], documents: Sequence[str]) -> list[list[int]]:
    """Dataset rows grouped by document: [[row, …] per document], documents in order of
    first appearance. `train_lines[row]` is the corpus line of dataset row `row`."""
    groups: dict[str, list[int]] = {}
    for row, line in enumerate(train_lines):
        groups.setdefault(documents[line], []).append(row)
    return list(groups.values())


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


def rate_at(segments: list[tuple[int, int]], n: float, step: int) -> float:
    """Poisson sampling rate of a step: the scheduled logical batch over n units."""
    return schedule.batch_at(segments, step) / n


def fixed_rate(q: float, step: int) -> float:
    """Poisson sampling rate of a step with --sample-rate: q itself, exactly."""
    return q


def step_rates(config: DPConfig, segments: list[tuple[int, int]],
               n_plan: float) -> Callable[[int], float]:
    """rate_of_step for train_dp (picklable, for spawned processes); a simulation
    samples its batches of B_SIM from the segments whatever the planned rate."""
    if config.sample_rate is not None and config.simulate_batch is None:
        return functools.partial(fixed_rate, float(config.sample_rate))
    return functools.partial(rate_at, segments, n_plan)


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


def base_model_privacy(model_dir: str) -> tuple[dict | None, list[dict], dict]:
    """What a base model already spent: (vocabulary entry, earlier DP trainings, note).

    Fine-tuning a DP model again on the owner's data composes with its earlier ε; a base
    fine-tuned without DP is outside any certificate, so it gets a warning."""
    cert_path = os.path.join(model_dir, "privacy.json")
    cert = read_json(cert_path) if os.path.isfile(cert_path) else {}
    earlier = list(cert.get("earlier_training") or [])
    if cert.get("training"):
        earlier.append(cert["training"])
    note: dict[str, int | str] = {"dp_trainings": len(earlier)}
    man_path = os.path.join(model_dir, MANIFEST)
    man = read_json(man_path) if os.path.isfile(man_path) else {}
    if man.get("kind") == "nmtfrag-finetuned-model" and not man.get("dp"):
        note["warning"] = ("the base model was fine-tuned WITHOUT differential privacy: "
                           "if its training data was confidential, this certificate does "
                           "not cover it")
    elif cert.get("base_model", {}).get("warning"):
        note["warning"] = cert["base_model"]["warning"]
    return cert.get("vocabulary"), earlier, note


def unit_text(config: DPConfig) -> str:
    """The certificate's wording of the unit."""
    if config.unit == "document":
        return ("one document (all its sentence pairs together; the documents file "
                "says which pair belongs to which)")
    if config.dedup:
        return "one distinct training sentence pair (duplicates removed with --dedup)"
    return ("one training sentence pair (a pair repeated k times in the data is "
            "protected only as a group of k: use --dedup)")


def _clean_stale_work(out):
    """Older versions put the private work dir inside OUT: remove any left by a kill."""
    for name in os.listdir(out):
        if name.startswith(".dp-work-"):
            shutil.rmtree(os.path.join(out, name), ignore_errors=True)


def _valid_bits(dataset, label_smoothing, model):
    from .sgd import valid_loss

    return valid_loss(model, dataset, label_smoothing=label_smoothing) / math.log(2)


def dp_finetune(job: FineTuneJob, config: DPConfig) -> dict:
    """DP-SGD fine-tuning of `job.model` on `job.train`; writes a model dir to `job.out`.
    Returns a summary dict (also printed as JSON by the CLI)."""
    allow_full_checkpoint_load()
    seed = start(job, config)
    sources = dp_sources(job)  # before the model is loaded: they read no text
    md = training_data.base_model(job)
    documents = early_unit_checks(config, sources)
    prior = PriorPrivacy.of_base_model(md.path, config)
    out, hashes = open_output(job, config, md, sources, documents is not None)
    try:
        return _train_and_write(job, config, seed, sources, md, documents, prior, out,
                                hashes)
    except (KeyboardInterrupt, SystemExit) as exc:  # SIGINT, SIGTERM: say what OUT keeps
        note_interruption(exc, resume.interruption_note(out, job.out))
        raise
    except OSError as exc:  # a full disk: one line naming the file (OUT when none is)
        if not is_disk_error(exc):
            raise
        named = with_path(exc, out)
        if os.path.isfile(resume.state_path(out)):  # the CLI keeps OUT and says so
            note_interruption(named, resume.interruption_note(out, job.out) + "; free "
                              "space first")
        if named is exc:
            raise
        raise named from exc


def _train_and_write(job: FineTuneJob, config: DPConfig, seed: Seed,
                     sources: TrainingSources, md: ModelDir, documents: list[str] | None,
                     prior: PriorPrivacy, out: str, hashes: dict[str, str]) -> dict:
    """dp_finetune once OUT is open: prepare, train, certify, write OUT."""
    t0 = time.time()
    with private_workdir(keep=job.keep_work, prefix="nmtfrag-dp-") as work:
        layout = WorkLayout(work)
        prep, model, task = prepare_model_and_data(job, config, md, sources, layout, seed)
        device = dp_device(job.device)
        units = (None if documents is None
                 else units_of_rows(prep.train_lines, documents))
        train_ds, valid_ds = task.dataset("train"), task.dataset("valid")
        plan = plan_run(config, out, seed, job.resume,
                        len(units) if units is not None else len(train_ds), units)
        setup = set_up_model(model.float(), config, seed, device)
        ls = job.label_smoothing
        validating = job.valid_src is not None  # else no validation set is read at all
        before = _valid_bits(valid_ds, ls, setup.model) if validating else None
        announce(job, config, plan, setup, seed)
        run = train(job, config, plan, setup, seed, train_ds, valid_ds if validating else None,
                    units, out, work, device)
        setup.model = setup.model.to(device)
        after = _valid_bits(valid_ds, ls, setup.model) if validating else None
        write_trained_model(setup.model, config, layout, md, out, job)
    privacy, training, total = certificate(config, job, plan, setup, run.history, seed,
                                           prior)
    run.before, run.after, run.wall_seconds = before, after, time.time() - t0
    not_private = (None if simulate.mode(config) == "private" else
                   simulate.record(config, plan.sigma, plan.planned_segments, plan.steps,
                                   plan.train_sigma, training["epsilon"]))
    write_owner_json(out, owner_record(job, config, md, sources, seed, not_private,
                                       prep.record(), plan, run, hashes))
    shipped: dict | None = privacy
    if not_private:
        shipped = None  # a simulation or control: no certificate, no privacy.json
    else:
        write_json(os.path.join(out, "privacy.json"), privacy)
    resume.discard(out)  # finished: the saved state (generator states too) goes
    write_json(os.path.join(out, MANIFEST), public_manifest(
        job, config, plan, setup, seed, shipped, not_private))
    return run_summary(out, config, plan, training, total, run, not_private)


def start(job: FineTuneJob, config: DPConfig) -> Seed:
    """Check the config, set the threads, resolve the randomness (a seeded run seeds
    torch's global generator too: dropout masks, so it repeats exactly)."""
    import torch

    config.check()
    if job.threads:
        torch.set_num_threads(job.threads)
    seed = resolve_seed(config.seed)
    if seed.reproducible:
        torch.manual_seed(seed.value)
    return seed


def dp_sources(job: FineTuneJob) -> TrainingSources:
    """The job's training and validation files (a release is refused under DP). Without
    validation files (`--no-validation`) no validation loss is measured: the model never
    depends on one anyway (a DP run follows its plan), and then nothing of a validation
    set is read either."""
    if (job.valid_src is None) != (job.valid_tgt is None):
        raise InputError("give both --valid-src and --valid-tgt, or --no-validation")
    sources = TrainingSources.of_job(job)
    if sources.train.kind == "release":
        raise InputError(
            "--dp on a release directory is refused: one sentence yields many phrase-pair "
            "examples (dozens), so a guarantee per example is not one per sentence. Train "
            "with --dp on the full sentence pairs instead (the DP guarantee replaces "
            "fragmentation)")
    sources.check_files()
    return sources


def early_unit_checks(config: DPConfig, sources: TrainingSources) -> list[str] | None:
    """Before the (slow) preprocessing: refuse δ ≥ 1/n on the lines (or documents), and
    too few documents. Returns the document ids (document unit) or None."""
    documents = None
    if config.documents is not None:  # the document unit (DPConfig.check)
        documents = read_documents(config.documents, scan_text_file(sources.train.src))
    accounting.check_delta(config.delta, n_examples=early_unit_count(
        config, sources.train.src, documents))
    if documents is not None:
        check_enough_units(config, len(set(documents)))
    return documents


@dataclass
class PriorPrivacy:
    """What the base model already spent (nmtfrag.dp.engine.base_model_privacy)."""
    vocabulary: dict | None
    earlier: list[dict]
    note: dict

    @classmethod
    def of_base_model(cls, model_dir: str, config: DPConfig) -> PriorPrivacy:
        """Read it, refuse it when its unit does not compose with this run's, and warn
        about a base fine-tuned without DP."""
        vocabulary, earlier, note = base_model_privacy(model_dir)
        accounting.check_composable(config.unit_key, vocabulary, earlier)
        if note.get("warning"):
            print(f"warning: {note['warning']}", file=sys.stderr)
        return cls(vocabulary, earlier, note)


def open_output(job: FineTuneJob, config: DPConfig, md: ModelDir, sources: TrainingSources,
                with_documents: bool) -> tuple[str, dict[str, str]]:
    """OUT prepared (stale outputs removed) and the resumable run's identity checked or
    recorded; returns (OUT, input hashes)."""
    out = prepare_output_dir(job.out, job.overwrite, kind=MODEL_KIND, inputs=[
        md.path, job.train, sources.train.src, sources.train.tgt, job.valid_src,
        job.valid_tgt, config.documents])
    _clean_stale_work(out)
    for f in (MANIFEST, "privacy.json", "train.log", os.path.join(OWNER_DIR, MANIFEST)):
        if os.path.exists(os.path.join(out, f)):
            os.unlink(os.path.join(out, f))
    hashes = training_data.input_hashes(md, sources,
                                        config.documents if with_documents else None)
    if job.resume and not config.accountant_given:  # the interrupted run's accountant
        config.accountant = resume.saved_accountant(out) or config.accountant
    resume.prepare(out, resume.run_identity(config, job, hashes), job.resume,
                   job.overwrite)
    return out, hashes


def prepare_model_and_data(job: FineTuneJob, config: DPConfig, md: ModelDir,
                           sources: TrainingSources, layout: WorkLayout,
                           seed: Seed) -> tuple[training_data.PreparedData, torch.nn.Module,
                                                TranslationTask]:
    """The shared training data (tags decided by the flag only), then the init
    checkpoint loaded with its fairseq task and datasets. Returns (prepared, model, task)."""
    from fairseq import checkpoint_utils

    with fairseq_log_level():
        prep = training_data.prepare(
            md, sources, layout, seed=1 if config.seed is None else config.seed,
            tags=TagPolicy.of_flag(job.tags, data_decides=False), dedup=config.dedup)
        models, _, task = checkpoint_utils.load_model_ensemble_and_task(
            [layout.init_checkpoint],
            arg_overrides={"data": layout.bin_dir, "source_lang": job.src_lang,
                           "target_lang": job.tgt_lang, "dropout": job.dropout})
        task.load_dataset("train")
        task.load_dataset("valid")
    return prep, models[0], task


@dataclass
class NoisePlan:
    """The run's plan from the DP count: n stays with the owner, everything else comes
    from ñ (`n_hat`) and the planning count."""
    n: int
    n_hat: float
    n_plan: float
    count_segment: tuple
    sigma: float
    segments: list
    steps: int
    rate_segments: list
    composition: dict
    train_sigma: float
    train_segments: list
    planned_segments: list  # (first step, expected batch): q·ñ at a fixed rate q


def plan_run(config: DPConfig, out: str, seed: Seed, resuming: bool, n: int,
             units: list[list[int]] | None) -> NoisePlan:
    """Check n exactly, draw the DP count ñ once (a resumed run reads the one its
    interrupted part drew and accounted), plan σ and the steps from it."""
    if units is not None:
        check_enough_units(config, n)  # after skipped lines, if any
    accounting.check_delta(config.delta, n_examples=n)  # exact: lines may be skipped
    count_seg = unit_count.count_segment()
    n_hat = resume.saved_count(out) if resuming else None
    if n_hat is None:
        n_hat = unit_count.noisy_count(n, unit_count.count_rng(seed))
        resume.save_count(out, n_hat)
    n_plan = unit_count.planning_count(n_hat, largest_batch(config, n))
    sigma, segs, steps, rate_segs, composition = plan_noise(config, n_plan,
                                                            fixed=[count_seg])
    saved_sigma = resume.saved_sigma(out) if resuming else None
    if saved_sigma is not None:  # a resumed run keeps the σ it planned: no recalibration
        sigma = saved_sigma
    else:
        resume.save_count(out, n_hat, sigma=sigma, accountant=config.accountant)
    # a simulation mirrors the planned expected batch: B, or q·ñ at a fixed rate q
    planned = segs if config.sample_rate is None else [(0, config.sample_rate * n_plan)]
    train_sigma, train_segs = simulate.training_noise(config, sigma, planned, n)
    return NoisePlan(n, n_hat, n_plan, count_seg, sigma, segs, steps, rate_segs,
                     composition, train_sigma, train_segs, planned)


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


def announce(job: FineTuneJob, config: DPConfig, plan: NoisePlan, setup: ModelSetup,
             seed: Seed) -> None:
    """The plan on stderr (no n there: the owner's terminal only sees it)."""
    from . import clipping as clipping_choice

    set_by = accounting.calibration_record(config.accountant, config.target_epsilon)["by"]
    print(f"DP-SGD: n={plan.n} {config.unit}s, {plan.steps} noisy steps, "
          f"σ={plan.sigma:.4f} ({set_by}), C={config.max_grad_norm}, "
          + (f"sample rate {config.sample_rate}" if config.sample_rate is not None
             else f"logical batch {plan.segments}")
          + f", physical batch {setup.physical_batch} (≤ {config.physical_max_tokens} "
          f"tokens), trained parameters {config.params.kind} ({setup.n_trainable}), "
          f"{job.world_size} process(es), randomness {seed.source}", file=sys.stderr)
    print(f"DP-SGD clipping: {setup.clipping} ({setup.clipping_why}); "
          f"{clipping_choice.CLIP_MODE_TEXT[config.clip_mode]}", file=sys.stderr)
    if setup.smaller:
        print(f"DP-SGD: {setup.smaller}", file=sys.stderr)
    run_mode = simulate.mode(config)
    if run_mode != "private":
        print(f"{simulate.NOT_PRIVATE[run_mode]}: trains with σ={plan.train_sigma:.4f}, "
              f"logical batch {round(plan.train_segments[0][1])}", file=sys.stderr)


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
          out: str, work: str, device: torch.device) -> RunRecord:
    """DP-SGD (nmtfrag.dp.sgd.train_dp) with the planned noise, in one process or
    `job.world_size`; its per-step log goes to OUT/owner/train.log."""
    ls = job.label_smoothing
    log = StepLog(owner_path(out, "train.log"), plan.steps, max(1, job.log_interval or 50),
                  job.quiet)
    t_train = time.time()
    checkpointer = resume.Checkpointer(resume.state_path(out), job.save_every, job.resume)
    train_kwargs = dict(
        steps=plan.steps, rate_of_step=step_rates(config, plan.train_segments, plan.n_plan),
        divisor_units=plan.n_plan,
        noise_multiplier=plan.train_sigma, max_grad_norm=config.max_grad_norm,
        physical_batch=setup.physical_batch, max_tokens=config.physical_max_tokens,
        lr=config.lr,
        weight_decay=config.weight_decay, seed=seed, label_smoothing=ls, log=log,
        valid_fn=(None if job.world_size > 1 or valid_ds is None
                  else functools.partial(_valid_bits, valid_ds, ls)),
        valid_every=config.valid_every, clipping=setup.clipping,
        checkpointer=checkpointer,
        warmup_steps=config.warmup_steps, clip_mode=config.clip_mode, loss=config.loss,
        allow_zero_noise=simulate.mode(config) == "control")
    try:
        records, history = run_training(setup.model, train_ds, units, train_kwargs,
                                        world_size=job.world_size, device=device,
                                        work=work, threads=job.threads)
    except (KeyboardInterrupt, SystemExit) as exc:  # train_dp saved its last whole step
        note_interruption(exc, resume.interruption_note(out, job.out, checkpointer.step,
                                                        plan.steps))
        raise
    return RunRecord(records, history, time.time() - t_train)


def write_trained_model(model: torch.nn.Module, config: DPConfig, layout: WorkLayout, md: ModelDir,
                        out: str, job: FineTuneJob) -> None:
    """OUT as a plain model dir: the trained weights (LoRA merged) in the init
    checkpoint's dtypes, the run's dictionaries and the base bpecodes."""
    from ..train import lora
    from . import fairseq_opacus

    fairseq_opacus.restore_model(model)
    state = load_state(layout.init_checkpoint)
    sd = {k: v.detach().to("cpu") for k, v in model.state_dict().items()}
    sd = lora.merge_state(sd, config.params.lora_scaling)
    state["model"] = {k: sd[k].to(v.dtype) if k in sd else v
                      for k, v in state["model"].items()}
    write_finetuned_model(out, state, layout, md, job.src_lang, job.tgt_lang)


def certificate(config: DPConfig, job: FineTuneJob, plan: NoisePlan, setup: ModelSetup,
                history: list, seed: Seed,
                prior: PriorPrivacy) -> tuple[dict, dict, dict]:
    """privacy.json's content: the training's (ε, δ) from its history (the count's
    segment first), composed with the vocabulary and earlier trainings. Returns
    (privacy, training entry, total)."""
    from . import clipping as clipping_choice

    if simulate.mode(config) != "private":  # ε of the planned run, for the record
        history = accounting.rates_history(plan.sigma, plan.rate_segments)
    history = [plan.count_segment] + [tuple(h) for h in history]
    training: dict[str, Any] = {"mechanism": "DP-SGD, Poisson-subsampled Gaussian, add/remove one unit",
                "neighbouring": "add/remove one unit; the number of units is not shipped",
                "unit": unit_text(config), "privacy_unit": config.unit,
                "unit_key": config.unit_key,
                "trained_parameters": dict(config.params.public_record(),
                                           count=setup.n_trainable),
                "clipping": clipping_choice.CLIPPING_TEXT[setup.clipping],
                "clip_mode": clipping_choice.CLIP_MODE_TEXT[config.clip_mode],
                "processes": job.world_size,
                "accountant": config.accountant,
                "delta": config.delta, "noise_multiplier": plan.sigma,
                "max_grad_norm": config.max_grad_norm, "steps": plan.steps,
                "sample_rate": config.sample_rate,
                "unit_count": {
                    "mechanism": "ñ = n + N(0, s²), sensitivity 1: the history's first "
                                 "segment [s, 1.0, 1]; " + (
                                     "q = --sample-rate and the steps are public, ñ only "
                                     "scales the update (divisor q·ñ)"
                                     if config.sample_rate is not None else
                                     "every rate q = batch / ñ (raised to keep q ≤ 1) and "
                                     "step count comes from ñ, never from n"),
                    "noise_std": plan.count_segment[0], "planning_count": plan.n_plan},
                "composition": plan.composition,
                "history": [list(h) for h in history],
                "target_epsilon": config.target_epsilon,
                "calibration": accounting.calibration_record(config.accountant,
                                                             config.target_epsilon),
                "randomness": seed.public_record()}
    eps, eps_all, parts = accounting.certify_training(training)
    training.update(epsilon=eps, epsilon_all_accountants=eps_all)
    training["composition"]["parts"] = parts
    total = accounting.compose_certificate(training, prior.vocabulary, prior.earlier,
                                           training_eps=training["epsilon"])
    privacy = {"training": training,
               "vocabulary": prior.vocabulary or accounting.NO_VOCABULARY,
               "earlier_training": prior.earlier, "base_model": prior.note, "total": total}
    return privacy, training, total


def public_manifest(job: FineTuneJob, config: DPConfig, plan: NoisePlan, setup: ModelSetup,
                    seed: Seed, privacy: dict | None, not_private: dict | None) -> dict:
    """OUT/manifest.json: public parameters and the certificate (never n)."""
    params = {
        "src_lang": job.src_lang, "tgt_lang": job.tgt_lang, "lr": config.lr,
        "optimizer": "adamw", "dp_weight_decay": config.weight_decay,
        "dropout": job.dropout, "label_smoothing": job.label_smoothing,
        "logical_batch": config.logical_batch, "batch_schedule": config.batch_schedule,
        "sample_rate": config.sample_rate,
        "physical_batch": setup.physical_batch,
        "physical_max_tokens": config.physical_max_tokens,
        "max_grad_norm": config.max_grad_norm,
        "noise_multiplier": plan.sigma, "target_epsilon": config.target_epsilon,
        "delta": config.delta, "steps": plan.steps, "accountant": config.accountant,
        "trained_parameters": config.params.public_record(),
        "privacy_unit": config.unit, "tags": bool(job.tags), "dedup": config.dedup,
        "trainable_parameters": setup.n_trainable, "dp_clip_mode": config.clip_mode,
        "dp_loss": config.loss, "dp_warmup_steps": config.warmup_steps}
    return {
        "kind": MODEL_KIND, "dp": not not_private,
        **({"not_private": not_private} if not_private else {}),
        "model_files": model_files(job.src_lang, job.tgt_lang),
        "shareable": ("nothing: " + not_private["not_private"] + " (trained on the "
                      "private data with no guarantee); keep all of it with the owner"
                      if not_private else "every file here except owner/"),
        "owner_only": [f"{OWNER_DIR}/{MANIFEST}", f"{OWNER_DIR}/train.log"],
        "params": params, "privacy": privacy,
        "randomness": simulate.public_randomness(seed, not_private)}


def owner_record(job: FineTuneJob, config: DPConfig, md: ModelDir, sources: TrainingSources,
                 seed: Seed, not_private: dict | None, prep: dict, plan: NoisePlan,
                 run: RunRecord, hashes: dict[str, str]) -> dict:
    """OUT/owner/manifest.json (never shared): paths, exact counts and n, the seed,
    validation losses and training statistics."""
    records = run.records
    steps = max(1, len(records))
    snrs = [r["snr"] for r in records]
    train = training_data.train_argument(job.train)
    return {
        "kind": "nmtfrag-finetuned-model-owner-record",
        "params": {"base_model": md.path,
                   "train": train if isinstance(train, str) else list(train),
                   "train_text_mode": sources.train.mode,
                   "valid_src": (os.path.abspath(sources.valid_src)
                                 if job.valid_src is not None else None),
                   "valid_tgt": (os.path.abspath(sources.valid_tgt)
                                 if job.valid_tgt is not None else None),
                   "documents": (os.path.abspath(config.documents)
                                 if config.documents else None)},
        "randomness": seed.owner_record(),
        "not_private": not_private,
        "counts": prep["counts"], "tags": prep["tags"],
        "units": {"n": plan.n, "unit": config.unit, "noisy_count": plan.n_hat,
                  "note": "exact n: owner-only (what ships gives ñ at most)"},
        "result": {"valid_loss_before": run.before, "valid_loss_after": run.after,
                   "valid_loss_unit": "label-smoothed loss per target token, base 2",
                   "mean_units_per_step": sum(r["units"] for r in records) / steps,
                   "mean_examples_per_step": sum(r["examples"] for r in records) / steps,
                   "empty_steps": sum(1 for r in records if r["examples"] == 0),
                   "clipped_share_mean": sum(r["clipped_share"] for r in records) / steps,
                   "snr_first": snrs[0] if snrs else None,
                   "snr_last": snrs[-1] if snrs else None,
                   "train_seconds": round(run.train_seconds, 1),
                   "wall_seconds": round(run.wall_seconds, 1)},
        "inputs_sha256": hashes,
        "tool_versions": tool_versions("fairseq-fixed", "torch", "opacus", "fastbpe",
                                       "sacremoses"),
    }


def run_summary(out: str, config: DPConfig, plan: NoisePlan, training: dict, total: dict,
                run: RunRecord, not_private: dict | None) -> dict:
    """What the CLI prints: the certificate's ε (None when the run is not private)."""
    summary = {"out": out, "num_updates": plan.steps, "noise_multiplier": plan.sigma,
               "epsilon": training["epsilon"], "delta": config.delta,
               "accountant": config.accountant,
               "epsilon_total": total["epsilon"], "valid_loss_before": run.before,
               "valid_loss_after": run.after}
    if not_private:  # the planned run's ε is no ε of this one
        summary.update(epsilon=None, epsilon_total=None,
                       not_private=not_private["not_private"],
                       epsilon_if_private=training["epsilon"],
                       trained_noise_multiplier=plan.train_sigma)
    return summary
