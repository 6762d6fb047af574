"""Reconstruction attack on a phrase-pair release: rebuild the longest text it can justify.

In the spirit of Gallé & Tealdi (2015), "Reconstructing textual documents from n-grams"
(KDD), which chains a document's n-grams on a de Bruijn-style graph and keeps the paths
that are not ambiguous, here extended to bilingual phrase pairs: a pair pins both sides,
so two fragments are chained only if their targets overlap AND their sources overlap
consistently. Why: a data owner must know how much of the confidential corpus a
receiver could rebuild from `phrases.*` alone before releasing them.

The adversary sees only the release (shuffled, subsampled, tagged or not, duplicates
kept). The algorithm (deterministic and independent of the release's line order):

1. read both sides, strip `<P> … </P>` tags, count duplicate pairs (the counts are the
   graph's multiplicities; a chain reports the smallest count along it as its support);
2. collapse widening variants: among pairs with the same target, a pair whose source is
   a substring of another's source is dropped (the wider one carries the same evidence);
3. overlap graph with best overlaps: the right-extension candidates of fragment A are
   the fragments B whose target starts with the longest proper suffix of A's target
   (length o ≥ `min_overlap`, and B's target longer than o) for which any such B exists
   whose source also overlaps A's source at exactly one placement (≥ 1 shared token).
   The candidate set is accepted only if its members agree with each other (each
   target is a prefix of the longest one, and the sources, once placed against A's,
   agree position by position); its representative (longest target, then longest
   source) is A's successor. Left extension is symmetric (predecessor). More than
   1,000 candidates sharing a source token at one overlap count as ambiguous too;
4. an edge A→B is kept only if B is A's successor AND A is B's predecessor (a mutual,
   unambiguous best overlap), so the graph falls into simple paths; a cycle (a text
   that repeats itself) is cut before its smallest fragment;
5. each path is merged into a chain: targets by their overlaps, sources by the
   placements; a source conflict along a path ends the chain there.

Fragments that join nothing are chains of one fragment. The output is a list of
`Chain(src, tgt, fragments, support)` sorted by (tgt, src).

That is the conservative mode: it joins only what the release justifies, so its figures
are a floor. `mode="greedy"` guesses where the conservative mode stops, so that an audit
can bracket what leaks: in step 3 disagreeing candidates are resolved by frequency (the
continuation word carried by the most release lines; see `nmtfrag.audit.greedy`) instead of
leaving the fragment unjoined, and in step 4 a best overlap seen from one side only is
taken too when neither end is taken yet (longest overlap first; no cycle). Its output is
the conservative chains plus the greedy ones, so it never rebuilds less; its false
joins show in the audit's precision. Both modes keep `MAX_SCAN` and the source placement
rules (a join needs a single consistent source placement).

How (for releases of millions of pairs): words become integer ids, ranked in sorted
vocabularies so that nothing depends on line order; pairs are counted and sorted as
padded numpy arrays; step 3 runs for all fragments at once, one overlap length at a
time (longest first): target ends become integer o-gram ids, the fragments still
unresolved are joined with their candidates on those ids, and the shared-token test,
the placements and the agreement of the candidates are computed on whole arrays in
batches of `CHUNK` pairs. `_placement` states the placement rule for one pair.
"""
from __future__ import annotations

import gc
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain, islice
from operator import itemgetter

import numpy as np

from ..errors import InputError
from ..data.release_text import TokenPair
from .greedy import most_frequent, one_sided_edges


@dataclass(frozen=True)
class Chain:
    src: tuple  # source tokens
    tgt: tuple  # target tokens
    fragments: int  # distinct release fragments merged into it
    support: int  # smallest multiplicity (duplicate count) of those fragments


# --------------------------------------------------------------------------- attack

