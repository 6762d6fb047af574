"""`nmtfrag privacy` recomputes every figure of a certificate and refuses an edited one.

Tiny real outputs are made once (a DP-SGD model with --sample-rate, seeded; one with a
logical batch, basic composition; a DP release; a DP vocabulary, seeded; a simulation),
then each tampered copy — one per field class: a forged ε, σ edited in the history, δ,
the release cap, a deleted count segment, the composition switched, a removed key, a
non-number, the manifest's copy disagreeing, the seeded flag removed, … — must be
refused with exit 2 and one `error:` line, never a traceback. A seeded output says
"seeded: not private" wherever its ε is printed; a simulation is not shareable.
"""
import json
import shutil

import pytest

from nmtfrag.cli import main

DELTA = 1e-3


@pytest.fixture(scope="module")
def outputs(tmp_path_factory, public_align_model):
    import torch
    from tinymodel import make_corpus, make_tiny_model_dir, write_parallel

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("certs")
    base = make_tiny_model_dir(str(root / "base"), updates=2)
    write_parallel(make_corpus(150, seed=71), str(root / "train"))
    write_parallel(make_corpus(10, seed=72), str(root / "valid"))

    def finetune(out, *extra):
        assert main(["finetune", "--model", base, "--train", str(root / "train.de"),
                     str(root / "train.en"), "--valid-src", str(root / "valid.de"),
                     "--valid-tgt", str(root / "valid.en"), "--out", str(root / out),
                     "--pretokenized", "--threads", "1", "-q", "--dp", "--delta",
                     str(DELTA), "--physical-batch", "16", "--dp-params", "bias",
                     "--dp-steps", "2", *extra]) == 0

    finetune("rate", "--sample-rate", "0.2", "--noise-multiplier", "1.0", "--seed", "4")
    finetune("batch", "--logical-batch", "32", "--target-epsilon", "8")
    # honest certificates of every unit and rate plan the checks must let through
    finetune("rate8", "--sample-rate", "0.2", "--target-epsilon", "8")
    finetune("sched", "--batch-schedule", "16:0,32:1", "--target-epsilon", "8")
    finetune("dedup", "--sample-rate", "0.2", "--target-epsilon", "8", "--dedup")
    (root / "docs.txt").write_text("".join(f"d{i % 120}\n" for i in range(150)))
    finetune("doc", "--sample-rate", "0.2", "--target-epsilon", "8", "--privacy-unit",
             "document", "--documents", str(root / "docs.txt"), "--allow-few-units")
    finetune("sim", "--logical-batch", "32", "--target-epsilon", "8",
             "--dp-simulate-batch", "8")
    assert main(["vocab", "--dp", "--src", str(root / "train.de"), "--tgt",
                 str(root / "train.en"), "--out", str(root / "voc"), "--pretokenized",
                 "--sigma", "6", "--delta", str(DELTA), "--tuple-len", "16",
                 "--merges", "20", "--seed", "3"]) == 0
    assert main(["extract", "--src", str(root / "train.de"), "--tgt",
                 str(root / "train.en"), "--out", str(root / "rel"), "--pretokenized",
                 "--dp", "--epsilon", "8", "--delta", str(DELTA), "--unit-cap", "4",
                 "--align-model", public_align_model[0]]) == 0
    return root


def _privacy(path, capsys, *extra):
    capsys.readouterr()
    rc = main(["privacy", str(path), *extra])
    return rc, capsys.readouterr()


@pytest.mark.parametrize("name", ["rate", "batch", "voc", "rel", "rate8", "sched", "dedup",
                                  "doc"])
def test_untouched_certificates_pass(outputs, capsys, name):
    rc, cap = _privacy(outputs / name, capsys)
    assert rc == 0, cap.err
    assert "total      ε = " in cap.out and not cap.err
    rc, cap = _privacy(outputs / name, capsys, "--json")
    out = json.loads(cap.out)
    assert rc == 0 and out["private"] is (name not in ("rate", "voc"))


@pytest.mark.parametrize("name", ["rate", "voc"])
def test_a_seeded_output_says_not_private_wherever_its_epsilon_is_printed(
        outputs, capsys, name):
    rc, cap = _privacy(outputs / name, capsys)
    assert rc == 0
    eps_lines = [line for line in cap.out.splitlines() if "ε" in line and "=" in line
                 and not line.startswith("vocabulary ε_V = 0.0000")]
    assert eps_lines and all("seeded: not private" in line for line in eps_lines)
    rc, cap = _privacy(outputs / name, capsys, "--json")
    assert json.loads(cap.out)["not_private"].startswith("seeded: not private")
    man = json.loads((outputs / name / "manifest.json").read_text())
    assert man["randomness"]["private"] is False
    assert "seeded: not private" in man["randomness"]["note"]
    # the batch run (secret randomness) says nothing of the kind
    rc, cap = _privacy(outputs / "batch", capsys)
    assert "seeded" not in cap.out


