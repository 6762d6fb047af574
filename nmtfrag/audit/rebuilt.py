"""Which corpus sentences a reconstruction attack rebuilds, and which of its joins are true.

Why a rule: the attacker's output is a set of units, the release's own fragments (it holds
them verbatim) and the chains it joined, and it does not know where a sentence starts or
ends inside a long chain. Counting only a chain equal to a sentence understates: a
sentence released whole is leaked whole even if the attack then joins it to another.

The rule (what the attacker can delimit by itself): a sentence is rebuilt when it equals
a span u[i:j] of some unit u (a fragment or a chain, one side) such that
  - i is the start of u, or u[i-1] is a sentence-final token (`.`, `!`, `?`), and
  - j is the end of u, or u[j-1] is a sentence-final token.
A whole unit is such a span, so a sentence equal to a released fragment or to a chain
always counts (a release of full sentences scores exactly 100%), and nothing that counted
as "a chain equals the sentence" stops counting. A sentence pair is rebuilt when its
source and its target are such spans of the same unit. A span cut anywhere else inside a chain does not count: the attacker
could not have cut it there without the corpus.
"""
from __future__ import annotations

from bisect import bisect_right
from collections.abc import Container, Hashable, Iterable, Sequence

Encoded = tuple[Hashable, ...]  # a segment as word ids (or words)

SENTENCE_FINAL = frozenset({".", "!", "?"})


def delimited_spans(seq: Encoded, final: Container[Hashable],
                    longest: float) -> set[Encoded]:
    """Distinct spans of `seq` the rule lets the attacker cut out (at most `longest` long).

    `final`: the ids (or words) of sentence-final tokens."""
    n = len(seq)
    cuts = [k + 1 for k in range(n - 1) if seq[k] in final]
    starts = [0] + cuts
    ends = cuts + [n]
    out = set()
    for i in starts:
        for j in ends[bisect_right(ends, i):]:
            if j - i > longest:
                break
            out.add(seq[i:j])
    return out


def rebuilt_flags(units: Iterable[tuple[Encoded, Encoded]], src_sents: Sequence[Encoded],
                  tgt_sents: Sequence[Encoded], final_src: Container[Hashable],
                  final_tgt: Container[Hashable]
                  ) -> tuple[list[bool], list[bool], list[bool]]:
    """Per corpus line: (source rebuilt, target rebuilt, pair rebuilt) under the rule.

    `units`: (src, tgt) sequences the attacker holds; sentences: sequences of the same
    encoding; `final_*`: sentence-final tokens of each side, in that encoding."""
    src_set, tgt_set = set(src_sents), set(tgt_sents)
    tgts_of: dict[Encoded, set[Encoded]] = {}
    for s, t in zip(src_sents, tgt_sents):
        tgts_of.setdefault(s, set()).add(t)
    ls = max(map(len, src_sents), default=0)
    lt = max(map(len, tgt_sents), default=0)
    src_hit, tgt_hit, pair_hit = set(), set(), set()
    for us, ut in units:
        hs = {sp for sp in delimited_spans(us, final_src, ls) if sp in src_set}
        ht = {sp for sp in delimited_spans(ut, final_tgt, lt) if sp in tgt_set}
        src_hit |= hs
        tgt_hit |= ht
        if hs and ht:
            for s in hs:
                for t in tgts_of[s] & ht:
                    pair_hit.add((s, t))
    return ([s in src_hit for s in src_sents], [t in tgt_hit for t in tgt_sents],
            [(s, t) in pair_hit for s, t in zip(src_sents, tgt_sents)])


def _as_str(seq):
    """Token ids as one character each, so that span search is str search (in C)."""
    return "".join(chr(x if x < 0xD800 else x + 0x800) for x in seq)


def joined_chain_truth(chains: Iterable[tuple[Encoded, Encoded, int]],
                       src_sents: Sequence[Encoded], tgt_sents: Sequence[Encoded]
                       ) -> list[tuple[bool, bool, bool]]:
    """For each chain (src, tgt, fragments) with fragments ≥ 2, whether its source occurs
    inside a corpus source line, its target inside a target line, and both inside the
    same line pair: a join the corpus does not contain is a false join.

    Returns a list of (src_true, tgt_true, pair_true)."""
    pairs = sorted(set(zip(src_sents, tgt_sents)))
    s_str = [_as_str(s) for s, _ in pairs]
    t_str = [_as_str(t) for _, t in pairs]
    post_s: dict[Hashable, list[int]] = {}
    post_t: dict[Hashable, list[int]] = {}
    for k, (s, t) in enumerate(pairs):
        for x in set(s):
            post_s.setdefault(x, []).append(k)
        for x in set(t):
            post_t.setdefault(x, []).append(k)

    def lines_with(seq, post, strs):
        if not seq:
            return set()
        rarest = min(seq, key=lambda x: len(post.get(x, ())))
        q = _as_str(seq)
        return {k for k in post.get(rarest, ()) if q in strs[k]}

    out = []
    for cs, ct, n in chains:
        if n < 2:
            continue
        in_s = lines_with(cs, post_s, s_str)
        in_t = lines_with(ct, post_t, t_str)
        out.append((bool(in_s), bool(in_t), not in_s.isdisjoint(in_t)))
    return out