def _placement(a, b):
    """Offset of b's start relative to a's start at which they overlap (≥ 1 token) and
    agree; None if there is none or more than one (a repeated word could then put b at
    the wrong place, and nothing in the two fragments says which is right), or if a
    word outside the overlap occurs in both (the same word at two places of one merged
    source: more likely two different sentences than one)."""
    la, lb = len(a), len(b)
    found = None
    for d in range(-(lb - 1), la):
        lo, hi = max(0, d), min(la, d + lb)
        if a[lo:hi] == b[lo - d:hi - d]:
            if found is not None:
                return None
            found = d
    if found is not None:
        lo, hi = max(0, found), min(la, found + lb)
        rest_a = set(a[:lo]) | set(a[hi:])
        if rest_a and not rest_a.isdisjoint(b[:lo - found] + b[hi - found:]):
            return None
    return found


def _collapse_variants(frags, ids=None):
    """Indices of fragments to keep: drop a source contained in another source with the
    same target (Moses emits every widening over unaligned boundary words). `ids`: look
    only at these (a fragment whose target no other fragment has is kept anyway)."""
    by_tgt = {}
    for i in range(len(frags)) if ids is None else ids:
        by_tgt.setdefault(frags[i][1], []).append(i)
    keep = []
    for ids in by_tgt.values():
        if len(ids) == 1:
            keep.append(ids[0])
            continue
        ids.sort(key=lambda i: (-len(frags[i][0]), i))
        kept = []
        for i in ids:
            s = frags[i][0]
            if not any(_contains(frags[k][0], s) for k in kept if len(frags[k][0]) > len(s)):
                kept.append(i)
        keep.extend(kept)
    keep.sort()
    return keep


def _shared_targets(T):
    """Ids of the fragments whose target (a row of T) some other fragment has too: the
    only ones `_collapse_variants` needs to look at."""
    if not len(T):
        return []
    order = np.lexsort([T[:, k] for k in range(T.shape[1] - 1, -1, -1)])
    Ts = T[order]
    same = np.zeros(len(T) + 1, dtype=bool)
    same[1:-1] = (Ts[1:] == Ts[:-1]).all(1)
    dup = same[:-1] | same[1:]  # equal to the row before or to the row after
    return np.sort(order[dup]).tolist()


def _contains(big, small):
    n = len(small)
    return any(big[i:i + n] == small for i in range(len(big) - n + 1))


MAX_SCAN = 1000  # more candidates than this sharing a source token: an unresolvable repeat
CHUNK = 1 << 20  # candidate pairs examined per numpy batch (bounds the memory)


ENCODE_BATCH = 1 << 18  # pairs encoded at a time: `pairs` may be a stream


def _encode(pairs):
    """Both sides as padded int32 arrays (pad -1) of word ids ranked in sorted word order
    (so nothing depends on line order), read once in batches so that `pairs` can be a
    generator. Returns (src_words, tgt_words, S, T, number of pairs)."""
    vocabs = ({}, {})
    parts = ([], [])  # per side: (flat codes, lengths) per batch
    it = iter(pairs)
    n = 0
    while True:
        batch = list(islice(it, ENCODE_BATCH))
        if not batch:
            break
        n += len(batch)
        for side in (0, 1):
            seqs = [p[side] for p in batch]
            flat = list(chain.from_iterable(seqs))
            vocab = vocabs[side]
            for w in set(flat).difference(vocab):
                vocab[w] = len(vocab)
            parts[side].append((np.fromiter(map(vocab.__getitem__, flat), np.int32, len(flat)),
                                np.fromiter(map(len, seqs), np.int32, len(seqs))))
    out = []
    for side in (0, 1):
        words = sorted(vocabs[side])
        rank = np.empty(len(words), dtype=np.int32)
        rank[np.fromiter(map(vocabs[side].__getitem__, words), np.int64, len(words))] = \
            np.arange(len(words), dtype=np.int32)
        codes = np.concatenate([c for c, _ in parts[side]] or [np.zeros(0, np.int32)])
        lens = np.concatenate([l for _, l in parts[side]] or [np.zeros(0, np.int32)])
        parts[side].clear()
        out.append((words, _pad(rank[codes], lens)))
    return out[0][0], out[1][0], out[0][1], out[1][1], n


def _pad(codes, lens):
    """Concatenated sequences (codes, lengths) as one (n, longest) array padded with -1."""
    width = max(int(lens.max()) if len(lens) else 0, 1)
    arr = np.full((len(lens), width), -1, dtype=np.int32)
    starts = np.cumsum(lens) - lens
    rows = np.repeat(np.arange(len(lens)), lens)
    arr[rows, np.arange(len(codes)) - starts[rows]] = codes
    return arr


