"""ε's of different privacy units never add, and δ < 1/n is checked before any work.

Composition: a per-sentence DP vocabulary does not compose with document-level
training, nor a per-occurrence vocabulary with --dedup training; `finetune --dp`
refuses both before preprocessing, and `nmtfrag privacy DIR` prints the parts of such a
(hand-made, old-style) certificate but no total. A distinct-pair vocabulary does
compose with per-pair training (removing one occurrence removes at most one distinct
pair).

δ: `extract --dp`, `vocab --dp`, `finetune --dp` and the `privacy` plan refuse δ ≥ 1/n
(vocab: δ_V = 2δ) with exit 2 and one error line, before tokenising, aligning or
preprocessing (those steps are replaced by ones that fail the test), leaving no OUT.
"""
import json
import shutil

import pytest

from nmtfrag.cli import main
from nmtfrag.dp import accounting
from nmtfrag.dp.vocab import UNIT, UNIT_DEDUP

N = 173


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    import torch
    from tinymodel import make_corpus, make_tiny_model_dir, write_parallel

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("compose")
    base = make_tiny_model_dir(str(root / "base"), updates=2)
    write_parallel(make_corpus(N, seed=41), str(root / "train"))
    write_parallel(make_corpus(10, seed=42), str(root / "valid"))
    (root / "docs.txt").write_text("".join(f"d{i % 37}\n" for i in range(N)))
    pairs = make_corpus(100, seed=43)  # 100 distinct pairs on 173 lines
    write_parallel(pairs + pairs[:N - 100], str(root / "dup"))
    return root, base


def _base_with_vocabulary(root, base, name, unit_text):
    d = root / name
    if not d.exists():
        shutil.copytree(base, d)
        (d / "privacy.json").write_text(json.dumps(
            {"vocabulary": {"epsilon": 0.5, "delta": 2e-9, "unit": unit_text}}))
    return str(d)


def _finetune(root, model, out, *extra):
    return main(["finetune", "--model", model, "--train", str(root / "train.de"),
                 str(root / "train.en"), "--valid-src", str(root / "valid.de"),
                 "--valid-tgt", str(root / "valid.en"), "--out", str(root / out),
                 "--pretokenized", "--threads", "1", "-q", "--dp",
                 "--noise-multiplier", "1.0", "--sample-rate", "0.05", "--dp-steps", "1",
                 *extra])


@pytest.fixture
def no_work(monkeypatch):
    """Every expensive step fails the test if reached."""
    import nmtfrag.fragment.extract
    import nmtfrag.data.tokenize
    import nmtfrag.train.data

    def reached(*a, **k):
        raise AssertionError("an expensive step ran before the δ check")

    monkeypatch.setattr(nmtfrag.fragment.extract, "tokenize_corpus", reached)
    monkeypatch.setattr(nmtfrag.train.data, "prepare", reached)
    monkeypatch.setattr(nmtfrag.data.tokenize, "to_tokens", reached)


def _one_error(capsys, *words):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    for w in words:
        assert w in err[0], err[0]
    return err[0]


def test_check_composable_rules():
    sent = {"epsilon": 0.5, "delta": 1e-9, "unit": UNIT}
    dedup = {"epsilon": 0.5, "delta": 1e-9, "unit": UNIT_DEDUP}
    with pytest.raises(accounting.NotComposable, match="has no document unit"):
        accounting.check_composable("document", sent)
    with pytest.raises(accounting.NotComposable, match="vocab --dp --dedup"):
        accounting.check_composable("distinct-sentence", sent)
    with pytest.raises(accounting.NotComposable):
        accounting.check_composable("document", dedup)
    accounting.check_composable("sentence", dedup)  # a distinct pair covers an occurrence
    accounting.check_composable("sentence", sent)
    accounting.check_composable("document", accounting.NO_VOCABULARY)
    with pytest.raises(accounting.NotComposable, match="earlier DP training"):
        accounting.check_composable("sentence", None,
                                    [{"privacy_unit": "document", "unit": "one document"}])
    with pytest.raises(accounting.NotComposable):  # and the certificate has no sum
        accounting.compose_certificate(
            {"privacy_unit": "document", "history": [[1.0, 0.1, 3]], "delta": 1e-5},
            sent)


