"""Reconstruction attack and its scoring: sanity anchors, a hand-made release whose
reconstruction is worked out by hand, tags/duplicates/shuffling, determinism, CLI."""
import json
import os
import random
import subprocess
import sys

import pytest

from nmtfrag.audit.reconstruct import _placement, read_release, reconstruct
from nmtfrag.audit.reconstruction_score import SuffixAutomaton, score_chains
from nmtfrag.phrases import extract_spans

SRC_WORDS = [f"q{i}" for i in range(60)]
TGT_WORDS = [f"w{i}" for i in range(60)]


def corpus(n, seed=0, lo=1, hi=12):
    """Sentence pairs with a word-for-word lexicon, adjacent swaps on the source side
    (so alignments are not monotone) and a final `.`; returns (src, tgt, alignment)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.randint(lo, hi)
        idx = [rng.randrange(60) for _ in range(k)]
        tgt = [TGT_WORDS[i] for i in idx] + ["."]
        order = list(range(k))
        for j in range(0, k - 1, 3):
            if rng.random() < 0.5:
                order[j], order[j + 1] = order[j + 1], order[j]
        src = [SRC_WORDS[idx[o]] for o in order] + ["."]
        points = [(si, order[si]) for si in range(k)] + [(k, k)]
        out.append((tuple(src), tuple(tgt), points))
    return out


def release(sents, max_len, rate=1.0, seed=0):
    pairs = []
    for src, tgt, points in sents:
        for s0, s1, t0, t1 in extract_spans(len(src), len(tgt), points, max_len):
            pairs.append((src[s0:s1 + 1], tgt[t0:t1 + 1]))
    rng = random.Random(seed)
    rng.shuffle(pairs)
    return pairs[:round(rate * len(pairs))]


def score(chains, sents, max_len):
    return score_chains(chains, [s for s, _, _ in sents], [t for _, t, _ in sents], max_len)


def test_full_sentences_are_rebuilt():
    sents = corpus(300, seed=1, lo=2, hi=15)
    pairs = [(s, t) for s, t, _ in sents]
    chains, _ = reconstruct(pairs)
    sc = score(chains, sents, max_len=100)
    assert sc["pair"]["rebuilt_exactly_share"] == 1.0
    assert sc["tgt"]["rebuilt_exactly_share"] == 1.0
    assert sc["src"]["rebuilt_exactly_share"] == 1.0


def test_unigrams_rebuild_only_one_word_sentences():
    sents = corpus(300, seed=2, lo=0, hi=10)  # lo=0: some sentences are just "."
    pairs = release(sents, max_len=1)
    chains, stats = reconstruct(pairs)
    assert stats["edges"] == 0
    sc = score(chains, sents, max_len=1)
    one = [s for s in sents if len(s[1]) == 1]
    assert one  # the anchor needs both kinds
    flags = {t for c in chains for t in [c.tgt]}
    assert all(t in flags for _, t, _ in one)
    assert sc["pair"]["rebuilt_exactly_longer_than_max_len_share"] == 0.0
    assert sc["tgt"]["ngrams_recovered_share"] == 0.0
    assert sc["tgt"]["longest_span"]["max"] == 1


def test_hand_made_release_known_reconstruction():
    # Two sentences sharing the target bigram "A2 A3" (same source "a2 a3"): every
    # consistent pair up to 3 words of a diagonal alignment, tagged, with duplicates.
    s1 = (("a1", "a2", "a3", "a4", "a5"), ("A1", "A2", "A3", "A4", "A5"))
    s2 = (("b1", "a2", "a3", "b4"), ("B1", "A2", "A3", "B4"))
    pairs = []
    for src, tgt in (s1, s2):
        for i in range(len(tgt)):
            for j in range(i + 1, min(i + 3, len(tgt)) + 1):
                pairs.append((src[i:j], tgt[i:j]))
    pairs += pairs[:4]  # duplicates are kept by a release
    random.Random(3).shuffle(pairs)
    chains, stats = reconstruct(pairs)
    multi = {(" ".join(c.src), " ".join(c.tgt)) for c in chains if len(c.tgt) >= 3}
    # the repeat "A2 A3" is followed by A4 in one sentence and B4 in the other, and
    # preceded by A1 / B1: the attack must stop at it, not guess.
    assert multi == {
        ("a1 a2 a3", "A1 A2 A3"),
        ("b1 a2 a3", "B1 A2 A3"),
        ("a2 a3 a4 a5", "A2 A3 A4 A5"),
        ("a2 a3 b4", "A2 A3 B4"),
    }
    assert stats["edges"] == 1
    # without the second sentence the first is rebuilt whole
    only1 = [p for p in pairs if p[1][0] != "B1" and "B4" not in p[1]]
    chains1, _ = reconstruct(only1)
    assert ((" ".join(s1[0]), " ".join(s1[1]))
            in {(" ".join(c.src), " ".join(c.tgt)) for c in chains1})


def test_reordered_sources_are_merged_by_placement():
    # target "he has read the book", source "er hat das buch gelesen": pairs that
    # overlap on the target must overlap on the source to be joined.
    pairs = [(("er", "hat"), ("he", "has")),
             (("hat", "das", "buch", "gelesen"), ("has", "read", "the", "book")),
             (("das", "buch"), ("the", "book"))]
    chains, _ = reconstruct(pairs, min_overlap=1)
    got = {(" ".join(c.src), " ".join(c.tgt)) for c in chains}
    assert ("er hat das buch gelesen", "he has read the book") in got


def test_placement():
    assert _placement(("a", "b", "c"), ("b", "c", "d")) == 1
    assert _placement(("b", "c", "d"), ("a", "b", "c")) == -1
    assert _placement(("a", "b", "c"), ("b",)) == 1
    assert _placement(("a", "b"), ("c",)) is None
    assert _placement(("x", "y"), ("y", "x")) is None  # two one-word overlaps: ambiguous
    assert _placement(("a", "b", "a"), ("a", "b")) is None  # repeated word: ambiguous


def test_diagonal_release_is_rebuilt_and_precise():
    sents = corpus(200, seed=4, lo=5, hi=12)
    pairs = release(sents, max_len=4)
    chains, _ = reconstruct(pairs)
    sc = score(chains, sents, max_len=4)
    assert sc["tgt"]["ngram_precision"] == 1.0
    assert sc["src"]["ngram_precision"] == 1.0
    # a 60-word vocabulary repeats bigrams across sentences: the attack stops there
    assert sc["pair"]["rebuilt_exactly_share"] > 0.3
    half, _ = reconstruct(release(sents, max_len=4, rate=0.5))
    sc_half = score(half, sents, max_len=4)
    assert sc_half["tgt"]["ngrams_recovered_share"] < sc["tgt"]["ngrams_recovered_share"]


def test_deterministic_and_independent_of_order():
    sents = corpus(150, seed=5)
    pairs = release(sents, max_len=3)
    a, sa = reconstruct(pairs)
    b, sb = reconstruct(list(reversed(pairs)))
    assert a == b and sa == sb


def test_suffix_automaton_matches_brute_force():
    rng = random.Random(7)
    for _ in range(100):
        seqs = [tuple(rng.randint(0, 3) for _ in range(rng.randint(0, 7)))
                for _ in range(rng.randint(1, 4))]
        sam = SuffixAutomaton()
        for s in seqs:
            sam.add(s)
        q = tuple(rng.randint(0, 4) for _ in range(rng.randint(1, 9)))
        subs = {s[i:j] for s in seqs for i in range(len(s) + 1) for j in range(i, len(s) + 1)}
        ref = [max(n for n in range(j + 2) if q[j + 1 - n:j + 1] in subs)
               for j in range(len(q))]
        assert sam.matching(q) == ref


def test_scores_by_hand():
    class C:
        def __init__(self, s, t):
            self.src, self.tgt = tuple(s.split()), tuple(t.split())

    chains = [C("x y z", "a b c d e"), C("u", "f g")]
    src = [tuple("x y z".split()), tuple("u v".split())]
    tgt = [tuple("a b c d e".split()), tuple("f g h i".split())]
    sc = score_chains(chains, src, tgt, max_len=2)
    assert sc["tgt"]["rebuilt_exactly"] == 1 and sc["pair"]["rebuilt_exactly"] == 1
    assert sc["tgt"]["longest_span"]["histogram"] == {"2": 1, "5": 1}
    # target 3-grams: a b c, b c d, c d e (recovered), f g h, g h i (not)
    assert sc["tgt"]["ngrams"]["3"]["distinct_recovered_share"] == pytest.approx(3 / 5)
    assert sc["tgt"]["ngrams"]["4"]["distinct_recovered_share"] == pytest.approx(2 / 3)
    assert sc["tgt"]["ngrams"]["3"]["precision"] == 1.0


def _write_release(d, pairs, tag, manifest=True):
    os.makedirs(d)
    wrap = (lambda x: "<P> " + " ".join(x) + " </P>") if tag else (lambda x: " ".join(x))
    with open(os.path.join(d, "phrases.de"), "w") as fs, \
            open(os.path.join(d, "phrases.en"), "w") as ft:
        for s, t in pairs:
            fs.write(wrap(s) + "\n")
            ft.write(wrap(t) + "\n")
    if manifest:
        with open(os.path.join(d, "manifest.json"), "w") as f:
            json.dump({"kind": "nmtfrag-release",
                       "files": {"src": "phrases.de", "tgt": "phrases.en"},
                       "params": {"src_lang": "de", "tgt_lang": "en", "max_len": 4,
                                  "sample_rate": 1.0, "tag": tag, "pretokenized": True}}, f)


def test_tags_are_stripped(tmp_path):
    sents = corpus(50, seed=6)
    pairs = release(sents, max_len=4)
    _write_release(tmp_path / "tagged", pairs, tag=True)
    _write_release(tmp_path / "auto", pairs, tag=True, manifest=False)
    _write_release(tmp_path / "plain", pairs, tag=False)
    got = {k: read_release(str(tmp_path / k)) for k in ("tagged", "auto", "plain")}
    assert got["tagged"][0] == got["plain"][0] == got["auto"][0] == [tuple(p) for p in pairs]
    assert got["auto"][1]["tagged"] and not got["plain"][1]["tagged"]


def test_cli_reconstruct(tmp_path):
    sents = corpus(60, seed=8, lo=3)
    _write_release(tmp_path / "rel", release(sents, max_len=4), tag=True)
    with open(tmp_path / "c.de", "w") as fs, open(tmp_path / "c.en", "w") as ft:
        for s, t, _ in sents:
            fs.write(" ".join(s) + "\n")
            ft.write(" ".join(t) + "\n")
    cmd = [sys.executable, "-m", "nmtfrag", "audit", "reconstruct", "--release",
           str(tmp_path / "rel"), "--src", str(tmp_path / "c.de"), "--tgt",
           str(tmp_path / "c.en"), "--out", str(tmp_path / "out"), "--write-chains"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    rep = json.load(open(tmp_path / "out" / "report.json"))
    assert rep["scores"]["pair"]["sentences"] == 60
    assert rep["max_len"] == 4
    assert os.path.exists(tmp_path / "out" / "report.md")
    assert os.path.exists(tmp_path / "out" / "manifest.json")
    assert os.path.exists(tmp_path / "out" / "chains.en")
    again = subprocess.run(cmd, capture_output=True, text=True)  # finished output
    assert again.returncode == 2 and again.stderr.startswith("error:")
    bad = subprocess.run(cmd[:5] + [str(tmp_path / "nope")] + cmd[6:-2]
                         + ["--out", str(tmp_path / "o2")], capture_output=True, text=True)
    assert bad.returncode == 2 and "error:" in bad.stderr and "Traceback" not in bad.stderr
    assert not os.path.exists(tmp_path / "o2")


@pytest.mark.parametrize("tag, rate", [(True, 1.0), (False, 0.5)])
def test_release_written_by_extract(tmp_path, tag, rate):
    """End to end on a real release (nmtfrag extract with a given alignment)."""
    from nmtfrag.audit.reconstruction_score import audit_reconstruction
    from nmtfrag.extract import extract_release

    sents = corpus(80, seed=9, lo=4, hi=12)
    src, tgt, ali = (str(tmp_path / n) for n in ("c.de", "c.en", "c.align"))
    with open(src, "w") as fs, open(tgt, "w") as ft, open(ali, "w") as fa:
        for s, t, pts in sents:
            fs.write(" ".join(s) + "\n")
            ft.write(" ".join(t) + "\n")
            fa.write(" ".join(f"{i}-{j}" for i, j in pts) + "\n")
    extract_release(src, tgt, str(tmp_path / "rel"), max_len=4, sample_rate=rate, tag=tag,
                    seed=1, alignments=ali, pretokenized=True)
    rep = audit_reconstruction(str(tmp_path / "rel"), src, tgt, str(tmp_path / "audit"))
    assert rep["release"]["tagged"] == tag and rep["max_len"] == 4 and rep["pretokenized"]
    direct, _ = reconstruct(release(sents, max_len=4))
    if rate == 1.0:  # the same pairs as extracting here, so the same reconstruction
        assert rep["attack"]["chains"] == len(direct)
        assert rep["scores"] == score(direct, sents, max_len=4)
    assert rep["scores"]["tgt"]["ngram_precision"] == 1.0
    assert rep["scores"]["pair"]["rebuilt_exactly"] > 0
