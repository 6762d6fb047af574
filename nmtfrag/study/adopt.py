"""Adopting a model trained earlier into a study cell, once its settings are checked.

Why: a sentence reference or a private DP-SGD run costs hours of CPU; when one was
already trained with exactly the settings a cell would use (the same base model, training
files, method options and seed), retraining it is waste. `adopt = "DIR"` in a
`sentences` or `dp-sgd` cell copies a finished `nmtfrag finetune` output into the cell
instead — after comparing what DIR's own records say it was trained with against what
the cell's command line would train, and refusing on the first difference. DIR is read,
never changed.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import InputError
from ..fileio import read_json, sha256_file
from ..model_dir import validate_model_dir
from .config import Cell
from .plan import Step


# How a finetune command line reads: (the parsed options, their DPConfig under --dp, else
# None). The CLI provides it (nmtfrag.cli.study.read_finetune_argv): an adopted run is
# checked against exactly what the command would have run, and the study stays below
# the CLI.
ReadArgv = Callable[[Sequence[str]], tuple[Any, Any]]


def expected(step: Step, cell: Cell, seed: int, read_argv: ReadArgv) -> dict[str, Any]:
    """{record key: value} a finished run of `step` holds in its manifests: a sentence
    cell's training settings from the study's config; a DP-SGD cell's from its options
    as `finetune --dp` parses them."""
    args, dcfg = read_argv([*step.argv, "--out", step.out])
    src, tgt = args.train
    md = validate_model_dir(args.model, args.src_lang, args.tgt_lang, args.checkpoint)
    exp: dict[str, Any] = {"inputs_sha256.train_src": sha256_file(src),
                           "inputs_sha256.train_tgt": sha256_file(tgt),
                           "inputs_sha256.model": sha256_file(md.checkpoints[0]),
                           "params.dropout": args.dropout,
                           "params.label_smoothing": args.label_smoothing}
    if not args.dp:
        t = cell.training
        exp.update({"inputs_sha256.valid_src": sha256_file(args.valid_src),
                    "inputs_sha256.valid_tgt": sha256_file(args.valid_tgt),
                    "params.lr": t.lr, "params.weight_decay": t.weight_decay,
                    "params.max_tokens": t.max_tokens, "params.max_epochs": t.max_epochs,
                    "params.max_updates": t.max_updates or None,
                    "params.patience": t.patience,
                    "params.validate_every": t.validate_every or None,
                    "params.seed": seed, "params.update_freq": 1,
                    "params.warmup_updates": 0,
                    "params.trained_parameters": {"kind": "all"}})
        return exp
    for key, field in (("lr", "lr"), ("target_epsilon", "target_epsilon"),
                       ("delta", "delta"), ("sample_rate", "sample_rate"),
                       ("logical_batch", "logical_batch"),
                       ("batch_schedule", "batch_schedule"),
                       ("max_grad_norm", "max_grad_norm"), ("accountant", "accountant"),
                       ("privacy_unit", "unit"), ("dp_clip_mode", "clip_mode"),
                       ("dp_loss", "loss"), ("dp_warmup_steps", "warmup_steps"),
                       ("dp_weight_decay", "weight_decay")):
        exp[f"params.{key}"] = getattr(dcfg, field)
    exp["params.trained_parameters"] = dcfg.params.public_record()
    exp["owner.randomness.seed"] = dcfg.seed  # None: secret randomness
    return exp


def recorded(source: str) -> dict[str, Any]:
    """The same keys from a finished run's manifests (DP: its owner record too)."""
    path = os.path.join(source, "manifest.json")
    if not os.path.isfile(path):
        raise InputError(f"adopt = {source!r}: not a finished `nmtfrag finetune` output "
                         f"(no manifest.json)")
    man = read_json(path)
    owner_path = os.path.join(source, "owner", "manifest.json")
    owner = read_json(owner_path) if os.path.isfile(owner_path) else {}
    flat: dict[str, Any] = {}
    for key, value in (man.get("params") or {}).items():
        flat[f"params.{key}"] = value
    hashes = man.get("inputs_sha256") or owner.get("inputs_sha256") or {}
    for key, value in hashes.items():
        flat[f"inputs_sha256.{key}"] = value
    flat["owner.randomness.seed"] = (owner.get("randomness") or {}).get("seed")
    flat["dp"] = bool(man.get("dp"))
    return flat


def differences(step: Step, cell: Cell, seed: int, source: str,
                read_argv: ReadArgv) -> list[str]:
    exp, rec = expected(step, cell, seed, read_argv), recorded(source)
    dp = "--dp" in step.argv
    if rec["dp"] != dp:
        return [f"it was trained {'with' if rec['dp'] else 'without'} DP-SGD, the cell "
                f"{'is' if dp else 'is not'} DP-SGD"]
    return [f"{key}: {rec.get(key, '(not recorded)')!r} there, {value!r} here"
            for key, value in exp.items() if rec.get(key, "(not recorded)") != value]


def adopt(step: Step, cell: Cell, seed: int, source: str,
          read_argv: ReadArgv | None) -> None:
    """Copy `source` into the step's output after checking it against the cell (and the
    study's seed): InputError naming the first difference; the copy appears whole or not
    at all."""
    if read_argv is None:
        raise InputError(f"cell {step.cell}: adopting needs the finetune command's reading "
                         "of its options: run the study with `nmtfrag study run`")
    diff = differences(step, cell, seed, source, read_argv)
    if diff:
        raise InputError(f"cannot adopt {source} into cell {step.cell}: {diff[0]}"
                         + (f" (and {len(diff) - 1} more)" if len(diff) > 1 else ""))
    tmp = step.out + ".adopting"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(source, tmp, ignore=shutil.ignore_patterns(".work", "checkpoints",
                                                               ".nmtfrag.lock"))
    shutil.rmtree(step.out, ignore_errors=True)
    os.replace(tmp, step.out)
