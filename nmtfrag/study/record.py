"""The settings a study recorded for each cell, and the refusal of a changed one.

Why: a study spans days and sessions; a rerun with an edited config must never put a cell
made with other settings (another model, corpus, test set, budget or ε) beside the others
in one report. Each cell's settings are recorded the first time it runs (OUT/study.json):
everything that shapes its figures — the cell's own keys, the shared training, decoding
and audit settings, and the SHA-256 of the model checkpoint and data files (not their
paths: the same files under another path are the same study). Where a study runs (device,
threads, jobs) is not a setting. A changed setting is refused, naming the key and both
values. A config that is not OUT's study at all (another model, corpus, test set or seed:
the baseline differs; or none of its cells was ever run there) is refused by status and
report too, rather than shown as OUT's (`check_same_study`).
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict
from typing import Any

from ..errors import InputError
from ..fileio import read_json, sha256_file, write_json
from ..model_dir import check_model_files, validate_model_dir
from .config import BASELINE, DP_RELEASE_APPROACHES, Audit, Decode, StudyConfig
from .variables import record_variables

RECORD_VERSION = 1


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(d, dict):
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: list(d) if isinstance(d, tuple) else d}


class FileHashes:
    """SHA-256 of the files a study reads, each hashed once per run. `load_model`: whether
    the model's checkpoints are loaded and checked too (a run), or only found (a look)."""

    def __init__(self, load_model: bool = True) -> None:
        self._seen: dict[str, str] = {}
        self.load_model = load_model

    def __call__(self, path: str) -> str:
        if path not in self._seen:
            self._seen[path] = sha256_file(path)
        return self._seen[path]


def shared_settings(config: StudyConfig, hashes: FileHashes) -> dict[str, Any]:
    """What every cell shares: model, data, seed, decoding, audits."""
    d = config.data
    if hashes.load_model:
        checkpoints = validate_model_dir(config.model, d.src_lang, d.tgt_lang,
                                         config.checkpoint or None).checkpoints
    else:
        checkpoints = check_model_files(config.model, d.src_lang, d.tgt_lang,
                                        config.checkpoint or None)[4]
    data = {"src_lang": d.src_lang, "tgt_lang": d.tgt_lang, "pretokenized": d.pretokenized}
    for split in ("train", "valid", "test"):
        for lang, f in zip((d.src_lang, d.tgt_lang), d.files(getattr(d, split))):
            data[f"{split}.{lang} sha256"] = hashes(f)
    return {"model": {f"{os.path.basename(p)} sha256": hashes(p) for p in checkpoints},
            "data": data, "seed": config.seed, "decode": asdict(config.decode),
            "audit": asdict(config.audit)}


def cell_settings(config: StudyConfig, name: str, hashes: FileHashes) -> dict[str, Any]:
    """The flat settings recorded for one cell (`training.lr`, `data.test.de sha256`, …)."""
    shared = shared_settings(config, hashes)
    if name == BASELINE:
        own: dict[str, Any] = {"approach": "baseline"}
    else:
        cell = asdict(config.cell(name))
        own = {k: v for k, v in cell.items() if k != "name" and _applies(cell["approach"], k)}
        if cell["public_share"] or cell["pack"] == "public" or cell["approach"] == "public" \
                or (cell["approach"] == "dp-sgd" and cell["public_batch"]):
            own["public_train sha256"] = [hashes(f) for f in
                                          config.data.files(config.data.public_train)]
        if cell["approach"] == "public":  # it trains on the public pairs its like-cell draws
            like = cell_settings(config, cell["like"], hashes)
            own[LIKE[:-1]] = {k: v for k, v in like.items() if not k.startswith(
                ("model.", "data.", "decode.", "audit.", "seed"))}
        if cell["approach"] in DP_RELEASE_APPROACHES:  # its fixed passes ignore early stop
            own["public_align sha256"] = [hashes(f) for f in
                                          config.data.files(config.data.public_align)]
            own["training"] = {k: v for k, v in own["training"].items()
                               if k not in ("patience", "max_epochs", "max_updates",
                                            "validate_every")}  # fixed passes instead
    return _flatten({**shared, **own})


def _applies(approach: str, key: str) -> bool:
    """Whether a cell key shapes an approach's results (the others keep their defaults)."""
    if key in ("approach", "run"):
        return True
    public = {"public_share", "public_min_words"}
    pack = {"pack", "pack_tags"}
    return key in {
        "phrases": {"max_len", "tags", "sample_rate", "training"} | public | pack,
        "sentences": {"training"} | public,
        "dp-release": {"max_len", "tags", "epsilon", "delta", "unit_cap", "passes", "seeded",
                       "training", "tuned_on"} | public | pack,
        # (chosen_on_test_lines is not recorded: it changes what the report adds, not
        # how the cell ran)
        "dp-sgd": {"epsilon", "delta", "options", "seeded", "tuned_on", "public_batch",
                   "public_weight", "train_fraction"},
        "dp-composed": {"epsilon", "delta", "release_epsilon", "max_len", "tags", "unit_cap",
                        "passes", "seeded", "tuned_on", "options", "training"} | public,
        "public": {"like", "training"},
    }[approach]


def default_settings(approach: str) -> dict[str, Any]:
    """The settings a cell of `approach` has when every key is left out: a key that a
    later nmtfrag added is accepted for a recorded cell at this value (the cell was made
    with what the key now names)."""
    from .config import Cell

    cell = asdict(Cell(name="x", approach=approach))
    own = {k: v for k, v in cell.items() if k != "name" and _applies(approach, k)}
    return _flatten({"decode": asdict(Decode()), "audit": asdict(Audit()), **own})