def _distinct(S, T):
    """Distinct (src, tgt) rows sorted as tuples would sort (pad -1 sorts first, like a
    shorter tuple), with their multiplicities (duplicate counts)."""
    if not len(S):
        return S, T, np.zeros(0, dtype=np.int64)
    cols = [T[:, k] for k in range(T.shape[1] - 1, -1, -1)] + \
           [S[:, k] for k in range(S.shape[1] - 1, -1, -1)]
    order = np.lexsort(cols)
    S, T = S[order], T[order]
    new = np.ones(len(S), dtype=bool)
    new[1:] = (S[1:] != S[:-1]).any(1) | (T[1:] != T[:-1]).any(1)
    first = np.nonzero(new)[0]
    mult = np.diff(np.append(first, len(S)))
    return S[first], T[first], mult


def _as_tuples(S, T):
    """Rows of the padded arrays as (src, tgt) tuples of ids (for the per-fragment steps)."""
    def rows(A):
        lens = (A >= 0).sum(1)
        out = np.empty(len(A), dtype=object)
        for k in np.unique(lens).tolist():  # one length at a time: no per-row slicing
            ids = np.nonzero(lens == k)[0]
            out[ids] = np.fromiter(map(tuple, A[ids, :k].tolist()), dtype=object,
                                   count=len(ids))
        return out.tolist()
    return list(zip(rows(S), rows(T)))


def _gram_ids(rows_tok):
    """One integer per row of a (k, o) token array, equal iff the rows are equal (a dense
    rank built column by column, so it never overflows whatever the vocabulary size)."""
    ids = rows_tok[:, 0].astype(np.int64)
    for k in range(1, rows_tok.shape[1]):
        ids = np.unique(ids * (int(rows_tok[:, k].max()) + 1) + rows_tok[:, k],
                        return_inverse=True)[1].astype(np.int64)
    return ids


def _ends(T, lt, ids, o, suffix):
    """The o-word prefix (or suffix) of the targets `ids`, as a (len(ids), o) array."""
    if not suffix:
        return T[ids, :o]
    return T[ids[:, None], lt[ids, None] - o + np.arange(o)]


def _token_matches(sa, sb):
    """eq[p][q]: source word p of a equals word q of b, for all pairs at once (sa, sb:
    (width, pairs) arrays; the pads, -1 in sa and -2 in sb, never match). Computed once,
    used by both the shared-token test and the placements."""
    return [[sa[p] == sb[q] for q in range(len(sb))] for p in range(len(sa))]


def _placements(eq, la, lb):
    """`_placement` on many pairs at once, from their token matches: (ok, offset) arrays.
    Same rules: exactly one offset at which the sources overlap and agree, and no word
    outside the overlap in both."""
    wa, wb = len(eq), len(eq[0])
    a_pad = [p >= la for p in range(wa)]
    b_pad = [q >= lb for q in range(wb)]
    count = np.zeros(len(la), dtype=np.int8)
    found = np.zeros(len(la), dtype=np.int32)
    for d in range(-(wb - 1), wa):
        m = np.maximum(0, d) < np.minimum(la, d + lb)  # they overlap at offset d
        for p in range(max(0, d), min(wa, wb + d)):
            m &= eq[p][p - d] | a_pad[p] | b_pad[p - d]
        count += m
        found[m] = d
    ok = count == 1
    lo = np.maximum(0, found)
    hi = np.minimum(la, found + lb)
    b_out = [(q < lo - found) | (q >= hi - found) for q in range(wb)]
    for p in range(wa):
        a_out = (p < lo) | (p >= hi)
        for q in range(wb):
            ok &= ~(a_out & b_out[q] & eq[p][q])
    return ok, found


