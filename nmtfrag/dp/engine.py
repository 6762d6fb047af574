"""The DP fine-tuning façade: a typed config and one entry point, `dp_finetune`.

Why: in the style of opacus' `PrivacyEngine`, the DP track is usable from Python without
argparse; `nmtfrag finetune --dp` only turns its options into a `DPConfig` and a
`FineTuneJob` (nmtfrag.dp.cli_args). The mechanism itself is nmtfrag.dp.sgd; accounting
is nmtfrag.dp.accounting; which parameters train is nmtfrag.trainable.

    from nmtfrag.dp.engine import DPConfig, FineTuneJob, dp_finetune
    from nmtfrag.trainable import TrainableSet
    job = FineTuneJob(model="wmt19.de-en/", train=("train.de", "train.en"),
                      valid_src="valid.de", valid_tgt="valid.en", out="dp-model/")
    dp_finetune(job, DPConfig(delta=1e-5, target_epsilon=8, logical_batch=1024,
                              steps=40, params=TrainableSet("lora")))

OUT gets what may be shared (model files, privacy.json, a manifest of public parameters)
and OUT/owner/ (never to be shared): the owner's manifest (paths, hashes, exact counts,
the number of units n, validation losses, seed) and train.log (per-step non-private
statistics). Nothing shared gives n: rates and steps come from a DP count ñ
(nmtfrag.dp.unit_count), composed into the certificate. The private work
dir holding the corpus lives in the system's temp dir, never inside OUT.
"""
import functools
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Optional, Sequence, Union