# settings that add steps to a cell without changing what it recorded before (the test
# set decoded once more with a public-chosen length penalty): a cell recorded without
# them takes them on, and keeps them from then on
ADDITIVE = ("decode.length_penalty", "decode.length_penalty_lines")
LIKE = "like settings."  # the prefix of a public control's like-cell settings


def differences(recorded: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """'key: recorded R, now N' for each setting that differs (missing ones included;
    a key added since the cell was recorded counts only when set off its default, or
    not at all when it is ADDITIVE)."""
    out = []
    defaults = default_settings(str(recorded.get("approach"))) \
        if recorded.get("approach") not in (None, "baseline") else \
        _flatten({"decode": asdict(Decode()), "audit": asdict(Audit())})
    like = LIKE + "approach"  # a public control records its like-cell's settings too
    like_defaults = (default_settings(str(recorded[like])) if recorded.get(like) else {})
    was_off = not recorded.get(ADDITIVE[0])  # recorded without the extra decoding
    for key in sorted(set(recorded) | set(now)):
        if key not in recorded and (key in ADDITIVE or key in defaults and
                                    json.dumps(defaults[key]) == json.dumps(now.get(key))):
            continue
        if key in ADDITIVE and was_off:
            continue  # recorded off: switching it on adds steps only
        own = key[len(LIKE):] if key.startswith(LIKE) else None
        if key not in recorded and own in like_defaults and \
                json.dumps(like_defaults[own]) == json.dumps(now.get(key)):
            continue
        a, b = recorded.get(key, "(not set)"), now.get(key, "(not set)")
        if json.dumps(a) != json.dumps(b):
            out.append(f"{key}: recorded {json.dumps(a, ensure_ascii=False)}, "
                       f"now {json.dumps(b, ensure_ascii=False)}")
    return out


def settings_now(config: StudyConfig, names: list[str], load_model: bool = True
                 ) -> dict[str, dict[str, Any]]:
    """Every named cell's settings from the config (InputError on an unusable model dir)."""
    hashes = FileHashes(load_model)
    return {name: cell_settings(config, name, hashes) for name in names}


def check_and_record(config: StudyConfig, record_path: str,
                     now: dict[str, dict[str, Any]], write: bool = True) -> None:
    """Refuse a cell whose recorded settings differ from `now`'s (the config's); record
    the cells not recorded yet (unless `write` is False: a check before anything runs)."""
    rec: dict[str, Any] = read_json(record_path) if os.path.exists(record_path) else {
        "kind": "nmtfrag-study", "version": RECORD_VERSION, "cells": {}}
    cells: dict[str, dict[str, Any]] = rec["cells"]
    for name, settings in now.items():
        if name in cells:
            diff = differences(cells[name]["settings"], settings)
            if diff:
                raise InputError(
                    f"{config.path}: cell {name!r} was recorded in {record_path} with other "
                    f"settings: {diff[0]}" + (f" (and {len(diff) - 1} more)" if len(diff) > 1
                                              else "")
                    + "; rename the cell, restore the setting, or use another --out")
            cells[name]["settings"].update({k: settings[k] for k in ADDITIVE
                                            if k in settings})  # kept from now on
        else:
            cells[name] = {"settings": settings}
    if write:
        rec["title"] = config.title
        write_json(record_path, rec)
        record_variables(os.path.dirname(os.path.abspath(record_path)),
                         dict(config.variables))


def read_record(out: str) -> dict[str, Any]:
    path = os.path.join(out, "study.json")
    if not os.path.isfile(path):
        raise InputError(f"{out}: not a study directory (no study.json; start one with "
                         f"`nmtfrag study run CONFIG --out {out}`)")
    return read_json(path)


def check_same_study(config: StudyConfig, out: str) -> None:
    """Refuse (InputError) a config that is not OUT's study, before status or report show
    OUT's directories under its cells: its baseline's settings (model and data by SHA-256,
    seed, decoding, audits) differ from the recorded baseline's, a cell of it was recorded
    with other settings (as `study run` refuses), or none of its cells was ever recorded
    in OUT. Cells it adds (pending) or leaves out are accepted: an edited config is still
    the study. The model's checkpoints are hashed, not loaded."""
    rec = read_record(out)
    recorded: dict[str, Any] = rec.get("cells") or {}
    names = [n for n in [BASELINE] + [c.name for c in config.cells] if n in recorded]
    where = f"{config.path}: not the study in {out} (recorded as {rec.get('title', '?')!r})"
    others = sorted(n for n in recorded if n != BASELINE)
    if others and names in ([], [BASELINE]):
        raise InputError(f"{where}: none of its cells was run there (it records "
                         f"{', '.join(others)}); give that study's config, or another --out")
    now = settings_now(config, names, load_model=False)
    for name in names:
        diff = differences(recorded[name]["settings"], now[name])
        if not diff:
            continue
        first = diff[0] + (f" (and {len(diff) - 1} more)" if len(diff) > 1 else "")
        if name == BASELINE:
            raise InputError(f"{where}: its baseline differs: {first}; give that study's "
                             f"config, or another --out")
        raise InputError(f"{config.path}: cell {name!r} was recorded in {out} with other "
                         f"settings: {first}; restore the setting (or rename the cell)")
