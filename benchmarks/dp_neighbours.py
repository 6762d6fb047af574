"""Neighbouring corpora D and D' (issue 18): does adding one unit move other units'
phrase pairs, and does it change what `extract --dp` releases?

D  = the first --lines pairs of a (Moses-tokenised) corpus + 150 × "der Blorf ist gut ."
     ||| "the ploof is zing ." + 300 × "das ist gut ." ||| "that is zing ."
D' = D + one unit: 1,000 × "Blorf" ||| 1,000 × "zing".

Exact counts (`--sample-rate 1.0 --allow-whole-sentences --keep-alignments`): every
release of every occurrence; the added unit's own pairs (from its kept alignment) are
subtracted from D''s counts, and the rest is compared with D's first run: max |Δ| over
all pairs, and the count of "Blorf ||| ploof". With the public aligner the two must be
identical in every run; eflomal (learned on the corpus itself, --eflomal-runs) is shown
for contrast — its own runs differ too, since it cannot be seeded.
DP (`--dp --epsilon E --delta D`, untagged): how often "Blorf ||| ploof" is released.

    python3 benchmarks/dp_neighbours.py --src EMEA/train.de --tgt EMEA/train.en \
        --align-model align-model/ [--runs 10] [--eflomal-runs 3]
"""
import argparse
import os
import sys
import tempfile
from collections import Counter

PROBE = ("Blorf", "ploof")


def write_corpora(src, tgt, n, work):
    """D and D' as (prefix, index of the added line or None)."""
    with open(src, encoding="utf-8") as fs, open(tgt, encoding="utf-8") as ft:
        base = [(s.rstrip("\n"), t.rstrip("\n")) for _, s, t in zip(range(n), fs, ft)]
    d = base + [("der Blorf ist gut .", "the ploof is zing .")] * 150 + \
        [("das ist gut .", "that is zing .")] * 300
    d2 = d + [(" ".join(["Blorf"] * 1000), " ".join(["zing"] * 1000))]
    out = {}
    for name, pairs, added in (("D", d, None), ("D'", d2, len(d2))):
        prefix = os.path.join(work, name.replace("'", "2"))
        for side, lang in enumerate(("de", "en")):
            with open(f"{prefix}.{lang}", "w", encoding="utf-8") as f:
                f.writelines(p[side] + "\n" for p in pairs)
        out[name] = (prefix, added)
    return out


def released(out):
    with open(os.path.join(out, "phrases.de"), encoding="utf-8") as fs, \
            open(os.path.join(out, "phrases.en"), encoding="utf-8") as ft:
        return Counter(zip(fs.read().splitlines(), ft.read().splitlines()))


def own_pairs(prefix, out, line_no):
    """The added unit's phrase pairs under the alignment the run gave it."""
    from nmtfrag.fragment.extract import phrase_pairs
    from nmtfrag.fragment.symmetrize import parse_pharaoh

    with open(f"{prefix}.de", encoding="utf-8") as fs, \
            open(f"{prefix}.en", encoding="utf-8") as ft, \
            open(os.path.join(out, "owner", "corpus.align"), encoding="utf-8") as fa:
        for k, (s, t, a) in enumerate(zip(fs, ft, fa), 1):
            if k == line_no:
                found, _ = phrase_pairs(s.split(), t.split(), sorted(parse_pharaoh(a)), 4,
                                        1, True, False)
                return Counter((p[0], p[1]) for p in found)
    return Counter()


def exact_runs(corpora, runs, work, aligner_kwargs):
    """[(corpus, run, probe count, max |Δ| of other units' counts vs D run 1)]."""
    from nmtfrag.fragment.extract import extract_release

    rows, reference = [], None
    for name in ("D", "D'"):
        prefix, added = corpora[name]
        for run in range(runs):
            out = os.path.join(work, "exact")
            extract_release(f"{prefix}.de", f"{prefix}.en", out, sample_rate=1.0,
                            pretokenized=True, allow_whole_sentences=True,
                            keep_alignments=True, overwrite=True, **aligner_kwargs)
            counts = released(out)
            if added:
                counts = counts - own_pairs(prefix, out, added)
            reference = reference or counts
            delta = max((abs(counts[k] - reference[k]) for k in set(counts) | set(reference)),
                        default=0)
            rows.append((name, run + 1, counts[PROBE], delta))
    return rows


def dp_runs(corpora, runs, work, epsilon, delta, aligner_kwargs):
    """{corpus: runs in which the probe pair was released}."""
    from nmtfrag.fragment.dp_release import DPReleaseParams
    from nmtfrag.fragment.extract import extract_release

    hits = {}
    for name in ("D", "D'"):
        prefix, _ = corpora[name]
        hits[name] = 0
        for _ in range(runs):
            out = os.path.join(work, "dp")
            extract_release(f"{prefix}.de", f"{prefix}.en", out, pretokenized=True,
                            overwrite=True, dp=DPReleaseParams(epsilon, delta),
                            **aligner_kwargs)
            hits[name] += PROBE in released(out)
    return hits


def summarise(label, rows):
    for name in ("D", "D'"):
        mine = [r for r in rows if r[0] == name]
        counts = sorted({r[2] for r in mine})
        same = sum(r[3] == 0 for r in mine)
        print(f"| {label} | {name} | {len(mine)} | {', '.join(map(str, counts))} | "
              f"{same}/{len(mine)} | {max(r[3] for r in mine)} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", required=True, help="Moses-tokenised source side")
    ap.add_argument("--tgt", required=True)
    ap.add_argument("--align-model", required=True, help="from `nmtfrag align-model`")
    ap.add_argument("--lines", type=int, default=500)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--eflomal-runs", type=int, default=0,
                    help="also exact counts with eflomal on the corpus (no --dp)")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-4)
    a = ap.parse_args()

    with tempfile.TemporaryDirectory() as work:
        corpora = write_corpora(a.src, a.tgt, a.lines, work)
        public = {"align_model": a.align_model}
        print("Exact counts (--sample-rate 1.0; D': the added unit's own pairs removed)")
        print("| aligner | corpus | runs | 'Blorf ||| ploof' counts | runs = D run 1 | "
              "max abs change |")
        print("|---|---|---|---|---|---|")
        summarise("public model", exact_runs(corpora, a.runs, work, public))
        if a.eflomal_runs:
            summarise("eflomal on the corpus", exact_runs(corpora, a.eflomal_runs, work, {}))
        hits = dp_runs(corpora, a.runs, work, a.epsilon, a.delta, public)
        print(f"\n--dp --epsilon {a.epsilon:g} --delta {a.delta:g} (public model): "
              f"'Blorf ||| ploof' released in {hits['D']}/{a.runs} runs on D, "
              f"{hits[chr(68) + chr(39)]}/{a.runs} on D'")


if __name__ == "__main__":
    sys.exit(main())
