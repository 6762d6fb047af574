"""The greedy mode of the reconstruction attack (`nmtfrag.audit.reconstruct`): its guesses.

Why: the conservative attack stops wherever the release is ambiguous, so its figures are
a floor. An attacker willing to be wrong sometimes goes further; these two choices are
what it does, so that an audit can report the bracket (and, against the corpus, how
often the guesses are wrong). Both are deterministic and independent of line order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

Edge = tuple[int, int, int]  # (fragment id, offset, overlap)


def most_frequent(frags: Sequence[tuple[Sequence[int], Sequence[int]]],
                  mult: Sequence[int], compatible: Sequence[tuple[int, int]], o: int,
                  right: bool) -> Edge:
    """Greedy choice among disagreeing candidates at overlap o: the continuation word
    (the first target word past the overlap) carried by the most release lines (summed
    multiplicities), ties to the smallest word id; then, among the candidates with that
    word, the most frequent one, then the longest target, the longest source, the
    smallest id. Ids come from sorted vocabularies, so the choice does not depend on the
    release's line order."""
    weight: dict[int, int] = {}
    for b, _ in compatible:
        tb = frags[b][1]
        w = tb[o] if right else tb[len(tb) - o - 1]
        weight[w] = weight.get(w, 0) + mult[b]
    word = min(weight, key=lambda w: (-weight[w], w))
    best: tuple[tuple[int, int, int, int], Edge] | None = None
    for b, d in compatible:
        sb, tb = frags[b]
        if (tb[o] if right else tb[len(tb) - o - 1]) != word:
            continue
        k = (mult[b], len(tb), len(sb), -b)
        if best is None or k > best[0]:
            best = (k, (b, d, o))
    assert best is not None  # the most frequent word came from some candidate
    return best[1]


def one_sided_edges(succ: Sequence[Edge | None], pred: Sequence[Edge | None],
                    mult: Sequence[int], mutual: Mapping[int, Edge]) -> dict[int, Edge]:
    """Greedy mode's extra joins: every best overlap seen from one side only (A's
    successor is B but B's predecessor is not A, or the reverse), taken longest overlap
    first, then highest support (the smaller multiplicity of the two), then smallest
    ids, as long as A has no successor yet, B no predecessor, and the join closes no
    cycle. `mutual` (the edges both sides chose, kept in any case) is not modified."""
    cand = set()
    for a, s in enumerate(succ):
        if s is not None and a not in mutual:
            cand.add((a, s[0], s[1], s[2]))
    for b, p in enumerate(pred):
        if p is not None and mutual.get(p[0], (None,))[0] != b:
            cand.add((p[0], b, -p[1], p[2]))  # p[1]: A's offset from B
    parent = list(range(len(succ)))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    has_prev = set()
    for a, (b, _, _) in mutual.items():
        has_prev.add(b)
        parent[find(a)] = find(b)
    extra = {}
    for a, b, d, o in sorted(cand, key=lambda e: (-e[3], -min(mult[e[0]], mult[e[1]]),
                                                  e[0], e[1], e[2])):
        if a in mutual or a in extra or b in has_prev:
            continue
        ra, rb = find(a), find(b)
        if ra == rb:
            continue
        parent[ra] = rb
        extra[a] = (b, d, o)
        has_prev.add(b)
    return extra
