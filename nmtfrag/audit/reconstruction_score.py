"""Score a reconstruction attack against the original corpus (which the attack never read).

Why: the chains the attack builds from a release (`nmtfrag.audit.reconstruct`) only
mean something next to the text they came from. Every figure is what THIS attack
achieves, a lower bound on what the release leaks. Per side (source, target) and for the
pair, this measures:

- the share of corpus lines rebuilt exactly, under the rule of `nmtfrag.audit.rebuilt`
  (the sentence equals a released fragment, a chain, or a span of one that the attacker
  can delimit by sentence-final punctuation), over all lines and over lines longer than
  max-len; beside it, the narrower counts "some chain equals the sentence" (the figure
  reported before the rule) and "some released fragment equals the sentence";
- the share of the corpus's word n-grams recovered (found inside some chain) for
  n = max-len+1 … 2·max-len — no single fragment holds such an n-gram, so each one
  recovered was assembled; counted over distinct n-grams and over occurrences;
- the precision of the attack: the share of distinct chain n-grams of those lengths
  that really occur in the corpus, and the share of joined chains that occur inside one
  corpus line (false joins lower both);
- the longest recovered span of each sentence (the longest run of its words that
  occurs inside some chain): its distribution and its share of the sentence length.

Substring queries run on a token-level suffix automaton of the chains, so each corpus
sentence is scored in one left-to-right pass (matching statistics).
"""
from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ..data.corpus import SkipLog, check_distinct_sides, read_parallel, validate_parallel
from ..errors import InputError
from ..fileio import public_name
from ..fileio import MANIFEST, atomic_writer, sha256_file, tool_versions, write_json
from ..outdir import prepare_output_dir
from ..data.tokenize import to_tokens
from .rebuilt import SENTENCE_FINAL, joined_chain_truth, rebuilt_flags

if TYPE_CHECKING:  # reconstruct imports numpy: load it only to run the attack
    from ..data.release_text import TokenPair, Tokens
    from .reconstruct import Chain


class SuffixAutomaton:
    """Suffix automaton of a set of token sequences (integers ≥ 0)."""

    def __init__(self):
        self.next = [{}]
        self.link = [-1]
        self.length = [0]
        self._sep = -1
        self._last = 0

    def add(self, seq: Sequence[int]) -> None:
        """Append `seq` and then a fresh separator (the automaton of the concatenation
        s1 #1 s2 #2 …: no match can run across two sequences)."""
        last = self._last
        for tok in seq:
            last = self._extend(last, tok)
        self._last = self._extend(last, self._sep)
        self._sep -= 1

    def _extend(self, last, tok):
        nxt, link, length = self.next, self.link, self.length
        cur = len(length)
        nxt.append({})
        length.append(length[last] + 1)
        link.append(0)
        p = last
        while p != -1 and tok not in nxt[p]:
            nxt[p][tok] = cur
            p = link[p]
        if p != -1:
            q = nxt[p][tok]
            if length[p] + 1 == length[q]:
                link[cur] = q
            else:
                clone = len(length)
                nxt.append(dict(nxt[q]))
                length.append(length[p] + 1)
                link.append(link[q])
                while p != -1 and nxt[p].get(tok) == q:
                    nxt[p][tok] = clone
                    p = link[p]
                link[q] = clone
                link[cur] = clone
        return cur

    def matching(self, seq: Sequence[int]) -> list[int]:
        """For each position j: length of the longest seq[i:j+1] occurring in the set."""
        nxt, link, length = self.next, self.link, self.length
        v, n, out = 0, 0, []
        for tok in seq:
            while v and tok not in nxt[v]:
                v = link[v]
                n = length[v]
            if tok in nxt[v]:
                v = nxt[v][tok]
                n += 1
            else:
                v, n = 0, 0
            out.append(n)
        return out


