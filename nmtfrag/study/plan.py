"""What each cell of a study runs: its steps as `nmtfrag` command lines, and where they write.

Why: every step is one of the toolkit's own commands (extract, finetune, evaluate, audit),
run as a child process with the options this module gives it, so a study does exactly
what a user could do by hand, each step's output is an ordinary output directory (done
when it holds a manifest.json), and a killed step resumes as the command resumes. The
plan depends on the config only: never on the private data (a DP cell's budget is its
plan, a DP release's is passes over the release), which a test checks.

Layout of a study directory OUT:
    study.json                the settings recorded for each cell (nmtfrag.study.record)
    owner/data/               the training corpus with canaries planted (owner-only)
    owner/align-model/        the public aligner of the DP releases (learned on public text)
    cells/NAME/STEP/          one output directory per step (release, reconstruct,
                              finetune, evaluate, exposure, membership)
    cells/NAME/logs/STEP.log  each step's terminal output
    cells/NAME/state.json     CPU and wall seconds per step, failures
    report/                   report.md, report.json, privacy_utility.png
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..fileio import trained_lines_path
from .config import BASELINE, RELEASE_APPROACHES, Cell, StudyConfig

RELEASE, RECONSTRUCT, FINETUNE, EVALUATE, EXPOSURE, MEMBERSHIP = (
    "release", "reconstruct", "finetune", "evaluate", "exposure", "membership")
LENPEN, EVALUATE_LP = "lenpen", "evaluate-lp"  # [decode] length_penalty = "public"
WARM_START = "warm-start"  # dp-composed: the model trained on its DP release, DP-SGD's base


@dataclass(frozen=True)
class Step:
    """One `nmtfrag` command of a cell. `argv` lacks --out and --overwrite/--resume (the
    runner adds them); `resumable`: a killed run continues with --resume (finetune)."""
    cell: str
    name: str
    out: str
    argv: tuple[str, ...]
    threads: bool = True      # takes --threads
    resumable: bool = False

    @property
    def done(self) -> bool:
        return os.path.isfile(os.path.join(self.out, "manifest.json"))


@dataclass(frozen=True)
class CellPlan:
    cell: str
    approach: str
    steps: tuple[Step, ...] = field(default_factory=tuple)
    adopt: str = ""           # a finished finetune output to adopt instead of training

    def step(self, name: str) -> Step | None:
        return next((s for s in self.steps if s.name == name), None)

    @property
    def done(self) -> bool:
        return all(s.done for s in self.steps)


class Paths:
    """Where a study keeps what (see the module docstring)."""

    def __init__(self, out: str):
        self.out = os.path.abspath(out)

    def cell(self, name: str) -> str:
        return os.path.join(self.out, "cells", name)

    def step(self, cell: str, step: str) -> str:
        return os.path.join(self.cell(cell), step)

    def log(self, cell: str, step: str) -> str:
        return os.path.join(self.cell(cell), "logs", f"{step}.log")

    @property
    def owner_data(self) -> str:
        return os.path.join(self.out, "owner", "data")

    @property
    def align_model(self) -> str:
        return os.path.join(self.out, "owner", "align-model")

    @property
    def report(self) -> str:
        return os.path.join(self.out, "report")

    @property
    def record(self) -> str:
        return os.path.join(self.out, "study.json")

    @property
    def machines(self) -> str:
        """One JSON line per `study run`: where it ran (the report names the hardware)."""
        return os.path.join(self.out, "machines.jsonl")

    @property
    def ct2_cache(self) -> str:
        return os.path.join(self.out, "ct2-cache")


class Planner:
    """Builds every cell's steps from the config and the study directory."""

    def __init__(self, config: StudyConfig, out: str):
        self.c = config
        self.p = Paths(out)

    # ----------------------------------------------------------------- shared inputs
    def canary_step(self) -> Step | None:
        """Plants the canaries every cell then trains on (None without the canary audit)."""
        a = self.c.audit
        if not a.canaries:
            return None
        src, tgt = self.c.data.files(self.c.data.train)
        return Step(BASELINE, "canaries", self.p.owner_data, (
            "audit", "canaries", "insert", "--src", src, "--tgt", tgt,
            "--count", str(a.canary_count),
            "--repeats", ",".join(str(r) for r in a.canary_repeats),
            "--seed", str(self.c.seed)), threads=False)

    def train_files(self) -> tuple[str, str]:
        """The owner's training corpus every cell uses (canaries planted, if audited)."""
        src, tgt = self.c.data.files(self.c.data.train)
        if self.c.audit.canaries:
            d = self.p.owner_data
            return os.path.join(d, os.path.basename(src)), os.path.join(d, os.path.basename(tgt))
        return src, tgt

    def run_seed(self, cell: Cell) -> int:
        """The seed of a cell's run: the study's for run 1 (what a cell recorded before
        runs existed), then a new one per run (training order, dropout, release draw;
        seeded DP noise). Unseeded DP noise is secret and new in every run anyway."""
        return self.c.seed + 1000 * (cell.run - 1)

    def first_phrase_cell(self) -> str | None:
        """The phrase cell whose eflomal alignment the others reuse (they then differ only
        in max length, tags and sampling, as in Kim et al.'s grid)."""
        return next((x.name for x in self.c.cells if x.approach == "phrases"), None)

    # ----------------------------------------------------------------- cells
    def release_cells(self, chosen: list[str]) -> list[str]:
        """The cells whose releases `chosen` needs made before the cells run, in the
        order they are made: the first phrase cell's (its alignment is every other's),
        the chosen phrase cells', and those of the mixed cells a public control trains
        like (its public draw is sized by that release: a phrase, DP or composed
        release). Only the release step of a cell not chosen is made."""
        likes = {self.c.cell(n).like for n in chosen
                 if n != BASELINE and self.c.cell(n).approach == "public"}
        cells = [c.name for c in self.c.cells
                 if (c.name in chosen and c.approach == "phrases")
                 or (c.name in likes and c.approach in RELEASE_APPROACHES)]
        first = self.first_phrase_cell()
        phrases = any(self.c.cell(n).approach == "phrases" for n in cells)
        return ([first] if phrases and first is not None else []) + \
            [n for n in cells if n != first]

    def plan(self, name: str) -> CellPlan:
        if name == BASELINE:
            return self._baseline()
        cell = self.c.cell(name)
        if cell.approach == "public":  # the control: no release, no model audits
            model = self.p.step(name, FINETUNE)
            return CellPlan(name, cell.approach, (self._control(cell),
                                                  self._evaluate(name, model, None),
                                                  *self._length_penalty(name, model, None)))
        steps: list[Step] = []
        if cell.approach in RELEASE_APPROACHES:
            steps.append(self._release(cell))
            if self.c.audit.reconstruction:
                steps.append(self._reconstruct(cell))
        if cell.approach == "dp-composed":
            steps.append(self._warm_start(cell))
        steps.append(self._finetune(cell))
        model = self.p.step(name, FINETUNE)
        steps.append(self._evaluate(name, model, checkpoint=None))
        steps += self._length_penalty(name, model, checkpoint=None)
        steps += self._model_audits(name, model, checkpoint=None,
                                    member_lines=(trained_lines_path(model)
                                                  if cell.train_fraction < 1 else None))
        return CellPlan(name, cell.approach, tuple(steps), cell.adopt)

    def all_plans(self) -> list[CellPlan]:
        return [self.plan(BASELINE)] + [self.plan(c.name) for c in self.c.cells]

    def _baseline(self) -> CellPlan:
        ck = self.c.checkpoint or None
        steps = [self._evaluate(BASELINE, self.c.model, ck),
                 *self._length_penalty(BASELINE, self.c.model, ck)]
        if self.c.audit.canaries:
            steps.append(self._exposure(BASELINE, self.c.model, ck))
        return CellPlan(BASELINE, "baseline", tuple(steps))

    def _common_text(self) -> tuple[str, ...]:
        d = self.c.data
        return (("--pretokenized",) if d.pretokenized else ()) + (
            "--src-lang", d.src_lang, "--tgt-lang", d.tgt_lang)

    def _release(self, cell: Cell) -> Step:
        src, tgt = self.train_files()
        argv = ["extract", "--src", src, "--tgt", tgt, "--max-len", str(cell.max_len),
                *self._common_text()]
        if cell.tags:
            argv.append("--tag")
        if cell.approach == "phrases":
            argv += ["--sample-rate", str(cell.sample_rate), "--seed", str(self.run_seed(cell))]
            first = self.first_phrase_cell()
            if first == cell.name:
                argv.append("--keep-alignments")
            else:  # the first phrase cell's alignment (made before, see runner)
                argv += ["--alignments", os.path.join(
                    self.p.step(str(first), RELEASE), "owner", "corpus.align")]
        else:  # a composed cell's release spends its share, at half its δ
            eps, delta = ((cell.release_epsilon, cell.delta / 2)
                          if cell.approach == "dp-composed" else (cell.epsilon, cell.delta))
            argv += ["--dp", "--epsilon", f"{eps:g}", "--delta", f"{delta:g}",
                     "--unit-cap", str(cell.unit_cap), "--align-public", self.c.data.public_align,
                     "--align-model", self.p.align_model]
            if cell.seeded:
                argv += ["--seed", str(self.run_seed(cell))]
        return Step(cell.name, RELEASE, self.p.step(cell.name, RELEASE), tuple(argv),
                    threads=False)

    def _reconstruct(self, cell: Cell) -> Step:
        src, tgt = self.train_files()
        return Step(cell.name, RECONSTRUCT, self.p.step(cell.name, RECONSTRUCT), (
            "audit", "reconstruct", "--release", self.p.step(cell.name, RELEASE),
            "--src", src, "--tgt", tgt, "--mode", "both"), threads=False)

    def _finetune(self, cell: Cell) -> Step:
        c, t = self.c, cell.training
        src, tgt = self.train_files()
        vsrc, vtgt = c.data.files(c.data.valid)
        argv = ["finetune", "--model", c.model, *self._common_text(), "-q",
                "--device", c.machine.device]
        if c.checkpoint and cell.approach != "dp-composed":  # it starts from its warm start
            argv += ["--checkpoint", c.checkpoint]
        if cell.approach in ("dp-sgd", "dp-composed"):
            # the DP track's own plan (the default recipe unless `options` say otherwise):
            # no validation set is read (a DP run never chooses by one). A composed cell
            # continues from its warm start, whose certificate is its release's: --epsilon
            # is then the total over both, its δ the other half
            delta = cell.delta / 2 if cell.approach == "dp-composed" else cell.delta
            if cell.approach == "dp-composed":
                argv[argv.index("--model") + 1] = self.p.step(cell.name, WARM_START)
            argv += ["--train", src, tgt, "--no-validation",
                     "--dp", "--epsilon", f"{cell.epsilon:g}", "--delta", f"{delta:g}",
                     "--max-tokens", str(c.training.max_tokens), *cell.options]
            if cell.seeded:
                argv += ["--seed", str(self.run_seed(cell))]
            if cell.train_fraction < 1:
                argv += ["--train-fraction", f"{cell.train_fraction:g}"]
            if cell.public_batch:
                argv += ["--dp-public-train", c.data.public_train, "--dp-public-batch",
                         str(cell.public_batch), "--dp-public-weight",
                         f"{cell.public_weight:g}"]
            return Step(cell.name, FINETUNE, self.p.step(cell.name, FINETUNE), tuple(argv),
                        resumable=True)
        argv += ["--lr", f"{t.lr:g}", "--weight-decay", f"{t.weight_decay:g}",
                 "--dropout", f"{t.dropout:g}", "--label-smoothing", f"{t.label_smoothing:g}",
                 "--max-tokens", str(t.max_tokens), "--seed", str(self.run_seed(cell))]
        if cell.approach == "dp-release":
            # a budget and a checkpoint from public inputs only: fixed passes over the
            # release (itself the mechanism's output), the last checkpoint, no validation
            return Step(cell.name, FINETUNE, self.p.step(cell.name, FINETUNE), tuple(
                argv + ["--train", self.p.step(cell.name, RELEASE),
                        "--max-epochs", str(cell.passes), "--no-validation",
                        *self._public_options(cell)]),
                resumable=True)
        train = [self.p.step(cell.name, RELEASE)] if cell.approach == "phrases" else [src, tgt]
        argv += ["--train", *train, *self._public_options(cell),
                 "--valid-src", vsrc, "--valid-tgt", vtgt,
                 "--max-epochs", str(t.max_epochs), "--patience", str(t.patience)]
        if t.max_updates:
            argv += ["--max-updates", str(t.max_updates)]
        if t.validate_every:
            argv += ["--validate-every", str(t.validate_every)]
        return Step(cell.name, FINETUNE, self.p.step(cell.name, FINETUNE), tuple(argv),
                    resumable=True)

    def _warm_start(self, cell: Cell) -> Step:
        """A composed cell's first model: fairseq's training on its DP release (and public
        pairs) for fixed passes, the last checkpoint, no validation set: post-processing
        of the release, so the model carries the release's certificate."""
        c, t = self.c, cell.training
        argv = ["finetune", "--model", c.model, *self._common_text(), "-q",
                "--device", c.machine.device, "--lr", f"{t.lr:g}",
                "--weight-decay", f"{t.weight_decay:g}", "--dropout", f"{t.dropout:g}",
                "--label-smoothing", f"{t.label_smoothing:g}", "--max-tokens",
                str(t.max_tokens), "--seed", str(self.run_seed(cell)), "--train",
                self.p.step(cell.name, RELEASE), "--max-epochs", str(cell.passes),
                "--no-validation", *self._public_options(cell)]
        if c.checkpoint:
            argv += ["--checkpoint", c.checkpoint]
        return Step(cell.name, WARM_START, self.p.step(cell.name, WARM_START), tuple(argv),
                    resumable=True)

    def _public_options(self, cell: Cell) -> list[str]:
        """finetune's options for a cell's public pairs and packing (none if it has none)."""
        argv: list[str] = []
        if cell.public_share or cell.pack == "public":
            argv += ["--public-train", self.c.data.public_train]
        if cell.public_share:
            argv += ["--public-share", f"{cell.public_share:g}"]
        if cell.public_min_words:
            argv += ["--public-min-words", str(cell.public_min_words)]
        if cell.pack:
            argv += ["--pack", cell.pack]
            if not cell.pack_tags:
                argv += ["--pack-tags", "drop"]
        return argv

    def _control(self, cell: Cell) -> Step:
        """The public control: its like-cell's training with the public pairs alone (the
        same draw, the same early stopping or fixed passes, the same cap); of a composed
        cell, its warm start's (where its public pairs are); of DP-SGD with public pairs,
        the planned steps with those pairs alone (--dp-public-only: no owner pair, σ 0)."""
        like = self.c.cell(cell.like)
        if like.approach == "dp-sgd":
            argv = self._finetune(like).argv + ("--dp-public-only",)
        elif like.approach == "dp-composed":
            argv = self._warm_start(like).argv + ("--public-only",)
        else:
            argv = self._finetune(like).argv + ("--public-only",)
        return Step(cell.name, FINETUNE, self.p.step(cell.name, FINETUNE), argv,
                    resumable=True)

    def _decoder(self, checkpoint: str | None) -> list[str]:
        """The decoding options every evaluation of the study shares."""
        c, d = self.c, self.c.decode
        argv = ["--beam", str(d.beam), "--engine", d.engine, "--device", c.machine.decoder]
        if checkpoint:
            argv += ["--checkpoint", checkpoint]
        if d.engine == "ctranslate2":
            argv += ["--compute-type", d.compute_type, "--ct2-cache", self.p.ct2_cache]
        return argv

    def _evaluate(self, name: str, model: str, checkpoint: str | None,
                  lenpen_from: str | None = None) -> Step:
        c, d = self.c, self.c.decode
        step = EVALUATE_LP if lenpen_from else EVALUATE
        src, ref = c.data.files(c.data.test)
        argv = ["evaluate", "--model", model, "--src", src, "--ref", ref,
                *self._common_text(), "--name", name, *self._decoder(checkpoint)]
        if d.test_lines:
            argv += ["--first", str(d.test_lines)]
        if lenpen_from:
            argv += ["--lenpen-from", lenpen_from]
        if name != BASELINE:
            argv += ["--baseline", self.p.step(BASELINE, step)]
        return Step(name, step, self.p.step(name, step), tuple(argv))

    def _length_penalty(self, name: str, model: str, checkpoint: str | None) -> list[Step]:
        """With [decode] length_penalty = "public": a penalty chosen for the cell's model
        on the public validation text, then the test set decoded with it (none else)."""
        c = self.c
        if c.decode.length_penalty != "public":
            return []
        src, ref = c.data.files(c.data.public_valid)
        choose = Step(name, LENPEN, self.p.step(name, LENPEN), (
            "length-penalty", "--model", model, "--src", src, "--ref", ref,
            "--first", str(c.decode.length_penalty_lines), "--src-lang", c.data.src_lang,
            "--tgt-lang", c.data.tgt_lang, *self._decoder(checkpoint)))
        return [choose, self._evaluate(name, model, checkpoint, lenpen_from=choose.out)]

    def _exposure(self, name: str, model: str, checkpoint: str | None) -> Step:
        argv = ["audit", "exposure", "--model", model, "--canaries",
                os.path.join(self.p.owner_data, "canaries.json"),
                "--samples", str(self.c.audit.exposure_samples), "--seed", str(self.c.seed),
                "--beam", str(self.c.decode.beam), "--device", self.c.machine.device]
        if checkpoint:
            argv += ["--checkpoint", checkpoint]
        return Step(name, EXPOSURE, self.p.step(name, EXPOSURE), tuple(argv))

    def _model_audits(self, name: str, model: str, checkpoint: str | None,
                      member_lines: str | None = None) -> list[Step]:
        """Canaries and membership; `member_lines`: the lines of the owner's training
        files a model trained on a share of them used (its members)."""
        c, steps = self.c, []
        if c.audit.canaries:
            steps.append(self._exposure(name, model, checkpoint))
        if c.audit.membership:
            members = c.data.files(c.data.train)  # the owner's pairs, without canaries
            leave_out: tuple[str, ...] = ()
            if member_lines and c.audit.canaries:  # its line numbers are the planted file's
                members = self.train_files()
                leave_out = ("--leave-out-canaries",
                             os.path.join(self.p.owner_data, "canaries.json"))
            argv = ["audit", "membership", "--model", model, "--reference-model", c.model,
                    "--members", *members, "--non-members", *c.data.files(c.data.test),
                    "--max-pairs", str(c.audit.membership_pairs), "--seed", str(c.seed),
                    "--device", c.machine.device,
                    *(("--pretokenized",) if c.data.pretokenized else ()),
                    *(("--member-lines", member_lines) if member_lines else ()),
                    *leave_out]
            steps.append(Step(name, MEMBERSHIP, self.p.step(name, MEMBERSHIP), tuple(argv)))
        return steps
