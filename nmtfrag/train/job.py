"""What a fine-tuning run trains on, from which model, and where the result goes.

Why: fine-tuning is one stage with two training methods, fairseq's trainer
(`nmtfrag.train.finetune.finetune(job, FineTuneConfig)`) and DP-SGD
(`nmtfrag.dp.engine.dp_finetune(job, DPConfig)`). Both take this same job; each method's
own settings (optimiser, budget, privacy) are in its config.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import (as_optional_path, as_path, check_bool, check_int, check_number,
                      check_str)

if TYPE_CHECKING:
    from .reshape import Reshape


@dataclass
class FineTuneJob:
    """What to fine-tune on what, and where the result goes (no method parameters).

    `train` is a release directory, a file prefix (PREFIX.SRC + PREFIX.TGT) or two files
    (nmtfrag.train.data.resolve_train). `tags` adds <P>/</P> to the dictionaries; without
    it fairseq's track adds them when the training data holds them, and the DP track
    refuses tagged data (its model's shape must not depend on the data). `device` None:
    cuda if available, else cpu. `world_size`: processes, one per GPU on CUDA (fairseq's
    distributed launcher, or torch.distributed under DP; gloo processes on CPU under DP
    only). `save_every` is the DP track's resumable-state interval. `valid_src` and
    `valid_tgt` are given together or not at all (none: `TrainingSources.of_job`).
    `reshape`: public pairs mixed in and/or the release packed to sentence length
    (nmtfrag.train.reshape; fairseq's track)."""
    model: str
    train: str | Sequence[str]
    out: str
    # None: no validation set (fairseq's track with FineTuneConfig.validate False only;
    # DP-SGD needs one)
    valid_src: str | None = None
    valid_tgt: str | None = None
    src_lang: str = "de"
    tgt_lang: str = "en"
    pretokenized: bool = False
    checkpoint: str | None = None
    tags: bool = False
    dropout: float = 0.2
    label_smoothing: float = 0.1
    device: str | None = None
    threads: int | None = None
    overwrite: bool = False
    keep_work: bool = False
    quiet: bool = False
    log_interval: int = 50
    world_size: int = 1      # processes (torch.distributed: gloo on CPU, nccl on GPUs)
    resume: bool = False     # continue the interrupted run in `out`
    save_every: int = 10     # DP: save the resumable state every N noisy steps (0: never)
    reshape: Reshape | None = None
    # train on a random share of the training pairs (each kept with this probability,
    # seeded): a data-size curve; 1: all
    train_fraction: float = 1.0

    def __post_init__(self) -> None:
        """Paths may be os.PathLike (kept as str); a wrong type is a TypeError and a value
        out of range a ValueError, each naming the field, before anything is read."""
        self.model, self.out = as_path("model", self.model), as_path("out", self.out)
        if isinstance(self.train, (str, os.PathLike)):
            self.train = as_path("train", self.train)
        elif isinstance(self.train, (list, tuple)):
            self.train = type(self.train)(as_path("train", t) for t in self.train)
        else:
            raise TypeError(f"train must be a path or a sequence of paths, got "
                            f"{self.train!r}")
        self.valid_src = as_optional_path("valid_src", self.valid_src)
        self.valid_tgt = as_optional_path("valid_tgt", self.valid_tgt)
        for name in ("pretokenized", "tags", "overwrite", "keep_work", "quiet", "resume"):
            check_bool(name, getattr(self, name))
        for name in ("src_lang", "tgt_lang"):
            check_str(name, getattr(self, name))
        for name in ("checkpoint", "device"):
            if getattr(self, name) is not None:
                check_str(name, getattr(self, name))
        if self.threads is not None:
            check_int("threads", self.threads, 1)
        for name, low in (("log_interval", 1), ("world_size", 1), ("save_every", 0)):
            check_int(name, getattr(self, name), low)
        for name in ("dropout", "label_smoothing"):
            if not 0 <= check_number(name, getattr(self, name)) < 1:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        if not 0 < check_number("train_fraction", self.train_fraction) <= 1:
            raise ValueError(f"train_fraction must be in (0, 1], got {self.train_fraction}")
