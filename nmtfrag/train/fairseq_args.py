"""The fairseq command lines of a fine-tuning run: fairseq-train's, parsed with the
model's architecture copied from its checkpoint, and fairseq-validate's for one
checkpoint's validation loss.

Apart from the stage (nmtfrag.train.finetune) so the flags fairseq is given, and why
each is there, read in one place; the run's manifest records the argv built here.
"""
from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, TypedDict

from .fairseq_log import LogCapture, attach_logs, detach_logs

if TYPE_CHECKING:
    from omegaconf import DictConfig


class PaperDefaults(TypedDict):
    """Kim et al. (2021)'s fine-tuning settings."""
    lr: float
    weight_decay: float
    dropout: float
    label_smoothing: float
    adam_betas: str
    adam_eps: float


PAPER_DEFAULTS: PaperDefaults = {
    "lr": 0.000175, "weight_decay": 0.0001, "dropout": 0.2, "label_smoothing": 0.1,
    "adam_betas": "(0.9, 0.98)", "adam_eps": 1e-8,
}


def _model_arg_names(arch):
    """Names of the model-specific options of `arch` (what the checkpoint decides)."""
    import argparse

    from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY

    p = argparse.ArgumentParser(add_help=False)
    ARCH_MODEL_REGISTRY[arch].add_args(p)
    names = {a.dest for a in p._actions}
    # plus what the architecture function derives (decoder_input_dim, …)
    ns = argparse.Namespace()
    ARCH_CONFIG_REGISTRY[arch](ns)
    names |= set(vars(ns))
    names |= {"max_source_positions", "max_target_positions"}
    return names


# an epoch interval no run reaches: turns fairseq's per-epoch validation and saving off
EPOCHS_OUT_OF_REACH = 10 ** 9


def fairseq_train_argv(bin_dir: str, save_dir: str, init_ckpt: str, arch: str, *,
                       src_lang: str, tgt_lang: str, lr: float, weight_decay: float,
                       dropout: float, label_smoothing: float, max_tokens: int,
                       update_freq: int, max_updates: int | None, max_epochs: int | None,
                       patience: int, validate_every: int | None, warmup_updates: int,
                       seed: int, device: str, gpus: int, fp16: bool, log_interval: int,
                       resume: bool, validate: bool = True,
                       threads_note: str | None = None) -> list[str]:
    """The fairseq-train command line of a fine-tuning run (also used by the benchmark).

    `validate` False: --disable-validation (fairseq reads no valid split, never stops
    early and writes no checkpoint_best.pt) and patience -1, whatever `patience` says;
    `validate_every` must then be None."""
    if not validate:
        if validate_every:
            raise ValueError("validate_every without validation")
        patience = -1
    argv = [
        bin_dir, "--task", "translation", "-s", src_lang, "-t", tgt_lang,
        "--arch", arch,
        "--optimizer", "adam", "--adam-betas", PAPER_DEFAULTS["adam_betas"],
        "--adam-eps", str(PAPER_DEFAULTS["adam_eps"]),
        "--lr", str(lr), "--weight-decay", str(weight_decay),
        "--lr-scheduler", "fixed", "--warmup-updates", str(warmup_updates),
        "--criterion", "label_smoothed_cross_entropy",
        "--label-smoothing", str(label_smoothing),
        "--dropout", str(dropout),
        "--max-tokens", str(max_tokens), "--update-freq", str(update_freq),
        # the fairseq forks drop the last batch unless it is a multiple of this (8 by
        # default): 7 of EMEA's 151 validation sentences would never be scored
        "--required-batch-size-multiple", "1",
        "--seed", str(seed),
        "--save-dir", save_dir, "--no-epoch-checkpoints",
        "--keep-interval-updates", "1", "--keep-last-epochs", "1",
        "--best-checkpoint-metric", "loss", "--patience", str(patience),
        "--skip-invalid-size-inputs-valid-test",
        "--log-format", "simple", "--log-interval", str(log_interval),
        "--num-workers", "0", "--no-progress-bar",
        # fairseq orders the examples of equal length with the seed plus the epoch at
        # which it builds the batches, then reuses them: epoch 1 in a whole run, epoch k
        # in one resumed at k, so a resumed run trained on other batches than an
        # uninterrupted one (a study's killed cell ended 0.7 BLEU away). New batches
        # every epoch (seed + epoch each time) make a resumed run repeat a whole one.
        "--update-epoch-batch-itr", "True",
    ]
    if not validate:
        argv += ["--disable-validation"]
    if max_updates:
        argv += ["--max-update", str(max_updates)]
    if max_epochs:
        argv += ["--max-epoch", str(max_epochs)]
    if validate_every:
        # every N updates *only*: fairseq also validates (and saves) at every epoch end
        # unless the epoch intervals are out of reach, and early stopping counts those
        # validations too (the demo stopped at 75 of 100 updates). A run still validates
        # and saves at its last update (fairseq's should_stop; at an epoch cap, through
        # stop_at_epoch_cap).
        argv += ["--validate-interval-updates", str(validate_every),
                 "--save-interval-updates", str(validate_every),
                 "--validate-interval", str(EPOCHS_OUT_OF_REACH),
                 "--save-interval", str(EPOCHS_OUT_OF_REACH)]
    if resume:
        argv += ["--restore-file", os.path.join(save_dir, "checkpoint_last.pt")]
    else:
        argv += ["--restore-file", init_ckpt, "--reset-optimizer", "--reset-lr-scheduler",
                 "--reset-meters", "--reset-dataloader"]
    if device == "cpu":
        argv += ["--cpu"]
    else:
        argv += ["--distributed-world-size", str(max(1, gpus))]
        if fp16:
            argv += ["--fp16"]
    return argv


