"""Reconstruction attack and its scoring: sanity anchors, a hand-made release whose
reconstruction is worked out by hand, tags/duplicates/shuffling, determinism, CLI."""
import json
import os
import random
import subprocess
import sys

import pytest

from nmtfrag.audit.reconstruct import _placement, reconstruct
from nmtfrag.data.release_text import read_release
from nmtfrag.audit.reconstruction_score import SuffixAutomaton, score_chains
from nmtfrag.fragment.phrases import extract_spans

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
    from nmtfrag.fragment.extract import extract_release

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


# --------------------------------------------------------------------------- issue 13:
# the audit never understates (counting rule), and a greedy mode brackets it from above

def _pair(src, tgt):
    return tuple(src.split()), tuple(tgt.split())


def _write_corpus(path_src, path_tgt, pairs):
    with open(path_src, "w") as fs, open(path_tgt, "w") as ft:
        for s, t in pairs:
            fs.write(" ".join(s) + "\n")
            ft.write(" ".join(t) + "\n")


def test_full_sentence_release_scores_exactly_100(tmp_path):
    """A release of the corpus's own sentences leaks every sentence: 100% on every side,
    in both modes, although the attack joins some of them and collapses others."""
    from nmtfrag.audit.reconstruction_score import audit_reconstruction

    sents = [
        _pair("a b c d", "A B C D"),          # joined with the next one (overlap C D)
        _pair("c d e f", "C D E F"),
        _pair("x y z .", "X Y ."),             # same target as the next, wider source:
        _pair("y z .", "X Y ."),               # this one is collapsed as a variant
        _pair("g h", "G H"),                   # contained in the next one
        _pair("f2 g h i", "F2 G H I"),
        _pair("m n o p", "M N O P"),           # ambiguous overlap N O: two continuations
        _pair("n o q", "N O Q"),
        _pair("n o r", "N O R"),
        _pair("a b c d", "A B C D"),           # a duplicate line
    ] + [(s, t) for s, t, _ in corpus(40, seed=11, lo=2, hi=9)]
    src, tgt = str(tmp_path / "c.de"), str(tmp_path / "c.en")
    _write_corpus(src, tgt, sents)
    _write_release(tmp_path / "full", sents, tag=False)
    rep = audit_reconstruction(str(tmp_path / "full"), src, tgt, str(tmp_path / "audit"),
                               mode="both", max_len=1000)
    for mode in ("conservative", "greedy"):
        sc = rep["modes"][mode]["scores"]
        for side in ("src", "tgt", "pair"):
            assert sc[side]["rebuilt_exactly_share"] == 1.0, (mode, side)
            assert sc[side]["rebuilt_as_release_fragment_share"] == 1.0
    assert rep["attack"]["verbatim_release"]  # scored without a graph search
    # the graph search, which joins some sentences and collapses others: the same 100%,
    # while the count of chains equal to a sentence (all the audit reported before)
    # misses some
    for mode in ("conservative", "greedy"):
        chains, _ = reconstruct(sents, mode=mode)
        old = score_chains(chains, [s for s, _ in sents], [t for _, t in sents], 1000,
                           fragments=sents)
        assert old["pair"]["rebuilt_exactly_share"] == 1.0
        assert old["pair"]["rebuilt_as_whole_chain_share"] < 1.0
        assert old["src"]["rebuilt_as_whole_chain_share"] < 1.0