def test_a_simulation_is_not_shareable_and_has_no_certificate(outputs, capsys):
    man = json.loads((outputs / "sim" / "manifest.json").read_text())
    assert man["dp"] is False and man["randomness"]["private"] is False
    assert "not private" in man["shareable"] and "nothing" in man["shareable"]
    rc, cap = _privacy(outputs / "sim", capsys)
    assert rc == 2 and "simulation: not private" in cap.err


def _edit_json(path, edit):
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _both(edit):
    """Apply `edit` to privacy.json and to the manifest's copy of it (a consistent
    forgery of the certificate alone)."""
    def run(d):
        _edit_json(d / "privacy.json", edit)
        _edit_json(d / "manifest.json", lambda m: edit(m["privacy"]))
    return run


def _vocab_both(edit):
    def run(d):
        _edit_json(d / "privacy.json", lambda c: edit(c["vocabulary"]))
        _edit_json(d / "manifest.json", lambda m: edit(m["privacy"]))
    return run


def _set(*path_value):
    *path, value = path_value

    def edit(data):
        for k in path[:-1]:
            data = data[k]
        data[path[-1]] = value
    return edit


def _forged_epsilon(c):
    c["training"]["epsilon"] = 1.0
    c["total"]["epsilon"] = 1.0


def _sigma_in_history(c):
    c["training"]["history"][1][0] *= 20


def _sigma_everywhere(c):
    t = c["training"]
    t["history"][1][0] *= 20
    t["noise_multiplier"] = t["history"][1][0]


def _sigma_everywhere_with_params(d):
    _both(_sigma_everywhere)(d)
    _edit_json(d / "manifest.json", lambda m: m["params"].update(
        noise_multiplier=m["privacy"]["training"]["noise_multiplier"]))


def _delta(d):
    _both(lambda c: c["training"].update(delta=1e-2))(d)
    _edit_json(d / "manifest.json", lambda m: m["params"].update(delta=1e-2))


def _cap(c):
    c["release"]["cap"] = 1


def _cap_and_sensitivity(c):
    c["release"].update(cap=1, sensitivity=1.0)


def _drop_count(c):
    c["training"]["history"].pop(0)


def _switch_composition(c):
    comp = c["training"]["composition"]
    for k in ("delta_count", "delta_train", "epsilon_train_bound", "why"):
        comp.pop(k, None)
    comp["kind"] = "rdp"


def _remove_randomness(c):
    del c["training"]["randomness"]


def _secret_but_not_private(c):
    c["training"]["randomness"]["source"] = "secret"


def _claim_secret(c):
    c["training"]["randomness"] = {"source": "secret", "private": True,
                                   "note": "drawn from the operating system"}


def _params_too(edit_cert, **params):
    """A consistent forgery: both copies of the certificate and manifest.params."""
    def run(d):
        _both(edit_cert)(d)
        _edit_json(d / "manifest.json", lambda m: m["params"].update(params))
    return run


def _recertified(edit):
    """`edit` the training entry, then recompute every ε the checks recompute (the
    training's, its parts, the total), in both copies: a forger's consistent rewrite."""
    from nmtfrag.dp import accounting

    def full(c):
        t = c["training"]
        edit(t)
        eps, eps_all, parts = accounting.certify_training(t)
        t.update(epsilon=eps, epsilon_all_accountants=eps_all)
        t["composition"]["parts"] = parts
        c["total"] = accounting.compose_certificate(t, c["vocabulary"],
                                                    c["earlier_training"], training_eps=eps)
    return full


def _one_step(t):
    t["steps"] = 1
    t["history"][1][2] = 1


def _quarter_rates(t):
    for h in t["history"][1:]:
        h[1] /= 4
    from nmtfrag.dp import accounting

    t["composition"]["epsilon_train_bound"] = accounting.epsilon(
        t["history"][1:], t["composition"]["delta_train"], t["accountant"])


def _duplicated_key(d):
    text = (d / "privacy.json").read_text()
    (d / "privacy.json").write_text(text.replace('"total": {', '"total": {"epsilon": 0.5, ',
                                                 1))


