"""Score a reconstruction attack against the original corpus (which the attack never read).

Why: the chains the attack builds from a release (`nmtfrag.audit.reconstruct`) only
mean something next to the text they came from. Per side (source, target) and for the
pair, this measures:

- the share of corpus lines rebuilt exactly (some chain equals the whole sentence),
  over all lines and over lines longer than max-len (shorter ones can be released whole);
- the share of the corpus's word n-grams recovered (found inside some chain) for
  n = max-len+1 … 2·max-len — no single fragment holds such an n-gram, so each one
  recovered was assembled; counted over distinct n-grams and over occurrences;
- the precision of the attack: the share of distinct chain n-grams of those lengths
  that really occur in the corpus (false joins lower it);
- the longest recovered span of each sentence (the longest run of its words that
  occurs inside some chain): its distribution and its share of the sentence length.

Substring queries run on a token-level suffix automaton of the chains, so each corpus
sentence is scored in one left-to-right pass (matching statistics).
"""
import os
import time

from ..corpus import SkipLog, read_parallel, validate_parallel
from ..errors import InputError
from ..fileio import (MANIFEST, atomic_writer, prepare_output_dir, sha256_file,
                      tool_versions, write_json)
from ..tokenize import to_tokens


class SuffixAutomaton:
    """Suffix automaton of a set of token sequences (integers ≥ 0)."""

    def __init__(self):
        self.next = [{}]
        self.link = [-1]
        self.length = [0]
        self._sep = -1
        self._last = 0

    def add(self, seq):
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

    def matching(self, seq):
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


def _side_scores(sentences, chain_seqs, max_len):
    """Scores of one side; `sentences` and `chain_seqs` are lists of int tuples."""
    sam = SuffixAutomaton()
    for c in chain_seqs:
        sam.add(c)
    chain_set = set(chain_seqs)
    ns = list(range(max_len + 1, 2 * max_len + 1))
    types_all = {n: set() for n in ns}
    types_hit = {n: set() for n in ns}
    occ_all = dict.fromkeys(ns, 0)
    occ_hit = dict.fromkeys(ns, 0)
    longest, share_longest = [], []
    exact = exact_long = n_long = 0
    exact_flags = []
    for sent in sentences:
        ell = sam.matching(sent)
        m = max(ell, default=0)
        longest.append(m)
        share_longest.append(m / len(sent) if sent else 0.0)
        hit = sent in chain_set
        exact_flags.append(hit)
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
        "sentences_longer_than_max_len": n_long,
        "rebuilt_exactly_longer_than_max_len": exact_long,
        "rebuilt_exactly_longer_than_max_len_share": _share(exact_long, n_long),
        "ngram_orders": [ns[0], ns[-1]] if ns else [],
        "ngrams_recovered_share": _share(hit_d, all_d),
        "ngram_precision": _share(sum(prec[n][0] for n in ns), sum(prec[n][1] for n in ns)),
        "ngrams": ngram,
        "longest_span": _distribution(longest),
        "longest_span_share_of_sentence": _distribution(share_longest, ints=False),
    }, exact_flags


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


