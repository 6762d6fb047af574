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


def extract_spans(n_src, n_tgt, points, max_len, min_len=1):
    """All consistent (src_start, src_end, tgt_start, tgt_end) of one sentence pair.

    Each occurrence appears once, in Moses order (target start, target end, source
    start descending, source end ascending). `min_len` drops pairs with a side shorter
    than that many words.
    """
    src_for_tgt = [[] for _ in range(n_tgt)]
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


def phrase_alignment(points, span):
    """Alignment points inside a phrase pair, relative to it, Moses order (by target)."""
    s0, s1, t0, t1 = span
    inside = sorted((j, i) for i, j in points if s0 <= i <= s1 and t0 <= j <= t1)
    return " ".join(f"{i - s0}-{j - t0}" for j, i in inside)


def extract_phrase_pairs(src_tokens, tgt_tokens, points, max_len, min_len=1,
                         with_alignment=False):
    """Phrase pairs of one sentence pair as (src_text, tgt_text[, alignment]) tuples."""
    pairs = []
    for span in extract_spans(len(src_tokens), len(tgt_tokens), points, max_len, min_len):
        s0, s1, t0, t1 = span
        pair = (" ".join(src_tokens[s0:s1 + 1]), " ".join(tgt_tokens[t0:t1 + 1]))
        if with_alignment:
            pair += (phrase_alignment(points, span),)
        pairs.append(pair)
    return pairs