def _side_scores(sentences, chain_seqs, max_len, rule_flags, fragment_seqs):
    """Scores of one side; `sentences`, `chain_seqs`, `fragment_seqs` hold int tuples;
    `rule_flags[i]`: sentence i is rebuilt under the counting rule."""
    sam = SuffixAutomaton()
    for c in chain_seqs:
        sam.add(c)
    chain_set = set(chain_seqs)
    fragment_set = set(fragment_seqs)
    whole_chain = as_fragment = 0
    ns = list(range(max_len + 1, 2 * max_len + 1))
    types_all = {n: set() for n in ns}
    types_hit = {n: set() for n in ns}
    occ_all = dict.fromkeys(ns, 0)
    occ_hit = dict.fromkeys(ns, 0)
    longest, share_longest = [], []
    exact = exact_long = n_long = 0
    for sent, hit in zip(sentences, rule_flags):
        ell = sam.matching(sent)
        m = max(ell, default=0)
        longest.append(m)
        share_longest.append(m / len(sent) if sent else 0.0)
        whole_chain += sent in chain_set
        as_fragment += sent in fragment_set
        exact += hit
        if len(sent) > max_len:
            n_long += 1
            exact_long += hit
        for j, lj in enumerate(ell):
            for n in ns:
                if j + 1 < n:
                    break
                key = hash(sent[j + 1 - n:j + 1])
                types_all[n].add(key)
                occ_all[n] += 1
                if lj >= n:
                    types_hit[n].add(key)
                    occ_hit[n] += 1
    # precision: distinct chain n-grams that occur in the corpus
    prec = {}
    for n in ns:
        grams = {hash(c[i:i + n]) for c in chain_seqs for i in range(len(c) - n + 1)}
        prec[n] = (sum(1 for g in grams if g in types_all[n]), len(grams))
    total = len(sentences)
    ngram = {}
    for n in ns:
        ngram[str(n)] = {
            "distinct": len(types_all[n]),
            "distinct_recovered": len(types_hit[n]),
            "distinct_recovered_share": _share(len(types_hit[n]), len(types_all[n])),
            "occurrences": occ_all[n],
            "occurrences_recovered": occ_hit[n],
            "occurrences_recovered_share": _share(occ_hit[n], occ_all[n]),
            "chain_ngrams": prec[n][1],
            "chain_ngrams_in_corpus": prec[n][0],
            "precision": _share(prec[n][0], prec[n][1]),
        }
    all_d = sum(len(types_all[n]) for n in ns)
    hit_d = sum(len(types_hit[n]) for n in ns)
    return {
        "sentences": total,
        "rebuilt_exactly": exact,
        "rebuilt_exactly_share": _share(exact, total),
        "rebuilt_as_whole_chain": whole_chain,
        "rebuilt_as_whole_chain_share": _share(whole_chain, total),
        "rebuilt_as_release_fragment": as_fragment,
        "rebuilt_as_release_fragment_share": _share(as_fragment, total),
        "sentences_longer_than_max_len": n_long,
        "rebuilt_exactly_longer_than_max_len": exact_long,
        "rebuilt_exactly_longer_than_max_len_share": _share(exact_long, n_long),
        "ngram_orders": [ns[0], ns[-1]] if ns else [],
        "ngrams_recovered_share": _share(hit_d, all_d),
        "ngram_precision": _share(sum(prec[n][0] for n in ns), sum(prec[n][1] for n in ns)),
        "ngrams": ngram,
        "longest_span": _distribution(longest),
        "longest_span_share_of_sentence": _distribution(share_longest, ints=False),
    }


def _share(a, b):
    return round(a / b, 6) if b else None


def _distribution(values, ints=True):
    if not values:
        return {}
    v = sorted(values)

    def q(p):
        return v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))]

    out = {"mean": round(sum(v) / len(v), 4), "median": q(0.5), "p90": q(0.9),
           "max": v[-1], "min": v[0]}
    if ints:
        hist = {}
        for x in v:
            hist[x] = hist.get(x, 0) + 1
        out["histogram"] = {str(k): hist[k] for k in sorted(hist)}
    else:
        out = {k: round(x, 4) for k, x in out.items()}
    return out


