"""Fine-tune a WMT19-format model on a release (or on full sentences) with fairseq.

Kim, Bisazza & Turkmen (2021), "Using Confidential Data for Domain Adaptation of Neural
Machine Translation", §4: the translation company continues training the generic
WMT19 de→en model on the released phrase pairs as if they were sentences, with the WMT19
learning rate divided by 4 (0.000175), weight decay 0.0001, dropout 0.2, label smoothing
0.1, Adam, and early stopping on a small full-sentence validation set.

Steps (all temporary files holding client text live in OUT/.work, mode 0700, removed at
the end unless keep_work):
1. validate the model dir and read its architecture from the checkpoint;
2. text → hub tokens → fastBPE with the model's codes (`nmtfrag.data.bpe`); `<P>`/`</P>`
   tags stay whole tokens;
3. when the training data is tagged, append the tags to both dictionaries and grow the
   checkpoint's embedding matrices (`nmtfrag.model_dir.grow_state`) → OUT/.work/init.pt;
4. binarise with those dictionaries (fairseq-preprocess) — steps 2–4 are
   `nmtfrag.train.data`'s, shared with the DP track (nmtfrag.dp.engine);
5. fairseq's own training (fairseq_cli.train.main through its Python API, so CPU, CUDA
   and multi-GPU via fairseq's distributed launcher all work) with `--restore-file
   init.pt` and every `--reset-*` flag; the model arguments are copied from the
   checkpoint so the model fairseq builds is the pretrained one;
6. the best checkpoint (lowest validation loss) becomes OUT/model.pt next to the
   dictionaries and bpecodes: OUT is again a model directory.

Without validation (`FineTuneConfig.validate` False, `--no-validation`) no validation set
is read: fairseq trains for the whole budget with --disable-validation and the last
checkpoint becomes OUT/model.pt, so the budget and the kept checkpoint depend on the
training data and fixed settings only (for a DP release: nothing outside its ε).

A run killed half-way is continued with `FineTuneJob.resume` from OUT/checkpoints/checkpoint_last.pt
(optimizer, scheduler, data iterator and meters restored by fairseq). fairseq saves it at
the end of each epoch (or every --validate-every updates); on top of that checkpoint_last.pt
is saved every few minutes (nmtfrag.resume_clock), mid-epoch too, so a killed run loses
minutes, not an epoch (an epoch of EMEA phrases is over an hour on a 2-core CPU). A run stopped
by SIGINT or SIGTERM says which checkpoint OUT keeps, or that it keeps none yet. These
resume points and the other fixes to fairseq's training are nmtfrag.train.fairseq_fixes';
where fairseq's log goes, nmtfrag.train.fairseq_log; the fairseq command lines,
nmtfrag.train.fairseq_args.
"""
from __future__ import annotations

import logging
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from typing import Protocol

from . import data as training_data
from ..errors import (InputError, check_bool, check_int, check_number, is_disk_error,
                      note_interruption, with_path)
from ..fileio import (MANIFEST, OWNER_DIR, public_name, read_json, tool_versions,
                      write_json)
from ..outdir import prepare_output_dir, remove_run_outputs
from ..outlock import lock_output_dir
from ..resume_clock import MIN_SECONDS
from .fairseq_args import PAPER_DEFAULTS, build_train_cfg, fairseq_train_argv, validation_loss
from .fairseq_fixes import STOP_EARLY, run_fairseq_train
from .fairseq_log import LogCapture, attach_logs, detach_logs, setup_console_logging
from .job import FineTuneJob
from ..model_dir import ModelDir, allow_full_checkpoint_load, load_state
from .trainable import TrainableSet
from .data import (MODEL_KIND, TagPolicy, TrainingSources, WorkLayout, model_files,
                   write_finetuned_model)

WORK = ".work"
CKPT = "checkpoints"
logger = logging.getLogger("nmtfrag.train.finetune")


def worse_than_before(before: float | None, best: float | None) -> bool | None:
    """True when even the kept (best) checkpoint has a higher validation loss than the
    model had before fine-tuning; None when either loss was not measured."""
    if before is None or best is None:
        return None
    return best > before