from ..errors import InputError
from ..trainable import TrainableSet

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
    accountant: str = "rdp"
    lr: float = 0.000175
    weight_decay: float = 0.0
    params: TrainableSet = field(default_factory=TrainableSet)
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

    def check(self):
        """Refuse configurations that would void (or silently change) the guarantee."""
        if self.delta is None:
            raise InputError("--dp needs --delta: a DP guarantee without δ is void")
        if (self.target_epsilon is None) == (self.noise_multiplier is None):
            raise InputError("--dp needs exactly one of --target-epsilon and "
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
        from .simulate import check as check_simulation

        if self.clip_mode not in CLIP_MODES:
            raise InputError(f"--dp-clip-mode must be one of {CLIP_MODES}")
        if self.loss not in LOSSES:
            raise InputError(f"--dp-loss must be one of {LOSSES}")
        if self.warmup_steps is None or self.warmup_steps < 0:
            raise InputError("--dp-warmup-steps must be ≥ 0")
        check_simulation(self)
        if self.unit == "document" and self.dedup:
            raise InputError("--dedup with --privacy-unit document: a document is the "
                             "unit, so its repeated pairs are already protected with it")


    def check_rates(self):
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
            if self.simulate_batch is not None:
                raise InputError("--dp-simulate-batch needs the planned --logical-batch "
                                 "(σ_sim = σ·B_SIM/B), not --sample-rate")
            return
        if not batch:
            raise InputError("--dp needs --sample-rate Q, --logical-batch (expected units "
                             "per noisy step) or --batch-schedule")
        if self.noise_multiplier is not None and self.simulate_batch is None \
                and not self.control:  # a simulation or control has no certificate
            raise InputError("--noise-multiplier with --logical-batch/--batch-schedule: "
                             "q = B/ñ comes from the DP count, so the training's ε would "
                             "depend on it and no bound is fixed in advance; use "
                             "--sample-rate Q, or --target-epsilon")
        from .accounting import check_delta
        from .unit_count import basic_split

        check_delta(self.delta)
        if self.target_epsilon is not None:
            eps_count = basic_split(self.delta)[0]
            if not self.target_epsilon > eps_count:
                raise InputError(
                    f"--target-epsilon {self.target_epsilon} does not exceed the DP unit "
                    f"count's ε_count = {eps_count:.4f} (at δ/10): nothing would be left "
                    "for training; raise it, or use --sample-rate Q (the count then "
                    "costs far less by RDP composition)")


@dataclass
class FineTuneJob:
    """What to fine-tune on what, and where the result goes (no privacy parameters)."""
    model: str
    train: Union[str, Sequence[str]]
    valid_src: str
    valid_tgt: str
    out: str
    src_lang: str = "de"
    tgt_lang: str = "en"
    pretokenized: bool = False
    checkpoint: Optional[str] = None
    tags: bool = False
    dropout: float = 0.2
    label_smoothing: float = 0.1
    device: Optional[str] = None
    threads: Optional[int] = None
    overwrite: bool = False
    keep_work: bool = False
    quiet: bool = False
    log_interval: int = 50
    world_size: int = 1      # processes (torch.distributed: gloo on CPU, nccl on GPUs)
    resume: bool = False     # continue the interrupted run in `out` (nmtfrag.dp.resume)
    save_every: int = 10     # save the resumable state every N noisy steps (0: never)


def dp_device(device=None):
    import torch

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda: no CUDA device is available")
    return torch.device(device)


def total_steps(config, segments, n):
    """Noisy steps of the run: `steps`, else enough for `epochs` passes over n units
    (with --sample-rate Q: ceil(epochs / Q), no n needed)."""
    if config.steps:
        return int(config.steps)
    if not config.epochs:
        raise InputError("give a DP training budget: --dp-steps, --max-updates or "
                         "--max-epochs")
    if config.sample_rate is not None:
        return math.ceil(config.epochs / config.sample_rate)
    from .schedule import batch_at

    steps, seen = 0, 0.0
    while seen < config.epochs * n:
        seen += batch_at(segments, steps)
        steps += 1
    return steps


def plan_noise(config, n_units, fixed=()):
    """(σ, schedule segments, steps, rate segments, composition) for n_units privacy
    units (in a run: the DP planning count of nmtfrag.dp.unit_count, never the exact n).

    --sample-rate: q and the steps do not depend on n_units, so the training's curve is
    fixed in advance and a target ε is reached with the `fixed` segments (the count's)
    composed in front (RDP composition). Logical batch: q = B/n_units is chosen from the
    count, so σ makes the training alone reach E − ε_count at δ_train (basic
    composition; the split is fixed in advance, whatever n_units is)."""
    from . import accounting, schedule, unit_count

    if config.sample_rate is not None:
        segs = [(0, None)]
        steps = total_steps(config, segs, n_units)
        rate_segs = [(float(config.sample_rate), steps)]
        comp = accounting.composition_record(accounting.RDP_COMPOSITION, config.delta)
        if config.noise_multiplier is not None:
            return float(config.noise_multiplier), segs, steps, rate_segs, comp
        sigma = accounting.noise_multiplier_for(config.target_epsilon, config.delta,
                                                rate_segs, config.accountant, fixed=fixed)
        return sigma, segs, steps, rate_segs, comp
    segs = schedule.parse_schedule(config.batch_schedule or f"{config.logical_batch}:0")
    steps = total_steps(config, segs, n_units)
    rate_segs = schedule.rate_segments(segs, steps, n_units)
    if config.noise_multiplier is not None:  # only a simulation or control: no certificate
        comp = accounting.composition_record(accounting.RDP_COMPOSITION, config.delta)
        return float(config.noise_multiplier), segs, steps, rate_segs, comp
    eps_count, d_count, d_train = unit_count.basic_split(config.delta)
    bound = config.target_epsilon - eps_count  # > 0: DPConfig.check_rates
    while eps_count + bound > config.target_epsilon:  # the certificate is ≤ E, not E + ulp
        bound = math.nextafter(bound, 0.0)
    sigma = accounting.noise_multiplier_for(bound, d_train, rate_segs, config.accountant)
    comp = accounting.composition_record(accounting.BASIC_COMPOSITION, config.delta,
                                         epsilon_train_bound=bound, delta_count=d_count)
    return sigma, segs, steps, rate_segs, comp


def largest_batch(config, n):
    """The largest scheduled logical batch; refused when above the n units (the owner's
    terminal only: q = batch / ñ is then clamped to 1 at most). With --sample-rate no
    rate comes from ñ: 1 (ñ only scales the update)."""
    from .schedule import parse_schedule

    if config.sample_rate is not None:
        return 1
    size = max(s for _, s in parse_schedule(config.batch_schedule
                                            or f"{config.logical_batch}:0"))
    if size > n:
        raise InputError(f"logical batch {size} exceeds the {n} training {config.unit}s "
                         "(sampling rate would be > 1)")
    return size


def unit_key(config):
    """The certificate's unit: "sentence", "distinct-sentence" (--dedup) or "document"."""
    if config.unit == "document":
        return "document"
    return "distinct-sentence" if config.dedup else "sentence"


def early_unit_count(config, src_path, documents):
    """Units before preprocessing (lines, or distinct document ids): an upper bound on
    the n training will see, enough to refuse δ ≥ 1/n before any expensive step."""
    from ..corpus import scan_text_file

    return len(set(documents)) if documents is not None else scan_text_file(src_path)


def read_documents(path, n_lines=None):
    """Document ids, one per training line (as `nmtfrag split` writes them)."""
    from ..corpus import scan_text_file

    scan_text_file(path)  # missing, empty or not UTF-8: InputError naming the file/line
    with open(path, encoding="utf-8") as f:
        ids = [ln.strip() for ln in f]
    if n_lines is not None and len(ids) != n_lines:
        raise InputError(f"--documents {path}: {len(ids)} lines, but the training data has "
                         f"{n_lines}: it must give one document id per training line")
    if any(not i for i in ids):
        raise InputError(f"--documents {path}: line {ids.index('') + 1} has no document id")
    return ids


def check_enough_units(config, n_units):
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


def units_of_rows(train_lines, documents):
    """Dataset rows grouped by document: [[row, …] per document], documents in order of
    first appearance. `train_lines[row]` is the corpus line of dataset row `row`."""
    groups = {}
    for row, line in enumerate(train_lines):
        groups.setdefault(documents[line], []).append(row)
    return list(groups.values())


class StepLog:
    """One JSON line per noisy step into the owner-only train.log, and a progress line on
    stderr every `interval` steps. A class, not a closure, so spawned processes get it."""

    def __init__(self, path, steps, interval=50, quiet=False):
        self.path, self.steps, self.interval, self.quiet = path, steps, interval, quiet
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))

    def restart(self, records):
        """A resumed run: the log holds exactly the saved steps' records."""
        from ..fileio import atomic_writer

        with atomic_writer(self.path, private=True) as f:
            f.writelines(json.dumps(rec) + "\n" for rec in records)

    def __call__(self, rec):
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")
        if not self.quiet and (rec["step"] % self.interval == 0 or rec["step"] == 1):
            print(f"dp step {rec['step']}/{self.steps}: {rec['examples']} pairs, "
                  f"loss/pair {rec['mean_loss']:.2f}, SNR {rec['snr']:.3f}, "
                  f"{rec['seconds']:.1f}s", file=sys.stderr)


