"""Corpus statistics: the figures of Table 1 of Kim, Bisazza & Turkmen (2021).

Why: a benchmark is only comparable if its data is: the paper describes each domain by
its number of sentence pairs per split, tokens per side, sentence lengths and vocabulary
(types). This module computes those figures for any line-aligned corpus, so a user can
check that a re-created split matches the paper's, or describe a new domain the same way.

Counting conventions (stated in every report):
- a token is a whitespace-separated unit of the line as given (`str.split()`, the way
  fairseq splits tokenised text); pass `tokenize=True` to Moses-tokenise raw text first,
  exactly as fairseq's WMT19 hub does (nmtfrag.data.tokenize);
- types are distinct tokens, case-sensitive; type/token ratio = types / tokens;
- sentence length = tokens in a line; the distribution gives mean, standard deviation,
  min, median, 90th/99th percentile (nearest rank), max, and a histogram with the buckets
  in LENGTH_BUCKETS;
- every line counts (an empty line has length 0 and is reported as `empty_lines`).
The corpus is streamed: memory grows with the vocabulary, not with the corpus.
"""
from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .corpus import check_distinct_sides, scan_text_file
from ..errors import InputError
from ..fileio import (MANIFEST, atomic_writer, public_name, sha256_file, tool_versions,
                     write_json)

LENGTH_BUCKETS = ((0, 0), (1, 5), (6, 10), (11, 20), (21, 30), (31, 50), (51, 100),
                  (101, None))


def bucket_name(lo: int, hi: int | None) -> str:
    if hi is None:
        return f">{lo - 1}"
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _nearest_rank(sorted_lengths, q):
    """The q-quantile by the nearest-rank method (a value that occurs in the data)."""
    if not sorted_lengths:
        return 0
    k = max(1, math.ceil(q * len(sorted_lengths)))
    return sorted_lengths[k - 1]


def side_stats(length_counts: Mapping[int, int],
               type_counts: Mapping[str, int]) -> dict:
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


def corpus_stats(src: str, tgt: str, name: str | None = None, src_lang: str = "de",
                 tgt_lang: str = "en", tokenize: bool = False) -> dict:
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
        lengths: Counter[int] = Counter()
        types: Counter[str] = Counter()
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


def splits_in_dir(directory: str, src_lang: str = "de",
                  tgt_lang: str = "en") -> list[tuple[str, str, str]]:
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


def to_markdown(results: Sequence[dict]) -> str:
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


# --------------------------------------------------------------------------- data checks
# Why: a translation memory can hold layouts that only full sentences teach (a target that
# repeats its source, a source in capitals), pairs counted twice, or test pairs that are
# also training pairs; each distorts every comparison unseen, so they are counted first.

MIN_COPY_WORDS = 3  # a copied source must have this many words with a letter or digit
MIN_CAPS_LETTERS = 4  # an all-caps segment must have this many letters


def _words_with_content(tokens):
    return sum(1 for t in tokens if any(c.isalnum() for c in t))


def copies_source(src: str, tgt: str) -> bool:
    """The target contains its source verbatim (case-insensitive, on token boundaries);
    only sources of MIN_COPY_WORDS words with a letter or digit count, so a copied
    "." or "( 1 )" is not a copy."""
    s, t = src.lower().split(), tgt.lower().split()
    if _words_with_content(s) < MIN_COPY_WORDS or len(s) > len(t):
        return False
    return f" {' '.join(s)} " in f" {' '.join(t)} "


def all_caps(segment: str) -> bool:
    """Every cased letter is upper case, and there are MIN_CAPS_LETTERS letters at least."""
    letters = [c for c in segment if c.isalpha()]
    return len(letters) >= MIN_CAPS_LETTERS and segment == segment.upper() \
        and segment != segment.lower()


def data_checks(src: str, tgt: str) -> dict[str, int]:
    """Counts of the layouts that distort a comparison, for one line-aligned corpus:
    targets containing their source copied, all-caps segments per side, duplicated pairs
    (lines whose pair occurred on an earlier line) and the distinct pairs duplicated."""
    seen: Counter[tuple[str, str]] = Counter()
    out = {"lines": 0, "target_contains_source": 0, "all_caps_src": 0, "all_caps_tgt": 0,
           "duplicate_lines": 0}
    for s, t in zip(_read_lines(src), _read_lines(tgt)):
        out["lines"] += 1
        out["target_contains_source"] += copies_source(s, t)
        out["all_caps_src"] += all_caps(s)
        out["all_caps_tgt"] += all_caps(t)
        key = (" ".join(s.split()), " ".join(t.split()))
        out["duplicate_lines"] += seen[key] > 0
        seen[key] += 1
    out["duplicated_pairs_distinct"] = sum(1 for c in seen.values() if c > 1)
    return out


