"""The ε of a study's cells as their checked certificates state it, with its labels, and
what lies outside it, from each cell's recorded inputs.

Why: the report is where a data owner reads the guarantee. A figure read straight from a
privacy.json (edited, copied from another output, or a per-accountant intermediate of a
basic composition) could say more than was given. Here every DP cell's certificate goes
through `nmtfrag privacy`'s own check (nmtfrag.dp.certificate.read_certificate): a cell
whose certificate is refused shows no ε and says why; a stated ε that is no guarantee
(seeded noise, a choice made on the owner's data, a base model trained on the owner's
data) carries the same label in every table that prints it.
"""
from __future__ import annotations

import json
import os
from typing import Any

from ..errors import InputError
from ..randomness import SEEDED_MARK
from .config import BASELINE, StudyConfig
from .plan import FINETUNE, RELEASE, Paths

PRIVATE_CHOICE = "chosen on private data: ε does not cover the choice"
# the public aligner's settings before 2026-11-27, chosen on EMEA's training text
EMEA_ALIGNER = {"tension": 8.0, "p0": 0.2}
OWNER_BASE = "base model trained on the owner's data: ε does not cover it"
REFUSED = "certificate refused"


def _json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _run_text(approach: str) -> str:
    if approach == "dp-sgd":
        return "its plan fixes the budget, no validation set is read"
    if approach == "dp-composed":
        return ("fixed passes over the release, then DP-SGD's plan from that model; no "
                "validation set read")
    return "fixed passes over the release, the last checkpoint, no validation set read"


def _stated_outside(checked: dict) -> list[str]:
    """What the checked certificate's entries state lies outside their ε."""
    entries = [checked.get(k) for k in ("training", "release")]
    entries += list(checked.get("earlier_releases") or [])
    entries += list(checked.get("released_from") or [])
    out: list[str] = []
    for e in entries:
        for text in (e or {}).get("outside_epsilon") or ():
            if text not in out:
                out.append(text)
    return out


def _fingerprint(directory: str) -> str:
    """What a check depends on: the bytes of every top-level file of the output (the
    certificate, its manifest, the files it binds) and the checking code itself (a newer
    nmtfrag may refuse what an older one passed)."""
    import hashlib

    from .. import __version__
    from ..dp import accounting, cert_check, cert_files, cert_plan, certificate
    from ..fileio import sha256_file

    h = hashlib.sha256(__version__.encode())
    for module in (accounting, cert_check, cert_files, cert_plan, certificate):
        h.update(sha256_file(str(module.__file__)).encode())
    for f in sorted(os.listdir(directory)):
        path = os.path.join(directory, f)
        if os.path.isfile(path) and not f.startswith("."):
            h.update(f"{f}:{sha256_file(path)}".encode())
    return h.hexdigest()


def checked_certificate(directory: str, cache: str) -> dict:
    """read_certificate's result (InputError when refused), kept in `cache` while the
    output's files are unchanged: the report is rewritten after every cell, and a check
    recalibrates σ and hashes the model."""
    from ..dp.certificate import read_certificate
    from ..fileio import write_json

    key = _fingerprint(directory)
    cached = _json(cache + ".json")
    if isinstance(cached, dict) and cached.get("key") == key:
        if cached.get("refused"):
            raise InputError(cached["refused"])
        return cached["checked"]
    os.makedirs(os.path.dirname(cache), exist_ok=True)
    try:
        checked = read_certificate(directory)
    except InputError as exc:
        if not isinstance(exc.__cause__ or exc.__context__, OSError):  # not a passing fault
            write_json(cache + ".json", {"key": key, "refused": str(exc)})
        raise
    write_json(cache + ".json", {"key": key, "checked": checked})
    return checked


def model_uncertified(approach: str, paths: Paths, name: str, checked: dict) -> list[str]:
    """Labels for a release-based cell whose trained model does not carry the release's
    guarantee: a dp-release cell's fine-tuned model without a certificate (the release's
    ε then says nothing of the model), a composed cell's DP-SGD run that composed no
    release (its total would leave the release's ε out)."""
    if approach == "dp-release":
        man = _json(os.path.join(paths.step(name, FINETUNE), "manifest.json"))
        if man is not None and man.get("dp") is not True:
            why = man.get("no_certificate") or "its fine-tuning read more than the release"
            return [f"the trained model carries no certificate: {why}"]
    if approach == "dp-composed" and checked and not checked.get("earlier_releases"):
        return ["the DP-SGD run composed no release (its warm start carries no "
                "certificate): its total leaves the release's ε out"]
    return []