def loss_note(result: dict) -> str | None:
    """The line that says a fine-tuning run made the validation loss worse (else None):
    the model written to OUT is then worse on the validation set than the one it started
    from, which a JSON summary alone does not make obvious."""
    if not result.get("worse_than_before"):
        return None
    return (f"note: fine-tuning did not lower the validation loss: the best checkpoint's "
            f"{result['valid_loss_best']:.3f} is worse than {result['valid_loss_before']:.3f} "
            f"before fine-tuning (the model in OUT is that best checkpoint; consider a "
            f"lower --lr, fewer updates, or keeping the base model)")


# --------------------------------------------------------------------------- the stage
@dataclass
class FineTuneConfig:
    """fairseq's training method: optimiser, budget, early stopping, what trains.

    Defaults follow Kim et al. (2021) (PAPER_DEFAULTS); dropout and label smoothing are
    the job's (both methods use them). A budget is required: `max_updates` and/or
    `max_epochs`. `validate` False trains for the whole budget and keeps the last
    checkpoint, reading no validation set (`patience` and `measure_before` then do
    nothing; `validate_every` is refused)."""
    max_updates: int | None = None
    max_epochs: int | None = None
    lr: float = PAPER_DEFAULTS["lr"]
    weight_decay: float = PAPER_DEFAULTS["weight_decay"]
    warmup_updates: int = 0
    max_tokens: int = 4096
    update_freq: int = 1
    patience: int = 5
    validate_every: int | None = None
    seed: int = 1
    params: TrainableSet = field(default_factory=TrainableSet)
    fp16: bool = False
    keep_checkpoints: bool = False
    measure_before: bool = True  # the validation loss of the base model, for the record
    # False: no validation set (the job's valid files None), fairseq's
    # --disable-validation, the whole budget, the last checkpoint kept, no loss measured
    validate: bool = True

    def __post_init__(self) -> None:
        """Checked when made: a wrong type is a TypeError, a value out of range a
        ValueError, each naming the field (the command's options have the same ranges).
        Why: lr=-1 or max_updates="10" were accepted here and failed inside fairseq."""
        for name in ("max_updates", "max_epochs", "validate_every"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), 1)
        check_number("lr", self.lr, 0, low_open=True)
        check_number("weight_decay", self.weight_decay, 0)
        for name, low in (("warmup_updates", 0), ("max_tokens", 1), ("update_freq", 1),
                          ("patience", -1), ("seed", 0)):
            check_int(name, getattr(self, name), low)
        if not isinstance(self.params, TrainableSet):
            raise TypeError(f"params must be a TrainableSet, got {self.params!r}")
        for name in ("fp16", "keep_checkpoints", "measure_before", "validate"):
            check_bool(name, getattr(self, name))

    def trained(self) -> TrainableSet | None:
        """What limits training (nmtfrag.train.trainable), or None: fairseq trains everything."""
        if self.params.kind == "all" and not self.params.freeze_embeddings:
            return None
        return self.params


@dataclass(frozen=True)
class RunDirs:
    """A run's places in OUT: the private work dir (OUT/.work, 0700) and fairseq's
    checkpoints (OUT/checkpoints), which are what `resume` continues from."""
    out: str

    @property
    def layout(self) -> WorkLayout:
        return WorkLayout(os.path.join(self.out, WORK))

    @property
    def save_dir(self) -> str:
        return os.path.join(self.out, CKPT)

    @property
    def last(self) -> str:
        return os.path.join(self.save_dir, "checkpoint_last.pt")

    @property
    def prepared_json(self) -> str:
        return os.path.join(self.layout.work, "prepared.json")


@dataclass
class TrainingOutcome:
    """What fairseq's training left: the command line, its validations, the kept
    (best, or without validation last) checkpoint's state and the counts the manifest
    reports."""
    argv: list[str]
    validations: list[dict]
    train_seconds: float
    earlier_train_seconds: float = 0.0  # of the interrupted run a resumed one continues
    num_updates: int = 0
    best_checkpoint_updates: int = 0
    valid_loss_best: float | None = None
    epochs_completed: int | None = None  # whole passes over the training data (fairseq's)