@pytest.mark.parametrize("unit_text,extra,words", [
    (UNIT, ["--privacy-unit", "document", "--documents", "DOCS", "--allow-few-units"],
     ["not composable", "one document", "has no document unit"]),
    (UNIT, ["--dedup"], ["not composable", "vocab --dp --dedup"]),
])
def test_finetune_refuses_mismatched_units_before_training(data, capsys, no_work,
                                                           unit_text, extra, words):
    root, base = data
    model = _base_with_vocabulary(root, base, "base-sent-vocab", unit_text)
    extra = [str(root / "docs.txt") if x == "DOCS" else x for x in extra]
    assert _finetune(root, model, "ft-mismatch", "--delta", "1e-3", *extra) == 2
    _one_error(capsys, *words)
    assert not (root / "ft-mismatch").exists()


def test_privacy_command_prints_no_sum_across_units(tmp_path, capsys):
    from certfiles import training_entry, vocabulary_entry, write_model

    d = tmp_path / "old-model"
    vocab = vocabulary_entry(sigma=3.0, delta=1e-9, unit_key="sentence")
    write_model(d, training_entry(sigma=1.2, q=0.05, steps=100, unit="document"), vocab)
    assert main(["privacy", str(d)]) == 2
    cap = capsys.readouterr()
    assert "ε_T = " in cap.out and f"ε_V = {vocab['epsilon']:.4f}" in cap.out
    assert "total" not in cap.out
    err = cap.err.strip().splitlines()
    assert len(err) == 1 and "not composable" in err[0] and "one document" in err[0]
    assert main(["privacy", str(d), "--json"]) == 2
    out = json.loads(capsys.readouterr().out)
    assert out["total"]["composable"] is False and out["total"]["epsilon"] is None


def test_extract_refuses_delta_before_aligning(data, capsys, no_work):
    root, _ = data
    argv = ["extract", "--src", str(root / "train.de"), "--tgt", str(root / "train.en"),
            "--pretokenized", "--dp", "--epsilon", "1"]
    assert main([*argv, "--out", str(root / "x1"), "--delta", str(1 / N)]) == 2
    _one_error(capsys, "1/n = 1/173")
    assert main([*argv, "--out", str(root / "x2"), "--delta", "0.03", "--privacy-unit",
                 "document", "--documents", str(root / "docs.txt")]) == 2
    _one_error(capsys, "1/n = 1/37")
    assert not (root / "x1").exists() and not (root / "x2").exists()


def test_vocab_refuses_delta_before_tokenising(data, capsys, no_work):
    root, _ = data
    argv = ["vocab", "--dp", "--src", str(root / "train.de"), "--tgt",
            str(root / "train.en"), "--pretokenized", "--sigma", "5"]
    # δ_V = 2δ = 0.006 ≥ 1/173
    assert main([*argv, "--out", str(root / "v1"), "--delta", "0.003"]) == 2
    _one_error(capsys, "δ_V = 2δ = 0.006", "1/173")
    assert not (root / "v1").exists()


def test_vocab_accepts_delta_below_one_over_n(data):
    """The control: δ_V = 0.004 < 1/173 goes through (the lines are an upper bound on
    n, also with --dedup, so the early check refuses every δ the exact one would)."""
    root, _ = data
    for out, extra in (("v3", []), ("v4", ["--dedup"])):
        assert main(["vocab", "--dp", "--src", str(root / "dup.de"), "--tgt",
                     str(root / "dup.en"), "--pretokenized", "--sigma", "5",
                     "--delta", "0.002", "--merges", "5", "--out", str(root / out),
                     *extra]) == 0


def test_finetune_refuses_delta_before_preprocessing(data, capsys, no_work):
    root, base = data
    assert _finetune(root, base, "f1", "--delta", "0.01") == 2
    _one_error(capsys, "1/n = 1/173")
    assert _finetune(root, base, "f2", "--delta", "0.03", "--privacy-unit", "document",
                     "--documents", str(root / "docs.txt"), "--allow-few-units") == 2
    _one_error(capsys, "1/n = 1/37")
    assert not (root / "f1").exists() and not (root / "f2").exists()


def test_privacy_plan_refuses_delta(capsys):
    assert main(["privacy", "--noise-multiplier", "1", "--sample-rate", "0.01",
                 "--steps", "10", "--delta", "0.01", "--n-examples", str(N)]) == 2
    _one_error(capsys, "1/n = 1/173")
