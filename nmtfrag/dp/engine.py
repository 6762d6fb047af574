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

The façade's parts, one job each: `config` (DPConfig and its checks), `rates` (the rate
policy: a public rate or a logical batch over ñ), `planning` (ñ, the steps and σ),
`workers` (the model, the step log, one process or `world_size` spawned ones), `records`
(the certificate and the manifests). This module prepares the data and the model, runs
those parts in order and writes OUT.

OUT gets what may be shared (model files, privacy.json, a manifest of public parameters)
and OUT/owner/ (never to be shared): the owner's manifest (paths, hashes, exact counts,
the number of units n, validation losses, seed) and train.log (per-step non-private
statistics). Nothing shared gives n: rates and steps come from a DP count ñ
(nmtfrag.dp.unit_count), composed into the certificate. The private work
dir holding the corpus lives in the system's temp dir, never inside OUT.
"""
from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..data.corpus import scan_text_file
from ..errors import InputError, is_disk_error, note_interruption, with_path
from ..fileio import MANIFEST, write_json, write_owner_json
from ..outdir import prepare_output_dir, remove_run_outputs
from ..workdir import private_workdir
from ..model_dir import ModelDir, allow_full_checkpoint_load, load_state
from ..randomness import Seed, resolve_seed
from ..train import data as training_data
from ..train.binarize import fairseq_log_level
from ..train.data import (MODEL_KIND, TagPolicy, TrainingSources, WorkLayout,
                          write_finetuned_model)
from ..train.job import FineTuneJob
from . import accounting, cert_files, resume, simulate
from .config import DPConfig
from .planning import NoisePlan, check_enough_units, plan_run
from .records import (PriorPrivacy, certificate, owner_record, public_manifest,
                      run_summary, write_trained_lines)
from .workers import ModelSetup, dp_device, set_up_model, train, valid_bits

if TYPE_CHECKING:
    import torch
    from fairseq.tasks.translation import TranslationTask

__all__ = ["DPConfig", "FineTuneJob", "dp_finetune"]


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
        public_ds = task.dataset(PUBLIC_SPLIT) if config.public_train else None
        plan = plan_run(config, out, seed, job.resume,
                        len(units) if units is not None else len(train_ds), units,
                        releases=prior.releases)
        setup = set_up_model(model.float(), config, seed, device)
        ls = job.label_smoothing
        validating = job.valid_src is not None  # else no validation set is read at all
        before = valid_bits(valid_ds, ls, setup.model) if validating else None
        announce(job, config, plan, setup, seed)
        run = train(job, config, plan, setup, seed, train_ds, valid_ds if validating else None,
                    units, out, work, device, public_ds)
        setup.model = setup.model.to(device)
        after = valid_bits(valid_ds, ls, setup.model) if validating else None
        write_trained_model(setup.model, config, layout, md, out, job)
    privacy, training, total = certificate(config, job, plan, setup, run.history, seed,
                                           prior)
    run.before, run.after, run.wall_seconds = before, after, time.time() - t0
    not_private = (None if config.mode.private else
                   simulate.record(config, plan.sigma, plan.planned_segments, plan.steps,
                                   plan.train_sigma, training["epsilon"]))
    write_owner_json(out, owner_record(job, config, md, sources, seed, not_private,
                                       prep.record(), plan, run, hashes))
    if job.train_fraction < 1:  # which pairs trained: a membership audit's members
        write_trained_lines(out, prep.train_lines)
    shipped: dict | None = privacy
    if not_private:
        shipped = None  # a simulation or control: no certificate, no privacy.json
    else:
        write_json(os.path.join(out, "privacy.json"), cert_files.bind(privacy, out))
    resume.discard(out)  # finished: the saved state (generator states too) goes
    write_json(os.path.join(out, MANIFEST), public_manifest(
        job, config, plan, setup, seed, shipped, not_private))
    return run_summary(out, config, plan, training, total, run, not_private)


def start(job: FineTuneJob, config: DPConfig) -> Seed:
    """Check the config, set the threads, resolve the randomness (a seeded run seeds
    torch's global generator too: dropout masks, so it repeats exactly)."""
    import torch

    config.check()
    if job.reshape is not None:
        raise InputError("--public-train/--pack reshape fairseq's training split; under "
                         "--dp public pairs join each logical batch instead "
                         "(--dp-public-train), outside the clipped, noised sum")
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


def units_of_rows(train_lines: Sequence[int], documents: Sequence[str]) -> list[list[int]]:
    """Dataset rows grouped by document: [[row, …] per document], documents in order of
    first appearance. `train_lines[row]` is the corpus line of dataset row `row`."""
    groups: dict[str, list[int]] = {}
    for row, line in enumerate(train_lines):
        groups.setdefault(documents[line], []).append(row)
    return list(groups.values())


def open_output(job: FineTuneJob, config: DPConfig, md: ModelDir, sources: TrainingSources,
                with_documents: bool) -> tuple[str, dict[str, str]]:
    """OUT prepared (stale outputs removed) and the resumable run's identity checked or
    recorded; returns (OUT, input hashes)."""
    out = prepare_output_dir(job.out, job.overwrite, kind=MODEL_KIND, inputs=[
        md.path, job.train, sources.train.src, sources.train.tgt, job.valid_src,
        job.valid_tgt, config.documents])
    _clean_stale_work(out)
    hashes = training_data.input_hashes(md, sources,
                                        config.documents if with_documents else None)
    from .records import public_hashes

    for lang, digest in (public_hashes(config, job) or {}).items():  # --dp-public-train
        hashes[f"public_{lang}"] = digest
    if job.resume and not config.accountant_given:  # the interrupted run's accountant
        config.accountant = resume.saved_accountant(out) or config.accountant
    resume.prepare(out, resume.run_identity(config, job, hashes), job.resume,
                   job.overwrite, resume.setting_defaults(config))
    # only once the run is allowed (a refused one removes nothing); a resumed run keeps
    # its owner/ state and step log
    remove_run_outputs(out)
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
            tags=TagPolicy.of_flag(job.tags, data_decides=False), dedup=config.dedup,
            fraction=job.train_fraction)
        if config.public_train:
            prepare_public_pool(job, config, md, layout)
        models, _, task = checkpoint_utils.load_model_ensemble_and_task(
            [layout.init_checkpoint],
            arg_overrides={"data": layout.bin_dir, "source_lang": job.src_lang,
                           "target_lang": job.tgt_lang, "dropout": job.dropout})
        task.load_dataset("train")
        task.load_dataset("valid")
        if config.public_train:
            task.load_dataset(PUBLIC_SPLIT)
    return prep, models[0], task