def _heavy_capped(S, b_ids, b_key, a_ids, a_key):
    """For fragments a whose candidate list is long: True where some source token of a
    is carried by more than MAX_SCAN candidates (a lower bound on the candidates sharing
    a source token, so the overlap is certainly given up), without pairing them."""
    vs = int(S.max()) + 2
    # distinct (candidate, token), then how many candidates per (key, token)
    rows = np.repeat(np.arange(len(b_ids)), S.shape[1])
    toks = S[b_ids].ravel()
    valid = toks >= 0
    rows, toks = rows[valid], toks[valid]
    pair = np.unique(rows.astype(np.int64) * vs + toks)
    rows, toks = pair // vs, pair % vs
    kt, cnt = np.unique(b_key[rows] * vs + toks, return_counts=True)
    best = np.zeros(len(a_ids), dtype=np.int64)
    for p in range(S.shape[1]):
        q = a_key * vs + S[a_ids, p]
        j = np.minimum(np.searchsorted(kt, q), len(kt) - 1)
        hit = (kt[j] == q) & (S[a_ids, p] >= 0)
        best = np.maximum(best, np.where(hit, cnt[j], 0))
    return best > MAX_SCAN


def _best_neighbours(frags, arrays, lmax, min_overlap, right, progress=None, mult=None,
                     guessed=None):
    """For each fragment: (neighbour id, source offset of the neighbour, overlap) or None.

    The candidates at the longest overlap that has any (source-compatible) candidate
    must agree with each other (targets nested from the overlap on, sources agreeing
    position by position once placed); the first disagreement makes the fragment's
    neighbour undefined, whatever the order the candidates are seen in. More than
    MAX_SCAN candidates sharing a source token at one overlap is a repeat too common to
    resolve: undefined too (this keeps the attack near-linear in the release size).

    All fragments are searched together, one overlap length at a time (longest first):
    the candidate pairs of the fragments still unresolved are formed by joining target
    ends on integer o-gram ids, and filtered with numpy in batches of CHUNK pairs.

    Greedy mode (`mult` given: the fragments' multiplicities): a disagreement is resolved
    by frequency instead (`greedy.most_frequent`), and the fragment's id is added to `guessed`.
    """
    S, ls, T, lt = arrays
    ST = np.ascontiguousarray(S.T)  # one row per source position: contiguous columns
    STb = np.where(ST < 0, -2, ST)  # candidate side padded differently: pads never match
    n = len(frags)
    out = [None] * n
    active = np.ones(n, dtype=bool)
    greedy = mult is not None
    for o in range(lmax - 1, min_overlap - 1, -1):
        a_ids = np.nonzero(active & (lt > o))[0]
        b_ids = np.nonzero(lt > o)[0]
        if not len(a_ids) or not len(b_ids):
            continue
        ids = _gram_ids(np.concatenate([_ends(T, lt, a_ids, o, right),
                                        _ends(T, lt, b_ids, o, not right)]))
        a_key, b_key = ids[:len(a_ids)], ids[len(a_ids):]
        order = np.argsort(b_key, kind="stable")
        b_sorted, b_key_sorted = b_ids[order], b_key[order]
        start = np.searchsorted(b_key_sorted, a_key, "left")
        count = np.searchsorted(b_key_sorted, a_key, "right") - start
        keep = count > 0
        a_ids, a_key, start, count = a_ids[keep], a_key[keep], start[keep], count[keep]
        big = count > MAX_SCAN
        if big.any():
            heavy_keys = np.unique(a_key[big])
            in_heavy = np.isin(b_key, heavy_keys)
            capped = _heavy_capped(S, b_ids[in_heavy], b_key[in_heavy],
                                   a_ids[big], a_key[big])
            active[a_ids[big][capped]] = False
            keep = np.ones(len(a_ids), dtype=bool)
            keep[np.nonzero(big)[0][capped]] = False
            a_ids, start, count = a_ids[keep], start[keep], count[keep]
        ends = np.cumsum(count)
        lo = 0
        while lo < len(a_ids):
            hi = int(np.searchsorted(ends, (ends[lo - 1] if lo else 0) + CHUNK, "right"))
            hi = max(hi, lo + 1)
            _batch(frags, S, ls, T, lt, ST, STb, b_sorted, a_ids[lo:hi], start[lo:hi], count[lo:hi],
                   o, right, out, active, greedy, mult, guessed)
            lo = hi
    if progress is not None:
        progress.update(n)
    return out


