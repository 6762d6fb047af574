"""Phrase pairs consistent with a word alignment, with the semantics of Moses `extract`.

For every target span of at most `max_len` words, take the source words aligned to it;
their span must be at most `max_len` words and hold no word aligned outside the target
span; then widen the source span over unaligned boundary words (still at most `max_len`),
emitting every variant. Target spans with unaligned edge words arise because every
target span is enumerated. Spans containing no alignment point are never phrases.
(Koehn 2010, §5.2.3; Moses `phrase-extract/extract-main.cpp`.) Unlike current Moses,
nothing here parses tokens as XML, so sentences containing `<` are kept.

A span is `(start, end)` with `end` inclusive, 0-based, as in Moses.
"""
from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

Point = tuple[int, int]  # (source index, target index) of an alignment link
Span = tuple[int, int, int, int]  # (src_start, src_end, tgt_start, tgt_end), ends inclusive


def extract_spans(n_src: int, n_tgt: int, points: Iterable[Point], max_len: int,
                  min_len: int = 1) -> list[Span]:
    """All consistent (src_start, src_end, tgt_start, tgt_end) of one sentence pair.

    Each occurrence appears once, in Moses order (target start, target end, source
    start descending, source end ascending). `min_len` drops pairs with a side shorter
    than that many words.
    """
    src_for_tgt: list[list[int]] = [[] for _ in range(n_tgt)]
    src_links = [0] * n_src
    src_min_tgt = [n_tgt] * n_src
    src_max_tgt = [-1] * n_src
    for i, j in points:
        if not (0 <= i < n_src and 0 <= j < n_tgt):
            raise ValueError(f"alignment point {i}-{j} outside a {n_src}x{n_tgt} sentence pair")
        src_for_tgt[j].append(i)
        src_links[i] += 1
        if j < src_min_tgt[i]:
            src_min_tgt[i] = j
        if j > src_max_tgt[i]:
            src_max_tgt[i] = j

    spans = []
    for t0 in range(n_tgt):
        lo, hi = n_src, -1
        for t1 in range(t0, min(t0 + max_len, n_tgt)):
            for i in src_for_tgt[t1]:
                if i < lo:
                    lo = i
                if i > hi:
                    hi = i
            if hi < 0:
                continue  # no alignment point yet
            if hi - lo >= max_len:
                break  # the source span only grows with t1
            consistent, hopeless = True, False
            for i in range(lo, hi + 1):
                if src_links[i] and (src_min_tgt[i] < t0 or src_max_tgt[i] > t1):
                    consistent = False
                    hopeless = src_min_tgt[i] < t0  # no longer t1 can fix that
                    break
            if hopeless:
                break
            if not consistent:
                continue
            if t1 - t0 + 1 < min_len:
                continue
            s0 = lo
            while s0 >= 0 and (s0 == lo or not src_links[s0]) and s0 > hi - max_len:
                s1 = hi
                while s1 < n_src and (s1 == hi or not src_links[s1]) and s1 < s0 + max_len:
                    if s1 - s0 + 1 >= min_len:
                        spans.append((s0, s1, t0, t1))
                    s1 += 1
                s0 -= 1
    return spans


def phrase_alignment(points: Iterable[Point], span: Span) -> str:
    """Alignment points inside a phrase pair, relative to it, Moses order (by target)."""
    s0, s1, t0, t1 = span
    inside = sorted((j, i) for i, j in points if s0 <= i <= s1 and t0 <= j <= t1)
    return " ".join(f"{i - s0}-{j - t0}" for j, i in inside)


