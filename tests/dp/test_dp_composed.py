"""A DP release, fine-tuned on (with public text) for fixed passes, then DP-SGD from that
model: the model in between carries the release's certificate (post-processing), DP-SGD
calibrates σ so that the release and the training together reach the asked total ε, and
that total equals an independent composition in Google's dp-accounting. A run on the
release that validates on the owner's data gets no certificate."""
import json

import pytest

from nmtfrag.cli import main
from nmtfrag.dp import accounting

DELTA = 1e-3


@pytest.fixture(scope="module")
def composed(tmp_path_factory, public_align_model):
    import torch
    from tinymodel import make_corpus, make_tiny_model_dir, write_parallel

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("composed")
    base = make_tiny_model_dir(str(root / "base"), updates=2)
    write_parallel(make_corpus(150, seed=81), str(root / "train"))
    write_parallel(make_corpus(10, seed=82), str(root / "valid"))
    write_parallel(make_corpus(400, seed=83, min_len=5, max_len=10), str(root / "public"))
    assert main(["extract", "--src", str(root / "train.de"), "--tgt", str(root / "train.en"),
                 "--out", str(root / "rel"), "--pretokenized", "--dp", "--epsilon", "2",
                 "--delta", str(DELTA / 2), "--unit-cap", "4", "--tag",
                 "--align-model", public_align_model[0]]) == 0
    common = ["--model", base, "--train", str(root / "rel"), "--threads", "1", "-q",
              "--max-tokens", "600", "--public-train", str(root / "public"),
              "--public-share", "0.5"]
    assert main(["finetune", *common, "--out", str(root / "warm"), "--no-validation",
                 "--max-epochs", "1"]) == 0
    assert main(["finetune", *common, "--out", str(root / "validated"), "--valid-src",
                 str(root / "valid.de"), "--valid-tgt", str(root / "valid.en"),
                 "--max-epochs", "1"]) == 0
    assert main(["finetune", "--model", str(root / "warm"), "--train", str(root / "train.de"),
                 str(root / "train.en"), "--no-validation", "--out", str(root / "dp"),
                 "--pretokenized", "--threads", "1", "-q", "--dp", "--delta",
                 str(DELTA / 2), "--physical-batch", "16", "--dp-params", "bias",
                 "--dp-steps", "3", "--sample-rate", "0.2", "--target-epsilon", "6",
                 "--allow-few-units"]) == 0
    return root


def _json(path):
    return json.loads(path.read_text())


def test_the_model_trained_on_the_release_carries_its_certificate(composed, capsys):
    rel = _json(composed / "rel" / "privacy.json")
    warm = _json(composed / "warm" / "privacy.json")
    assert warm["released_from"] == [rel["release"]]
    assert warm["total"]["epsilon"] == rel["total"]["epsilon"]
    capsys.readouterr()
    assert main(["privacy", str(composed / "warm")]) == 0
    assert "post-processing" in capsys.readouterr().out
    # validating on the owner's data chooses by private data: no certificate, said why
    assert not (composed / "validated" / "privacy.json").exists()
    man = _json(composed / "validated" / "manifest.json")
    assert man["dp"] is False and "validation set" in man["no_certificate"]


def test_the_total_epsilon_is_the_asked_one_and_dp_accounting_agrees(composed, capsys):
    cert = _json(composed / "dp" / "privacy.json")
    rel = cert["earlier_releases"][0]
    t = cert["training"]
    assert cert["total"]["epsilon"] == pytest.approx(6, rel=0.01)
    assert cert["total"]["delta"] == pytest.approx(DELTA)
    assert "accounted together" in cert["total"]["composition"]
    # basic composition of the two would be looser
    assert rel["epsilon"] + t["epsilon"] > cert["total"]["epsilon"]
    # independent: Google's dp-accounting RDP accountant over the same mechanisms
    dp_accounting = pytest.importorskip("dp_accounting")
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant

    acc = rdp_privacy_accountant.RdpAccountant()
    acc.compose(dp_event.GaussianDpEvent(rel["sigma"] / rel["sensitivity"]))
    for sigma, q, steps in t["history"]:
        event = (dp_event.GaussianDpEvent(sigma) if q == 1 else
                 dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)))
        acc.compose(event, steps)
    ref = acc.get_epsilon(t["delta"] + rel["delta_gauss"])
    ours = accounting.joint_release_epsilon({**t, "accountant": "rdp"}, [rel])
    assert ours == pytest.approx(ref, rel=0.01)
    assert dp_accounting is not None
    capsys.readouterr()
    assert main(["privacy", str(composed / "dp")]) == 0
    out = capsys.readouterr().out
    assert "DP release 1 the base model was trained on" in out


def test_an_edited_release_entry_in_the_composed_certificate_is_refused(composed, capsys,
                                                                        tmp_path):
    import shutil

    copy = tmp_path / "dp"
    shutil.copytree(composed / "dp", copy)
    for name in ("privacy.json", "manifest.json"):
        doc = _json(copy / name)
        cert = doc if name == "privacy.json" else doc["privacy"]
        cert["earlier_releases"][0]["sigma"] *= 2
        (copy / name).write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["privacy", str(copy)]) == 2
    assert "earlier_releases[0]" in capsys.readouterr().err


def test_a_release_trained_on_from_a_fine_tuned_base_carries_no_certificate(composed):
    """The base's own training is outside the release's ε: a model trained on the DP
    release from a model nmtfrag fine-tuned (here the warm start itself) is not
    certified, and its manifest says why."""
    root = composed
    assert main(["finetune", "--model", str(root / "warm"), "--train", str(root / "rel"),
                 "--threads", "1", "-q", "--max-tokens", "600", "--out",
                 str(root / "from-warm"), "--no-validation", "--max-updates", "1"]) == 0
    assert not (root / "from-warm" / "privacy.json").exists()
    man = _json(root / "from-warm" / "manifest.json")
    assert man["dp"] is False and "base model" in man["no_certificate"]