def overlap_with_train(train_src: str, train_tgt: str, test_src: str,
                       test_tgt: str) -> dict[str, int]:
    """Test lines whose pair (and whose source alone) is also a training line: BLEU on
    them measures recall of the training data, not translation."""
    pairs, sources = set(), set()
    for s, t in zip(_read_lines(train_src), _read_lines(train_tgt)):
        s, t = " ".join(s.split()), " ".join(t.split())
        pairs.add((s, t))
        sources.add(s)
    n = pair_hits = src_hits = 0
    for s, t in zip(_read_lines(test_src), _read_lines(test_tgt)):
        s, t = " ".join(s.split()), " ".join(t.split())
        n += 1
        pair_hits += (s, t) in pairs
        src_hits += s in sources
    return {"test_lines": n, "test_pairs_in_train": pair_hits,
            "test_sources_in_train": src_hits}


CHECKS = (("target_contains_source", "target contains its source"),
          ("all_caps_src", "all-caps source"), ("all_caps_tgt", "all-caps target"),
          ("duplicate_lines", "duplicated pair lines"))


def checks_markdown(checks: Sequence[tuple[str, dict]],
                    overlaps: Sequence[tuple[str, str, dict]]) -> str:
    """The data checks as Markdown: one row per corpus, then the test/train overlaps."""
    lines = ["## Data checks", "",
             "| corpus | lines | " + " | ".join(label for _, label in CHECKS) + " |",
             "|---|---:|" + "---:|" * len(CHECKS)]
    for name, c in checks:
        lines.append(f"| {name} | {c['lines']:,} | " + " | ".join(
            f"{c[k]:,} ({_pct(c[k], c['lines'])})" for k, _ in CHECKS) + " |")
    if overlaps:
        lines += ["", "| test | train | test pairs also in train | test sources also in "
                  "train |", "|---|---|---:|---:|"]
        for test, train, o in overlaps:
            lines.append(f"| {test} | {train} | {o['test_pairs_in_train']:,} "
                         f"({_pct(o['test_pairs_in_train'], o['test_lines'])}) | "
                         f"{o['test_sources_in_train']:,} "
                         f"({_pct(o['test_sources_in_train'], o['test_lines'])}) |")
    lines += ["", f"Copied source: the target contains the whole source (case-insensitive, "
              f"sources of {MIN_COPY_WORDS}+ words with a letter or digit). All-caps: every "
              f"cased letter upper case ({MIN_CAPS_LETTERS}+ letters). Duplicated: lines "
              f"whose pair occurred on an earlier line (whitespace-normalised).", ""]
    return "\n".join(lines)


def checks_warnings(checks: Sequence[tuple[str, dict]],
                    overlaps: Sequence[tuple[str, str, dict]]) -> list[str]:
    """One `warning:` sentence per non-zero check (what `nmtfrag study` shows before training)."""
    out = []
    for name, c in checks:
        for k, label in CHECKS:
            if c[k]:
                out.append(f"{name}: {c[k]:,} of {c['lines']:,} lines ({_pct(c[k], c['lines'])})"
                           f": {label}")
    for test, train, o in overlaps:
        if o["test_pairs_in_train"] or o["test_sources_in_train"]:
            out.append(f"{test}: {o['test_pairs_in_train']:,} of {o['test_lines']:,} test "
                       f"pairs (and {o['test_sources_in_train']:,} sources) are also in {train}")
    return out


def _pct(a, b):
    return f"{100 * a / b:.1f}%" if b else "–"


# --------------------------------------------------------------------------- releases

RELEASE_LENGTH_BUCKETS = ((1, 1), (2, 2), (3, 3), (4, 4), (5, 7), (8, 15), (16, None))


def punct_or_number(tokens: Iterable[str]) -> bool:
    """Every token is punctuation, a symbol, a number or a Moses escape (&amp; …)."""
    import re

    return all(re.fullmatch(r"(&\w+;|[\W_\d])+", t) for t in tokens)