class Certifier(Protocol):
    """What may give a fine-tuned model a privacy certificate (nmtfrag.dp.release_privacy:
    one trained on a DP release only carries the release's). `prepare` runs before any
    training (it may refuse the run); `write` runs once the model is written, before the
    manifest (the completion mark), and returns a note to print, if any."""

    def prepare(self, sources: TrainingSources, validate: bool, base_model: str) -> None: ...

    def write(self, out: str, manifest: dict) -> str | None: ...


def finetune(job: FineTuneJob, config: FineTuneConfig,
             certifier: Certifier | None = None) -> dict:
    """Fine-tune `job.model` on `job.train` with fairseq's trainer; write a model dir to
    `job.out`.

    Returns the manifest (also written to OUT/manifest.json). Raises InputError for
    anything the user can fix.
    """
    allow_full_checkpoint_load()
    device = check_request(job, config)
    sources = TrainingSources.of_job(job)
    sources.check_files()  # before the model is loaded: they read no text
    if job.reshape is not None:
        job.reshape.check(sources.train.kind)
    md = training_data.base_model(job)
    # before anything trains: a DP release's certificate is checked now (refused when
    # edited), and only where the model would carry it
    if certifier is not None:
        certifier.prepare(sources, config.validate, md.path)
    dirs = open_run_dirs(job, md, sources)
    try:
        return _prepare_train_keep(job, config, device, sources, md, dirs, certifier)
    except (KeyboardInterrupt, SystemExit) as exc:  # SIGINT, SIGTERM: say what OUT keeps
        note_interruption(exc, interruption_note(dirs, job.out))
        raise
    except Exception as exc:
        resumable = os.path.isfile(dirs.last)
        if not (resumable or job.keep_work):  # nothing to resume: the training text
            for d in (dirs.layout.work, dirs.save_dir):  # and half-saved checkpoints go
                shutil.rmtree(d, ignore_errors=True)
        if not is_disk_error(exc):
            raise
        assert isinstance(exc, OSError)
        named = with_path(exc, dirs.out)  # e.g. fairseq's writes name no file
        if resumable:  # the CLI then keeps OUT and prints this after the error
            note_interruption(named, f"{job.out} keeps the run's last checkpoint, "
                                     f"{CKPT}/checkpoint_last.pt, and its prepared data "
                                     f"in {WORK}/ (the training text): free space and "
                                     f"continue with --resume, or remove {job.out}")
        if named is exc:
            raise
        raise named from exc


def _prepare_train_keep(job: FineTuneJob, config: FineTuneConfig, device: str,
                        sources: TrainingSources, md: ModelDir, dirs: RunDirs,
                        certifier: Certifier | None) -> dict:
    """finetune once OUT is open: prepare the data, train, keep the chosen checkpoint,
    and let the certifier write its certificate (or why there is none)."""
    if job.threads:
        import torch

        torch.set_num_threads(job.threads)
    setup_console_logging(job.quiet)
    t0 = time.time()
    hashes = training_data.input_hashes(md, sources)
    if job.reshape is not None:
        hashes.update(job.reshape.hashes())
    prep = prepared_data(job, config, dirs, md, sources, hashes)
    before = loss_before(job, config, dirs, prep, device)
    outcome = train(job, config, dirs, md, device)
    keep_best(job, config, dirs, md, outcome)
    manifest = run_manifest(job, config, md, sources, prep, outcome, before, device)
    manifest["result"]["wall_seconds_this_run"] = round(time.time() - t0, 1)
    manifest["inputs_sha256"] = hashes if config.validate else {  # valid: the train files
        k: v for k, v in hashes.items() if k not in ("valid_src", "valid_tgt")}
    manifest["tool_versions"] = tool_versions("fairseq-fixed", "torch", "fastbpe",
                                              "sacremoses")
    note = certifier.write(dirs.out, manifest) if certifier is not None else None
    manifest["dp"] = os.path.isfile(os.path.join(dirs.out, "privacy.json"))
    if certifier is None and sources.train.manifest is not None and os.path.isfile(
            os.path.join(os.path.dirname(sources.train.manifest), "privacy.json")):
        note = manifest["no_certificate"] = (
            "trained on a DP release, but no certifier was given (nmtfrag finetune gives "
            "nmtfrag.dp.release_privacy.ReleaseCertifier): the model carries no certificate")
    if note:
        print(f"note: {note}", file=sys.stderr)
    write_json(os.path.join(dirs.out, MANIFEST), manifest)
    return manifest