def score_chains(chains, src_sentences, tgt_sentences, max_len):
    """Score chains (objects with .src/.tgt token tuples) against tokenised sentences."""
    vocabs = ({}, {})

    def enc(seq, side):
        voc = vocabs[side]
        return tuple(voc.setdefault(w, len(voc)) for w in seq)

    src_sents = [enc(s, 0) for s in src_sentences]
    tgt_sents = [enc(t, 1) for t in tgt_sentences]
    src_chains = [enc(c.src, 0) for c in chains]
    tgt_chains = [enc(c.tgt, 1) for c in chains]
    src_scores, src_flags = _side_scores(src_sents, src_chains, max_len)
    tgt_scores, tgt_flags = _side_scores(tgt_sents, tgt_chains, max_len)
    pair_set = set(zip(src_chains, tgt_chains))
    pair_exact = [(s, t) in pair_set for s, t in zip(src_sents, tgt_sents)]
    longer = [max(len(s), len(t)) > max_len for s, t in zip(src_sents, tgt_sents)]
    n_long = sum(longer)
    pair = {
        "sentences": len(pair_exact),
        "rebuilt_exactly": sum(pair_exact),
        "rebuilt_exactly_share": _share(sum(pair_exact), len(pair_exact)),
        "either_side_rebuilt_exactly_share": _share(
            sum(a or b for a, b in zip(src_flags, tgt_flags)), len(pair_exact)),
        "sentences_longer_than_max_len": n_long,
        "rebuilt_exactly_longer_than_max_len_share": _share(
            sum(p for p, lg in zip(pair_exact, longer) if lg), n_long),
    }
    return {"pair": pair, "src": src_scores, "tgt": tgt_scores}


def read_tokenised_corpus(src, tgt, src_lang, tgt_lang, pretokenized):
    """Tokenised (src, tgt) lists of the usable lines, tokenised as the release was."""
    validate_parallel(src, tgt)
    skips = SkipLog()
    src_sents, tgt_sents = [], []
    for _, s, t in read_parallel(src, tgt, skips):
        src_sents.append(tuple(to_tokens(s, src_lang, pretokenized)))
        tgt_sents.append(tuple(to_tokens(t, tgt_lang, pretokenized)))
    return src_sents, tgt_sents, skips


def audit_reconstruction(release, src, tgt, out, *, min_overlap=None, pretokenized=None,
                         max_len=None, write_chains=False, overwrite=False,
                         show_progress=False):
    """Run the attack on `release` (reading only it), score it against `src`/`tgt`, and
    write out/report.json, out/report.md, out/manifest.json (and, if asked, the chains,
    which are confidential: they are rebuilt pieces of the corpus)."""
    from .reconstruct import reconstruct, read_release

    t0 = time.time()
    pairs, info = read_release(release)
    validate_parallel(src, tgt)
    out = prepare_output_dir(out, overwrite)
    params = info["params"]
    chains, attack_stats = reconstruct(pairs, min_overlap=min_overlap,
                                       show_progress=show_progress)
    t_attack = time.time() - t0
    del pairs
    if max_len is None:
        max_len = params.get("max_len") or info["max_len_observed"]
    if pretokenized is None:
        pretokenized = bool(params.get("pretokenized", False))
    src_lang, tgt_lang = params.get("src_lang", "de"), params.get("tgt_lang", "en")
    src_sents, tgt_sents, skips = read_tokenised_corpus(src, tgt, src_lang, tgt_lang,
                                                        pretokenized)
    if not src_sents:
        raise InputError(f"{src}: no usable sentence pairs")
    t1 = time.time()
    scores = score_chains(chains, src_sents, tgt_sents, max_len)
    t_score = time.time() - t1
    report = {
        "kind": "nmtfrag-reconstruction-audit",
        "release": {"dir": os.path.abspath(release), "lines": info["lines"],
                    "tagged": info["tagged"], "params": params,
                    "sha256": info["sha256"]},
        "max_len": max_len,
        "pretokenized": pretokenized,
        "attack": attack_stats,
        "scores": scores,
        "seconds": {"attack": round(t_attack, 2), "scoring": round(t_score, 2)},
    }
    write_json(os.path.join(out, "report.json"), report)
    with atomic_writer(os.path.join(out, "report.md")) as f:
        f.write(render_markdown(report))
    if write_chains:
        with atomic_writer(os.path.join(out, f"chains.{src_lang}")) as fs, \
                atomic_writer(os.path.join(out, f"chains.{tgt_lang}")) as ft:
            for c in chains:
                fs.write(" ".join(c.src) + "\n")
                ft.write(" ".join(c.tgt) + "\n")
    manifest = {
        "kind": "nmtfrag-reconstruction-audit",
        "params": {"min_overlap": attack_stats["min_overlap"], "max_len": max_len,
                   "pretokenized": pretokenized, "write_chains": write_chains},
        "inputs": {"release_src": info["sha256"]["src"], "release_tgt": info["sha256"]["tgt"],
                   "corpus_src": sha256_file(src), "corpus_tgt": sha256_file(tgt)},
        "counts": {"release_pairs": info["lines"], "chains": len(chains),
                   "corpus_lines_scored": len(src_sents), "corpus_lines_skipped": skips.total},
        "files": ["report.json", "report.md"]
                 + ([f"chains.{src_lang}", f"chains.{tgt_lang}"] if write_chains else []),
        "tool_versions": tool_versions("nmtfrag"),
    }
    write_json(os.path.join(out, MANIFEST), manifest)
    return report