def test_verbatim_release_needs_no_graph_search(tmp_path, monkeypatch):
    """A release of whole sentences is scored without the attack's graph search, and its
    one-line summary shows what report.md shows ("–" where no n-gram can be rebuilt)."""
    from nmtfrag.audit import reconstruct as attack
    from nmtfrag.audit.reconstruction_report import summary_line
    from nmtfrag.audit.reconstruction_score import audit_reconstruction

    def refuse(*a, **k):
        raise AssertionError("graph search run on a verbatim release")

    monkeypatch.setattr(attack, "reconstruct", refuse)
    sents = [(s, t) for s, t, _ in corpus(60, seed=12, lo=2, hi=9)]
    src, tgt = str(tmp_path / "c.de"), str(tmp_path / "c.en")
    _write_corpus(src, tgt, sents)
    _write_release(tmp_path / "rel", sents + sents[:5], tag=False, manifest=False)
    rep = audit_reconstruction(str(tmp_path / "rel"), src, tgt, str(tmp_path / "a"),
                               mode="both")
    longest = max(max(len(s), len(t)) for s, t in sents)
    assert rep["max_len"] == rep["max_len_observed"] == longest
    assert rep["max_len_stated"] is None and not rep["warnings"]
    for m in ("conservative", "greedy"):
        r = rep["modes"][m]
        assert r["attack"]["verbatim_release"] and r["attack"]["edges"] == 0
        assert r["attack"]["chains"] == len(set(sents))
        assert r["scores"]["pair"]["rebuilt_exactly_share"] == 1.0
        assert r["scores"]["tgt"]["ngrams_recovered_share"] is None
    md = (tmp_path / "a" / "report.md").read_text()
    line = summary_line(rep)
    assert line.count("sentence pairs rebuilt exactly 100.00%") == 2
    assert line.count(f"target {longest + 1}…{2 * longest}-grams recovered –") == 2
    assert f"| distinct {longest + 1}…{2 * longest}-grams recovered | – | – |" in md
    assert "| sentences rebuilt exactly | 100.00% | 100.00% | 100.00% |" in md
    assert "verbatim release" in md