def check_request(job: FineTuneJob, config: FineTuneConfig) -> str:
    """Refuse a run without a budget or on a device torch cannot use; the device."""
    if not (config.max_updates or config.max_epochs):
        raise InputError("give a training budget: --max-updates and/or --max-epochs")
    if config.validate and (job.valid_src is None or job.valid_tgt is None):
        raise InputError("give --valid-src and --valid-tgt, or --no-validation to train "
                         "for the whole budget without a validation set")
    if not config.validate:
        if job.valid_src is not None or job.valid_tgt is not None:
            raise InputError("--no-validation reads no validation set: leave out "
                             "--valid-src/--valid-tgt")
        if config.validate_every:
            raise InputError("--validate-every with --no-validation: nothing is validated")
    device = job.device
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda"):
        raise InputError(f"--device {device}: expected cpu or cuda")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise InputError("--device cuda but torch sees no CUDA device")
    if config.fp16 and device != "cuda":  # fairseq would ignore it on the CPU
        raise InputError("--fp16 needs --device cuda (mixed precision is a GPU feature)")
    return device


def open_run_dirs(job: FineTuneJob, md: ModelDir, sources: TrainingSources) -> RunDirs:
    """OUT for this run: checked for a run to resume, or prepared afresh (refusing to
    drop an interrupted run without `overwrite`)."""
    dirs = RunDirs(os.path.abspath(job.out))
    out = dirs.out
    if job.resume:
        _check_resumable(dirs)
        lock_output_dir(out)  # no other run writes into it while this one lives
        _check_resumable(dirs)  # again under the lock: a run may have finished meanwhile
        return dirs
    # prepared (and locked) first: a run still writing into OUT is named as such
    out = prepare_output_dir(out, job.overwrite, kind=MODEL_KIND, inputs=[
        md.path, job.train, sources.train.src, sources.train.tgt, sources.valid_src,
        sources.valid_tgt])
    dirs = RunDirs(out)
    if os.path.isdir(dirs.save_dir) and os.listdir(dirs.save_dir) and not job.overwrite \
            and not os.path.isfile(os.path.join(out, MANIFEST)):
        raise InputError(f"{out} holds an interrupted run: pass --resume to continue "
                         f"it or --overwrite to start again")
    owner = os.path.join(out, OWNER_DIR)  # written by DP runs only
    if os.path.isdir(owner) and os.listdir(owner) and not job.overwrite:
        raise InputError(f"{out} holds an interrupted DP run (its state in {OWNER_DIR}/): "
                         f"continue it with `finetune --dp … --resume`, or pass --overwrite "
                         f"to start again")
    for d in (dirs.layout.work, dirs.save_dir):
        shutil.rmtree(d, ignore_errors=True)
    remove_run_outputs(out)
    # a run without DP writes nothing to owner/: what is there is an earlier DP run's
    # (its resume state, step log and owner manifest)
    shutil.rmtree(owner, ignore_errors=True)
    return dirs


def _check_resumable(dirs: RunDirs) -> None:
    """Refuse --resume of a finished run, or where no interrupted run is."""
    out = dirs.out
    if os.path.isfile(os.path.join(out, MANIFEST)):
        raise InputError(f"{out}: run already finished (manifest.json); nothing to resume")
    if not (os.path.isfile(dirs.prepared_json) and os.path.isfile(dirs.last)):
        raise InputError(f"{out}: no interrupted run to resume (needs {WORK}/ and "
                         f"{CKPT}/checkpoint_last.pt)")


