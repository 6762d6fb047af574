"""Membership inference: AUC and TPR@FPR against brute force, per-pair losses against
fairseq's own SequenceScorer, the attack on an overfit tiny model, the CLI."""
import json
import random

import pytest

from nmtfrag.audit import membership as mi
from nmtfrag.cli import main
from nmtfrag.fileio import sha256_file


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


def test_held_out_pairs_that_are_members_leave_the_non_members():
    members = [("a", "A"), ("b", "B"), ("a", "A")]
    held = [("c", "C"), ("a", "A"), ("a", "X"), ("b", "B"), ("d", "D")]
    kept, dropped = mi.held_out_only(members, held)
    assert kept == [("c", "C"), ("a", "X"), ("d", "D")] and dropped == 2  # same source,
    # other target: not a member pair


@pytest.mark.parametrize("seed", range(3))
def test_members_split_by_occurrences_match_brute_force(seed):
    from collections import Counter

    rng = random.Random(seed)
    train = [(f"s{rng.randint(0, 40)}", "t") for _ in range(200)]
    counts = Counter(train)
    sample = rng.sample(train, 60)
    scores = [rng.random() + 0.3 * (counts[p] > 1) for p in sample]
    neg = [rng.random() for _ in range(50)]
    got = mi.by_repeats(counts, sample, scores, neg)
    once = [s for p, s in zip(sample, scores) if sum(q == p for q in train) == 1]
    rep = [s for p, s in zip(sample, scores) if sum(q == p for q in train) > 1]
    assert got["repeated"]["members"] == len(rep) and len(rep) > 0
    assert got["repeated"]["auc"] == pytest.approx(brute_auc(rep, neg))
    assert got["repeated"]["tpr_at_1pct_fpr"] == pytest.approx(brute_tpr(rep, neg, 0.01))
    if once:
        assert got["once"]["members"] == len(once)
        assert got["once"]["auc"] == pytest.approx(brute_auc(once, neg))
    else:
        assert "once" not in got


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
    train = make_corpus(300, seed=0)
    members = write_parallel(train, str(tmp_path / "members"))
    held = [p for p in make_corpus(300, seed=99) if p not in set(train)][:295]
    # five training pairs among the held-out ones: members, left out of the non-members
    heldout = write_parallel(held + train[:5], str(tmp_path / "heldout"))
    capsys.readouterr()
    assert main(["audit", "membership", "--model", tiny_model_dir, "--members", *members,
                 "--non-members", str(tmp_path / "heldout"), "--pretokenized",
                 "--out", str(tmp_path / "mi")]) == 0
    assert "5 --non-members pair(s) are also --members pairs" in capsys.readouterr().err
    rep = json.loads((tmp_path / "mi" / "report.json").read_text())
    assert rep["members"] == 300 and rep["non_members"] == len(held) == 295
    assert rep["non_members_dropped_as_members"] == 5
    groups = rep["by_repeats"]  # uncalibrated here: the split is of the attack reported
    assert sum(g["members"] for g in groups.values()) == 300
    assert groups["once"]["members"] == sum(1 for p in train if train.count(p) == 1)
    assert rep["auc"] > 0.6  # 0.67 measured; under the null its std is ~0.024
    assert rep["mean_loss"]["members"] < rep["mean_loss"]["non_members"]
    assert "AUC" in (tmp_path / "mi" / "report.md").read_text()
    # a finished output has a manifest (written last), so it is not silently replaced
    assert json.loads((tmp_path / "mi" / "manifest.json").read_text())["counts"] == {
        "members": 300, "non_members": 295, "non_members_dropped_as_members": 5}
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


