"""Phrase extraction: the textbook example and a brute-force consistency checker."""
import random

import pytest

from nmtfrag.fragment import phrases
from nmtfrag.fragment.phrases import (extract_phrase_pairs, extract_spans, phrase_alignment,
                             phrase_records)

# Koehn (2009), Statistical Machine Translation, Figures 5.2 and 5.5 (German source).
DE = "michael geht davon aus , dass er im haus bleibt".split()
EN = "michael assumes that he will stay in the house".split()
# German index - English index; the comma (4) is unaligned.
ALIGNMENT = {(0, 0), (1, 1), (2, 1), (3, 1), (5, 2), (6, 3), (9, 4), (9, 5),
             (7, 6), (7, 7), (8, 8)}
TEXTBOOK_PAIRS = {
    ("michael", "michael"),
    ("michael geht davon aus", "michael assumes"),
    ("michael geht davon aus ,", "michael assumes"),
    ("michael geht davon aus , dass", "michael assumes that"),
    ("michael geht davon aus , dass er", "michael assumes that he"),
    ("michael geht davon aus , dass er im haus bleibt",
     "michael assumes that he will stay in the house"),
    ("geht davon aus", "assumes"),
    ("geht davon aus ,", "assumes"),
    ("geht davon aus , dass", "assumes that"),
    ("geht davon aus , dass er", "assumes that he"),
    ("geht davon aus , dass er im haus bleibt", "assumes that he will stay in the house"),
    ("dass", "that"),
    (", dass", "that"),
    ("dass er", "that he"),
    (", dass er", "that he"),
    ("dass er im haus bleibt", "that he will stay in the house"),
    (", dass er im haus bleibt", "that he will stay in the house"),
    ("er", "he"),
    ("er im haus bleibt", "he will stay in the house"),
    ("bleibt", "will stay"),
    ("im haus bleibt", "will stay in the house"),
    ("im", "in the"),
    ("im haus", "in the house"),
    ("haus", "house"),
}


def test_textbook_example_gives_the_known_phrase_pairs():
    pairs = extract_phrase_pairs(DE, EN, ALIGNMENT, max_len=20)
    assert len(pairs) == len(TEXTBOOK_PAIRS) == 24
    assert set(pairs) == TEXTBOOK_PAIRS


def test_textbook_example_max_len_bounds_both_sides():
    pairs = extract_phrase_pairs(DE, EN, ALIGNMENT, max_len=4)
    expected = {(s, t) for s, t in TEXTBOOK_PAIRS
                if len(s.split()) <= 4 and len(t.split()) <= 4}
    assert set(pairs) == expected
    assert ("michael geht davon aus ,", "michael assumes") not in pairs  # 5 source words


def test_min_len_drops_short_sides():
    pairs = extract_phrase_pairs(DE, EN, ALIGNMENT, max_len=4, min_len=2)
    assert pairs and all(len(s.split()) >= 2 and len(t.split()) >= 2 for s, t in pairs)
    assert ("haus", "house") not in pairs


def brute_force(n_src, n_tgt, points, max_len):
    """Independent reference: every span pair with a point inside and none crossing."""
    found = []
    for s0 in range(n_src):
        for s1 in range(s0, min(n_src, s0 + max_len)):
            for t0 in range(n_tgt):
                for t1 in range(t0, min(n_tgt, t0 + max_len)):
                    inside = crossing = False
                    for i, j in points:
                        in_s, in_t = s0 <= i <= s1, t0 <= j <= t1
                        inside |= in_s and in_t
                        crossing |= in_s != in_t
                    if inside and not crossing:
                        found.append((s0, s1, t0, t1))
    return found


def random_alignment(rng):
    n_src, n_tgt = rng.randint(1, 9), rng.randint(1, 9)
    density = rng.choice([0.05, 0.15, 0.3, 0.6])
    points = {(i, j) for i in range(n_src) for j in range(n_tgt) if rng.random() < density}
    return n_src, n_tgt, points


@pytest.mark.parametrize("seed", range(6))
def test_extraction_equals_brute_force_on_random_alignments(seed):
    rng = random.Random(seed)
    for _ in range(100):
        n_src, n_tgt, points = random_alignment(rng)
        max_len = rng.choice([1, 2, 3, 4, 7])
        ours = extract_spans(n_src, n_tgt, points, max_len)
        assert len(ours) == len(set(ours)), "an occurrence was emitted twice"
        assert sorted(ours) == sorted(brute_force(n_src, n_tgt, points, max_len))


def straightforward_records(src, tgt, points, max_len, min_len, with_alignment,
                            keep_whole):
    """phrase_records spelled out on extract_spans + phrase_alignment (the reference)."""
    records, whole = [], 0
    for span in extract_spans(len(src), len(tgt), points, max_len, min_len):
        s0, s1, t0, t1 = span
        is_whole = s1 - s0 + 1 == len(src) or t1 - t0 + 1 == len(tgt)
        whole += is_whole
        if keep_whole or not is_whole:
            inner = phrase_alignment(points, span) if with_alignment else ""
            records.append(f"{' '.join(src[s0:s1 + 1])}\t{' '.join(tgt[t0:t1 + 1])}\t{inner}")
    return records, whole


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("impl", ["python", "compiled"])
def test_fast_records_equal_the_straightforward_path(seed, impl):
    """Same occurrences, same order, same strings and whole-sentence count."""
    if impl == "compiled":
        fast = pytest.importorskip("nmtfrag.fragment._phrases_fast").phrase_records
    else:
        fast = phrases.phrase_records_python
    rng = random.Random(100 + seed)
    for _ in range(300):
        n_src, n_tgt, points = random_alignment(rng)
        max_len = rng.choice([1, 2, 3, 4, 7, 20])
        min_len = rng.randint(1, max_len)
        with_alignment, keep_whole = rng.random() < 0.5, rng.random() < 0.5
        src = [f"s{k}" for k in range(n_src)]
        tgt = [f"t{k}" for k in range(n_tgt)]
        shuffled = sorted(points, key=lambda _: rng.random())  # any point order
        assert fast(src, tgt, shuffled, max_len, min_len, with_alignment, keep_whole) == \
            straightforward_records(src, tgt, points, max_len, min_len, with_alignment,
                                    keep_whole)


def test_point_outside_sentence_is_refused():
    with pytest.raises(ValueError):
        extract_spans(2, 2, {(2, 0)}, 4)
    for fast in (phrase_records, phrases.phrase_records_python):
        with pytest.raises(ValueError):
            fast(["a", "b"], ["x", "y"], [(0, 2)], 4)
