"""The reconstruction attack's batched (numpy) overlap search against a plain restatement
of its rules, fragment by fragment and candidate by candidate, on random small releases:
both modes, small vocabularies (repeats, ambiguous overlaps, unaligned words), the
candidate cap and the batching forced low so that every path is taken."""
import random
from collections import Counter

import pytest

from nmtfrag.audit import reconstruct as rec
from nmtfrag.audit.greedy import most_frequent, one_sided_edges
from nmtfrag.fragment.phrases import extract_spans


def random_release(seed, vocab, max_len, sentences=40):
    """Phrase pairs of random sentence pairs (word-for-word lexicon with synonyms, local
    swaps, some unaligned words), shuffled, subsampled, duplicates kept."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(sentences):
        k = rng.randint(1, 12)
        idx = [rng.randrange(vocab) for _ in range(k)]
        tgt = [f"w{i}" for i in idx]
        order = list(range(k))
        for j in range(0, k - 1, 2):
            if rng.random() < 0.4:
                order[j], order[j + 1] = order[j + 1], order[j]
        src = [f"{rng.choice('qr')}{idx[o]}" for o in order]
        points = [(si, order[si]) for si in range(k) if rng.random() > 0.1]
        for s0, s1, t0, t1 in extract_spans(k, k, points, max_len):
            pairs.append((tuple(src[s0:s1 + 1]), tuple(tgt[t0:t1 + 1])))
    rng.shuffle(pairs)
    return pairs[:round(len(pairs) * rng.uniform(0.5, 1.0))]


def reference_neighbours(frags, mult, lmax, min_overlap, right, max_scan, guessed):
    """Best neighbour of each fragment, by the rules of `rec._best_neighbours`, scanning
    every fragment as a candidate."""
    out = [None] * len(frags)
    for a, (sa, ta) in enumerate(frags):
        la = len(ta)
        for o in range(min(la - 1, lmax - 1), min_overlap - 1, -1):
            key = ta[la - o:] if right else ta[:o]
            cand = [b for b, (sb, tb) in enumerate(frags)
                    if len(tb) > o and (tb[:o] if right else tb[len(tb) - o:]) == key
                    and set(sb) & set(sa)]
            if len(cand) > max_scan:
                break
            comp = [(b, rec._placement(sa, frags[b][0])) for b in cand if b != a]
            comp = [(b, d) for b, d in comp if d is not None]
            if not comp:
                continue
            if agree(frags, comp, right):
                b, d = max(comp, key=lambda c: (len(frags[c[0]][1]), len(frags[c[0]][0]),
                                                -c[0]))
                out[a] = (b, d, o)
            elif mult is not None:
                out[a] = most_frequent(frags, mult, comp, o, right)
                guessed.add(a)
            break
    return out


def agree(frags, comp, right):
    """Every two candidates agree: one target extends the other away from the overlap,
    and their placed sources put the same word wherever both have one."""
    for b1, d1 in comp:
        for b2, d2 in comp:
            t1, t2 = frags[b1][1], frags[b2][1]
            short, long_ = (t1, t2) if len(t1) <= len(t2) else (t2, t1)
            if (long_[:len(short)] if right else long_[len(long_) - len(short):]) != short:
                return False
            at1 = {d1 + k: w for k, w in enumerate(frags[b1][0])}
            if any(at1.get(d2 + k, w) != w for k, w in enumerate(frags[b2][0])):
                return False
    return True


def reference_reconstruct(pairs, mode, max_scan):
    counts = Counter(pairs)
    src_words = sorted({w for s, _ in counts for w in s})
    tgt_words = sorted({w for _, t in counts for w in t})
    sid = {w: i for i, w in enumerate(src_words)}
    tid = {w: i for i, w in enumerate(tgt_words)}
    enc = sorted(((tuple(sid[w] for w in s), tuple(tid[w] for w in t)), c)
                 for (s, t), c in counts.items())
    frags_all = [f for f, _ in enc]
    keep = [i for i, (s, t) in enumerate(frags_all)
            if not any(t2 == t and len(s2) > len(s) and rec._contains(s2, s)
                       for s2, t2 in frags_all)]
    frags = [frags_all[i] for i in keep]
    mult = [enc[i][1] for i in keep]
    lmax = max(len(t) for _, t in frags)
    min_overlap = 2 if lmax >= 3 else 1
    greedy = mode == "greedy"
    g_succ, g_pred = set(), set()
    m = mult if greedy else None
    succ = reference_neighbours(frags, m, lmax, min_overlap, True, max_scan, g_succ)
    pred = reference_neighbours(frags, m, lmax, min_overlap, False, max_scan, g_pred)
    nxt = {a: s for a, s in enumerate(succ)
           if s is not None and pred[s[0]] is not None and pred[s[0]][0] == a}
    chains = rec._walk_all(frags, mult, nxt)
    if greedy:
        sure = {a: s for a, s in nxt.items() if a not in g_succ and s[0] not in g_pred}
        nxt.update(one_sided_edges(succ, pred, mult, nxt))
        chains = rec._walk_all(frags, mult, sure) + rec._walk_all(frags, mult, nxt)
    best = {}
    for s, t, n, sup in chains:
        key = (tuple(src_words[i] for i in s), tuple(tgt_words[i] for i in t))
        if key not in best or (n, sup) > best[key]:
            best[key] = (n, sup)
    return [(k[0], k[1]) + best[k] for k in sorted(best, key=lambda k: (k[1], k[0]))]


@pytest.mark.parametrize("mode", ["conservative", "greedy"])
@pytest.mark.parametrize("seed", range(12))
def test_batched_search_matches_reference(seed, mode, monkeypatch):
    rng = random.Random(seed)
    max_len = rng.choice([2, 3, 4, 5, 7])
    pairs = random_release(seed, vocab=rng.choice([4, 8, 30]), max_len=max_len)
    max_scan = rng.choice([2, 5, 1000])
    monkeypatch.setattr(rec, "MAX_SCAN", max_scan)
    monkeypatch.setattr(rec, "CHUNK", rng.choice([1, 17, 1 << 20]))
    monkeypatch.setattr(rec, "ENCODE_BATCH", rng.choice([3, 1 << 18]))
    got = [(c.src, c.tgt, c.fragments, c.support)
           for c in rec.reconstruct(iter(pairs), mode=mode)[0]]
    assert got == reference_reconstruct(pairs, mode, max_scan)