def _batch(frags, S, ls, T, lt, ST, STb, b_sorted, a_ids, start, count, o, right, out, active,
           greedy, mult, guessed):
    """Examine the candidate pairs of the fragments `a_ids` at overlap o; resolve (or give
    up) those that have source-compatible candidates, leave the others active."""
    total = int(count.sum())
    rep = np.repeat(np.arange(len(a_ids)), count)
    pos = np.arange(total) - np.repeat(np.cumsum(count) - count, count) + np.repeat(start, count)
    a = a_ids[rep]
    b = b_sorted[pos]
    eq = _token_matches(np.repeat(ST[:, a_ids], count, axis=1), STb[:, b])
    share = np.logical_or.reduce([m for row in eq for m in row])
    n_share = np.bincount(rep[share], minlength=len(a_ids))
    capped = n_share > MAX_SCAN
    active[a_ids[capped]] = False
    ok, d = _placements(eq, ls[a], ls[b])
    ok &= share & ~capped[rep] & (a != b)
    a, b, d = a[ok], b[ok], d[ok]
    if not len(a):
        return
    firsts = np.flatnonzero(np.diff(a, prepend=-1))  # a is sorted: runs of one fragment
    counts = np.diff(firsts, append=len(a))
    resolved = a[firsts]
    active[resolved] = False
    multi = counts > 1
    sel = np.repeat(multi, counts)
    rows = np.nonzero(sel)[0]
    good, best = _agree_all(S, ls, T, lt, b[rows], d[rows], counts[multi], right)
    # one compatible candidate agrees with itself; several: the best if they all agree
    win = np.concatenate([firsts[~multi], rows[best[good]]])
    for ai, bi, di in zip(a[win].tolist(), b[win].tolist(), d[win].tolist()):
        out[ai] = (bi, di, o)
    if greedy:
        for i in np.nonzero(multi)[0][~good].tolist():
            j, k = int(firsts[i]), int(firsts[i] + counts[i])
            ai = int(a[j])
            out[ai] = most_frequent(frags, mult, list(zip(b[j:k].tolist(), d[j:k].tolist())),
                                    o, right)
            guessed.add(ai)


def _agree_all(S, ls, T, lt, b, d, sizes, right):
    """`_agree` for many candidate groups at once (rows grouped, `sizes` rows each):
    (agrees, row of the best candidate within the rows) per group. Same rules as the
    one-by-one check: agreement is pairwise and the best a maximum, so order is moot."""
    if not len(sizes):
        return np.zeros(0, dtype=bool), np.zeros(0, dtype=np.int64)
    starts = np.cumsum(sizes) - sizes
    g = np.repeat(np.arange(len(sizes)), sizes)
    tb = T[b] if right else _reversed_rows(T[b], lt[b])
    lb = lt[b]
    # targets: each is a prefix (suffix) of the group's longest
    longest = np.maximum.reduceat(lb, starts)
    ref_row = np.zeros(len(sizes), dtype=np.int64)
    is_long = lb == longest[g]
    ref_row[g[is_long]] = np.nonzero(is_long)[0]  # any longest one will do
    ref = tb[ref_row[g]]
    t_ok = ((tb == ref) | (np.arange(tb.shape[1]) >= lb[:, None])).all(1)
    ok = np.logical_and.reduceat(t_ok, starts)
    # sources (groups whose targets agree): once placed, the same token wherever two of
    # them cover a position
    lsb = ls[b]
    sub = np.nonzero(ok)[0]
    rows = np.nonzero(ok[g])[0]
    if len(rows):
        w = S.shape[1]
        sb, sd, sl = S[b[rows]], d[rows], lsb[rows]
        placed_hi = np.full((len(rows), 3 * w), -1, dtype=np.int32)
        placed_lo = np.full((len(rows), 3 * w), np.iinfo(np.int32).max, dtype=np.int32)
        for k in range(w):
            r = np.nonzero(k < sl)[0]
            col = sd[r] + k + w
            placed_hi[r, col] = sb[r, k]
            placed_lo[r, col] = sb[r, k]
        sub_starts = np.cumsum(sizes[sub]) - sizes[sub]
        hi = np.maximum.reduceat(placed_hi, sub_starts, axis=0)
        lo = np.minimum.reduceat(placed_lo, sub_starts, axis=0)
        ok[sub] = ((hi == -1) | (hi == lo)).all(1)
    # best: longest target, then longest source, then smallest id
    key = (lb.astype(np.int64) * 256 + lsb) * (1 << 40) - b
    best_row = np.zeros(len(sizes), dtype=np.int64)
    top = key == np.maximum.reduceat(key, starts)[g]
    best_row[g[top]] = np.nonzero(top)[0]
    return ok, best_row