def build_train_cfg(argv: list[str], ckpt_model_args: dict) -> DictConfig:
    """Parse a fairseq-train command line, then copy the architecture from the checkpoint.

    fairseq builds the model from the command line, not from the restore file, so every
    model-specific option the checkpoint stored (layer count, FFN width, embedding
    sharing, …) is copied over the parsed defaults — except dropout, which fine-tuning
    sets (the paper's 0.2).
    """
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, argv)
    for name in _model_arg_names(args.arch):
        if name in ("dropout",) or name not in ckpt_model_args:
            continue
        setattr(args, name, ckpt_model_args[name])
    return convert_namespace_to_omegaconf(args)


def validation_loss(bin_dir: str, ckpt: str, *, src_lang: str, tgt_lang: str,
                    max_tokens: int, device: str, label_smoothing: float) -> float | None:
    """Label-smoothed validation loss (base 2, fairseq's) of a checkpoint: fairseq-validate."""
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq_cli import validate as fs_validate

    argv = [bin_dir, "--path", ckpt, "--task", "translation", "-s", src_lang, "-t",
            tgt_lang, "--valid-subset", "valid", "--max-tokens", str(max_tokens),
            "--required-batch-size-multiple", "1",
            "--criterion", "label_smoothed_cross_entropy", "--label-smoothing",
            str(label_smoothing), "--log-format", "simple", "--no-progress-bar",
            "--skip-invalid-size-inputs-valid-test", "--num-workers", "0"]
    if device == "cpu":
        argv.append("--cpu")
    parser = options.get_validation_parser()
    args = options.parse_args_and_arch(parser, argv)
    override = options.parse_args_and_arch(options.get_validation_parser(), argv,
                                           suppress_defaults=True)
    handler = LogCapture(os.devnull)
    attached = attach_logs(handler, logging.WARNING)
    try:
        fs_validate.main(convert_namespace_to_omegaconf(args), override)
    finally:
        detach_logs(handler, attached)
        handler.close()
    return handler.valid[-1]["loss"] if handler.valid else None