def score_chains(chains: Sequence[Chain], src_sentences: Sequence[Tokens],
                 tgt_sentences: Sequence[Tokens], max_len: int,
                 fragments: Iterable[TokenPair] = ()) -> dict:
    """Score an attack's output against tokenised sentences.

    `chains`: objects with .src/.tgt token tuples (and .fragments, the number of release
    fragments joined into each); `fragments`: the release's (src, tgt) pairs, which the
    attacker holds verbatim too (see `nmtfrag.audit.rebuilt` for how both count)."""
    vocabs: tuple[dict[str, int], dict[str, int]] = ({}, {})

    def enc(seq, side):
        voc = vocabs[side]
        return tuple(voc.setdefault(w, len(voc)) for w in seq)

    src_sents = [enc(s, 0) for s in src_sentences]
    tgt_sents = [enc(t, 1) for t in tgt_sentences]
    src_chains = [enc(c.src, 0) for c in chains]
    tgt_chains = [enc(c.tgt, 1) for c in chains]
    frags = sorted({(enc(s, 0), enc(t, 1)) for s, t in fragments})
    final = [{voc[w] for w in SENTENCE_FINAL if w in voc} for voc in vocabs]
    units = list(zip(src_chains, tgt_chains)) + frags
    src_flags, tgt_flags, pair_exact = rebuilt_flags(units, src_sents, tgt_sents, *final)
    src_scores = _side_scores(src_sents, src_chains, max_len, src_flags,
                              [s for s, _ in frags])
    tgt_scores = _side_scores(tgt_sents, tgt_chains, max_len, tgt_flags,
                              [t for _, t in frags])
    chain_set = set(zip(src_chains, tgt_chains))
    whole_chain = sum((s, t) in chain_set for s, t in zip(src_sents, tgt_sents))
    frag_set = set(frags)
    as_fragment = sum((s, t) in frag_set for s, t in zip(src_sents, tgt_sents))
    longer = [max(len(s), len(t)) > max_len for s, t in zip(src_sents, tgt_sents)]
    n_long = sum(longer)
    pair = {
        "sentences": len(pair_exact),
        "rebuilt_exactly": sum(pair_exact),
        "rebuilt_exactly_share": _share(sum(pair_exact), len(pair_exact)),
        "rebuilt_as_whole_chain": whole_chain,
        "rebuilt_as_whole_chain_share": _share(whole_chain, len(pair_exact)),
        "rebuilt_as_release_fragment": as_fragment,
        "rebuilt_as_release_fragment_share": _share(as_fragment, len(pair_exact)),
        "either_side_rebuilt_exactly_share": _share(
            sum(a or b for a, b in zip(src_flags, tgt_flags)), len(pair_exact)),
        "sentences_longer_than_max_len": n_long,
        "rebuilt_exactly_longer_than_max_len_share": _share(
            sum(p for p, lg in zip(pair_exact, longer) if lg), n_long),
    }
    truth = joined_chain_truth([(s, t, getattr(c, "fragments", 1)) for s, t, c in
                                zip(src_chains, tgt_chains, chains)], src_sents, tgt_sents)
    n = len(truth)
    joins = {"joined_chains": n}
    for k, side in enumerate(("src", "tgt", "pair")):
        true = sum(x[k] for x in truth)
        joins[f"{side}_in_corpus"] = true
        joins[f"{side}_precision"] = _share(true, n)
    return {"pair": pair, "src": src_scores, "tgt": tgt_scores, "joined_chains": joins}


def read_tokenised_corpus(src: str, tgt: str, src_lang: str, tgt_lang: str,
                          pretokenized: bool
                          ) -> tuple[list[Tokens], list[Tokens], SkipLog]:
    """Tokenised (src, tgt) lists of the usable lines, tokenised as the release was."""
    validate_parallel(src, tgt, "--src/--tgt")
    skips = SkipLog()
    src_sents, tgt_sents = [], []
    for _, s, t in read_parallel(src, tgt, skips):
        src_sents.append(tuple(to_tokens(s, src_lang, pretokenized)))
        tgt_sents.append(tuple(to_tokens(t, tgt_lang, pretokenized)))
    return src_sents, tgt_sents, skips


ATTACK_NAME = ("bilingual overlap-graph reconstruction (after Gallé & Tealdi 2015, "
               "nmtfrag.audit.reconstruct)")
LOWER_BOUND = ("Every figure is what this attack achieves from the release alone: a lower "
               "bound on what the release leaks, not a guarantee. A stronger attacker (other "
               "joins, outside knowledge) may rebuild more.")
RULE = ("A sentence counts as rebuilt when it equals a released fragment, a chain, or a span "
        "of one whose ends the attacker can see without the corpus (the start or end of the "
        "fragment/chain, or right after a sentence-final . ! ?); a pair when both sides are "
        "such spans of the same fragment/chain.")
MODE_CHOICES = ("conservative", "greedy", "both")