BOUND = [
    # issue 44: the unit, the files, the plan and malformed fields
    ("model unit_key → document", "rate8", _both(_set("training", "unit_key", "document")),
     ["training.privacy_unit", "disagree"]),
    ("model unit_key → distinct-sentence", "rate8",
     _both(_set("training", "unit_key", "distinct-sentence")),
     ["training.unit is not the text of its unit_key"]),
    ("model unit, all three fields → document", "rate8", _both(lambda c: c["training"].update(
        unit_key="document", privacy_unit="document",
        unit="one document (all its sentence pairs together; the documents file says "
             "which pair belongs to which)")), ["is not the unit of manifest.params"]),
    ("release unit_key → document", "rel", _both(_set("release", "unit_key", "document")),
     ["release.unit is not the text of its unit_key"]),
    ("release unit text edited", "rel", _both(_set("release", "unit", "one document")),
     ["release.unit is not the text"]),
    ("release unit, both fields → document", "rel", _both(lambda c: c["release"].update(
        unit_key="document", unit="one document")), ["manifest.params.dp.unit"]),
    ("vocabulary unit_key → distinct-sentence", "voc",
     _vocab_both(_set("unit_key", "distinct-sentence")), ["manifest.params.dedup"]),
    ("vocabulary unit text edited", "voc", _vocab_both(_set("unit", "one document")),
     ["manifest.params.dedup"]),
    ("vocabulary unit_key → document", "voc", _vocab_both(_set("unit_key", "document")),
     ["vocabulary.unit_key is 'document'"]),
    ("steps and history 2 → 1, ε recomputed", "rate8",
     lambda d: (_both(_recertified(_one_step))(d),
                _edit_json(d / "manifest.json", lambda m: m["params"].update(steps=1))),
     ["training.noise_multiplier", "calibrates"]),
    ("every q divided by 4, the bound lowered", "batch", _both(_recertified(_quarter_rates)),
     ["training.history", "planning_count"]),
    ("planning count 1e9", "batch",
     _both(_set("training", "unit_count", "planning_count", 1e9)),
     ["training.delta 0.001 is not below 1/ñ = 1/1e+09"]),
    ("model δ 0.2", "rate", _params_too(_set("training", "delta", 0.2), delta=0.2),
     ["training.delta is 0.2, outside (0, 0.01]"]),
    ("max_grad_norm −1", "rate8", _params_too(_set("training", "max_grad_norm", -1.0),
                                             max_grad_norm=-1.0),
     ["training.max_grad_norm is -1.0, not positive"]),
    ("target_epsilon Infinity", "rate8",
     _params_too(_set("training", "target_epsilon", float("inf")),
                 target_epsilon=float("inf")), ["training.target_epsilon is inf"]),
    ("calibration claims another ε", "rate8",
     _both(_set("training", "calibration", "by",
                "calibrated to ε ≤ 1 with PRV, the upper end of its ε estimate")),
     ["training.calibration"]),
    ("an extra key", "rate8", _both(_set("total", "epsilon_headline", 0.1)),
     ["total.epsilon_headline is not a field"]),
    ("a duplicated key", "rate8", _duplicated_key, ["'epsilon' appears twice"]),
    ("a phrase file replaced", "rel",
     lambda d: (d / "phrases.en").write_text("the whole sentence\n"),
     ["phrases.en: not the file the certificate certifies"]),
]

