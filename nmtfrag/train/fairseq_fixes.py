"""fairseq's known training gaps, fixed around its own training main (fairseq_cli.train).

Why: nmtfrag fine-tunes with fairseq's trainer as it is (nmtfrag.train.finetune), and
that trainer leaves gaps a long run falls into. `train_main_with_fixes` fixes
them for the length of one run: atomic checkpoint copies (a kill mid-copy no longer
truncates checkpoint_last.pt), the early-stopping count kept across a resume, a resume
point every few minutes (mid-epoch too; nmtfrag.resume_clock), the epoch-cap save under
--validate-every, and training only a parameter subset (nmtfrag.train.trainable).
"""
from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

from ..fileio import atomic_writer
from ..resume_clock import ResumeClock

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from .trainable import TrainableSet


def run_fairseq_train(cfg: DictConfig, trained: TrainableSet | None = None,
                      stop_early: dict | None = None) -> None:
    """fairseq-train's main on a parsed cfg (spawns one process per GPU when needed).
    `trained` (a nmtfrag.train.trainable.TrainableSet) limits what trains; None: everything.
    `stop_early`: the early-stopping count a resumed run continues (ResumedFrom)."""
    from fairseq.distributed import utils as distributed_utils

    distributed_utils.call_main(cfg, train_main_with_fixes, trained=trained,
                                stop_early=stop_early)


def train_main_with_fixes(cfg: DictConfig, trained: TrainableSet | None = None,
                          stop_early: dict | None = None, **kwargs: object) -> object:
    """fairseq_cli.train.main, with checkpoint copies made atomic, the early-stopping count
    restored, a resume point every few minutes (ResumePoints), the epoch cap's
    last update saved (stop_at_epoch_cap) and (with `trained`) only that parameter set
    trained: fairseq's optimizer skips frozen parameters.

    Why atomic: fairseq saves a checkpoint once (atomically) and then `PathManager.copy`s
    it to the other names, checkpoint_last.pt included, with a plain `shutil.copyfile`
    that truncates and rewrites the file in place at every save. A run killed during that
    copy leaves a truncated checkpoint_last.pt, and `--resume` cannot continue.
    Module-level, so fairseq's spawned GPU workers import it and get the same fix.
    """
    from fairseq.file_io import PathManager
    from fairseq.tasks.translation import TranslationTask
    from fairseq.trainer import Trainer
    from fairseq_cli import train as fs_train

    plain_copy = PathManager.__dict__["copy"]
    plain_build = TranslationTask.__dict__["build_model"]
    plain_save = Trainer.__dict__["save_checkpoint"]
    plain_validate_and_save = fs_train.validate_and_save
    PathManager.copy = staticmethod(atomic_copy)
    restore_stop_early(fs_train, stop_early)
    points = ResumePoints()

    def save_checkpoint(self, filename, extra_state):
        points.saved()
        return plain_save(self, filename, {**extra_state,
                                           STOP_EARLY: stop_early_state(fs_train)})
    Trainer.save_checkpoint = save_checkpoint
    fs_train.validate_and_save = points.wrap(stop_at_epoch_cap(plain_validate_and_save))
    if trained is not None:
        def build_model(self, *args, **kw):
            from .trainable import apply

            model = plain_build(self, *args, **kw)
            apply(model, trained, seed=cfg.common.seed)
            return model

        TranslationTask.build_model = build_model
    try:
        return fs_train.main(cfg, **kwargs)
    finally:
        PathManager.copy = plain_copy
        TranslationTask.build_model = plain_build
        Trainer.save_checkpoint = plain_save
        fs_train.validate_and_save = plain_validate_and_save