def _ngram_max_len(stated, observed):
    """The max-len the n-gram figures are defined by, and what the audit assumed: n-grams
    of max-len+1 … 2·max-len are those no single fragment holds, which is only true if no
    fragment is longer than max-len. A release with longer fragments than stated (or
    given by --max-len) is scored with its longest fragment instead, with a warning.
    Returns (max_len, assumptions, warnings)."""
    if stated is None:
        return observed, [f"max-len not stated: the longest fragment ({observed} words) is "
                          f"taken as max-len"], []
    if observed > stated:
        w = (f"the release holds fragments of up to {observed} words, longer than its "
             f"max-len {stated}: n-grams are counted from {observed + 1} words "
             f"({observed + 1}…{2 * observed}-grams), the shortest no fragment holds")
        return observed, [w], [w]
    return stated, [f"max-len {stated} (no fragment is longer; the longest has {observed} "
                    f"words)"], []


def verbatim_chains(pairs: Sequence[TokenPair], mode: str) -> tuple[list[Chain], dict]:
    """The attack's output for a verbatim release: each distinct fragment a chain of one
    (support: its multiplicity), in the order and shape `reconstruct` returns."""
    from collections import Counter

    from .reconstruct import Chain

    counts = Counter(pairs)
    chains = [Chain(s, t, 1, counts[(s, t)]) for (s, t) in
              sorted(counts, key=lambda p: (p[1], p[0]))]
    stats = {"mode": mode, "verbatim_release": True, "pairs": len(pairs),
             "distinct_pairs": len(counts), "widening_variants_collapsed": 0,
             "fragments": len(counts), "edges": 0, "chains": len(chains),
             "chains_longer_than_any_fragment": 0,
             "longest_chain_tgt": max((len(c.tgt) for c in chains), default=0),
             "longest_chain_src": max((len(c.src) for c in chains), default=0),
             "min_overlap": None}
    if mode == "greedy":
        stats.update({"edges_unambiguous": 0, "ambiguous_overlaps_resolved_by_frequency": 0,
                      "non_mutual_edges": 0})
    return chains, stats


def audit_reconstruction(release: str, src: str, tgt: str, out: str, *,
                         min_overlap: int | None = None, pretokenized: bool | None = None,
                         max_len: int | None = None, write_chains: bool = False,
                         overwrite: bool = False, show_progress: bool = False,
                         mode: str = "conservative") -> dict:
    """Run the attack on `release` (reading only it), score it against `src`/`tgt`, and
    write out/report.json, out/report.md, out/manifest.json (and, if asked, the chains,
    which are confidential: they are rebuilt pieces of the corpus).

    `mode`: "conservative", "greedy", or "both" (the two side by side: a bracket)."""
    from ..data.stats import release_contents
    from ..data.release_text import read_release
    from .reconstruction_report import render_markdown

    if mode not in MODE_CHOICES:
        raise InputError(f"--mode must be one of {', '.join(MODE_CHOICES)}, got {mode!r}")
    modes = ("conservative", "greedy") if mode == "both" else (mode,)
    check_distinct_sides(src, tgt, "--src/--tgt")  # before the release is read
    pairs, info = read_release(release)
    validate_parallel(src, tgt, "--src/--tgt")
    out = prepare_output_dir(out, overwrite, inputs=[release, src, tgt],
                             kind="nmtfrag-reconstruction-audit")
    params = info["params"]
    stated = max_len if max_len is not None else params.get("max_len")
    max_len, assumptions, warnings = _ngram_max_len(stated, info["max_len_observed"])
    if pretokenized is None:
        pretokenized = bool(params.get("pretokenized", False))
    src_lang, tgt_lang = params.get("src_lang", "de"), params.get("tgt_lang", "en")
    src_sents, tgt_sents, skips = read_tokenised_corpus(src, tgt, src_lang, tgt_lang,
                                                        pretokenized)
    if not src_sents:
        raise InputError(f"{src}: no usable sentence pairs")
    contents = release_contents(pairs)
    fragments = set(pairs)
    # a release whose every fragment is a whole sentence pair of the corpus needs no graph
    # search: each sentence is rebuilt as it stands, and a join of two sentences holds
    # no n-gram of the corpus longer than its longest sentence
    verbatim = fragments <= set(zip(src_sents, tgt_sents))
    if verbatim:
        assumptions.append("every fragment of the release is a whole sentence pair of the "
                           "corpus (a verbatim release): the fragments are the attack's "
                           "output, no graph search was run")
    results, all_chains = _attack_and_score(pairs, fragments, modes, verbatim, src_sents,
                                            tgt_sents, max_len, min_overlap, show_progress,
                                            write_chains)
    del pairs, fragments
    first = results[modes[0]]
    report = {
        "kind": "nmtfrag-reconstruction-audit",
        "attack_name": ATTACK_NAME,
        "mode": mode,
        "lower_bound": LOWER_BOUND,
        "counting_rule": RULE,
        "release": {"dir": public_name(release), "lines": info["lines"],
                    "tagged": info["tagged"], "params": params,
                    "sha256": info["sha256"], "contents": contents},
        "max_len": max_len,
        "max_len_stated": stated,
        "max_len_observed": info["max_len_observed"],
        "assumptions": assumptions,
        "warnings": warnings,
        "pretokenized": pretokenized,
        # the first mode's figures (the conservative floor when both ran), for readers of
        # the single-mode layout; every mode's figures are under "modes"
        "attack": first["attack"],
        "scores": first["scores"],
        "seconds": first["seconds"],
        "modes": results,
    }
    write_json(os.path.join(out, "report.json"), report)
    with atomic_writer(os.path.join(out, "report.md")) as f:
        f.write(render_markdown(report))
    chain_files = _write_chains(out, all_chains, modes[0], src_lang, tgt_lang)
    write_json(os.path.join(out, MANIFEST),
               _manifest(report, write_chains, src, tgt, len(src_sents), skips.total,
                         chain_files))
    return report