def release_contents(pairs: Sequence[tuple[tuple[str, ...], tuple[str, ...]]]) -> dict:
    """What a release holds, from its (src, tgt) token pairs (tags stripped): pairs,
    distinct pairs, the share of distinct pairs that are punctuation/numbers only (both
    sides), the share identical on both sides, and a histogram of distinct pairs by
    length (words of the longer side, as max-len counts them). Why: a DP release may keep
    only the most frequent pairs; what they are decides what a model can learn from it."""
    distinct = set(pairs)
    n = len(distinct)
    hist = {bucket_name(lo, hi): 0 for lo, hi in RELEASE_LENGTH_BUCKETS}
    for s, t in distinct:
        k = max(len(s), len(t))
        for lo, hi in RELEASE_LENGTH_BUCKETS:
            if k >= lo and (hi is None or k <= hi):
                hist[bucket_name(lo, hi)] += 1
                break
    pn = sum(1 for s, t in distinct if punct_or_number(s) and punct_or_number(t))
    same = sum(1 for s, t in distinct if s == t)
    return {"pairs": len(pairs), "distinct_pairs": n,
            "punct_or_number_only_share": round(pn / n, 4) if n else None,
            "identical_sides_share": round(same / n, 4) if n else None,
            "length_histogram": hist}


def release_markdown(results: Sequence[tuple[str, dict]]) -> str:
    """What each release holds, one row per release."""
    buckets = [bucket_name(lo, hi) for lo, hi in RELEASE_LENGTH_BUCKETS]
    lines = ["## What each release holds", "",
             "| release | pairs | distinct | punct./numbers only | identical sides | "
             + " | ".join(f"{b} w." for b in buckets) + " |",
             "|---|---:|---:|---:|---:|" + "---:|" * len(buckets)]
    for name, r in results:
        lines.append(f"| {name} | {r['pairs']:,} | {r['distinct_pairs']:,} | "
                     f"{_share(r['punct_or_number_only_share'])} | "
                     f"{_share(r['identical_sides_share'])} | "
                     + " | ".join(f"{r['length_histogram'][b]:,}" for b in buckets) + " |")
    lines += ["", "Shares and the histogram are of distinct pairs; length: words of the "
              "longer side (tags stripped).", ""]
    return "\n".join(lines)


def _share(x):
    return "–" if x is None else f"{100 * x:.1f}%"


# --------------------------------------------------------------------------- the stage
# Why one entry point: `nmtfrag stats` and a Python caller describe corpora, check them
# and report on releases the same way; the command only turns its options into inputs.

@dataclass
class StatsInputs:
    """What one statistics report covers."""

    corpora: list[tuple[str | None, str, str]]    # (name or None, src path, tgt path)
    # (test name, train name, (test src, test tgt), (train src, train tgt))
    overlaps: list[tuple[str, str, Sequence[str], Sequence[str]]]
    releases: list[str]                           # release directories

    def files(self) -> list[tuple[str, str]]:
        """The (src, tgt) files of every corpus (what an output must not overwrite)."""
        return [c[1:] for c in self.corpora]


def stats_inputs(src: Sequence[str] = (), tgt: Sequence[str] = (),
                 names: Sequence[str] = (), *, train: Sequence[str] | None = None,
                 test: Sequence[str] | None = None, dirs: Sequence[str] = (),
                 releases: Sequence[str] = (), src_lang: str = "de",
                 tgt_lang: str = "en") -> StatsInputs:
    """The corpora, test/train overlaps and releases to report on, from the command's
    options: `src`/`tgt` (and `names`) pairwise, `train` and `test` as (src, tgt), each
    of `dirs` holding train/valid/test files; refused (InputError) when inconsistent."""
    if len(src) != len(tgt):
        raise InputError(f"give one --tgt per --src ({len(src)} --src, "
                         f"{len(tgt)} --tgt)")
    if names and len(names) != len(src):
        raise InputError(f"give one --name per --src or none ({len(names)} --name, "
                         f"{len(src)} --src)")
    corpora: list[tuple[str | None, str, str]] = []
    for i, (s, t) in enumerate(zip(src, tgt)):
        check_distinct_sides(s, t, "--src/--tgt")
        corpora.append((names[i] if names else None, s, t))
    overlaps = []
    if train:
        check_distinct_sides(train[0], train[1], "--train")
        corpora.append(("train", train[0], train[1]))
    if test:
        check_distinct_sides(test[0], test[1], "--test")
        corpora.append(("test", test[0], test[1]))
        if train:
            overlaps.append(("test", "train", test, train))
    for d in dirs:
        found = splits_in_dir(d, src_lang, tgt_lang)
        for _, s, t in found:
            check_distinct_sides(s, t, f"--dir {d}")
        corpora.extend(found)
        by_split = {name.rsplit(" ", 1)[1]: (name, (s, t)) for name, s, t in found}
        if "train" in by_split and "test" in by_split:
            overlaps.append((by_split["test"][0], by_split["train"][0],
                             by_split["test"][1], by_split["train"][1]))
    if not corpora and not releases:
        raise InputError("nothing to count: give --src/--tgt, --train/--test, --dir or "
                         "--release")
    for r in releases:
        if not os.path.isdir(r):
            raise InputError(f"--release {r}: no such directory")
    return StatsInputs(corpora, overlaps, list(releases))


