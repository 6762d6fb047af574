"""The training data of a fine-tuning run, shared by both training methods.

Why: fairseq's trainer (nmtfrag.train.finetune) and the DP engine (nmtfrag.dp.engine) train on
the same thing, prepared the same way; this module is that common part, so neither
method reaches into the other's code:

1. resolve the input (`resolve_train`): a release directory, a file prefix or two files,
   and the text mode that says how the model's hub pipeline must read it;
2. check the base model (`base_model`) and the input files (`TrainingSources`);
3. prepare (`prepare`): text → hub tokens → fastBPE with the model's codes; the model's
   dictionaries (+ <P>/</P> per `TagPolicy`); the checkpoint's embeddings grown to match
   (OUT's init checkpoint); fairseq binaries of the train and valid splits;
4. the output conventions: the work dir's layout (`WorkLayout`), the input hashes of a
   manifest (`input_hashes`) and the model directory a run writes (`write_finetuned_model`).

Every file holding client text lives in the caller's private work dir.
"""
from __future__ import annotations

import enum
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from .binarize import binarize
from ..data.bpe import BPE, TAGS
from ..data.corpus import (SkipLog, check_distinct_sides, check_not_swapped, read_parallel,
                     validate_parallel)
from ..errors import InputError
from ..fileio import MANIFEST, read_json, sha256_file, write_parallel
from .job import FineTuneJob
from .reshape import Reshape, tagged_lines
from .reshape import reshape as reshape_split
from ..model_dir import (ModelDir, grow_state, load_state, member_to_adapt, save_state,
                        validate_model_dir, write_dict_with, write_model_dir)

# the manifest kind of a fine-tuned model directory (both methods)
MODEL_KIND = "nmtfrag-finetuned-model"


# --------------------------------------------------------------------------- inputs
class TrainingInput(NamedTuple):
    """The training files `--train` names and how their text is written: "raw",
    "moses" (Moses-tokenised, unescaped) or "hub" (the model's own tokens)."""
    src: str
    tgt: str
    mode: str
    kind: str                      # "release" or "files"
    manifest: str | None = None    # the release's manifest.json, if it has one
    release_params: dict | None = None


def resolve_train(train: str | Sequence[str], src_lang: str = "de", tgt_lang: str = "en",
                  pretokenized: bool = False) -> TrainingInput:
    """Training files and their text mode from `--train`.

    `train` is a release directory (manifest.json of kind nmtfrag-release; its
    `params.pretokenized` says whether the text is hub-tokenised or Moses-tokenised and
    unescaped), a file prefix (PREFIX.de + PREFIX.en) or a pair of files. Plain files are
    raw text unless `pretokenized` (Moses-tokenised, unescaped).
    """
    files_mode = "moses" if pretokenized else "raw"
    if not isinstance(train, str):
        if len(train) == 2:
            return TrainingInput(train[0], train[1], files_mode, "files")
        train = train[0]
    if os.path.isdir(train):
        return _release_input(train, src_lang, tgt_lang)
    src, tgt = f"{train}.{src_lang}", f"{train}.{tgt_lang}"
    if not (os.path.isfile(src) and os.path.isfile(tgt)):
        raise InputError(f"--train {train}: not a release directory and no "
                         f"{src} / {tgt} pair")
    return TrainingInput(src, tgt, files_mode, "files")


def _release_input(train: str, src_lang: str, tgt_lang: str) -> TrainingInput:
    """A release directory's files and text mode, read from its manifest. A directory
    without manifest.json is refused: `extract` writes the manifest last, so its phrase
    files alone are an unfinished (or killed) release, and their text mode unknown."""
    man_path = os.path.join(train, MANIFEST)
    files = {"src": f"phrases.{src_lang}", "tgt": f"phrases.{tgt_lang}"}
    if not os.path.isfile(man_path):
        raise InputError(f"--train {train}: a directory without {MANIFEST}, so no finished "
                         f"release (extract writes it last); give a release that "
                         f"`nmtfrag extract` finished, a file prefix or two files")
    try:
        man = read_json(man_path)
    except (ValueError, OSError) as exc:
        raise InputError(f"{man_path}: unreadable manifest ({exc})") from None
    if man.get("kind") not in (None, "nmtfrag-release"):
        raise InputError(f"{man_path}: kind {man.get('kind')!r} is not a release")
    files.update(man.get("files") or {})
    params: dict = man.get("params") or {}
    if params.get("src_lang", src_lang) != src_lang or \
            params.get("tgt_lang", tgt_lang) != tgt_lang:
        raise InputError(f"{man_path}: release is {params.get('src_lang')}→"
                         f"{params.get('tgt_lang')}, model is {src_lang}→{tgt_lang}")
    mode = "moses" if params.get("pretokenized") else "hub"
    return TrainingInput(os.path.join(train, files["src"]), os.path.join(train, files["tgt"]),
                         mode, "release", man_path, params)