def _reversed_rows(A, lens):
    """Each row's first `len` entries reversed (pad stays at the end): suffixes compared
    as prefixes."""
    k = np.arange(A.shape[1])
    idx = np.where(k < lens[:, None], lens[:, None] - 1 - k, k)
    return np.take_along_axis(A, idx, 1)


MODES = ("conservative", "greedy")


def reconstruct(pairs: Iterable[TokenPair], min_overlap: int | None = None,
                show_progress: bool = False,
                mode: str = "conservative") -> tuple[list[Chain], dict]:
    """Chain the release's phrase pairs into the longest fragments they justify.

    `pairs`: iterable of (src_tokens, tgt_tokens) (tags already stripped).
    `min_overlap`: fewest target words two fragments must share to be chained; default
    2 (1 when no fragment is longer than 2 words): a single shared word pair, such as a
    sentence-final word that starts another sentence, is too weak to justify a join.
    `mode`: "conservative" (only mutual, unambiguous best overlaps) or "greedy" (see
    `nmtfrag.audit.greedy`; its output also holds the conservative chains, so it never rebuilds
    less). Returns (chains, stats).
    """
    # The cyclic garbage collector is paused: the attack makes millions of small tuples
    # and no cycles, and each collection would rescan them all.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _reconstruct(pairs, min_overlap, show_progress, mode)
    finally:
        if enabled:
            gc.enable()


def _reconstruct(pairs, min_overlap, show_progress, mode):
    """The attack itself (see `reconstruct`)."""
    from ..fileio import progress as make_progress

    if mode not in MODES:
        raise InputError(f"--mode must be one of {', '.join(MODES)}, got {mode!r}")
    if min_overlap is not None and min_overlap < 1:
        raise InputError("--min-overlap must be at least 1")
    src_words, tgt_words, S_all, T_all, n_pairs = _encode(pairs)
    S_all, T_all, mult_all = _distinct(S_all, T_all)
    frags_all = _as_tuples(S_all, T_all)
    shared = _shared_targets(T_all)
    keep_mask = np.ones(len(frags_all), dtype=bool)
    keep_mask[shared] = False
    keep_mask[_collapse_variants(frags_all, shared)] = True
    keep = np.flatnonzero(keep_mask)
    frags = [frags_all[i] for i in keep.tolist()]
    mult = mult_all[keep].tolist()
    del frags_all
    lmax = max((len(t) for _, t in frags), default=0)
    if min_overlap is None:
        min_overlap = 2 if lmax >= 3 else 1

    greedy = mode == "greedy"
    g_succ, g_pred = set(), set()
    bar = make_progress(total=2 * len(frags), desc="overlaps") if show_progress else None
    S, T = S_all[keep], T_all[keep]
    del S_all, T_all
    arrays = (S, (S >= 0).sum(1).astype(np.int32), T, (T >= 0).sum(1).astype(np.int32))
    succ = _best_neighbours(frags, arrays, lmax, min_overlap, True, bar,
                            mult if greedy else None, g_succ)
    pred = _best_neighbours(frags, arrays, lmax, min_overlap, False, bar,
                            mult if greedy else None, g_pred)
    if bar is not None:
        bar.close()
    nxt = {}
    for a, s in enumerate(succ):
        if s is not None and pred[s[0]] is not None and pred[s[0]][0] == a:
            nxt[a] = s
    chains_enc = _walk_all(frags, mult, nxt)
    extra = {}
    if greedy:
        sure = {a: s for a, s in nxt.items() if a not in g_succ and s[0] not in g_pred}
        extra = one_sided_edges(succ, pred, mult, nxt)
        nxt.update(extra)
        chains_enc = _walk_all(frags, mult, sure) + _walk_all(frags, mult, nxt)

    result = _to_words(chains_enc, src_words, tgt_words)
    stats = {
        "mode": mode,
        "pairs": n_pairs,
        "distinct_pairs": len(mult_all),
        "widening_variants_collapsed": len(mult_all) - len(frags),
        "fragments": len(frags),
        "edges": len(nxt),
        "chains": len(result),
        "chains_longer_than_any_fragment": sum(1 for c in result if len(c.tgt) > lmax),
        "longest_chain_tgt": max((len(c.tgt) for c in result), default=0),
        "longest_chain_src": max((len(c.src) for c in result), default=0),
        "min_overlap": min_overlap,
    }
    if greedy:
        stats.update({"edges_unambiguous": len(sure),
                      "ambiguous_overlaps_resolved_by_frequency": len(g_succ) + len(g_pred),
                      "non_mutual_edges": len(extra)})
    return result, stats