def test_fragments_longer_than_max_len_are_flagged(tmp_path):
    """A release stated to be max-len 4 that holds 5-word fragments: a warning, and the
    n-grams are those no fragment holds (6…10-grams), not 5…8-grams."""
    from nmtfrag.audit.reconstruction_score import audit_reconstruction

    full = corpus(40, seed=13, lo=6, hi=10)
    sents = [(s, t) for s, t, _ in full]
    src, tgt = str(tmp_path / "c.de"), str(tmp_path / "c.en")
    _write_corpus(src, tgt, sents)
    pairs = release(full, max_len=4) + [(sents[0][0][:5], sents[0][1][:5])]
    _write_release(tmp_path / "rel", pairs, tag=True)  # the manifest says max-len 4
    rep = audit_reconstruction(str(tmp_path / "rel"), src, tgt, str(tmp_path / "a"))
    assert rep["max_len_stated"] == 4 and rep["max_len_observed"] == 5
    assert rep["max_len"] == 5 and rep["scores"]["tgt"]["ngram_orders"] == [6, 10]
    assert len(rep["warnings"]) == 1 and "up to 5 words" in rep["warnings"][0]
    assert "**warning:** the release holds fragments of up to 5 words" in \
        (tmp_path / "a" / "report.md").read_text()
    cli = subprocess.run([sys.executable, "-m", "nmtfrag", "audit", "reconstruct",
                          "--release", str(tmp_path / "rel"), "--src", src, "--tgt", tgt,
                          "--max-len", "4", "--out", str(tmp_path / "b")],
                         capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    assert "warning: the release holds fragments of up to 5 words" in cli.stderr
    assert "target 6…10-grams recovered" in cli.stderr


def test_verbatim_fragment_equal_to_a_short_sentence_counts():
    long_ = _pair("nimm die tabletten .", "take the tablets .")
    short = _pair("tabletten .", "tablets .")
    frags = [_pair("nimm die", "take the"), _pair("die tabletten", "the tablets"),
             _pair("tabletten .", "tablets .")]
    chains, stats = reconstruct(frags)
    assert stats["edges"] == 2  # all three are joined into the long sentence
    assert [(c.src, c.tgt) for c in chains] == [long_]
    src, tgt = [long_[0], short[0]], [long_[1], short[1]]
    without = score_chains(chains, src, tgt, max_len=2)
    assert without["pair"]["rebuilt_exactly"] == 1  # the short one is inside, not at a cut
    sc = score_chains(chains, src, tgt, max_len=2, fragments=frags)
    assert sc["pair"]["rebuilt_exactly"] == 2
    assert sc["pair"]["rebuilt_as_release_fragment"] == 1
    assert sc["pair"]["rebuilt_as_whole_chain"] == 1


def test_counting_rule_spans_delimited_by_sentence_final_tokens():
    from nmtfrag.audit.rebuilt import SENTENCE_FINAL, delimited_spans, rebuilt_flags

    u = tuple("a b . c d . e".split())
    got = delimited_spans(u, SENTENCE_FINAL, 100)
    assert got == {tuple(x.split()) for x in (
        "a b .", "a b . c d .", "a b . c d . e", "c d .", "c d . e", "e")}
    assert tuple("b .".split()) not in got  # starts after "a": not a cut the attacker sees
    assert delimited_spans(u, SENTENCE_FINAL, 3) == {tuple("a b .".split()),
                                                     tuple("c d .".split()), ("e",)}
    # a pair needs both sides in the same unit
    units = [(tuple("x .".split()), tuple("X .".split())),
             (tuple("y .".split()), tuple("Y . Z .".split()))]
    s = [tuple("x .".split()), tuple("y .".split()), tuple("y .".split())]
    t = [tuple("Y .".split()), tuple("Y .".split()), tuple("Z .".split())]
    fs, ft, fp = rebuilt_flags(units, s, t, SENTENCE_FINAL, SENTENCE_FINAL)
    assert fs == [True, True, True] and ft == [True, True, True]
    assert fp == [False, True, True]


def test_rule_never_counts_less_than_whole_chains():
    sents = corpus(200, seed=12, lo=1, hi=10)
    pairs = release(sents, max_len=3, rate=0.7)
    for mode in ("conservative", "greedy"):
        chains, _ = reconstruct(pairs, mode=mode)
        sc = score_chains(chains, [s for s, _, _ in sents], [t for _, t, _ in sents], 3,
                          fragments=pairs)
        for side in ("src", "tgt", "pair"):
            assert sc[side]["rebuilt_exactly"] >= sc[side]["rebuilt_as_whole_chain"]
            assert sc[side]["rebuilt_exactly"] >= sc[side]["rebuilt_as_release_fragment"]


def _all_spans(sentences, max_len, times=1):
    """Every diagonal pair up to max_len of (src, tgt) sentences, each `times` times."""
    out = []
    for (src, tgt), k in zip(sentences, times if isinstance(times, list) else
                             [times] * len(sentences)):
        for i in range(len(tgt)):
            for j in range(i + 1, min(i + max_len, len(tgt)) + 1):
                out += [(src[i:j], tgt[i:j])] * k
    return out


def test_greedy_joins_ambiguous_overlaps_by_frequency():
    # "b c" is followed by d in a sentence seen three times and by f in one seen once:
    # the conservative mode stops at the repeat, the greedy one follows the majority.
    s1, s2 = _pair("a b c d", "A B C D"), _pair("e b c f", "E B C F")
    pairs = _all_spans([s1, s2], 3, times=[3, 1])
    cons, cs = reconstruct(pairs)
    greedy, gs = reconstruct(pairs, mode="greedy")
    assert s1 not in {(c.src, c.tgt) for c in cons}
    assert s1 in {(c.src, c.tgt) for c in greedy}
    assert {(c.src, c.tgt) for c in cons} <= {(c.src, c.tgt) for c in greedy}
    assert gs["ambiguous_overlaps_resolved_by_frequency"] >= 2
    src, tgt = [s1[0], s2[0]], [s1[1], s2[1]]
    sc_c = score_chains(cons, src, tgt, 3, fragments=pairs)
    sc_g = score_chains(greedy, src, tgt, 3, fragments=pairs)
    for side in ("src", "tgt", "pair"):
        assert sc_g[side]["rebuilt_exactly"] >= sc_c[side]["rebuilt_exactly"]
    assert sc_g["pair"]["rebuilt_exactly"] > sc_c["pair"]["rebuilt_exactly"] == 0
    assert sc_g["tgt"]["ngram_precision"] == 1.0  # here the majority was right
    # the same answer whatever the line order
    assert reconstruct(list(reversed(pairs)), mode="greedy") == (greedy, gs)


def test_greedy_precision_drops_when_it_joins_wrongly():
    # "x y z w" (twice) and "u y z v": the release lost "y z w", so "x y z" can only go
    # on with "y z v"; "y z v" has two predecessors. Conservative: no join. Greedy: the
    # more frequent "x y z" wins and builds "x y z v", which is in no sentence.
    s1, s2 = _pair("x y z w", "X Y Z W"), _pair("u y z v", "U Y Z V")
    pairs = [p for p in _all_spans([s1, s2], 3, times=[2, 1]) if p[1] != ("Y", "Z", "W")]
    cons, _ = reconstruct(pairs)
    greedy, _ = reconstruct(pairs, mode="greedy")
    assert (("x", "y", "z", "v"), ("X", "Y", "Z", "V")) in {(c.src, c.tgt) for c in greedy}
    src, tgt = [s1[0], s2[0]], [s1[1], s2[1]]
    sc_c = score_chains(cons, src, tgt, 3, fragments=pairs)
    sc_g = score_chains(greedy, src, tgt, 3, fragments=pairs)
    assert sc_c["tgt"]["ngram_precision"] in (1.0, None)
    assert sc_g["tgt"]["ngram_precision"] < 1.0
    assert sc_g["joined_chains"]["pair_precision"] < 1.0
    assert sc_g["joined_chains"]["pair_in_corpus"] < sc_g["joined_chains"]["joined_chains"]


def test_cli_both_modes_bracket(tmp_path):
    sents = corpus(80, seed=13, lo=3)
    _write_release(tmp_path / "rel", release(sents, max_len=3, rate=0.8), tag=False)
    _write_corpus(tmp_path / "c.de", tmp_path / "c.en", [(s, t) for s, t, _ in sents])
    cmd = [sys.executable, "-m", "nmtfrag", "audit", "reconstruct", "--release",
           str(tmp_path / "rel"), "--src", str(tmp_path / "c.de"), "--tgt",
           str(tmp_path / "c.en"), "--out", str(tmp_path / "out"), "--mode", "both",
           "--max-len", "3", "--write-chains"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    rep = json.load(open(tmp_path / "out" / "report.json"))
    assert rep["mode"] == "both" and list(rep["modes"]) == ["conservative", "greedy"]
    assert "Gallé" in rep["attack_name"] and "lower bound" in rep["lower_bound"]
    assert rep["scores"] == rep["modes"]["conservative"]["scores"]
    c, g = (rep["modes"][m]["scores"] for m in ("conservative", "greedy"))
    for side in ("src", "tgt", "pair"):
        assert g[side]["rebuilt_exactly"] >= c[side]["rebuilt_exactly"]
    assert g["tgt"]["ngrams_recovered_share"] >= c["tgt"]["ngrams_recovered_share"]
    md = open(tmp_path / "out" / "report.md").read()
    assert "lower bound" in md and "conservative: pair" in md and "greedy: pair" in md
    for f in ("chains.de", "chains.en", "chains-greedy.de", "chains-greedy.en"):
        assert os.path.exists(tmp_path / "out" / f)
    bad = subprocess.run(cmd[:-4] + ["wild"], capture_output=True, text=True)
    assert bad.returncode == 2 and "invalid choice: 'wild'" in bad.stderr
    assert "Traceback" not in bad.stderr