def train_argument(train: str | Sequence[str]) -> str | tuple[str, str]:
    """A job's `train` as resolve_train takes it: a path, or a pair of files."""
    if isinstance(train, str):
        return train
    if len(train) != 2:
        raise InputError("--train takes a release directory, a prefix, or two files")
    return (train[0], train[1])


@dataclass(frozen=True)
class TrainingSources:
    """The text a fine-tuning run reads: training and validation files, their text modes
    and languages. Validation files are plain files (raw, or Moses-tokenised when the job
    is `pretokenized`)."""
    train: TrainingInput
    valid_src: str
    valid_tgt: str
    valid_mode: str
    src_lang: str
    tgt_lang: str

    @classmethod
    def of_job(cls, job: FineTuneJob) -> TrainingSources:
        """The job's sources, its training input resolved (InputError if it is none).

        A job without validation files (`valid_src` None: fairseq's track with
        FineTuneConfig.validate False) gets the training files, in their own text mode,
        as its "valid" split. Why: fairseq's preprocessing binarises a valid split and
        its trainer expects one; these are the files the run trains on anyway, and with
        --disable-validation fairseq never evaluates them, so nothing outside the
        training data enters the run."""
        train = resolve_train(train_argument(job.train), job.src_lang, job.tgt_lang,
                              job.pretokenized)
        if (job.valid_src is None) != (job.valid_tgt is None):
            raise InputError("give both validation files (--valid-src and --valid-tgt) "
                             "or neither")
        if job.valid_src is None or job.valid_tgt is None:
            return cls(train, train.src, train.tgt, train.mode, job.src_lang, job.tgt_lang)
        return cls(train, job.valid_src, job.valid_tgt,
                   "moses" if job.pretokenized else "raw", job.src_lang, job.tgt_lang)

    def check_files(self) -> None:
        """Refuse a training or validation file that does not exist, one file as both
        sides of a pair, and a pair that looks swapped against the languages (reads the
        start of each file only). Call it before the model is loaded."""
        for p in (self.train.src, self.train.tgt, self.valid_src, self.valid_tgt):
            if not os.path.isfile(p):
                raise InputError(f"{p}: no such file")
        check_distinct_sides(self.train.src, self.train.tgt, "--train")
        check_distinct_sides(self.valid_src, self.valid_tgt, "--valid-src/--valid-tgt")
        check_not_swapped(self.train.src, self.train.tgt, self.src_lang, self.tgt_lang,
                          "--train")
        check_not_swapped(self.valid_src, self.valid_tgt, self.src_lang, self.tgt_lang,
                          "--valid-src/--valid-tgt")

    def splits(self) -> dict[str, tuple[str, str, str]]:
        """{split: (source file, target file, text mode)}."""
        return {"train": (self.train.src, self.train.tgt, self.train.mode),
                "valid": (self.valid_src, self.valid_tgt, self.valid_mode)}


def base_model(job: FineTuneJob) -> ModelDir:
    """The checked model directory, reduced to the one member a run adapts (a note on
    stderr says which, for an ensemble)."""
    md, note = member_to_adapt(validate_model_dir(job.model, job.src_lang, job.tgt_lang,
                                                  job.checkpoint), job.checkpoint)
    if note:
        print(f"note: {note}", file=sys.stderr)
    return md


def input_hashes(md: ModelDir, sources: TrainingSources,
                 documents: str | None = None) -> dict[str, str]:
    """SHA-256 of each input file, keyed as every fine-tuning manifest records them."""
    inputs = {"model": md.checkpoints[0], "train_src": sources.train.src,
              "train_tgt": sources.train.tgt, "valid_src": sources.valid_src,
              "valid_tgt": sources.valid_tgt}
    if documents is not None:
        inputs["documents"] = documents
    return {k: sha256_file(v) for k, v in inputs.items()}


# --------------------------------------------------------------------------- preparation
class TagPolicy(enum.Enum):
    """Whether <P>/</P> join the dictionaries (growing the embeddings)."""
    FROM_DATA = "from-data"  # when the training data holds them (fairseq's track)
    ADD = "add"              # always (--tags)
    REFUSE = "refuse"        # never, and tagged data is refused: under DP a public flag,
    #                          not the data, decides the model's shape

    @classmethod
    def of_flag(cls, tags: bool, *, data_decides: bool) -> TagPolicy:
        """--tags given: ADD; else FROM_DATA where the data may decide, else REFUSE."""
        if tags:
            return cls.ADD
        return cls.FROM_DATA if data_decides else cls.REFUSE