def _pct(x):
    return "–" if x is None else f"{100 * x:.2f}%"


def render_markdown(report):
    s = report["scores"]
    L = report["max_len"]
    p = report["release"]["params"]
    lines = [
        "# Reconstruction audit",
        "",
        f"Release: `{report['release']['dir']}` — {report['release']['lines']} phrase pairs, "
        f"max-len {L}, sample-rate {p.get('sample_rate', '?')}, tag {p.get('tag', '?')}.",
        f"Attack: {report['attack']['chains']} chains from {report['attack']['fragments']} "
        f"fragments ({report['attack']['edges']} joins, min overlap "
        f"{report['attack']['min_overlap']}); longest chain {report['attack']['longest_chain_tgt']}"
        f" target words; {report['seconds']['attack']} s.",
        "",
        "| measure | source | target | pair |",
        "|---|---|---|---|",
        f"| sentences rebuilt exactly | {_pct(s['src']['rebuilt_exactly_share'])} | "
        f"{_pct(s['tgt']['rebuilt_exactly_share'])} | {_pct(s['pair']['rebuilt_exactly_share'])} |",
        f"| … of sentences longer than {L} words | "
        f"{_pct(s['src']['rebuilt_exactly_longer_than_max_len_share'])} | "
        f"{_pct(s['tgt']['rebuilt_exactly_longer_than_max_len_share'])} | "
        f"{_pct(s['pair']['rebuilt_exactly_longer_than_max_len_share'])} |",
        f"| distinct {L + 1}…{2 * L}-grams recovered | {_pct(s['src']['ngrams_recovered_share'])}"
        f" | {_pct(s['tgt']['ngrams_recovered_share'])} | |",
        f"| precision of chain {L + 1}…{2 * L}-grams | {_pct(s['src']['ngram_precision'])} | "
        f"{_pct(s['tgt']['ngram_precision'])} | |",
        f"| longest recovered span, median (p90, max) words | "
        f"{s['src']['longest_span']['median']} ({s['src']['longest_span']['p90']}, "
        f"{s['src']['longest_span']['max']}) | {s['tgt']['longest_span']['median']} "
        f"({s['tgt']['longest_span']['p90']}, {s['tgt']['longest_span']['max']}) | |",
        f"| longest span / sentence length, mean | "
        f"{_pct(s['src']['longest_span_share_of_sentence']['mean'])} | "
        f"{_pct(s['tgt']['longest_span_share_of_sentence']['mean'])} | |",
        "",
        "## n-grams recovered (distinct / occurrences), target side",
        "",
        "| n | distinct | recovered | occurrences recovered | precision |",
        "|---|---|---|---|---|",
    ]
    for n, g in s["tgt"]["ngrams"].items():
        lines.append(f"| {n} | {g['distinct']} | {_pct(g['distinct_recovered_share'])} | "
                     f"{_pct(g['occurrences_recovered_share'])} | {_pct(g['precision'])} |")
    lines += ["", "A sentence is rebuilt exactly when some chain equals it from its first to "
              "its last word. n-grams longer than max-len occur in no single fragment: each "
              "one recovered was assembled by the attack.", ""]
    return "\n".join(lines)
