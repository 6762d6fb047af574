#!/usr/bin/env python3
"""Cross-check `nmtfrag extract` against Moses `extract`, occurrence for occurrence.

Given a Moses `extract` binary (phrase-extract/extract-main.cpp of mosesdecoder, built
separately: nothing here builds it) and a Pharaoh alignment (source-target, one line per
corpus line), run both extractions on the same sentences and compare the multisets of

  * (source phrase, target phrase) occurrences, and
  * (source phrase, target phrase, phrase-internal alignment) occurrences, the alignment
    both as a set of points and byte for byte (Moses keeps the input file's order of the
    points within a target word, nmtfrag sorts them; the same for sorted input such as
    atools output or nmtfrag's owner/corpus.align).

Moses parses every target line as XML, so a target line with a raw `<` and no later `>`
becomes empty and the sentence pair is dropped ("ERROR: malformed XML"; "no target (0)
... words"); nmtfrag keeps it. The script finds the sentences Moses dropped, removes
them from our side and checks that the rest is identical. Any other difference is
reported with the smallest sentence pair showing it (tokens, alignment, both outputs).

    python3 benchmarks/moses_crosscheck.py --moses-extract /path/to/extract \
        --alignment union.align --src train.de --tgt train.en \
        --max-len 4 7 --work /tmp/xcheck [--first 300]

Moses is called as `extract TGT SRC ALIGN OUT MAXLEN --IncludeSentenceId` (it takes the
target side first and the alignment source-target); nmtfrag as
`nmtfrag extract --pretokenized --alignments ALIGN --sample-rate 1.0 --keep-alignments
--allow-whole-sentences` (Moses keeps a phrase pair that spans a whole sentence; a release
drops it by default).
Exit status: 0 if the only differences are sentences Moses dropped, 1 otherwise.
"""
import argparse
import itertools
import os
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from nmtfrag.fragment.phrases import extract_phrase_pairs  # noqa: E402
from nmtfrag.fragment.symmetrize import parse_pharaoh  # noqa: E402
from nmtfrag.data.tokenize import to_tokens  # noqa: E402

SEP = " ||| "
# Moses' reasons for skipping a sentence pair, as printed on stderr.
MOSES_SKIP_PATTERNS = [
    (re.compile(r"no target \(\d+\) or source \(\d+\) words << end insentence (\d+)"),
     "empty side after Moses' XML parsing of the target"),
    (re.compile(r"WARNING: sentence (\d+) has alignment point"), "alignment point out of bounds"),
    (re.compile(r"WARNING: failed to process target sentence at line (\d+)"), "XML exception"),
    (re.compile(r"bad alignment point in sentence (\d+)"), "bad alignment point"),
]


def head(path, n, out):
    with open(path, encoding="utf-8", newline="") as f, \
            open(out, "w", encoding="utf-8", newline="") as g:
        g.writelines(itertools.islice(f, n))
    return out


def run(cmd, log):
    t0 = time.perf_counter()
    with open(log, "w") as err:
        proc = subprocess.run(cmd, stdout=err, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} failed (exit {proc.returncode}), see {log}")
    return seconds


def split_record(line, n_fields, path):
    parts = line.rstrip("\n").split(SEP)
    if len(parts) != n_fields:
        sys.exit(f"error: {path}: cannot split {line!r} into {n_fields} fields "
                 "(does a token contain '|||'?)")
    return [p.strip() for p in parts]


def read_moses(path):
    """{sentence id: Counter of (src, tgt, alignment)} from `extract --IncludeSentenceId`."""
    per_sentence = defaultdict(Counter)
    with open(path, encoding="utf-8") as f:
        for line in f:
            src, tgt, align, sid = split_record(line, 4, path)
            per_sentence[int(sid)][(src, tgt, align)] += 1
    return per_sentence


def read_ours(path):
    with open(path, encoding="utf-8") as f:
        return Counter(tuple(split_record(line, 3, path)) for line in f)


def moses_skips(log):
    skipped = {}
    with open(log, encoding="utf-8", errors="replace") as f:
        for line in f:
            for pattern, reason in MOSES_SKIP_PATTERNS:
                m = pattern.search(line)
                if m:
                    skipped.setdefault(int(m.group(1)), reason)
    return skipped


def our_per_sentence(src, tgt, alignment, max_len):
    """{line number: Counter of (src, tgt, alignment)} from nmtfrag's Python API."""
    per_sentence, sentences = {}, {}
    with open(src, encoding="utf-8") as fs, open(tgt, encoding="utf-8") as ft, \
            open(alignment, encoding="utf-8") as fa:
        for line_no, (s, t, a) in enumerate(zip(fs, ft, fa), 1):
            s_tok, t_tok = to_tokens(s, "de", True), to_tokens(t, "en", True)
            if not s_tok or not t_tok:
                continue
            points = parse_pharaoh(a)
            per_sentence[line_no] = Counter(
                extract_phrase_pairs(s_tok, t_tok, points, max_len, with_alignment=True))
            sentences[line_no] = (s_tok, t_tok, a.strip())
    return per_sentence, sentences


def total(counters):
    out = Counter()
    for c in counters:
        out.update(c)
    return out


def canonical(counter):
    """Alignment strings as point sets (Moses keeps the input order within a target word;
    nmtfrag sorts by target, then source)."""
    out = Counter()
    for (s, t, a), n in counter.items():
        points = sorted(a.split(), key=lambda p: tuple(map(int, p.split("-")))[::-1])
        out[(s, t, " ".join(points))] += n
    return out


def pairs_only(counter):
    out = Counter()
    for (s, t, _), n in counter.items():
        out[(s, t)] += n
    return out