def _to_words(chains_enc, src_words, tgt_words):
    """Chains of ids as `Chain`s of words, one per distinct (src, tgt) (the most fragments,
    then the highest support, wins), sorted by (tgt, src). Word ids are ranks in sorted
    word order, so sorting and comparing the id tuples gives the order of the words."""
    chains_enc.sort(key=itemgetter(1, 0))
    result, prev = [], None
    for s, t, n, sup in chains_enc:
        if (t, s) == prev:  # rare: keep the one with most fragments, then support
            if (n, sup) > (result[-1].fragments, result[-1].support):
                result[-1] = Chain(result[-1].src, result[-1].tgt, n, sup)
            continue
        prev = (t, s)
        result.append(Chain(tuple(map(src_words.__getitem__, s)),
                            tuple(map(tgt_words.__getitem__, t)), n, sup))
    return result


def _walk_all(frags, mult, nxt):
    """Merge the paths of the join graph `nxt` (a → (b, offset, overlap)) into chains:
    targets by their overlaps, sources by the placements; a source conflict along a path
    ends the chain there; a cycle is cut before its smallest fragment. Returns
    (src, tgt, fragments, support) tuples of ids."""
    has_prev = {b for b, _, _ in nxt.values()}
    chains_enc = []
    visited = [False] * len(frags)

    def walk(start):
        # the merged source is a list covering positions base … base + len(src) - 1
        # (relative to the first fragment); each fragment overlaps the one before it
        cur, off = start, 0
        src, base = list(frags[cur][0]), 0
        tgt = list(frags[cur][1])
        members = [cur]
        visited[cur] = True
        while cur in nxt:
            b, d, o = nxt[cur]
            if visited[b]:
                break  # closes a cycle
            off_b = off + d
            sb, tb = frags[b]
            lo, hi = max(base, off_b), min(base + len(src), off_b + len(sb))
            if src[lo - base:hi - base] != list(sb[lo - off_b:hi - off_b]):
                emit(src, tgt, members)  # the sources disagree: end the chain here
                off_b, src, base, tgt, members = 0, [], 0, list(tb[:o]), []
            if off_b < base:
                src[:0] = sb[:base - off_b]
                base = off_b
            if off_b + len(sb) > base + len(src):
                src.extend(sb[base + len(src) - off_b:])
            tgt.extend(tb[o:])
            members.append(b)
            visited[b] = True
            cur, off = b, off_b
        emit(src, tgt, members)

    def emit(src, tgt, members):
        chains_enc.append((tuple(src), tuple(tgt), len(members),
                           min(map(mult.__getitem__, members))))

    joined = sorted(has_prev.union(nxt))
    in_path = np.zeros(len(frags), dtype=bool)
    in_path[joined] = True
    # a fragment that joins nothing (most of them) is its own chain
    chains_enc.extend((frags[a][0], frags[a][1], 1, mult[a])
                      for a in np.flatnonzero(~in_path).tolist())
    for a in joined:
        if a not in has_prev and not visited[a]:
            walk(a)
    for a in joined:  # what is left lies on cycles
        if not visited[a]:
            walk(a)
    return chains_enc
