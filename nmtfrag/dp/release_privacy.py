"""The certificate of a model trained on a DP release only: the release's, carried over.

Why: fine-tuning on a DP release (nmtfrag extract --dp) is post-processing of the
release when nothing else private enters the run: a base model that is not itself
trained on the owner's data, a budget fixed in advance (passes over the release), the
last checkpoint, no validation set of the owner's read, public text beside it at most.
The model is then as private as the release, and a later DP-SGD run from it composes
with the release's ε (nmtfrag.dp.accounting.compose_certificate). A run that validates
on the owner's data chooses its checkpoint by private data, and a base model fine-tuned
on the owner's data (with or without DP) brings its own history: both get no
certificate, and say why.
"""
from __future__ import annotations

import os

from ..fileio import MANIFEST, read_json, write_json
from ..train.data import TrainingSources
from . import cert_files
from .cert_check import POST_PROCESSED


def _base_history(model_dir: str) -> str | None:
    """Why the base model's own training rules a certificate out (None: a base with no
    fine-tuning of nmtfrag's and no certificate, such as WMT19 or a public stand-in)."""
    if os.path.isfile(os.path.join(model_dir, "privacy.json")):
        return ("the base model carries a privacy certificate of its own; a model trained "
                "on a DP release from it is not certified here (train from a public base)")
    man_path = os.path.join(model_dir, MANIFEST)
    if os.path.isfile(man_path) and read_json(man_path).get("kind") == \
            "nmtfrag-finetuned-model":
        return ("the base model was fine-tuned by nmtfrag (on data no certificate here "
                "covers): a model trained on a DP release from it carries no certificate")
    return None


def release_certificate(sources: TrainingSources, validate: bool, base_model: str
                        ) -> tuple[dict | None, str | None]:
    """(the model's certificate, None) when it trains on a DP release only; (None, why
    not) for a DP release trained on with a validation set or from a fine-tuned base;
    (None, None) otherwise. Called before training: the release's own certificate is
    checked then (refused when edited), and only when it would be carried over."""
    train = sources.train
    if train.kind != "release" or train.manifest is None:
        return None, None
    release_dir = os.path.dirname(train.manifest)
    if not os.path.isfile(os.path.join(release_dir, "privacy.json")):
        return None, None
    if validate:
        return None, ("the training data is a DP release, but the owner's validation set "
                      "chooses the kept checkpoint (and early stopping): that choice reads "
                      "private data, so the model carries no certificate. Train with "
                      "--no-validation and a fixed budget to keep the release's guarantee")
    why_not = _base_history(base_model)
    if why_not:
        return None, why_not
    from .certificate import read_certificate

    checked = read_certificate(release_dir)
    total = checked["total"]
    return {"released_from": [checked["release"]],
            "total": {"epsilon": total["epsilon"], "delta": total["delta"],
                      "composition": POST_PROCESSED},
            "post_processing": "fine-tuned on the release (and public text only) for a "
                               "budget fixed in advance, the last checkpoint kept, no "
                               "validation set read, from a base model with no training "
                               "on the owner's data: nothing else of the owner's"}, None


class ReleaseCertifier:
    """The certifier fairseq's track takes (nmtfrag.train.finetune.Certifier): decides,
    before training, whether the model will carry its DP release's certificate (checking
    that certificate then), and writes it, bound to the model's files, before the
    manifest. `nmtfrag finetune` passes one; the study's cells run that command."""

    def __init__(self) -> None:
        self.cert: dict | None = None
        self.why_not: str | None = None

    def prepare(self, sources: TrainingSources, validate: bool, base_model: str) -> None:
        self.cert, self.why_not = release_certificate(sources, validate, base_model)

    def write(self, out: str, manifest: dict) -> str | None:
        """privacy.json in OUT and the manifest's dp/privacy fields; returns the note to
        print (why there is no certificate), if any."""
        manifest["dp"] = self.cert is not None
        if self.cert is not None:
            manifest["privacy"] = cert_files.bind(self.cert, out)
            write_json(os.path.join(out, "privacy.json"), self.cert)
        if self.why_not:
            manifest["no_certificate"] = self.why_not
        return self.why_not