@dataclass
class StatsReport:
    """Statistics, data checks, overlaps and release contents of one StatsInputs."""

    inputs: StatsInputs
    corpora: list[dict]                       # corpus_stats of each corpus
    checks: list[tuple[str, dict]]            # (corpus name, data_checks)
    overlaps: list[tuple[str, str, dict]]     # (test, train, overlap_with_train)
    releases: list[tuple[str, dict]]          # (release name, release_contents)
    src_lang: str = "de"
    tgt_lang: str = "en"
    tokenize: bool = False

    def warnings(self) -> list[str]:
        """One sentence per data check that found something (see checks_warnings)."""
        return checks_warnings(self.checks, self.overlaps)

    def markdown(self) -> str:
        """report.md: the statistics, then the data checks, then the releases."""
        return "\n".join(part for part in (
            to_markdown(self.corpora),
            checks_markdown(self.checks, self.overlaps) if self.checks else "",
            release_markdown(self.releases) if self.releases else "") if part)

    def to_json(self) -> dict:
        """report.json."""
        return {"corpora": self.corpora, "tokenized_here": self.tokenize,
                "data_checks": [{"name": n, **c} for n, c in self.checks],
                "test_in_train": [{"test": te, "train": tr, **o}
                                  for te, tr, o in self.overlaps],
                "releases": [{"name": n, **c} for n, c in self.releases],
                "conventions": "see nmtfrag/data/stats.py"}

    def manifest(self) -> dict:
        """manifest.json: options, input digests (by corpus and file name), counts."""
        return {
            "stage": "stats",
            "params": {"src_lang": self.src_lang, "tgt_lang": self.tgt_lang,
                       "tokenize": self.tokenize},
            # corpus name / file name, not the path: the manifest may be shared
            "inputs": {f"{r['name']}/{public_name(p)}": sha256_file(p)
                       for r, (_, s, t) in zip(self.corpora, self.inputs.corpora)
                       for p in (s, t)},
            "counts": {r["name"]: r["sentences"] for r in self.corpora},
            "tool_versions": tool_versions("nmtfrag", "sacremoses"),
        }


def describe_corpora(inputs: StatsInputs, *, src_lang: str = "de", tgt_lang: str = "en",
                     tokenize: bool = False) -> StatsReport:
    """Count every corpus of `inputs`, run the data checks and the test/train overlaps,
    and read what each release holds."""
    from .release_text import read_release

    results = [corpus_stats(s, t, name=n, src_lang=src_lang, tgt_lang=tgt_lang,
                            tokenize=tokenize)
               for n, s, t in inputs.corpora]
    checks = [(r["name"], data_checks(s, t))
              for r, (_, s, t) in zip(results, inputs.corpora)]
    overlaps = [(test, train, overlap_with_train(*tr, *te))
                for test, train, te, tr in inputs.overlaps]
    releases = []
    for r in inputs.releases:
        pairs, _ = read_release(r)
        releases.append((os.path.basename(os.path.normpath(r)), release_contents(pairs)))
    return StatsReport(inputs, results, checks, overlaps, releases, src_lang, tgt_lang,
                       tokenize)


def write_report(report: StatsReport, out: str) -> None:
    """OUT/report.json, OUT/report.md and OUT/manifest.json (OUT already prepared)."""
    write_json(os.path.join(out, "report.json"), report.to_json())
    with atomic_writer(os.path.join(out, "report.md")) as f:
        f.write(report.markdown())
    write_json(os.path.join(out, MANIFEST), report.manifest())