def prepared_data(job: FineTuneJob, config: FineTuneConfig, dirs: RunDirs, md: ModelDir,
                  sources: TrainingSources, hashes: dict[str, str]) -> dict:
    """The preparation's record (OUT/.work/prepared.json): made now, or, resuming,
    the interrupted run's (refused if the inputs changed since)."""
    if job.resume:
        prep = read_json(dirs.prepared_json)
        if prep["inputs_sha256"] != hashes:
            raise InputError(f"{dirs.out}: --resume with different inputs than the "
                             f"interrupted run (model, train or valid files changed)")
        return prep
    work = dirs.layout.work
    os.makedirs(work, mode=0o700)
    os.chmod(work, 0o700)
    prep = training_data.prepare(md, sources, dirs.layout, seed=config.seed,
                                 tags=TagPolicy.of_flag(job.tags, data_decides=True),
                                 reshape=job.reshape, fraction=job.train_fraction).record()
    prep["inputs_sha256"] = hashes
    write_json(dirs.prepared_json, prep)
    return prep


def loss_before(job: FineTuneJob, config: FineTuneConfig, dirs: RunDirs, prep: dict,
                device: str) -> float | None:
    """The base model's validation loss (kept in prepared.json for a resumed run);
    None without validation (the valid split is then the training data)."""
    if not config.validate:
        return None
    if not config.measure_before or job.resume:
        return prep.get("valid_loss_before")
    layout = dirs.layout
    before = validation_loss(layout.bin_dir, layout.init_checkpoint, src_lang=job.src_lang,
                             tgt_lang=job.tgt_lang, max_tokens=config.max_tokens,
                             device=device, label_smoothing=job.label_smoothing)
    prep["valid_loss_before"] = before
    write_json(dirs.prepared_json, prep)
    return before


def train(job: FineTuneJob, config: FineTuneConfig, dirs: RunDirs, md: ModelDir,
          device: str) -> TrainingOutcome:
    """fairseq's training from the init checkpoint (or the interrupted run's last),
    its log in OUT/train.log."""
    layout = dirs.layout
    argv = fairseq_train_argv(
        layout.bin_dir, dirs.save_dir, layout.init_checkpoint,
        md.arch.get("arch") or "transformer", src_lang=job.src_lang, tgt_lang=job.tgt_lang,
        lr=config.lr, weight_decay=config.weight_decay, dropout=job.dropout,
        label_smoothing=job.label_smoothing, max_tokens=config.max_tokens,
        update_freq=config.update_freq, max_updates=config.max_updates,
        max_epochs=config.max_epochs, patience=config.patience,
        validate_every=config.validate_every, warmup_updates=config.warmup_updates,
        seed=config.seed, device=device, gpus=job.world_size, fp16=config.fp16,
        log_interval=job.log_interval, resume=job.resume, validate=config.validate)
    cfg = build_train_cfg(argv, md.arch)
    os.makedirs(dirs.save_dir, exist_ok=True)
    resumed = ResumedFrom.read(dirs.last) if job.resume else ResumedFrom()
    handler = LogCapture(os.path.join(dirs.out, "train.log"))
    attached = attach_logs(handler, logging.WARNING if job.quiet else logging.INFO)
    t_train = time.time()
    try:
        run_fairseq_train(cfg, config.trained(), resumed.stop_early)
    except (KeyboardInterrupt, SystemExit) as exc:  # the last save's epoch, from the log
        note_interruption(exc, interruption_note(dirs, job.out, handler.saved))
        raise
    finally:
        detach_logs(handler, attached)
        handler.close()
    return TrainingOutcome(argv, handler.valid, time.time() - t_train,
                           resumed.training_seconds)


