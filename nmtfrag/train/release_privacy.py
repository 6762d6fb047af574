"""The certificate of a model trained on a DP release only: the release's, carried over.

Why: fine-tuning on a DP release (nmtfrag extract --dp) is post-processing of the
release when nothing else private enters the run: a budget fixed in advance (passes over
the release), the last checkpoint, no validation set of the owner's read, public text
beside it at most. The model is then as private as the release, and a later DP-SGD run
from it composes with the release's ε (nmtfrag.dp.accounting.compose_certificate). A run
that validates on the owner's data chooses its checkpoint by private data: it gets no
certificate, and says why.
"""
from __future__ import annotations

import os

from ..dp.cert_check import POST_PROCESSED
from ..fileio import MANIFEST
from .data import TrainingSources

CERTIFICATE = "privacy.json"


def release_certificate(sources: TrainingSources, validate: bool
                        ) -> tuple[dict | None, str | None]:
    """(the model's certificate, None) when it trains on a DP release only; (None, why
    not) for a DP release trained on with a validation set; (None, None) otherwise.
    The release's own certificate is checked first (refused when edited)."""
    train = sources.train
    if train.kind != "release" or train.manifest is None:
        return None, None
    release_dir = os.path.dirname(train.manifest)
    if not os.path.isfile(os.path.join(release_dir, CERTIFICATE)):
        return None, None
    from ..dp.certificate import read_certificate

    checked = read_certificate(release_dir)
    if validate:
        return None, ("the training data is a DP release, but the owner's validation set "
                      "chose the kept checkpoint (and early stopping): that choice reads "
                      "private data, so the model carries no certificate. Train with "
                      "--no-validation and a fixed budget to keep the release's guarantee")
    total = checked["total"]
    return {"released_from": [checked["release"]],
            "total": {"epsilon": total["epsilon"], "delta": total["delta"],
                      "composition": POST_PROCESSED},
            "post_processing": "fine-tuned on the release (and public text only) for a "
                               "budget fixed in advance, the last checkpoint kept, no "
                               "validation set read: nothing else of the owner's"}, None


def is_certified(model_dir: str) -> bool:
    """Whether a fine-tuned model directory carries a certificate (its manifest's dp)."""
    from ..fileio import read_json

    path = os.path.join(model_dir, MANIFEST)
    return os.path.isfile(path) and read_json(path).get("dp") is True