TAMPERED = [
    # (case, output, edit, words the error line must hold)
    ("forged ε (both copies)", "rate", _both(_forged_epsilon),
     ["training.epsilon is 1.0", "history"]),
    ("σ edited in the history only", "batch", lambda d: _edit_json(
        d / "privacy.json", _sigma_in_history), ["manifest.json's copy",
                                                 "training.history[1][0]"]),
    ("σ edited in the history, both copies", "rate", _both(_sigma_in_history),
     ["training.history[1]", "noise_multiplier"]),
    ("σ edited in every field, both copies", "rate", _sigma_everywhere_with_params,
     ["training.epsilon", "history"]),
    ("δ changed", "rate", _delta, ["training.epsilon"]),
    ("release cap 4 → 1", "rel", _both(_cap), ["release.sensitivity"]),
    ("release cap and sensitivity → 1", "rel", _both(_cap_and_sensitivity),
     ["release.epsilon"]),
    ("count segment deleted", "rate", _both(_drop_count),
     ["training.history", "unit count"]),
    ("basic composition switched to RDP", "batch", _both(_switch_composition),
     ["training.composition.kind", "'basic'"]),
    ("a removed key (unit_count)", "batch",
     _both(lambda c: c["training"].pop("unit_count")), ["training.unit_count is missing"]),
    ("a non-number (σ as text)", "rate",
     _both(_set("training", "noise_multiplier", "1.0")), ["not a finite number"]),
    ("a non-number in the history", "batch",
     _both(lambda c: c["training"]["history"][1].__setitem__(1, None)),
     ["training.history[1]", "not a finite number"]),
    ("manifest's copy disagrees", "batch",
     lambda d: _edit_json(d / "manifest.json", _set("privacy", "total", "epsilon", 0.5)),
     ["manifest.json's copy", "total.epsilon"]),
    ("seeded flag removed", "rate", _both(_remove_randomness),
     ["training.randomness is missing"]),
    ("seeded source renamed secret", "rate", _both(_secret_but_not_private),
     ["training.randomness", "never private"]),
    ("seeded record replaced by a secret one", "rate", _both(_claim_secret),
     ["manifest.randomness differs"]),
    ("vocabulary σ edited", "voc", _vocab_both(_set("sigma", 60.0)),
     ["vocabulary.epsilon"]),
    ("vocabulary forged ε", "voc", _vocab_both(_set("epsilon", 0.1)),
     ["vocabulary.epsilon is 0.1"]),
    ("release δ changed", "rel", _both(_set("release", "delta", 0.5)),
     ["release.delta is 0.5, outside (0, 0.01]"]),
    ("release forged ε", "rel", _both(lambda c: (c["release"].update(epsilon=1.0),
                                                c["total"].update(epsilon=1.0))),
     ["release.epsilon is 1.0"]),
    ("release threshold lowered", "rel", _both(_set("release", "threshold", 1.5)),
     ["release.threshold"]),
    ("earlier training not a list", "rate", _both(_set("earlier_training", {})),
     ["earlier_training"]),
    ("privacy.json not JSON", "batch",
     lambda d: (d / "privacy.json").write_text("{\"training\": "), ["not valid JSON"]),
    ("privacy.json a list", "batch", lambda d: (d / "privacy.json").write_text("[1]"),
     ["no training, release or vocabulary entry"]),
    ("manifest.json removed", "batch", lambda d: (d / "manifest.json").unlink(),
     ["manifest.json not found"]),
    ("not_private a string", "batch",
     lambda d: _edit_json(d / "manifest.json", _set("not_private", "yes")),
     ["not private"]),
]


TAMPERED += BOUND


@pytest.mark.parametrize("case,name,edit,words", TAMPERED, ids=[c[0] for c in TAMPERED])
def test_a_tampered_certificate_is_refused(outputs, tmp_path, capsys, case, name, edit,
                                           words):
    d = tmp_path / name
    shutil.copytree(outputs / name, d)
    edit(d)
    for extra in ((), ("--json",)):
        rc, cap = _privacy(d, capsys, *extra)
        err = cap.err.strip().splitlines()
        assert rc == 2, (case, cap.out, cap.err)
        assert len(err) == 1 and err[0].startswith("error: "), (case, cap.err)
        assert "Traceback" not in cap.err and not cap.out, case
        for w in words:
            assert w in err[0], (case, err[0])


@pytest.mark.parametrize("source,target", [("batch", "rate8"), ("rate8", "base")])
def test_a_certificate_copied_into_another_model_is_refused_naming_the_file(
        outputs, tmp_path, capsys, source, target):
    """privacy.json + manifest.json of one DP model copied into another DP model, or into
    the non-DP base model: the files there are not the certified ones."""
    d = tmp_path / target
    shutil.copytree(outputs / target, d)
    for f in ("privacy.json", "manifest.json"):
        shutil.copy(outputs / source / f, d / f)
    rc, cap = _privacy(d, capsys)
    err = cap.err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "model.pt: not the file the certificate certifies" \
        in err[0], cap.err


def test_a_release_certificate_forged_for_epsilon_16_under_an_asked_8_is_refused():
    """Model-free: a release certificate rewritten consistently for ε 16 (σ, threshold,
    pass probability, total) under a manifest that asked for ε 8."""
    from nmtfrag.dp import cert_check
    from nmtfrag.fragment.dp_release import DPReleaseParams, calibrate, certificate
    from nmtfrag.randomness import Seed

    randomness = Seed(1, reproducible=False).public_record()

    def pair(asked, made):
        params = DPReleaseParams(epsilon=made, delta=1e-4, cap=4)
        cert = certificate(params, *calibrate(params), randomness)
        cert["release"]["aligner"] = "public"
        manifest = {"privacy": cert, "randomness": randomness, "params": {"dp": {
            "epsilon": asked, "delta": 1e-4, "cap": 4, "unit": "sentence",
            "repeat": "count", "weights": "count"}}}
        return cert, manifest

    assert cert_check.check_release(*pair(8, 8))["epsilon"] == pytest.approx(8, rel=1e-6)
    with pytest.raises(cert_check.CertificateError, match="exceeds the ε asked for"):
        cert_check.check_release(*pair(8, 16))