# the binarised split that holds a DP run's public pairs (a DP run has no test split)
PUBLIC_SPLIT = "test"
PUBLIC_POOL = 100_000  # public pairs a run's logical batches cycle through
PUBLIC_SEED = 1        # their order: public text only, so a fixed, published seed


def prepare_public_pool(job: FineTuneJob, config: DPConfig, md: ModelDir,
                        layout: WorkLayout) -> None:
    """Binarise up to PUBLIC_POOL public pairs (seeded order) with the run's
    dictionaries, as the PUBLIC_SPLIT split beside the training data."""
    from ..data.bpe import BPE
    from ..fileio import write_parallel
    from ..train.binarize import binarize
    from ..train.public_mix import public_pool

    src, tgt = (f"{config.public_train}.{job.src_lang}",
                f"{config.public_train}.{job.tgt_lang}")
    pairs = public_pool(src, tgt, BPE(md.bpecodes), PUBLIC_POOL, PUBLIC_SEED, job.src_lang,
                        job.tgt_lang)
    if not pairs:
        raise InputError(f"--dp-public-train {config.public_train}: no usable pair")
    prefix = layout.text_prefix("public")
    write_parallel(f"{prefix}.{job.src_lang}", f"{prefix}.{job.tgt_lang}", pairs)
    binarize({PUBLIC_SPLIT: prefix}, layout.bin_dir, layout.dictionary(job.src_lang),
             layout.dictionary(job.tgt_lang), job.src_lang, job.tgt_lang)


def announce(job: FineTuneJob, config: DPConfig, plan: NoisePlan, setup: ModelSetup,
             seed: Seed) -> None:
    """The plan on stderr (no n there: the owner's terminal only sees it)."""
    from . import clipping as clipping_choice

    set_by = accounting.calibration_record(config.accountant, config.target_epsilon)["by"]
    print(f"DP-SGD: n={plan.n} {config.unit}s, {plan.steps} noisy steps, "
          f"σ={plan.sigma:.4f} ({set_by}), C={config.max_grad_norm}, "
          + config.rate.describe(plan.segments)
          + f", physical batch {setup.physical_batch} (≤ {config.physical_max_tokens} "
          f"tokens), trained parameters {config.params.kind} ({setup.n_trainable}), "
          f"{job.world_size} process(es), randomness {seed.source}", file=sys.stderr)
    print(f"DP-SGD clipping: {setup.clipping} ({setup.clipping_why}); "
          f"{clipping_choice.CLIP_MODE_TEXT[config.clip_mode]}", file=sys.stderr)
    if setup.smaller:
        print(f"DP-SGD: {setup.smaller}", file=sys.stderr)
    if not config.mode.private:
        batch = ("its public pairs alone (no owner pair)" if config.public_only
                 else f"logical batch {round(plan.train_segments[0][1])}")
        print(f"{simulate.NOT_PRIVATE[simulate.kind(config)]}: trains with "
              f"σ={plan.train_sigma:.4f}, {batch}", file=sys.stderr)


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


def _clean_stale_work(out):
    """Older versions put the private work dir inside OUT: remove any left by a kill."""
    for name in os.listdir(out):
        if name.startswith(".dp-work-"):
            shutil.rmtree(os.path.join(out, name), ignore_errors=True)