def show_diff(a, b, label_a, label_b, limit=10):
    lines = []
    for key in sorted(set(a) | set(b)):
        if a[key] != b[key]:
            lines.append(f"    {' ||| '.join(key)}   {label_a}={a[key]} {label_b}={b[key]}")
    more = f"\n    ... {len(lines) - limit} more" if len(lines) > limit else ""
    return "\n".join(lines[:limit]) + more


def check(args, src, tgt, alignment, max_len, work):
    print(f"== max-len {max_len}")
    moses_out = os.path.join(work, f"moses{max_len}.extract")
    moses_log = moses_out + ".log"
    cmd = [args.moses_extract, tgt, src, alignment, moses_out, str(max_len), "--IncludeSentenceId"]
    t_moses = run(cmd, moses_log)
    print(f"moses:   {' '.join(cmd)}   ({t_moses:.2f} s)")

    ours_dir = os.path.join(work, f"nmtfrag{max_len}")
    cmd = [args.nmtfrag, "extract", "--src", src, "--tgt", tgt, "--pretokenized",
           "--alignments", alignment, "--sample-rate", "1.0", "--keep-alignments",
           "--allow-whole-sentences", "--max-len", str(max_len), "--out", ours_dir, "--overwrite"]
    t_ours = run(cmd, ours_dir + ".log")
    print(f"nmtfrag: {' '.join(cmd)}   ({t_ours:.2f} s)")

    moses_by_sent = read_moses(moses_out)
    moses_all = total(moses_by_sent.values())
    ours_all = read_ours(os.path.join(ours_dir, "phrases.extract"))
    n_moses, n_ours = sum(moses_all.values()), sum(ours_all.values())
    print(f"occurrences: nmtfrag {n_ours}, Moses {n_moses}, difference {n_ours - n_moses}")

    t0 = time.perf_counter()
    ours_by_sent, sentences = our_per_sentence(src, tgt, alignment, max_len)
    print(f"nmtfrag.fragment.phrases per-sentence pass: {time.perf_counter() - t0:.2f} s")
    api_all = total(ours_by_sent.values())
    api_ok = api_all == ours_all
    print(f"nmtfrag CLI release == per-sentence Python API: {api_ok}")

    skipped = moses_skips(moses_log)
    differing = sorted(
        n for n in set(ours_by_sent) | set(moses_by_sent)
        if canonical(ours_by_sent.get(n, Counter())) != canonical(moses_by_sent.get(n, Counter())))
    dropped = [n for n in differing if not moses_by_sent.get(n) and n in skipped]
    other = [n for n in differing if n not in dropped]
    reasons = Counter(skipped[n] for n in dropped)
    with_lt = sum("<" in " ".join(sentences[n][1]) for n in dropped)
    print(f"sentences Moses skipped (stderr): {len(skipped)}; dropped and yielding pairs "
          f"in nmtfrag: {len(dropped)} ({with_lt} with '<' in the target"
          + "".join(f"; {r}: {c}" for r, c in reasons.items()) + ")")
    dropped_occ = sum(sum(ours_by_sent[n].values()) for n in dropped)
    print(f"nmtfrag occurrences from those sentences: {dropped_occ}; "
          f"nmtfrag minus them: {n_ours - dropped_occ} (Moses {n_moses})")

    rest_ours = ours_all - total(ours_by_sent[n] for n in dropped)
    same_pairs = pairs_only(rest_ours) == pairs_only(moses_all)
    same_full = canonical(rest_ours) == canonical(moses_all)
    same_strings = rest_ours == moses_all
    print(f"identical without the dropped sentences: (src, tgt) {same_pairs}; "
          f"(src, tgt, alignment points) {same_full}; "
          f"(src, tgt, alignment string byte for byte) {same_strings}")
    print(f"whole corpus identical: (src, tgt) {pairs_only(ours_all) == pairs_only(moses_all)}")
    if other:
        print(f"DISCREPANCY in {len(other)} other sentences: {other[:20]}")
        n = min(other, key=lambda k: (len(sentences[k][0]) + len(sentences[k][1]), k)
                if k in sentences else (10**9, k))
        if n in sentences:
            s_tok, t_tok, a = sentences[n]
            print(f"  smallest: line {n}\n  src: {' '.join(s_tok)}\n  tgt: {' '.join(t_tok)}"
                  f"\n  align: {a}")
        print(show_diff(ours_by_sent.get(n, Counter()), moses_by_sent.get(n, Counter()),
                        "nmtfrag", "moses"))
    return api_ok and same_pairs and same_full and not other


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--moses-extract", required=True, help="Moses `extract` binary")
    ap.add_argument("--alignment", required=True, help="Pharaoh alignment, source-target")
    ap.add_argument("--src", required=True, help="tokenised source side (e.g. train.de)")
    ap.add_argument("--tgt", required=True, help="tokenised target side (e.g. train.en)")
    ap.add_argument("--max-len", type=int, nargs="+", default=[4, 7],
                    help="one or more max phrase lengths (default: 4 7)")
    ap.add_argument("--first", type=int, help="only the first N lines")
    ap.add_argument("--work", required=True, help="directory for both outputs (created)")
    ap.add_argument("--nmtfrag", default="nmtfrag", help="nmtfrag command (default: nmtfrag)")
    args = ap.parse_args()

    os.makedirs(args.work, exist_ok=True)
    src, tgt, alignment = args.src, args.tgt, args.alignment
    if args.first:
        src = head(src, args.first, os.path.join(args.work, "head.src"))
        tgt = head(tgt, args.first, os.path.join(args.work, "head.tgt"))
        alignment = head(alignment, args.first, os.path.join(args.work, "head.align"))
    ok = True
    for max_len in args.max_len:
        ok &= check(args, src, tgt, alignment, max_len, args.work)
    print("RESULT:", "identical except sentences Moses drops" if ok else "DIFFERENT")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
