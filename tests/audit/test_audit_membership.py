"""Membership inference: AUC and TPR@FPR against brute force, per-pair losses against
fairseq's own SequenceScorer, the attack on an overfit tiny model, the CLI."""
import json
import random

import pytest

from nmtfrag.audit import membership as mi
from nmtfrag.cli import main


def brute_auc(pos, neg):
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def brute_tpr(pos, neg, fpr):
    """Best TPR over every threshold t (flag score > t) whose FPR is ≤ fpr."""
    best = 0.0
    for t in set(pos) | set(neg) | {float("-inf")}:
        if sum(n > t for n in neg) <= fpr * len(neg):
            best = max(best, sum(p > t for p in pos) / len(pos))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_metrics_match_brute_force(seed):
    rng = random.Random(seed)
    pos = [rng.choice(range(30)) + rng.random() * (seed % 2) for _ in range(rng.randint(5, 80))]
    neg = [rng.choice(range(25)) + rng.random() * (seed % 2) for _ in range(rng.randint(5, 300))]
    assert mi.roc_auc(pos, neg) == pytest.approx(brute_auc(pos, neg))
    for fpr in (0.0, 0.01, 0.1, 0.5):
        assert mi.tpr_at_fpr(pos, neg, fpr) == pytest.approx(brute_tpr(pos, neg, fpr))


@pytest.fixture(scope="module")
def translator(tiny_model_dir):
    from nmtfrag.translate.fairseq_engine import Translator

    return Translator(tiny_model_dir)


def test_pair_losses_equal_fairseq_sequence_scorer(translator):
    import torch
    from fairseq.sequence_scorer import SequenceScorer

    from tinymodel import make_corpus

    pairs = make_corpus(12, seed=5)
    ours = mi.pair_losses(translator, pairs, "moses", batch_size=5)
    scorer = SequenceScorer(translator.tgt_dict)
    td, sd = translator.tgt_dict, translator.src_dict
    for (s, t), loss in zip(pairs, ours):
        src_sub, _ = translator.bpe.encode_lines([s], "de", "moses", keep_tags=False)
        tgt_sub, _ = translator.bpe.encode_lines([t], "en", "moses", keep_tags=False)
        src = sd.encode_line(src_sub[0], add_if_not_exist=False).long().unsqueeze(0)
        tgt = td.encode_line(tgt_sub[0], add_if_not_exist=False).long().unsqueeze(0)
        prev = torch.cat([torch.tensor([[td.eos()]]), tgt[:, :-1]], 1)
        sample = {"net_input": {"src_tokens": src, "src_lengths": torch.tensor([src.size(1)]),
                                "prev_output_tokens": prev}, "target": tgt}
        hypo = scorer.generate(translator.models, sample)[0][0]
        assert loss == pytest.approx(-float(hypo["positional_scores"].mean()), rel=1e-5)


def test_attack_on_an_overfit_model_and_cli(tiny_model_dir, tmp_path, capsys):
    from tinymodel import make_corpus, write_parallel

    # the tiny model was trained on make_corpus(300, seed=0) (tests/tinymodel.py)
    members = write_parallel(make_corpus(300, seed=0), str(tmp_path / "members"))
    heldout = write_parallel(make_corpus(300, seed=99), str(tmp_path / "heldout"))
    assert main(["audit", "membership", "--model", tiny_model_dir, "--members", *members,
                 "--non-members", str(tmp_path / "heldout"), "--pretokenized",
                 "--out", str(tmp_path / "mi")]) == 0
    rep = json.loads((tmp_path / "mi" / "report.json").read_text())
    assert rep["members"] == rep["non_members"] == 300
    assert rep["auc"] > 0.6  # 0.67 measured; under the null its std is ~0.024
    assert rep["mean_loss"]["members"] < rep["mean_loss"]["non_members"]
    assert "AUC" in (tmp_path / "mi" / "report.md").read_text()
    # a finished output has a manifest (written last), so it is not silently replaced
    assert json.loads((tmp_path / "mi" / "manifest.json").read_text())["counts"] == {
        "members": 300, "non_members": 300}
    capsys.readouterr()
    assert main(["audit", "membership", "--model", tiny_model_dir, "--members", *members,
                 "--non-members", *heldout, "--pretokenized", "--out", str(tmp_path / "mi")]) == 2
    assert "--overwrite" in capsys.readouterr().err
    # calibrated by the model itself, every score is 0: exactly chance
    assert main(["audit", "membership", "--model", tiny_model_dir, "--members", *members,
                 "--non-members", *heldout, "--pretokenized", "--max-pairs", "50",
                 "--reference-model", tiny_model_dir, "--out", str(tmp_path / "mi2")]) == 0
    rep2 = json.loads((tmp_path / "mi2" / "report.json").read_text())
    assert rep2["members"] == 50 and rep2["auc"] == 0.5
    assert rep2["calibrated"]["tpr_at_1pct_fpr"] == 0.0
    capsys.readouterr()
    assert main(["audit", "membership", "--model", tiny_model_dir, "--members",
                 str(tmp_path / "nope"), "--non-members", *heldout,
                 "--out", str(tmp_path / "mi3")]) == 2
    assert capsys.readouterr().err.startswith("error:")