def phrase_records_python(src_tokens: Sequence[str], tgt_tokens: Sequence[str],
                          points: Iterable[Point], max_len: int, min_len: int = 1,
                          with_alignment: bool = False, keep_whole: bool = True
                          ) -> tuple[list[str], int]:
    """Phrase pairs of one sentence pair as `src\ttgt\talignment` strings, and how many
    were whole-sentence (a side spanning its whole sentence), dropped unless `keep_whole`.

    The production path: the occurrences and order of `extract_spans` (alignment as
    `phrase_alignment`, "" unless `with_alignment`), built for speed, since extraction
    runs per occurrence. `phrase_records` is the compiled copy of this function
    (_phrases_fast.pyx) where it was built, else this one. Consistency is checked incrementally as the target span grows;
    each target string, alignment string and source prefix is built once per span and
    shared by its widened variants. The inner alignment of a consistent pair is the set of
    points of its target span (none of them can lie outside its source span).
    """
    n_src, n_tgt = len(src_tokens), len(tgt_tokens)
    by_tgt: list[list[int]] = [[] for _ in range(n_tgt)]
    first_tgt = [n_tgt] * n_src  # per source word, its lowest and highest aligned
    last_tgt = [-1] * n_src      # target word; unaligned words never break consistency
    for i, j in points:
        if not (0 <= i < n_src and 0 <= j < n_tgt):
            raise ValueError(f"alignment point {i}-{j} outside a {n_src}x{n_tgt} sentence pair")
        by_tgt[j].append(i)
        if j < first_tgt[i]:
            first_tgt[i] = j
        if j > last_tgt[i]:
            last_tgt[i] = j
    if with_alignment:
        for column in by_tgt:
            column.sort()
    records, whole = [], 0
    for t0 in range(n_tgt):
        lo, hi = n_src, -1
        low, high = n_tgt, -1  # extremes of first_tgt / last_tgt over source lo..hi
        for t1 in range(t0, min(t0 + max_len, n_tgt)):
            column = by_tgt[t1]
            if column:
                new_lo, new_hi = min(lo, min(column)), max(hi, max(column))
                if hi < 0:
                    grown: Iterable[int] = range(new_lo, new_hi + 1)
                else:
                    grown = [*range(new_lo, lo), *range(hi + 1, new_hi + 1)]
                for i in grown:
                    if first_tgt[i] < low:
                        low = first_tgt[i]
                    if last_tgt[i] > high:
                        high = last_tgt[i]
                lo, hi = new_lo, new_hi
            elif hi < 0:
                continue  # no alignment point yet
            if hi - lo >= max_len or low < t0:
                break  # neither a longer target span can fix
            if high > t1 or t1 - t0 + 1 < min_len:
                continue
            whole_tgt = t1 - t0 + 1 == n_tgt
            tgt_text = "\t" + " ".join(tgt_tokens[t0:t1 + 1]) + "\t"
            inner = ([(i, j - t0) for j in range(t0, t1 + 1) for i in by_tgt[j]]
                     if with_alignment else ())
            s0 = lo
            while s0 >= 0 and (s0 == lo or last_tgt[s0] < 0) and s0 > hi - max_len:
                suffix = tgt_text + " ".join([f"{i - s0}-{j}" for i, j in inner])
                src_text = " ".join(src_tokens[s0:hi + 1])
                s1 = hi
                while True:
                    if s1 - s0 + 1 >= min_len:
                        if whole_tgt or s1 - s0 + 1 == n_src:
                            whole += 1
                            if keep_whole:
                                records.append(src_text + suffix)
                        else:
                            records.append(src_text + suffix)
                    s1 += 1
                    if s1 >= n_src or last_tgt[s1] >= 0 or s1 >= s0 + max_len:
                        break
                    src_text += " " + src_tokens[s1]
                s0 -= 1
    return records, whole


try:  # built by `pip install -e .` / `python3 setup.py build_ext --inplace`
    from ._phrases_fast import phrase_records
except ImportError:
    phrase_records = phrase_records_python


def extract_phrase_pairs(src_tokens: Sequence[str], tgt_tokens: Sequence[str],
                         points: Collection[Point], max_len: int, min_len: int = 1,
                         with_alignment: bool = False) -> list[tuple[str, ...]]:
    """Phrase pairs of one sentence pair as (src_text, tgt_text[, alignment]) tuples."""
    pairs: list[tuple[str, ...]] = []
    for span in extract_spans(len(src_tokens), len(tgt_tokens), points, max_len, min_len):
        s0, s1, t0, t1 = span
        pair: tuple[str, ...] = (" ".join(src_tokens[s0:s1 + 1]), " ".join(tgt_tokens[t0:t1 + 1]))
        if with_alignment:
            pair += (phrase_alignment(points, span),)
        pairs.append(pair)
    return pairs