def interruption_note(dirs: RunDirs, shown: str, saved: str | None = None) -> str:
    """What an interrupted run left in OUT (`shown`: OUT as the user gave it) and how to
    continue it; `saved`: the epoch and updates of fairseq's last save, when known."""
    if os.path.isfile(dirs.last):
        at = f" ({saved})" if saved else ""
        return (f"{shown} keeps the run's last checkpoint{at}, {CKPT}/checkpoint_last.pt; "
                f"continue with --resume (the same command and options)")
    return (f"{shown} holds no checkpoint of the run yet (one is saved every "
            f"{MIN_SECONDS / 60:g} minutes of training (longer where saving is slow), "
            f"at the end of each epoch, or every --validate-every updates): run the same "
            f"command again, without "
            f"--resume, to start over")


@dataclass(frozen=True)
class ResumedFrom:
    """What a resume continues, read once from the checkpoint's extra state: the training
    time so far (so a study reports a resumed run's whole cost, not only its last part)
    and fairseq's early-stopping count (STOP_EARLY). A checkpoint of an older version has
    only fairseq's best loss and its own validation loss: the count restarts at 1 if that
    validation was worse than the best, else 0 (a lower bound: never stops sooner than the
    uninterrupted run)."""
    training_seconds: float = 0.0
    stop_early: dict | None = None

    @classmethod
    def read(cls, last: str) -> "ResumedFrom":
        if not os.path.exists(last):
            return cls()
        extra = load_state(last).get("extra_state") or {}
        return cls(float(extra.get("previous_training_time") or 0.0),
                   extra.get(STOP_EARLY) or _older_stop_early(extra))


def _older_stop_early(extra: dict) -> dict | None:
    """The early-stopping count an older checkpoint implies (see ResumedFrom)."""
    best, last = extra.get("best"), extra.get("val_loss")
    if best is None:
        return None
    worse = last is not None and float(last) > float(best)
    return {"best": best, "num_runs": int(worse)}


def keep_best(job: FineTuneJob, config: FineTuneConfig, dirs: RunDirs, md: ModelDir,
              outcome: TrainingOutcome) -> None:
    """The best checkpoint (LoRA adapters merged) becomes OUT's model — the last one
    without validation; fairseq's checkpoints and the work dir go unless kept. Fills
    `outcome`'s counts."""
    best = os.path.join(dirs.save_dir, "checkpoint_best.pt")
    chosen = best if config.validate and os.path.isfile(best) else dirs.last
    if not os.path.isfile(chosen):
        raise RuntimeError(f"fairseq training wrote no checkpoint in {dirs.save_dir}")
    state = load_state(chosen)
    trained = config.trained()
    if trained is not None and trained.kind == "lora":
        from .lora import merge_state

        state["model"] = merge_state(state["model"], trained.lora_scaling)
    last_state = load_state(dirs.last) if chosen != dirs.last else state
    outcome.num_updates = last_state["optimizer_history"][-1]["num_updates"]
    outcome.epochs_completed = epochs_completed(last_state)
    outcome.best_checkpoint_updates = state["optimizer_history"][-1]["num_updates"]
    best_loss = (last_state.get("extra_state") or {}).get("best") if config.validate \
        else None
    if best_loss is not None and hasattr(best_loss, "item"):
        best_loss = best_loss.item()
    outcome.valid_loss_best = best_loss
    del last_state
    write_finetuned_model(dirs.out, state, dirs.layout, md, job.src_lang, job.tgt_lang)
    del state
    if not config.keep_checkpoints:
        shutil.rmtree(dirs.save_dir, ignore_errors=True)
    if not job.keep_work:
        shutil.rmtree(dirs.layout.work, ignore_errors=True)


def epochs_completed(state: dict) -> int | None:
    """Whole passes a fairseq checkpoint had made: its iterator's epoch counts from 1 and
    moves on at an epoch's end (a checkpoint saved mid-epoch k has made k − 1 too)."""
    epoch = ((state.get("extra_state") or {}).get("train_iterator") or {}).get("epoch")
    return None if epoch is None else int(epoch) - 1


def ended_at_cap(num_updates: int | None, epochs_completed: int | None,
                 max_updates: int | None, max_epochs: int | None) -> bool:
    """Whether a run reached a cap it had (updates or epochs; an unknown count reached
    none). The manifest and the study report both decide "at its cap" by this rule."""
    return bool((max_epochs and epochs_completed is not None and epochs_completed >= max_epochs)
                or (max_updates and num_updates is not None and num_updates >= max_updates))


