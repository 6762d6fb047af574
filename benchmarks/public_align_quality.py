"""How close the public, per-sentence aligner (nmtfrag.fragment.public_align) comes to eflomal
learned on the corpus itself, and how many phrase pairs each gives.

eflomal is run on the first --lines pairs (twice: two runs of eflomal differ, which
bounds how much agreement to expect); its union alignment is the proxy reference.
For each setting of the public aligner's fixed parameters (tension λ, null
probability p0, identical-token probability), the union alignment is scored by link
precision / recall / F against it, and the phrase-pair occurrences at --max-len are
counted (whole-sentence pairs dropped, as `extract` does by default).

    python3 benchmarks/public_align_quality.py --src EMEA/train.de --tgt EMEA/train.en \
        --pretokenized --model align-model/ [--lines 2000] \
        [--tensions 2,4,8] [--p0s 0.02,0.08,0.2] [--identicals 0,0.5]
"""
import argparse
import itertools
import os
import sys
import tempfile


def read_pairs(src, tgt, n, pretokenized):
    from nmtfrag.data.tokenize import to_tokens

    pairs = []
    with open(src, encoding="utf-8") as fs, open(tgt, encoding="utf-8") as ft:
        for s, t in zip(fs, ft):
            if len(pairs) == n:
                break
            s_tok = to_tokens(s.strip(), "de", pretokenized)
            t_tok = to_tokens(t.strip(), "en", pretokenized)
            if s_tok and t_tok:
                pairs.append((s_tok, t_tok))
    return pairs


def eflomal_union(pairs):
    from nmtfrag.fragment.align import align_files
    from nmtfrag.fragment.symmetrize import parse_pharaoh

    with tempfile.TemporaryDirectory() as work:
        paths = [os.path.join(work, name) for name in ("s", "t", "f", "r")]
        for path, side in zip(paths, (0, 1)):
            with open(path, "w", encoding="utf-8") as f:
                f.writelines(" ".join(p[side]) + "\n" for p in pairs)
        align_files(*paths, work)
        with open(paths[2]) as ff, open(paths[3]) as fr:
            return [parse_pharaoh(a) | parse_pharaoh(b) for a, b in zip(ff, fr)]


def scores(found, reference):
    hit = sum(len(a & b) for a, b in zip(found, reference))
    n_found, n_ref = sum(map(len, found)), sum(map(len, reference))
    p, r = hit / max(n_found, 1), hit / max(n_ref, 1)
    return p, r, 2 * p * r / max(p + r, 1e-12), n_found


def phrase_count(pairs, alignments, max_len):
    from nmtfrag.fragment.extract import phrase_pairs

    return sum(len(phrase_pairs(s, t, sorted(a), max_len, 1, False, False)[0])
               for (s, t), a in zip(pairs, alignments))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", required=True)
    ap.add_argument("--tgt", required=True)
    ap.add_argument("--model", required=True, help="a dir from `nmtfrag align-model`")
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--max-len", type=int, default=4)
    ap.add_argument("--pretokenized", action="store_true")
    ap.add_argument("--tensions", default=None, help="comma-separated λ to try "
                    "(default: the model's)")
    ap.add_argument("--p0s", default=None, help="comma-separated p0 to try")
    ap.add_argument("--identicals", default=None, help="comma-separated identical-token "
                    "probabilities to try")
    a = ap.parse_args()

    from nmtfrag.fragment.public_align import AlignParams, PublicAligner

    pairs = read_pairs(a.src, a.tgt, a.lines, a.pretokenized)
    ref, again = eflomal_union(pairs), eflomal_union(pairs)
    print(f"{len(pairs)} pairs; eflomal union: {sum(map(len, ref))} links, "
          f"{phrase_count(pairs, ref, a.max_len)} phrase pairs (max-len {a.max_len})")
    p, r, f, n = scores(again, ref)
    print(f"eflomal run 2 vs run 1: P {p:.3f} R {r:.3f} F {f:.3f} ({n} links, "
          f"{phrase_count(pairs, again, a.max_len)} phrase pairs)")
    aligner = PublicAligner(a.model)
    base = aligner.params
    def values(text, default):
        return [float(x) for x in text.split(",")] if text else [default]

    grid = itertools.product(values(a.tensions, base.tension), values(a.p0s, base.p0),
                             values(a.identicals, base.identical))
    print(f"{'λ':>4} {'p0':>5} {'ident':>5} {'P':>6} {'R':>6} {'F':>6} {'links':>7} "
          f"{'phrases':>8}")
    for tension, p0, identical in grid:
        aligner.params = AlignParams(tension, p0, identical, base.min_count)
        found = [set(aligner.align(s, t)) for s, t in pairs]
        p, r, f, n = scores(found, ref)
        print(f"{tension:4g} {p0:5g} {identical:5g} {p:6.3f} {r:6.3f} {f:6.3f} {n:7d} "
              f"{phrase_count(pairs, found, a.max_len):8d}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
