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


@pytest.mark.parametrize("name", ["rate", "batch", "voc", "rel"])
def test_untouched_certificates_pass(outputs, capsys, name):
    rc, cap = _privacy(outputs / name, capsys)
    assert rc == 0, cap.err
    assert "total      ε = " in cap.out and not cap.err
    rc, cap = _privacy(outputs / name, capsys, "--json")
    out = json.loads(cap.out)
    assert rc == 0 and out["private"] is (name in ("batch", "rel"))


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
     ["release.delta_gauss"]),
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
