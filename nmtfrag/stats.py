"""Corpus statistics: the figures of Table 1 of Kim, Bisazza & Turkmen (2021).

Why: a benchmark is only comparable if its data is: the paper describes each domain by
its number of sentence pairs per split, tokens per side, sentence lengths and vocabulary
(types). This module computes those figures for any line-aligned corpus, so a user can
check that a re-created split matches the paper's, or describe a new domain the same way.

Counting conventions (stated in every report):
- a token is a whitespace-separated unit of the line as given (`str.split()`, the way
  fairseq splits tokenised text); pass `tokenize=True` to Moses-tokenise raw text first,
  exactly as fairseq's WMT19 hub does (nmtfrag.tokenize);
- types are distinct tokens, case-sensitive; type/token ratio = types / tokens;
- sentence length = tokens in a line; the distribution gives mean, standard deviation,
  min, median, 90th/99th percentile (nearest rank), max, and a histogram with the buckets
  in LENGTH_BUCKETS;
- every line counts (an empty line has length 0 and is reported as `empty_lines`).
The corpus is streamed: memory grows with the vocabulary, not with the corpus.
"""
import math
import os
from collections import Counter

from .corpus import scan_text_file
from .errors import InputError
from .fileio import public_name

LENGTH_BUCKETS = ((0, 0), (1, 5), (6, 10), (11, 20), (21, 30), (31, 50), (51, 100),
                  (101, None))


def bucket_name(lo, hi):
    if hi is None:
        return f">{lo - 1}"
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _nearest_rank(sorted_lengths, q):
    """The q-quantile by the nearest-rank method (a value that occurs in the data)."""
    if not sorted_lengths:
        return 0
    k = max(1, math.ceil(q * len(sorted_lengths)))
    return sorted_lengths[k - 1]


def side_stats(length_counts, type_counts):
    """Figures of one side from {length: lines} and {token: occurrences}."""
    n = sum(length_counts.values())
    tokens = sum(length * c for length, c in length_counts.items())
    mean = tokens / n if n else 0.0
    var = (sum(c * (length - mean) ** 2 for length, c in length_counts.items()) / n
           if n else 0.0)
    lengths = []
    for length in sorted(length_counts):
        lengths.extend([length] * length_counts[length])
    hist = {}
    for lo, hi in LENGTH_BUCKETS:
        hist[bucket_name(lo, hi)] = sum(c for length, c in length_counts.items()
                                        if length >= lo and (hi is None or length <= hi))
    types = len(type_counts)
    return {
        "tokens": tokens,
        "types": types,
        "type_token_ratio": round(types / tokens, 4) if tokens else 0.0,
        "singletons": sum(1 for c in type_counts.values() if c == 1),
        "length": {
            "mean": round(mean, 2),
            "std": round(math.sqrt(var), 2),
            "min": lengths[0] if lengths else 0,
            "median": _nearest_rank(lengths, 0.5),
            "p90": _nearest_rank(lengths, 0.9),
            "p99": _nearest_rank(lengths, 0.99),
            "max": lengths[-1] if lengths else 0,
        },
        "length_histogram": hist,
        "empty_lines": length_counts.get(0, 0),
    }


def _read_lines(path):
    with open(path, "rb") as f:
        for raw in f:
            yield raw.rstrip(b"\n").decode("utf-8").rstrip("\r")


def corpus_stats(src, tgt, name=None, src_lang="de", tgt_lang="en", tokenize=False):
    """Statistics of a line-aligned corpus (src, tgt paths); returns a dict.

    Only counts are returned, never tokens or types: a report on a confidential corpus
    must not leak its vocabulary.
    """
    n_src = scan_text_file(src)
    n_tgt = scan_text_file(tgt)
    if n_src != n_tgt:
        raise InputError(f"{src} has {n_src} lines but {tgt} has {n_tgt}: parallel files "
                         f"must be line-aligned")
    if tokenize:
        from .tokenize import tokenize as moses

    sides = {}
    for lang, path in ((src_lang, src), (tgt_lang, tgt)):
        lengths, types = Counter(), Counter()
        for line in _read_lines(path):
            toks = (moses(line, lang) if tokenize and line.strip() else line).split()
            lengths[len(toks)] += 1
            types.update(toks)
        sides[lang] = side_stats(lengths, types)
    return {
        "name": name or os.path.basename(src).rsplit(".", 1)[0],
        "src": public_name(src),
        "tgt": public_name(tgt),
        "sentences": n_src,
        "languages": [src_lang, tgt_lang],
        "tokenized_here": bool(tokenize),
        "sides": sides,
    }


def splits_in_dir(directory, src_lang="de", tgt_lang="en"):
    """(name, src, tgt) for each of train/valid/test present in `directory`."""
    if not os.path.isdir(directory):
        raise InputError(f"{directory}: no such directory")
    found = []
    base = os.path.basename(os.path.normpath(directory))
    for split in ("train", "valid", "test"):
        s = os.path.join(directory, f"{split}.{src_lang}")
        t = os.path.join(directory, f"{split}.{tgt_lang}")
        if os.path.exists(s) or os.path.exists(t):
            found.append((f"{base} {split}", s, t))
    if not found:
        raise InputError(f"{directory}: no train/valid/test.{src_lang}/.{tgt_lang} files")
    return found


CONVENTIONS = ("Tokens: whitespace-separated units of each line as given{tok}. Types: "
               "distinct tokens (case-sensitive). TTR = types / tokens. Lengths in "
               "tokens; median and percentiles by nearest rank.")


def to_markdown(results):
    """Markdown report: one summary table, then one length-distribution table per side."""
    if not results:
        return ""
    s, t = results[0]["languages"]
    lines = ["# Corpus statistics", ""]
    lines.append(f"| corpus | sentences | tokens {s} | tokens {t} | types {s} | types {t} "
                 f"| TTR {s} | TTR {t} | mean len {s} | mean len {t} |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        a, b = r["sides"][s], r["sides"][t]
        lines.append(f"| {r['name']} | {r['sentences']:,} | {a['tokens']:,} | "
                     f"{b['tokens']:,} | {a['types']:,} | {b['types']:,} | "
                     f"{a['type_token_ratio']:.3f} | {b['type_token_ratio']:.3f} | "
                     f"{a['length']['mean']:.1f} | {b['length']['mean']:.1f} |")
    for lang in (s, t):
        lines += ["", f"## Sentence length ({lang}, tokens)", ""]
        buckets = [bucket_name(lo, hi) for lo, hi in LENGTH_BUCKETS]
        lines.append("| corpus | mean | std | min | median | p90 | p99 | max | "
                     + " | ".join(buckets) + " |")
        lines.append("|---|" + "---:|" * (7 + len(buckets)))
        for r in results:
            x = r["sides"][lang]
            ln = x["length"]
            lines.append(f"| {r['name']} | {ln['mean']:.1f} | {ln['std']:.1f} | "
                         f"{ln['min']} | {ln['median']} | {ln['p90']} | {ln['p99']} | "
                         f"{ln['max']} | "
                         + " | ".join(f"{x['length_histogram'][k]:,}" for k in buckets)
                         + " |")
    tok = any(r["tokenized_here"] for r in results)
    lines += ["", CONVENTIONS.format(tok=" (Moses-tokenised by nmtfrag first)" if tok
                                     else ""), ""]
    return "\n".join(lines)