def privacy_figures(config: StudyConfig, paths: Paths, name: str) -> dict[str, Any]:
    """ε and its labels: what the guarantee is, or why the number is none; and what lies
    outside it, computed from the cell's recorded inputs."""
    if name == BASELINE:
        return {"privacy": "no owner data used", "epsilon": 0.0}
    cell = config.cell(name)
    base_outside = ([f"the base model's own training data (the owner's: {OWNER_BASE})"]
                    if config.model_on_owner_data else [])
    if cell.approach == "public":
        rule = {"dp-release": "sized by the owner's DP release",
                "dp-composed": "sized by the owner's DP release",
                "dp-sgd": "run for DP-SGD's plan, sized by the owner's data"}.get(
            config.cell(cell.like).approach,
            "early-stopped on the owner's validation set and sized by the owner's data")
        return {"privacy": f"none (a control: public pairs only, but {rule})",
                "epsilon": None}
    if cell.approach in ("phrases", "sentences"):
        return {"privacy": "none (no formal guarantee)", "epsilon": None}
    directory = paths.step(name, RELEASE if cell.approach == "dp-release" else FINETUNE)
    man = _json(os.path.join(directory, "manifest.json")) or {}
    sgd = cell.approach in ("dp-sgd", "dp-composed")
    labels: list[str] = []
    outside: list[str] = []
    detail: dict[str, Any] = {}
    eps = delta = None
    checked: dict = {}
    if man.get("not_private"):
        labels.append(f"{man['not_private'].get('mode', 'simulation')}: not private")
    elif os.path.isfile(os.path.join(directory, "privacy.json")):
        try:
            checked = checked_certificate(directory, os.path.join(paths.report,
                                                                  "certificates", name))
        except InputError as exc:
            labels.append(f"{REFUSED}: {exc}")
        else:
            eps, delta = checked["total"]["epsilon"], checked["total"]["delta"]
            if not checked.get("private", True):
                labels.append(SEEDED_MARK)
            outside += _stated_outside(checked)
    labels += model_uncertified(cell.approach, paths, name, checked)
    if sgd and checked.get("training"):
        t = checked["training"]
        detail = {"sigma": t.get("noise_multiplier"), "dp_steps": t.get("steps"),
                  "epsilon_by_accountant": t.get("epsilon_recomputed"),
                  "composition_kind": (t.get("composition") or {}).get("kind")}
    if sgd:
        detail.update(_dp_step_means(os.path.join(directory, "owner", "train.log")))
    release_man = (_json(os.path.join(paths.step(name, RELEASE), "manifest.json")) or {}) \
        if cell.approach != "dp-sgd" else {}
    aligner = (release_man.get("params") or {}).get("aligner_params") or {}
    if all(aligner.get(k) == v for k, v in EMEA_ALIGNER.items()):
        outside.append("its aligner's settings (λ 8, p0 0.2): chosen on EMEA's training "
                       "text, so for EMEA's data the release's ε does not cover that "
                       "choice")
    if cell.tuned_on == "private":
        chosen = "hyperparameters" if sgd else "passes"
        labels.append(f"{chosen} {PRIVATE_CHOICE}")
        outside.append(f"the choice of its {chosen}, made on the owner's data")
    if base_outside:
        labels.append(OWNER_BASE)
        outside += base_outside
    outside.append(f"nothing of the run itself ({_run_text(cell.approach)})")
    text = (f"(ε = {eps:.3g}, δ = {delta:g})" if eps is not None else "no certificate")
    if cell.approach == "dp-release" and eps is not None:
        text += " of the release"
    return {"privacy": "; ".join([text] + labels), "epsilon": eps if not labels else None,
            "epsilon_stated": eps, "epsilon_labels": labels, "delta": delta,
            "private": eps is not None and not labels, "outside_epsilon": outside,
            **detail}


def _dp_step_means(log: str) -> dict[str, Any]:
    """Mean gradient signal-to-noise ratio and clipped share of a DP-SGD run's steps
    (its owner-only per-step log): why a DP cell lands where it does."""
    if not os.path.isfile(log):
        return {}
    with open(log, encoding="utf-8") as f:
        steps = [json.loads(ln) for ln in f if ln.strip()]
    if not steps:
        return {}
    snr = [s["snr"] for s in steps if s.get("noise_norm", 0) > 0]
    return {"snr_mean": sum(snr) / len(snr) if snr else None,
            "clipped_share": sum(s["clipped_share"] for s in steps) / len(steps)}