def rate_at(segments, n, step):
    """Poisson sampling rate of a step: the scheduled logical batch over n units."""
    from .schedule import batch_at

    return batch_at(segments, step) / n


def fixed_rate(q, step):
    """Poisson sampling rate of a step with --sample-rate: q itself, exactly."""
    return q


def step_rates(config, segments, n_plan):
    """rate_of_step for train_dp (picklable, for spawned processes)."""
    if config.sample_rate is not None:
        return functools.partial(fixed_rate, float(config.sample_rate))
    return functools.partial(rate_at, segments, n_plan)


def run_training(model, dataset, units, train_kwargs, *, world_size, device, work,
                 threads=None):
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
    finally:
        dist.destroy_process_group()


def base_model_privacy(model_dir):
    """What a base model already spent: (vocabulary entry, earlier DP trainings, note).

    Fine-tuning a DP model again on the owner's data composes with its earlier ε; a base
    fine-tuned without DP is outside any certificate, so it gets a warning."""
    from ..fileio import MANIFEST, read_json

    cert_path = os.path.join(model_dir, "privacy.json")
    cert = read_json(cert_path) if os.path.isfile(cert_path) else {}
    earlier = list(cert.get("earlier_training") or [])
    if cert.get("training"):
        earlier.append(cert["training"])
    note = {"dp_trainings": len(earlier)}
    man_path = os.path.join(model_dir, MANIFEST)
    man = read_json(man_path) if os.path.isfile(man_path) else {}
    if man.get("kind") == "nmtfrag-finetuned-model" and not man.get("dp"):
        note["warning"] = ("the base model was fine-tuned WITHOUT differential privacy: "
                           "if its training data was confidential, this certificate does "
                           "not cover it")
    elif cert.get("base_model", {}).get("warning"):
        note["warning"] = cert["base_model"]["warning"]
    return cert.get("vocabulary"), earlier, note


