"""How many phrase pairs a DP release keeps: nmtfrag's √K-sensitivity count against the
Policy Gaussian of Gopi et al. (2020), "Differentially Private Set Union", Alg. 4.

`nmtfrag extract --dp` counts each unit's ≤ K distinct pairs once (L2 sensitivity √K)
and thresholds at 1 + σ·Φ⁻¹(1 − δ_T/K). The Policy Gaussian instead lets each unit (in
a random order) spread an L2 budget of 1 over its ≤ Δ0 pairs, pushing only the pairs
still below a cutoff Γ towards it (budget is not spent on pairs that are already
frequent), and thresholds at ρ = max_t [1/√t + σ·Φ⁻¹((1 − δ_T)^(1/t))]
(`--dp-weights policy`; both in nmtfrag.dp.histogram). Both are (ε, δ)
with δ split evenly; σ is calibrated to ε by the analytic Gaussian mechanism at their
sensitivities (√K, 1). This script prints the number of distinct pairs each releases on
the same units — the utility that matters for fine-tuning — and their ratio; for the
policy, the best of a few cutoffs Γ = ρ + α·σ.

    python3 benchmarks/dp_release.py --src EMEA/train.de --tgt EMEA/train.en \
        --align-model align-model/ [--pretokenized] [--max-len 4] [--epsilons 1,4,8]
"""
import argparse
import os
import sys

import numpy as np


def unit_pairs(src, tgt, alignments, max_len, pretokenized, align_model=None):
    """Each unit's phrase pairs, aligned by the public model (`extract --dp`'s) or, for
    comparison with the old corpus-learned alignment, by a given alignment file."""
    import itertools

    from nmtfrag.fragment.extract import phrase_pairs
    from nmtfrag.fragment.symmetrize import parse_pharaoh
    from nmtfrag.data.tokenize import to_tokens

    aligner = None
    if align_model:
        from nmtfrag.fragment.public_align import PublicAligner

        aligner = PublicAligner(align_model)
    units = []
    with open(src, encoding="utf-8") as fs, open(tgt, encoding="utf-8") as ft, \
            open(alignments or os.devnull, encoding="utf-8") as fa:
        for s, t, a in zip(fs, ft, fa if alignments else itertools.repeat(None)):
            s_tok = to_tokens(s.rstrip("\n"), "de", pretokenized)
            t_tok = to_tokens(t.rstrip("\n"), "en", pretokenized)
            if not s_tok or not t_tok or (a is not None and not a.strip()):
                continue
            points = aligner.align(s_tok, t_tok) if aligner else parse_pharaoh(a)
            found, _ = phrase_pairs(s_tok, t_tok, points, max_len, 1, False,
                                    with_alignment=False)
            units.append([(p[0], p[1]) for p in found])
    return units


def main():
    from nmtfrag.dp import histogram
    from nmtfrag.fragment import dp_release as phrase_release

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", required=True)
    ap.add_argument("--tgt", required=True)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--align-model", help="the public alignment model `extract --dp` "
                     "uses (`nmtfrag align-model`)")
    src.add_argument("--alignments", help="one Pharaoh line per input line (e.g. eflomal "
                     "on the corpus: NOT what a DP release may use; for comparison)")
    ap.add_argument("--pretokenized", action="store_true")
    ap.add_argument("--max-len", type=int, default=4)
    ap.add_argument("--delta", type=float, default=1e-6)
    ap.add_argument("--epsilons", default="1,4,8")
    ap.add_argument("--caps", default="4,16,64")
    ap.add_argument("--seed", type=int, default=1, help="benchmark only: reproducible")
    a = ap.parse_args()
    units = unit_pairs(a.src, a.tgt, a.alignments, a.max_len, a.pretokenized,
                       a.align_model)
    print(f"{len(units)} units, {sum(len(set(u)) for u in units)} distinct pairs per unit "
          "summed", file=sys.stderr)
    print("| ε | K | count: σ | threshold | pairs | policy: σ | ρ | best Γ | pairs | "
          "count / policy |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for eps in [float(x) for x in a.epsilons.split(",")]:
        for cap in [int(x) for x in a.caps.split(",")]:
            p = phrase_release.DPReleaseParams(eps, a.delta, cap)
            sigma, thr = phrase_release.calibrate(p)
            n_count = len(phrase_release.select_pairs(units, p, sigma, thr,
                                                      np.random.default_rng(a.seed)))
            best = (-1, None, None, None)
            for alpha in (2.0, 3.0, 5.0, 8.0):
                q = phrase_release.DPReleaseParams(eps, a.delta, cap, repeat="once",
                                                   weights="policy", cutoff_sigmas=alpha)
                sig_p, rho = phrase_release.calibrate(q)
                n = len(phrase_release.select_pairs(units, q, sig_p, rho,
                                                    np.random.default_rng(a.seed)))
                best = max(best, (n, alpha, sig_p, rho))
            n_pol, alpha, sig_p, rho = best
            print(f"| {eps:g} | {cap} | {sigma:.2f} | {thr:.1f} | {n_count} | {sig_p:.2f} | "
                  f"{rho:.2f} | ρ+{alpha:g}σ | {n_pol} | "
                  f"{n_count / n_pol if n_pol else float('inf'):.2f} |")
            assert histogram.tail_probability(sigma, thr) * cap <= a.delta / 2 * (1 + 1e-6)

if __name__ == "__main__":
    main()