def test_member_lines_take_the_trained_pairs_and_the_rest_as_same_file_non_members(
        tiny_model_dir, tmp_path, capsys):
    """A model trained on a share of a file (--train-fraction): its members are the lines
    it trained on, not the whole file (counted as members, the untrained lines would
    lower the AUC), and the file's other pairs are non-members from the same documents."""
    from tinymodel import make_corpus, write_parallel

    train = make_corpus(300, seed=0)  # what the tiny model trained on (tests/tinymodel.py)
    unseen = [p for p in make_corpus(300, seed=98) if p not in set(train)][:200]
    rng = random.Random(3)
    order = train + unseen
    rng.shuffle(order)
    order.insert(0, ("", ""))  # a blank pair: skipped, yet line numbers stay the file's
    files = write_parallel(order, str(tmp_path / "corpus"))
    trained = sorted(k for k, p in enumerate(order) if p in set(train))
    (tmp_path / "lines.txt").write_text("".join(f"{k}\n" for k in trained))
    # as a run writes it: OUT/owner/trained-lines.txt beside the manifest naming its files
    owner = tmp_path / "run" / "owner"
    owner.mkdir(parents=True)
    (owner / "trained-lines.txt").write_text((tmp_path / "lines.txt").read_text())
    (owner / "manifest.json").write_text(json.dumps({"inputs_sha256": {
        "train_src": sha256_file(files[0]), "train_tgt": sha256_file(files[1])}}))
    held = write_parallel([p for p in make_corpus(300, seed=99) if p not in set(train)][:250],
                          str(tmp_path / "held"))
    common = ["audit", "membership", "--model", tiny_model_dir, "--members", *files,
              "--non-members", *held, "--pretokenized", "--seed", "1"]
    assert main([*common, "--member-lines", str(owner / "trained-lines.txt"),
                 "--out", str(tmp_path / "by-lines")]) == 0
    err = capsys.readouterr().err
    assert "pairs of the same files it did not train on" in err and "warning" not in err
    rep = json.loads((tmp_path / "by-lines" / "report.json").read_text())
    assert rep["members"] == len(trained) == 300
    sf = rep["same_files"]
    assert sf["non_members"] == len(unseen) and sf["non_members_dropped_as_members"] == 0
    assert sf["auc"] > 0.6 and sf["mean_loss"] > rep["mean_loss"]["members"]
    assert sum(g["members"] for g in sf["by_repeats"].values()) == 300
    assert "the same documents" in (tmp_path / "by-lines" / "report.md").read_text()
    # the whole file as members understates: a third of them were never trained on
    assert main([*common, "--out", str(tmp_path / "whole")]) == 0
    whole = json.loads((tmp_path / "whole" / "report.json").read_text())
    assert "same_files" not in whole and whole["members"] == 500
    assert rep["auc"] > whole["auc"] + 0.03
    # planted canaries in the file are left out of members and same-file non-members
    canaries = {"kind": "nmtfrag-canaries", "canaries": [
        {"src": order[trained[0]][0], "tgt": order[trained[0]][1]},
        {"src": unseen[0][0], "tgt": unseen[0][1]}]}
    (tmp_path / "canaries.json").write_text(json.dumps(canaries))
    assert main([*common, "--member-lines", str(tmp_path / "lines.txt"),
                 "--leave-out-canaries", str(tmp_path / "canaries.json"),
                 "--out", str(tmp_path / "no-canaries")]) == 0
    assert "no finetune manifest beside it" in capsys.readouterr().err  # unchecked: said
    nc = json.loads((tmp_path / "no-canaries" / "report.json").read_text())
    assert nc["members"] == 300 - train.count(order[trained[0]])
    assert nc["same_files"]["non_members"] == len(unseen) - 1
    # line numbers that are not lines of the file, or not numbers: a clear error
    for text in ("0\n9999\n", "0\nten\n", "\n", "0\n\u00b2\n", "0\n\udcff\n", "0\n0\n"):
        if text == "0\n0\n":  # right numbers, files the run did not train on
            (owner / "manifest.json").write_text(json.dumps({"inputs_sha256": {
                "train_src": "0" * 64, "train_tgt": sha256_file(files[1])}}))
            bad = owner / "trained-lines.txt"
        else:
            bad = tmp_path / "bad.txt"
        bad.write_bytes(text.encode("utf-8", "surrogateescape"))
        capsys.readouterr()
        assert main([*common, "--member-lines", str(bad),
                     "--out", str(tmp_path / "bad")]) == 2
        assert capsys.readouterr().err.splitlines()[-1].startswith("error: --member-lines")
    # canaries that are every trained pair leave no member: refused, not divided by zero
    (tmp_path / "all.json").write_text(json.dumps({"kind": "nmtfrag-canaries", "canaries": [
        {"src": order[k][0], "tgt": order[k][1]} for k in trained]}))
    assert main([*common, "--member-lines", str(tmp_path / "lines.txt"),
                 "--leave-out-canaries", str(tmp_path / "all.json"),
                 "--out", str(tmp_path / "bad")]) == 2
    assert "no member pair is left" in capsys.readouterr().err