def _attack_and_score(pairs, fragments, modes, verbatim, src_sents, tgt_sents, max_len,
                      min_overlap, show_progress, keep_chains):
    """Run the attack in each mode and score its chains. Returns ({mode: {"attack",
    "scores", "seconds"}}, {mode: chains} when `keep_chains`, else {})."""
    from .reconstruct import reconstruct

    results, all_chains = {}, {}
    for m in modes:
        t0 = time.time()
        if verbatim:
            chains, attack_stats = verbatim_chains(pairs, m)
        else:
            chains, attack_stats = reconstruct(pairs, min_overlap=min_overlap, mode=m,
                                               show_progress=show_progress)
        t_attack = time.time() - t0
        t1 = time.time()
        scores = score_chains(chains, src_sents, tgt_sents, max_len, fragments)
        results[m] = {"attack": attack_stats, "scores": scores,
                      "seconds": {"attack": round(t_attack, 2),
                                  "scoring": round(time.time() - t1, 2)}}
        if keep_chains:
            all_chains[m] = chains
        del chains
    return results, all_chains


def _write_chains(out, all_chains, first_mode, src_lang, tgt_lang):
    """OUT/chains.<lang> (the first mode) and OUT/chains-<mode>.<lang>; returns the names."""
    chain_files = []
    for m, chains in all_chains.items():
        stem = "chains" if m == first_mode else f"chains-{m}"
        chain_files += [f"{stem}.{src_lang}", f"{stem}.{tgt_lang}"]
        with atomic_writer(os.path.join(out, chain_files[-2])) as fs, \
                atomic_writer(os.path.join(out, chain_files[-1])) as ft:
            for c in chains:
                fs.write(" ".join(c.src) + "\n")
                ft.write(" ".join(c.tgt) + "\n")
    return chain_files


def _manifest(report, write_chains, src, tgt, lines_scored, lines_skipped, chain_files):
    """manifest.json of an audit: its options, input digests, counts and files."""
    release, attack = report["release"], report["attack"]
    return {
        "kind": "nmtfrag-reconstruction-audit",
        "params": {"mode": report["mode"], "min_overlap": attack["min_overlap"],
                   "max_len": report["max_len"], "pretokenized": report["pretokenized"],
                   "write_chains": write_chains},
        "inputs": {"release_src": release["sha256"]["src"],
                   "release_tgt": release["sha256"]["tgt"],
                   "corpus_src": sha256_file(src), "corpus_tgt": sha256_file(tgt)},
        "counts": {"release_pairs": release["lines"],
                   "chains": attack["chains"],
                   "chains_by_mode": {m: r["attack"]["chains"]
                                      for m, r in report["modes"].items()},
                   "corpus_lines_scored": lines_scored,
                   "corpus_lines_skipped": lines_skipped},
        "files": ["report.json", "report.md"] + chain_files,
        "tool_versions": tool_versions("nmtfrag"),
    }