@dataclass(frozen=True)
class WorkLayout:
    """Where a run's prepared data lives inside its private work dir."""
    work: str

    @property
    def bin_dir(self) -> str:
        return os.path.join(self.work, "bin")

    @property
    def init_checkpoint(self) -> str:
        """The base checkpoint with embeddings grown to the run's dictionaries."""
        return os.path.join(self.work, "init.pt")

    def text_prefix(self, split: str) -> str:
        return os.path.join(self.work, split)

    def dictionary(self, lang: str) -> str:
        """The dictionary as prepared (before binarising)."""
        return os.path.join(self.work, f"dict.{lang}.txt")

    def binarised_dictionary(self, lang: str) -> str:
        return os.path.join(self.bin_dir, f"dict.{lang}.txt")


@dataclass
class PreparedData:
    """What `prepare` made: per-split counts, the tags record, the text modes, and the
    0-based corpus line of each binarised training example (`train_lines`: owner-only,
    never written by `record`)."""
    counts: dict
    tags: dict
    text_modes: dict
    train_lines: list[int]
    reshaped: dict = field(default_factory=dict)  # packing, public pairs (reshape.py)

    def record(self) -> dict:
        """The preparation's record (everything but the training lines)."""
        rec = {"counts": self.counts, "tags": self.tags, "text_modes": self.text_modes}
        if self.reshaped:
            rec["reshaped"] = self.reshaped
        return rec


def prepare(md: ModelDir, sources: TrainingSources, layout: WorkLayout, *, seed: int,
            tags: TagPolicy, dedup: bool = False,
            reshape: Reshape | None = None, fraction: float = 1.0) -> PreparedData:
    """Subword text, dictionaries (+tags), grown init checkpoint, binaries.

    `dedup` keeps one copy of each distinct training pair. `seed` seeds the rows of added
    tag symbols (nmtfrag.model_dir.grow_state), and the packing and public draw of
    `reshape` (nmtfrag.train.reshape), which then replaces the training split (its
    `train_lines` are then empty: its rows are no longer corpus lines). `fraction` < 1
    keeps each training pair with that probability (keep_fraction)."""
    bpe = BPE(md.bpecodes)
    counts, prefixes, tagged, train_lines = {}, {}, {}, []
    reshaped: dict = {}
    for split, (src, tgt, mode) in sources.splits().items():
        pairs, skips, lines = _read_pairs(src, tgt, split)
        duplicates = 0
        if split == "train" and fraction < 1:
            pairs, lines = keep_fraction(pairs, lines, fraction, seed)
        if split == "train" and dedup:
            pairs, lines, duplicates = _distinct(pairs, lines)
        src_sub, n_src_tags = bpe.encode_lines((p[0] for p in pairs), sources.src_lang, mode)
        tgt_sub, n_tgt_tags = bpe.encode_lines((p[1] for p in pairs), sources.tgt_lang, mode)
        tagged[split] = n_src_tags + n_tgt_tags
        # a pair whose side became empty after tokenisation cannot be trained on
        kept = [k for k, (a, b) in enumerate(zip(src_sub, tgt_sub)) if a.strip() and b.strip()]
        sub_pairs = [(src_sub[k], tgt_sub[k]) for k in kept]
        read = len(sub_pairs)
        if split == "train" and reshape is not None and reshape.active:
            sub_pairs, reshaped = reshape_split(sub_pairs, reshape, bpe, seed,
                                                sources.src_lang, sources.tgt_lang)
            tagged[split] = tagged_lines(sub_pairs)
        elif split == "train":
            train_lines = [lines[k] for k in kept]
        prefixes[split] = layout.text_prefix(split)
        _write_sides(prefixes[split], sub_pairs, sources)
        counts[split] = {"pairs": len(sub_pairs), "skipped": skips.to_json(),
                         "empty_after_bpe": len(pairs) - len(kept),
                         "tagged_lines": tagged[split], "duplicates_removed": duplicates}
        if reshaped and split == "train":  # before packing and the public pairs
            counts[split]["pairs_read"] = read
    added_src, added_tgt = _dictionaries_and_init(md, layout, sources, tagged["train"],
                                                  tags, seed)
    stats = binarize(prefixes, layout.bin_dir, layout.dictionary(sources.src_lang),
                     layout.dictionary(sources.tgt_lang), sources.src_lang, sources.tgt_lang)
    for split in counts:
        counts[split].update(stats.get(split, {}))
    return PreparedData(
        reshaped=reshaped,
        counts=counts,
        tags={"tagged_training_lines": tagged["train"], "added_to_src_dict": added_src,
              "added_to_tgt_dict": added_tgt,
              "init": "mean of pretrained rows + 0.01·std noise"},
        text_modes={"train": sources.train.mode, "valid": sources.valid_mode},
        train_lines=train_lines)


