"""Build a differentially private BPE vocabulary (Hoory et al. 2021) from a corpus.

Counts each distinct word once per sentence pair (the privacy unit; with --dedup, once
per distinct pair), at most --tuple-len words per pair; adds Gaussian noise N(0, σ²) to
every count; keeps the words whose noisy count reaches C = 1 + σ·Φ⁻¹(1 − δ/N); learns
--merges BPE merges from that noisy histogram only. Writes OUT/bpecodes (fastBPE
format), OUT/dict.SRC.txt and OUT/dict.TGT.txt (joined fairseq dictionary of noisy
subword counts), OUT/noisy_counts.txt (the DP histogram itself), OUT/privacy.json (ε_V,
δ_V) and OUT/manifest.json: everything in OUT except OUT/owner/ is DP and may be shared.
OUT/owner/manifest.json (input hashes, exact corpus counts, skipped lines, the seed)
must stay with the data owner. The noise comes from the operating system's
cryptographic source unless --seed is given (reproducible, and marked not private).

With --extend BASE_MODEL, OUT becomes a copy of that WMT19-layout model dir whose BPE
codes, dictionaries and embeddings are extended with the DP-selected words the base BPE
splits into at least --min-pieces pieces (new embeddings = mean of their pieces').

examples:
  nmtfrag vocab --dp --src train.de --tgt train.en --sigma 200 --delta 1e-9 \\
      --tuple-len 256 --merges 8000 --out dpvocab/
  nmtfrag vocab --dp --src train.de --tgt train.en --sigma 10 --delta 1e-6 \\
      --tuple-len 64 --extend base_model/ --out extended_model/ --pretokenized
"""
from __future__ import annotations

import argparse

from . import options as opt
from . import arg_types as ct

HELP = "learn a DP vocabulary (noisy thresholded histogram → BPE codes, ε_V)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    opt.add_dp(p, "differentially private vocabulary (required; the only mode)",
               required=True)
    opt.add_parallel_files(p, "source side (never modified)", "target side, line-aligned")
    opt.add_languages(p)
    opt.add_tmx(p, "not used by the vocabulary")
    opt.add_pretokenized(p, "input is already Moses-tokenised (else tokenised like "
                            "fairseq's WMT19 hub)")
    opt.add_out(p, "output directory (or, with --extend, the extended model dir)")
    p.add_argument("--sigma", type=ct.positive_float, required=True,
                   help="noise std σ of each count")
    opt.add_delta(p, "δ (required): threshold tail δ/N per word; total δ_V = 2δ",
                  required=True)
    p.add_argument("--tuple-len", type=ct.positive_int, default=256, metavar="N",
                   help="distinct words counted per sentence pair at most (default 256)")
    opt.add_dedup(p, "count each distinct sentence pair once: the unit becomes one "
                     "distinct pair (without it a pair repeated k times is protected "
                     "only as a group of k)")
    p.add_argument("--merges", type=ct.nonnegative_int, default=8000,
                   help="BPE merges to learn (default 8000)")
    p.add_argument("--min-frequency", type=ct.positive_int, default=2,
                   help="stop merging below this noisy pair frequency (default 2)")
    p.add_argument("--extend", metavar="BASE_MODEL",
                   help="extend this model dir with DP-selected shattered words instead of "
                        "building a vocabulary from scratch")
    p.add_argument("--min-pieces", type=ct.positive_int, default=3,
                   help="with --extend: words split into at least this many pieces (default 3)")
    p.add_argument("--max-new-words", type=ct.positive_int, default=1000,
                   help="with --extend: at most this many new words, most frequent first "
                        "(default %(default)s)")
    opt.add_seed(p, "seed the noise: reproducible but NOT private (the output says so; the "
                    "seed goes only to OUT/owner/). Default: secret randomness from the "
                    "operating system")
    opt.add_overwrite(p)


def run(args: argparse.Namespace) -> int:
    from .tmx_input import tmx_corpus

    with tmx_corpus(args, documents=None):  # --tmx: the two files, privately
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from ..dp.vocab import VocabularyJob, build_vocabulary
    from ..errors import InputError

    if not args.dp:
        raise InputError("only the DP vocabulary is implemented: pass --dp")
    result = build_vocabulary(VocabularyJob(
        src=args.src, tgt=args.tgt, out=args.out, sigma=args.sigma, delta=args.delta,
        src_lang=args.src_lang, tgt_lang=args.tgt_lang, pretokenized=args.pretokenized,
        tuple_len=args.tuple_len, dedup=args.dedup, merges=args.merges,
        min_frequency=args.min_frequency, extend=args.extend, min_pieces=args.min_pieces,
        max_new_words=args.max_new_words, seed=args.seed, overwrite=args.overwrite))
    from ..randomness import SEEDED_MARK

    m = result.manifest
    e = m["epsilon_both_methods"]
    print(f"kept {m['kept_words']} of {result.owner['counts']['distinct_words']} words "
          f"(threshold C = {m['threshold']:.1f})"
          + ("" if args.extend else f"; {m['merges_learned']} merges"))
    if m["extension"]:
        print(f"extended {args.extend}: {m['extension']['new_words']} new words, "
              f"{m['extension']['new_symbols']} new symbols")
    print(f"ε_V = {e['analytic_gaussian']:.4f} (analytic Gaussian, used); "
          f"Corollary 1: {e['corollary_1']:.4f}; δ_V = {2 * args.delta:g}"
          + ("" if m["randomness"]["private"] else f" — {SEEDED_MARK}"))
    print(f"wrote {result.out}")
    return 0
