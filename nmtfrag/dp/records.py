"""What a DP run records: what the base model already spent (`PriorPrivacy`), the
certificate (privacy.json), the shared manifest (public parameters, never n), the
owner's record (OUT/owner/manifest.json: paths, exact counts, n, the seed; with
--train-fraction also OUT/owner/trained-lines.txt) and the summary the CLI prints.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

from ..fileio import (MANIFEST, OWNER_DIR, TRAINED_LINES, atomic_writer, owner_path, read_json,
                      tool_versions)
from ..model_dir import ModelDir
from ..randomness import Seed
from ..train import data as training_data
from ..train.data import MODEL_KIND, TrainingSources, model_files
from ..train.job import FineTuneJob
from . import accounting, simulate
from .config import DPConfig
from .planning import NoisePlan
from .workers import ModelSetup, RunRecord


def write_trained_lines(out: str, lines: list[int]) -> str:
    """OUT/owner/trained-lines.txt: the 0-based line of the training files of each pair
    a --train-fraction run trained on, one a line. A membership audit's members are these
    pairs, not the whole file (`audit membership --member-lines`); the rest of the file is
    held out from the same documents."""
    path = owner_path(out, TRAINED_LINES)
    with atomic_writer(path, private=True) as f:
        f.writelines(f"{n}\n" for n in lines)
    return path


def base_model_privacy(model_dir: str) -> tuple[dict | None, list[dict], list[dict], dict]:
    """What a base model already spent: (vocabulary entry, earlier DP trainings, DP
    releases it was trained on, note).

    Fine-tuning a DP model again on the owner's data composes with its earlier ε; a base
    trained only on a DP release (and public text) carries the release's certificate
    (nmtfrag.dp.release_privacy), which composes too; a base fine-tuned without DP is
    outside any certificate, so it gets a warning. The base's certificate is checked
    first (nmtfrag privacy's checks): an edited one is refused."""
    cert_path = os.path.join(model_dir, "privacy.json")
    cert: dict = {}
    if os.path.isfile(cert_path):
        cert = read_json(cert_path)
        if "training" in cert or "released_from" in cert:  # what nmtfrag's runs write
            from .certificate import read_certificate

            read_certificate(model_dir)  # InputError on an edited or forged certificate
    earlier = list(cert.get("earlier_training") or [])
    if cert.get("training"):
        earlier.append(cert["training"])
    releases = list(cert.get("earlier_releases") or cert.get("released_from") or [])
    note: dict[str, int | str] = {"dp_trainings": len(earlier)}
    if releases:
        note["dp_releases"] = len(releases)
    man_path = os.path.join(model_dir, MANIFEST)
    man = read_json(man_path) if os.path.isfile(man_path) else {}
    if man.get("kind") == "nmtfrag-finetuned-model" and not man.get("dp"):
        note["warning"] = ("the base model was fine-tuned WITHOUT differential privacy: "
                           "if its training data was confidential, this certificate does "
                           "not cover it")
    elif cert.get("base_model", {}).get("warning"):
        note["warning"] = cert["base_model"]["warning"]
    return cert.get("vocabulary"), earlier, releases, note


@dataclass
class PriorPrivacy:
    """What the base model already spent (base_model_privacy)."""
    vocabulary: dict | None
    earlier: list[dict]
    releases: list[dict]
    note: dict

    @classmethod
    def of_base_model(cls, model_dir: str, config: DPConfig) -> PriorPrivacy:
        """Read it, refuse it when its unit does not compose with this run's, and warn
        about a base fine-tuned without DP."""
        vocabulary, earlier, releases, note = base_model_privacy(model_dir)
        accounting.check_composable(config.unit_key, vocabulary, earlier + releases)
        if note.get("warning"):
            print(f"warning: {note['warning']}", file=sys.stderr)
        return cls(vocabulary, earlier, releases, note)


def unit_text(config: DPConfig) -> str:
    """The certificate's wording of the unit (one text per unit key)."""
    return accounting.TRAINING_UNIT_TEXT[config.unit_key]


def certificate(config: DPConfig, job: FineTuneJob, plan: NoisePlan, setup: ModelSetup,
                history: list, seed: Seed,
                prior: PriorPrivacy) -> tuple[dict, dict, dict]:
    """privacy.json's content: the training's (ε, δ) from its history (the count's
    segment first), composed with the vocabulary and earlier trainings. Returns
    (privacy, training entry, total)."""
    from . import clipping as clipping_choice

    if not config.mode.private:  # ε of the planned run, for the record
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
                                 "segment [s, 1.0, 1]; " + config.rate.count_mechanism(),
                    "noise_std": plan.count_segment[0], "planning_count": plan.n_plan},
                "composition": plan.composition,
                "history": [list(h) for h in history],
                "target_epsilon": config.target_epsilon,
                "calibration": accounting.calibration_record(config.accountant,
                                                             config.target_epsilon),
                "randomness": seed.public_record(),
                "outside_epsilon": list(accounting.OUTSIDE_TRAINING)}
    if config.public_train:
        training["public_data"] = public_data_record(config, job)
    eps, eps_all, parts = accounting.certify_training(training)
    training.update(epsilon=eps, epsilon_all_accountants=eps_all)
    training["composition"]["parts"] = parts
    total = accounting.compose_certificate(training, prior.vocabulary, prior.earlier,
                                           training_eps=training["epsilon"],
                                           releases=prior.releases)
    privacy = {"training": training,
               "vocabulary": prior.vocabulary or accounting.NO_VOCABULARY,
               "earlier_training": prior.earlier, "base_model": prior.note, "total": total}
    if prior.releases:
        privacy["earlier_releases"] = prior.releases
    return privacy, training, total


def public_hashes(config: DPConfig, job: FineTuneJob) -> dict[str, str] | None:
    """SHA-256 of --dp-public-train's files (None without them)."""
    if not config.public_train:
        return None
    from ..fileio import sha256_file

    return {lang: sha256_file(f"{config.public_train}.{lang}")
            for lang in (job.src_lang, job.tgt_lang)}


def public_data_record(config: DPConfig, job: FineTuneJob) -> dict:
    """What the certificate says of the public pairs in every logical batch."""
    return {"pairs_per_step": config.public_batch, "weight": config.public_weight,
            "sha256": public_hashes(config, job),
            "note": "public pairs joined every logical batch unclipped and noise-free; "
                    "they read nothing private, so they leave the clipped sum's "
                    "sensitivity at C and the ε above unchanged"}


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
        "dp_loss": config.loss, "dp_warmup_steps": config.warmup_steps,
        "dp_public": (public_data_record(config, job) if config.public_train else None),
        "train_fraction": job.train_fraction}
    return {
        "kind": MODEL_KIND, "dp": not not_private,
        **({"not_private": not_private} if not_private else {}),
        "model_files": model_files(job.src_lang, job.tgt_lang),
        "shareable": ("nothing: " + not_private["not_private"] + (
                          " (planned on the private data with no guarantee)"
                          if config.public_only else
                          " (trained on the private data with no guarantee)")
                      + "; keep all of it with the owner"
                      if not_private else "every file here except owner/"),
        "owner_only": [f"{OWNER_DIR}/{MANIFEST}", f"{OWNER_DIR}/train.log",
                       *([f"{OWNER_DIR}/{TRAINED_LINES}"] if job.train_fraction < 1
                         else [])],
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