OPTIONS_OF_SPLIT = {"train": "--train", "valid": "--valid-src/--valid-tgt"}


def _read_pairs(src: str, tgt: str, what: str) -> tuple[list[tuple[str, str]], SkipLog,
                                                        list[int]]:
    validate_parallel(src, tgt, OPTIONS_OF_SPLIT.get(what, what))
    skips = SkipLog()
    rows = list(read_parallel(src, tgt, skips))
    if not rows:
        raise InputError(f"{what} {src}: no usable line pairs")
    return [(s, t) for _, s, t in rows], skips, [n - 1 for n, _, _ in rows]


def keep_fraction(pairs: list[tuple[str, str]], lines: list[int], fraction: float,
                  seed: int) -> tuple[list[tuple[str, str]], list[int]]:
    """Each pair kept with probability `fraction` (independent draws, seeded): a random
    share of the corpus whose size is never chosen from n, so a DP run on it is a DP run
    on a subset (its units outside the subset spend nothing)."""
    import random

    if not 0 < fraction <= 1:
        raise InputError(f"--train-fraction must be in (0, 1], got {fraction}")
    rng = random.Random(f"train-fraction {seed}")
    kept = [k for k in range(len(pairs)) if rng.random() < fraction]
    if not kept:
        raise InputError(f"--train-fraction {fraction:g} kept no training pair")
    return [pairs[k] for k in kept], [lines[k] for k in kept]


def _distinct(pairs: list[tuple[str, str]],
              lines: list[int]) -> tuple[list[tuple[str, str]], list[int], int]:
    """The first occurrence of each distinct pair, its line, and how many were dropped."""
    first: dict[tuple[str, str], int] = {}
    for pair, line in zip(pairs, lines):
        first.setdefault(pair, line)
    return list(first), list(first.values()), len(pairs) - len(first)


def _write_sides(prefix: str, pairs: list[tuple[str, str]], sources: TrainingSources) -> None:
    write_parallel(f"{prefix}.{sources.src_lang}", f"{prefix}.{sources.tgt_lang}", pairs)


def _dictionaries_and_init(md: ModelDir, layout: WorkLayout, sources: TrainingSources,
                           n_tagged: int, tags: TagPolicy,
                           seed: int) -> tuple[list[str], list[str]]:
    """The model's dictionaries plus the tags `tags` asks for, and the init checkpoint
    with embedding rows for them. Returns the symbols added to each dictionary."""
    if tags is TagPolicy.REFUSE and n_tagged:
        raise InputError(f"the training data holds {n_tagged} <P>/</P> tag tokens but "
                         "--tags was not given: under --dp the vocabulary is decided by "
                         "flags only, so pass --tags (or remove the tags)")
    add = tags is TagPolicy.ADD or (tags is TagPolicy.FROM_DATA and n_tagged)
    new = list(TAGS) if add else []
    added_src = write_dict_with(md.src_dict, layout.dictionary(sources.src_lang), new)
    added_tgt = write_dict_with(md.tgt_dict, layout.dictionary(sources.tgt_lang), new)
    state = load_state(md.checkpoints[0])
    grow_state(state, len(added_src), len(added_tgt), seed=seed)
    save_state(state, layout.init_checkpoint)
    return added_src, added_tgt


# --------------------------------------------------------------------------- outputs
def model_files(src_lang: str, tgt_lang: str) -> list[str]:
    """The files of a fine-tuned model directory (the WMT19 layout)."""
    return ["model.pt", f"dict.{src_lang}.txt", f"dict.{tgt_lang}.txt", "bpecodes"]


def write_finetuned_model(out: str, state: dict, layout: WorkLayout, md: ModelDir,
                          src_lang: str, tgt_lang: str) -> str:
    """OUT as a model directory: the trained checkpoint, the run's (binarised)
    dictionaries and the base model's bpecodes."""
    return write_model_dir(out, state, layout.binarised_dictionary(src_lang),
                           layout.binarised_dictionary(tgt_lang), md.bpecodes,
                           src_lang, tgt_lang)