def unit_text(config):
    if config.unit == "document":
        return ("one document (all its sentence pairs together; the documents file "
                "says which pair belongs to which)")
    if config.dedup:
        return "one distinct training sentence pair (duplicates removed with --dedup)"
    return ("one training sentence pair (a pair repeated k times in the data is "
            "protected only as a group of k: use --dedup)")


def _refuse_release(train_info):
    if train_info["kind"] == "release":
        raise InputError(
            "--dp on a release directory is refused: one sentence yields many phrase-pair "
            "examples (dozens), so a guarantee per example is not one per sentence. Train "
            "with --dp on the full sentence pairs instead (the DP guarantee replaces "
            "fragmentation)")


def _clean_stale_work(out):
    """Older versions put the private work dir inside OUT: remove any left by a kill."""
    import shutil

    for name in os.listdir(out):
        if name.startswith(".dp-work-"):
            shutil.rmtree(os.path.join(out, name), ignore_errors=True)


def _valid_bits(dataset, label_smoothing, model):
    from .sgd import valid_loss

    return valid_loss(model, dataset, label_smoothing=label_smoothing) / math.log(2)


def dp_finetune(job: FineTuneJob, config: DPConfig):
    """DP-SGD fine-tuning of `job.model` on `job.train`; writes a model dir to `job.out`.
    Returns a summary dict (also printed as JSON by the CLI)."""
    os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    import torch

    from .. import lora, trainable
    from ..bpe import BPE, TAGS
    from ..binarize import fairseq_log_level
    from ..corpus import scan_text_file
    from ..fileio import (MANIFEST, OWNER_DIR, owner_path, prepare_output_dir,
                          private_workdir, sha256_file, tool_versions, write_json,
                          write_owner_json)
    from ..finetune import _prepare, resolve_train
    from ..model_dir import (grow_state, load_state, member_to_adapt, save_state,
                             validate_model_dir,
                             write_dict_with, write_model_dir)
    from ..randomness import resolve_seed
    from . import accounting, fairseq_opacus, resume, simulate, unit_count
    from . import clipping as clipping_choice
    from .sgd import valid_loss

    config.check()
    if job.threads:
        torch.set_num_threads(job.threads)
    seed = resolve_seed(config.seed)
    if seed.reproducible:  # dropout masks too, so a seeded run repeats exactly
        torch.manual_seed(seed.value)
    src_lang, tgt_lang = job.src_lang, job.tgt_lang
    md, note = member_to_adapt(validate_model_dir(job.model, src_lang, tgt_lang,
                                                  job.checkpoint), job.checkpoint)
    if note:
        print(f"note: {note}", file=sys.stderr)
    train = job.train if isinstance(job.train, str) else tuple(job.train)
    if not isinstance(train, str) and len(train) != 2:
        raise InputError("--train takes a release directory, a prefix, or two files")
    src_path, tgt_path, mode, train_info = resolve_train(train, src_lang, tgt_lang,
                                                         job.pretokenized)
    _refuse_release(train_info)
    valid_mode = "moses" if job.pretokenized else "raw"
    for p in (src_path, tgt_path, job.valid_src, job.valid_tgt):
        if not os.path.isfile(p):
            raise InputError(f"{p}: no such file")
    documents = None
    if config.unit == "document":  # refuse before the (slow) preprocessing
        documents = read_documents(config.documents, scan_text_file(src_path))
    accounting.check_delta(config.delta,
                           n_examples=early_unit_count(config, src_path, documents))
    if documents is not None:
        check_enough_units(config, len(set(documents)))
    vocab_privacy, earlier, base_note = base_model_privacy(md.path)
    accounting.check_composable(unit_key(config), vocab_privacy, earlier)
    if base_note.get("warning"):
        print(f"warning: {base_note['warning']}", file=sys.stderr)
    out = prepare_output_dir(job.out, job.overwrite, kind="nmtfrag-finetuned-model", inputs=[
        md.path, job.train, src_path, tgt_path, job.valid_src, job.valid_tgt, config.documents])
    _clean_stale_work(out)
    for f in (MANIFEST, "privacy.json", "train.log", os.path.join(OWNER_DIR, MANIFEST)):
        if os.path.exists(os.path.join(out, f)):
            os.unlink(os.path.join(out, f))
    inputs = {"model": md.checkpoints[0], "train_src": src_path, "train_tgt": tgt_path,
              "valid_src": job.valid_src, "valid_tgt": job.valid_tgt}
    if documents is not None:
        inputs["documents"] = config.documents
    hashes = {k: sha256_file(v) for k, v in inputs.items()}
    resume.prepare(out, resume.run_identity(config, job, hashes), job.resume,
                   job.overwrite)
    run_mode = simulate.mode(config)
    t0 = time.time()
    with private_workdir(keep=job.keep_work, prefix="nmtfrag-dp-") as work:
        bin_dir = os.path.join(work, "bin")
        init_ckpt = os.path.join(work, "init.pt")
        with fairseq_log_level():
            prep = _prepare(md, src_path, tgt_path, mode, job.valid_src, job.valid_tgt,
                            valid_mode, work, bin_dir, init_ckpt, src_lang, tgt_lang,
                            1 if config.seed is None else config.seed, BPE, TAGS,
                            load_state, grow_state, save_state, write_dict_with,
                            tags=bool(job.tags), dedup=config.dedup)
            from fairseq import checkpoint_utils

            models, _, task = checkpoint_utils.load_model_ensemble_and_task(
                [init_ckpt], arg_overrides={"data": bin_dir, "source_lang": src_lang,
                                            "target_lang": tgt_lang,
                                            "dropout": job.dropout})
            task.load_dataset("train")
            task.load_dataset("valid")
        device = dp_device(job.device)
        model = models[0].float()
        train_lines = prep.pop("train_lines")
        units = None if documents is None else units_of_rows(train_lines, documents)
        train_ds, valid_ds = task.dataset("train"), task.dataset("valid")
        n = len(units) if units is not None else len(train_ds)
        if units is not None:
            check_enough_units(config, n)  # after skipped lines, if any
        accounting.check_delta(config.delta, n_examples=n)  # exact: lines may be skipped
        # n never ships: every rate and step count comes from the DP count ñ, drawn once
        # (a resumed run reads the one its interrupted part drew and accounted)
        count_seg = unit_count.count_segment()
        n_hat = resume.saved_count(out) if job.resume else None
        if n_hat is None:
            n_hat = unit_count.noisy_count(n, unit_count.count_rng(seed))
            resume.save_count(out, n_hat)
        n_plan = unit_count.planning_count(n_hat, largest_batch(config, n))
        sigma, segs, steps, rate_segs, composition = plan_noise(config, n_plan,
                                                                fixed=[count_seg])
        train_sigma, train_segs = simulate.training_noise(config, sigma, segs, n)
        n_trainable, _ = trainable.apply(model, config.params,
                                         seed=seed.value if seed.reproducible else 0)
        model = model.to(device)
        fairseq_opacus.prepare_model(model)  # refuses unsupported layers before training
        clipping, clipping_why = clipping_choice.choose_clipping(
            model, config.clipping, config.unit, config.physical_batch)
        physical_batch, smaller = config.physical_batch, None
        if clipping == "hooks":  # fewer pairs per pass where their gradients would not fit
            physical_batch, smaller = clipping_choice.fitting_physical_batch(
                model, config.physical_batch)
        ls = job.label_smoothing
        before = valid_loss(model, valid_ds, label_smoothing=ls) / math.log(2)
        log = StepLog(owner_path(out, "train.log"), steps, max(1, job.log_interval or 50),
                      job.quiet)

        print(f"DP-SGD: n={n} {config.unit}s, {steps} noisy steps, σ={sigma:.4f}, "
              f"C={config.max_grad_norm}, " + (f"sample rate {config.sample_rate}"
              if config.sample_rate is not None else f"logical batch {segs}")
              + f", physical batch "
              f"{physical_batch} (≤ {config.physical_max_tokens} tokens), trained "
              f"parameters {config.params.kind} ({n_trainable}), {job.world_size} "
              f"process(es), randomness {seed.source}",
              file=sys.stderr)
        print(f"DP-SGD clipping: {clipping} ({clipping_why}); "
              f"{clipping_choice.CLIP_MODE_TEXT[config.clip_mode]}", file=sys.stderr)
        if smaller:
            print(f"DP-SGD: {smaller}", file=sys.stderr)
        if run_mode != "private":
            print(f"{simulate.NOT_PRIVATE[run_mode]}: trains with σ={train_sigma:.4f}, "
                  f"logical batch {train_segs[0][1]}", file=sys.stderr)
        t_train = time.time()
        train_kwargs = dict(
            steps=steps, rate_of_step=step_rates(config, train_segs, n_plan),
            divisor_units=n_plan,
            noise_multiplier=train_sigma, max_grad_norm=config.max_grad_norm,
            physical_batch=physical_batch, max_tokens=config.physical_max_tokens,
            lr=config.lr,
            weight_decay=config.weight_decay, seed=seed, label_smoothing=ls, log=log,
            valid_fn=(None if job.world_size > 1 else functools.partial(_valid_bits,
                                                                         valid_ds, ls)),
            valid_every=config.valid_every, clipping=clipping,
            checkpointer=resume.Checkpointer(resume.state_path(out), job.save_every,
                                             job.resume),
            warmup_steps=config.warmup_steps, clip_mode=config.clip_mode, loss=config.loss,
            allow_zero_noise=run_mode == "control")
        records, history = run_training(model, train_ds, units, train_kwargs,
                                        world_size=job.world_size, device=device,
                                        work=work, threads=job.threads)
        model = model.to(device)
        train_seconds = time.time() - t_train
        after = valid_loss(model, valid_ds, label_smoothing=ls) / math.log(2)
        fairseq_opacus.restore_model(model)
        state = load_state(init_ckpt)
        sd = {k: v.detach().to("cpu") for k, v in model.state_dict().items()}
        sd = lora.merge_state(sd, config.params.lora_scaling)
        state["model"] = {k: sd[k].to(v.dtype) if k in sd else v
                          for k, v in state["model"].items()}
        write_model_dir(out, state, os.path.join(bin_dir, f"dict.{src_lang}.txt"),
                        os.path.join(bin_dir, f"dict.{tgt_lang}.txt"), md.bpecodes,
                        src_lang, tgt_lang)
        del state

    if run_mode != "private":  # ε of the planned run, for the record; no certificate
        history = accounting.rates_history(sigma, rate_segs)
    history = [count_seg] + [tuple(h) for h in history]
    training = {"mechanism": "DP-SGD, Poisson-subsampled Gaussian, add/remove one unit",
                "neighbouring": "add/remove one unit; the number of units is not shipped",
                "unit": unit_text(config), "privacy_unit": config.unit,
                "unit_key": unit_key(config),
                "trained_parameters": dict(config.params.public_record(),
                                           count=n_trainable),
                "clipping": clipping_choice.CLIPPING_TEXT[clipping],
                "clip_mode": clipping_choice.CLIP_MODE_TEXT[config.clip_mode],
                "processes": job.world_size,
                "accountant": config.accountant,
                "delta": config.delta, "noise_multiplier": sigma,
                "max_grad_norm": config.max_grad_norm, "steps": steps,
                "sample_rate": config.sample_rate,
                "unit_count": {
                    "mechanism": "ñ = n + N(0, s²), sensitivity 1: the history's first "
                                 "segment [s, 1.0, 1]; " + (
                                     "q = --sample-rate and the steps are public, ñ only "
                                     "scales the update (divisor q·ñ)"
                                     if config.sample_rate is not None else
                                     "every rate q = batch / ñ (raised to keep q ≤ 1) and "
                                     "step count comes from ñ, never from n"),
                    "noise_std": count_seg[0], "planning_count": n_plan},
                "composition": composition,
                "history": [list(h) for h in history],
                "target_epsilon": config.target_epsilon,
                "randomness": seed.public_record()}
    eps, eps_all, parts = accounting.certify_training(training)
    training.update(epsilon=eps, epsilon_all_accountants=eps_all)
    training["composition"]["parts"] = parts
    total = accounting.compose_certificate(training, vocab_privacy, earlier,
                                           training_eps=training["epsilon"])
    privacy = {"training": training,
               "vocabulary": vocab_privacy or accounting.NO_VOCABULARY,
               "earlier_training": earlier, "base_model": base_note, "total": total}
    public_params = {
        "src_lang": src_lang, "tgt_lang": tgt_lang, "lr": config.lr,
        "optimizer": "adamw", "dp_weight_decay": config.weight_decay,
        "dropout": job.dropout, "label_smoothing": ls,
        "logical_batch": config.logical_batch, "batch_schedule": config.batch_schedule,
        "sample_rate": config.sample_rate,
        "physical_batch": physical_batch,
        "physical_max_tokens": config.physical_max_tokens,
        "max_grad_norm": config.max_grad_norm,
        "noise_multiplier": sigma, "target_epsilon": config.target_epsilon,
        "delta": config.delta, "steps": steps, "accountant": config.accountant,
        "trained_parameters": config.params.public_record(),
        "privacy_unit": config.unit, "tags": bool(job.tags), "dedup": config.dedup,
        "trainable_parameters": n_trainable, "dp_clip_mode": config.clip_mode,
        "dp_loss": config.loss, "dp_warmup_steps": config.warmup_steps}
    not_private = (None if run_mode == "private" else
                   simulate.record(config, sigma, segs, steps, train_sigma,
                                   eps))
    snrs = [r["snr"] for r in records]
    write_owner_json(out, {
        "kind": "nmtfrag-finetuned-model-owner-record",
        "params": {"base_model": md.path,
                   "train": train if isinstance(train, str) else list(train),
                   "train_text_mode": mode, "valid_src": os.path.abspath(job.valid_src),
                   "valid_tgt": os.path.abspath(job.valid_tgt),
                   "documents": (os.path.abspath(config.documents)
                                 if config.documents else None)},
        "randomness": seed.owner_record(),
        "not_private": not_private,
        "counts": prep["counts"], "tags": prep["tags"],
        "units": {"n": n, "unit": config.unit, "noisy_count": n_hat,
                  "note": "exact n: owner-only (what ships gives ñ at most)"},
        "result": {"valid_loss_before": before, "valid_loss_after": after,
                   "valid_loss_unit": "label-smoothed loss per target token, base 2",
                   "mean_units_per_step": sum(r["units"] for r in records)
                   / max(1, len(records)),
                   "mean_examples_per_step": sum(r["examples"] for r in records)
                   / max(1, len(records)),
                   "empty_steps": sum(1 for r in records if r["examples"] == 0),
                   "clipped_share_mean": sum(r["clipped_share"] for r in records)
                   / max(1, len(records)),
                   "snr_first": snrs[0] if snrs else None,
                   "snr_last": snrs[-1] if snrs else None,
                   "train_seconds": round(train_seconds, 1),
                   "wall_seconds": round(time.time() - t0, 1)},
        "inputs_sha256": hashes,
        "tool_versions": tool_versions("fairseq-fixed", "torch", "opacus", "fastbpe",
                                       "sacremoses"),
    })
    if not_private:
        privacy = None  # a simulation or control: no certificate, no privacy.json
    else:
        write_json(os.path.join(out, "privacy.json"), privacy)
    resume.discard(out)  # finished: the saved state (generator states too) goes
    write_json(os.path.join(out, MANIFEST), {
        "kind": "nmtfrag-finetuned-model", "dp": not not_private,
        **({"not_private": not_private} if not_private else {}),
        "model_files": ["model.pt", f"dict.{src_lang}.txt", f"dict.{tgt_lang}.txt",
                        "bpecodes"],
        "shareable": "every file here except owner/",
        "owner_only": [f"{OWNER_DIR}/{MANIFEST}", f"{OWNER_DIR}/train.log"],
        "params": public_params, "privacy": privacy,
        "randomness": seed.public_record()})
    summary = {"out": out, "num_updates": steps, "noise_multiplier": sigma,
               "epsilon": training["epsilon"], "delta": config.delta,
               "epsilon_total": total["epsilon"], "valid_loss_before": before,
               "valid_loss_after": after}
    if not_private:  # the planned run's ε is no ε of this one
        summary.update(epsilon=None, epsilon_total=None,
                       not_private=not_private["not_private"],
                       epsilon_if_private=eps,
                       trained_noise_multiplier=train_sigma)
    return summary