def stopped_early(outcome: TrainingOutcome, config: FineTuneConfig) -> bool:
    """Whether early stopping ended the run: it stopped short of every cap it had. A run
    with neither ends only that way; one with an epoch cap but no epoch count is not
    called early-stopped."""
    if config.max_epochs and outcome.epochs_completed is None:
        return False
    return not ended_at_cap(outcome.num_updates, outcome.epochs_completed,
                            config.max_updates, config.max_epochs)


def run_manifest(job: FineTuneJob, config: FineTuneConfig, md: ModelDir,
                 sources: TrainingSources, prep: dict, outcome: TrainingOutcome,
                 before: float | None, device: str) -> dict:
    """OUT/manifest.json's parameters, architecture, counts and result (the caller adds
    the wall time, input hashes and tool versions)."""
    train = job.train
    trained = config.trained()
    validate = config.validate
    counts = prep["counts"] if validate else {  # the valid split is the training data
        k: v for k, v in prep["counts"].items() if k != "valid"}
    return {
        "kind": MODEL_KIND,
        "model_files": model_files(job.src_lang, job.tgt_lang),
        "params": {
            "base_model": public_name(md.path), "checkpoint": os.path.basename(md.checkpoints[0]),
            "base_ensemble_members": md.ensemble_members,
            "train": (public_name(train) if isinstance(train, str)
                      else [public_name(t) for t in train]),
            "train_kind": sources.train.kind, "train_text_mode": sources.train.mode,
            "validate": validate,
            "valid_src": public_name(job.valid_src), "valid_tgt": public_name(job.valid_tgt),
            "valid_text_mode": sources.valid_mode if validate else None,
            "src_lang": job.src_lang,
            "tgt_lang": job.tgt_lang, "lr": config.lr, "lr_scheduler": "fixed",
            "warmup_updates": config.warmup_updates, "weight_decay": config.weight_decay,
            "dropout": job.dropout, "label_smoothing": job.label_smoothing,
            "optimizer": "adam", "adam_betas": PAPER_DEFAULTS["adam_betas"],
            "max_tokens": config.max_tokens, "update_freq": config.update_freq,
            "max_updates": config.max_updates, "max_epochs": config.max_epochs,
            "patience": config.patience if validate else None,
            "validate_every": config.validate_every,
            "seed": config.seed,
            "trained_parameters": (trained.public_record() if trained is not None
                                   else {"kind": "all"}),
            "device": device, "gpus": job.world_size if device == "cuda" else 0,
            "fp16": config.fp16, "release_params": sources.train.release_params,
            "train_fraction": job.train_fraction,
            "pack": prep.get("reshaped", {}).get("pack"),
            "public_train": prep.get("reshaped", {}).get("public"),
        },
        "architecture": {k: md.arch.get(k) for k in (
            "arch", "encoder_layers", "decoder_layers", "encoder_embed_dim",
            "encoder_ffn_embed_dim", "decoder_ffn_embed_dim", "encoder_attention_heads",
            "share_all_embeddings", "share_decoder_input_output_embed")},
        "counts": counts,
        "tags": prep["tags"],
        "result": {
            "valid_loss_before": before, "valid_loss_best": outcome.valid_loss_best,
            "num_updates": outcome.num_updates, "epochs_completed": outcome.epochs_completed,
            "best_checkpoint_updates": outcome.best_checkpoint_updates,
            "stopped_early": stopped_early(outcome, config) if validate else False,
            "resumed": bool(job.resume),
            "train_seconds_this_run": round(outcome.train_seconds, 1),
            "train_seconds": round(outcome.earlier_train_seconds + outcome.train_seconds, 1),
            "wall_seconds_this_run": None,
            "validations_this_run": outcome.validations,
            "worse_than_before": worse_than_before(before, outcome.valid_loss_best),
        },
        "fairseq_train_argv": outcome.argv,
    }