def stop_at_epoch_cap(validate_and_save):
    """fairseq_cli.train.validate_and_save, with the last update of a run validating
    every N updates (--validate-every) that ends at its epoch cap handled as fairseq
    handles the last one under --max-update: validated and saved.

    Why: such a run puts fairseq's epoch intervals out of reach (fairseq_train_argv), so
    its last epoch's end neither validated nor saved: the updates since the last multiple
    of N never reached the kept model, and checkpoint_last.pt was an older save."""

    def with_cap(cfg, trainer, task, epoch_itr, valid_subsets, end_of_epoch):
        opt = cfg.optimization
        if (end_of_epoch and cfg.checkpoint.save_interval_updates > 0 and opt.max_epoch
                and epoch_itr.epoch >= opt.max_epoch):
            opt.max_update = trainer.get_num_updates()  # the run ends here anyway
        return validate_and_save(cfg, trainer, task, epoch_itr, valid_subsets, end_of_epoch)
    return with_cap


class ResumePoints:
    """checkpoint_last.pt saved when nmtfrag.resume_clock says a point is due (minutes
    since fairseq's or our last save), after an update that fairseq neither saves nor ends
    training at (an epoch's end is fairseq's).

    Why: fairseq saves at an epoch's end (or every --validate-every updates, validating
    each time, which early stopping counts); an epoch of EMEA phrases is over an hour on a
    2-core CPU, and a kill lost all of it. The point is saved with no validation loss: it
    changes neither the kept checkpoint nor the early-stopping count (its extra state
    carries the count; fairseq's dropout seed is the seed + updates and its data iterator
    resumes mid-epoch), so a run resumed from it trains as the uninterrupted one would (in
    fp32: under --fp16 fairseq keeps the loss scale but not its scaler's counters, at any
    resume).
    Only the process that saves checkpoints saves it, so each rank decides alone: not
    with sharded optimizer state (FSDP, ZeRO), whose saves are collective."""

    def __init__(self) -> None:
        self.clock = ResumeClock()

    def saved(self) -> None:
        self.clock.saved()

    def wrap(self, validate_and_save):
        """fairseq_cli.train.validate_and_save, then a resume point when one is due."""
        from fairseq import checkpoint_utils

        def with_resume_point(cfg, trainer, task, epoch_itr, valid_subsets, end_of_epoch):
            valid_losses, should_stop = validate_and_save(cfg, trainer, task, epoch_itr,
                                                          valid_subsets, end_of_epoch)
            if (self.clock.due() and not (end_of_epoch or should_stop)
                    and trainer.should_save_checkpoint_on_current_rank
                    and not trainer.is_fsdp
                    and cfg.distributed_training.zero_sharding == "none"):
                with self.clock.timing():  # also where the save wrote nothing (--no-save)
                    checkpoint_utils.save_checkpoint(cfg.checkpoint, trainer, epoch_itr, None)
            return valid_losses, should_stop
        return with_resume_point


# fairseq keeps its early-stopping count (the best validation loss, and the validations
# since) in memory only, as attributes of fairseq_cli.train.should_stop_early: a resumed
# run counted afresh, took its first validation for the best, and trained on past the
# point where the uninterrupted run stops. Saved in every checkpoint's extra state here.
STOP_EARLY = "nmtfrag_stop_early"


def stop_early_state(fs_train: object) -> dict:
    """fairseq's early-stopping count now, as a checkpoint keeps it."""
    f = getattr(fs_train, "should_stop_early")
    return {"best": getattr(f, "best", None), "num_runs": getattr(f, "num_runs", 0)}


def restore_stop_early(fs_train: object, saved: dict | None) -> None:
    """Start fairseq's early-stopping count afresh, or (`saved`, a resumed run's) where
    the interrupted run left it."""
    f = getattr(fs_train, "should_stop_early")
    for attr in ("best", "num_runs"):
        if hasattr(f, attr):
            delattr(f, attr)
    if saved and saved.get("best") is not None:
        f.best = float(saved["best"])
        f.num_runs = int(saved.get("num_runs") or 0)


def atomic_copy(src_path: str, dst_path: str, overwrite: bool = False) -> bool:
    """Copy to a temp file beside `dst_path`, then rename: a reader (or a kill) sees the
    old file or the new one, never half of it. Signature of fairseq's PathManager.copy."""
    if os.path.exists(dst_path) and not overwrite:
        return False
    with open(src_path, "rb") as src, atomic_writer(dst_path, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    return True
