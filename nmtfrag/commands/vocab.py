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
import argparse

from .. import cli_options as opt
from .. import cli_types as ct

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


def run(args):
    from ..tmx import tmx_corpus

    with tmx_corpus(args, documents=None):  # --tmx: the two files, privately
        return _run(args)


def _run(args):
    import os

    from ..corpus import SkipLog, read_parallel, validate_parallel
    from ..dp import vocab
    from ..errors import InputError
    from ..fileio import (OWNER_DIR, atomic_writer, prepare_output_dir, sha256_file,
                          tool_versions, write_json, write_owner_json)
    from ..tokenize import to_tokens

    if not args.dp:
        raise InputError("only the DP vocabulary is implemented: pass --dp")
    if args.delta is None:
        raise InputError("--delta is required: a DP vocabulary without δ is void")
    n_lines = validate_parallel(args.src, args.tgt)
    # before any tokenising: n ≤ the line count, so δ_V ≥ 1/lines means δ_V ≥ 1/n
    vocab.check_vocab_delta(args.delta, n_lines, "input lines")
    existed = os.path.isdir(args.out)
    out = prepare_output_dir(args.out, args.overwrite, inputs=[args.src, args.tgt],
                             kind="nmtfrag-dp-vocabulary")
    skips = SkipLog()

    def pairs():
        for _, s, t in read_parallel(args.src, args.tgt, skips):
            yield (to_tokens(s, args.src_lang, args.pretokenized),
                   to_tokens(t, args.tgt_lang, args.pretokenized))

    # --extend keeps the base model's merges and only appends; no codes to learn
    try:
        res = vocab.dp_vocabulary(pairs(), args.sigma, args.delta, args.tuple_len,
                                  0 if args.extend else args.merges, seed=args.seed,
                                  dedup=args.dedup, min_frequency=args.min_frequency)
    except InputError:
        if not existed and not os.listdir(out):
            os.rmdir(out)  # refused after counting: leave no OUT behind
        raise
    noisy = res["noisy"]
    with atomic_writer(os.path.join(out, "noisy_counts.txt")) as f:
        for w, c in sorted(noisy.items(), key=lambda kv: (-kv[1], kv[0])):
            f.write(f"{w} {c:.1f}\n")
    extension = None
    if args.extend:
        # computed from the DP histogram and the public base model only: post-processing
        extension = vocab.extend_model(args.extend, out, noisy, args.min_pieces,
                                       args.max_new_words, src_lang=args.src_lang,
                                       tgt_lang=args.tgt_lang)
    else:
        codes_path = os.path.join(out, "bpecodes")
        vocab.write_codes(res["codes"], codes_path)
        sub = vocab.subword_vocab(noisy, codes_path)
        for lang in (args.src_lang, args.tgt_lang):
            vocab.write_fairseq_dict(sub, os.path.join(out, f"dict.{lang}.txt"))
    params = {k: getattr(args, k) for k in (
        "sigma", "delta", "tuple_len", "dedup", "merges", "min_frequency", "min_pieces",
        "max_new_words", "pretokenized", "src_lang", "tgt_lang")}
    write_owner_json(out, {
        "kind": "nmtfrag-dp-vocabulary-owner-record",
        "note": "owner-only: exact corpus counts are not differentially private",
        "params": {**params, "extend": args.extend}, "randomness": res["seed"].owner_record(),
        "input_lines": n_lines, "skipped": skips.to_json(), "counts": res["stats"],
        "inputs": {"src": {"path": args.src, "sha256": sha256_file(args.src)},
                   "tgt": {"path": args.tgt, "sha256": sha256_file(args.tgt)}},
        "tool_versions": tool_versions("subword-nmt", "fastbpe", "numpy", "scipy", "torch"),
    })
    privacy = {"vocabulary": res["privacy"]}
    write_json(os.path.join(out, "privacy.json"), privacy)
    write_json(os.path.join(out, "manifest.json"), {
        "kind": "nmtfrag-dp-vocabulary",
        "mode": "extend" if args.extend else "from_scratch", "params": params,
        "shareable": f"every file here except {OWNER_DIR}/",
        "randomness": res["seed"].public_record(), "threshold": res["threshold"],
        "paper_threshold_not_used": res["paper_threshold"],
        "per_word_tail_probability": res["tail_probability"],
        "privacy": res["privacy"], "epsilon_both_methods": res["epsilon"],
        # noisy words and merges only (DP post-processing), never the corpus counts
        "kept_words": len(noisy), "merges_learned": len(res["codes"]),
        "extension": extension,
    })
    e = res["epsilon"]
    print(f"kept {len(noisy)} of {res['stats']['distinct_words']} words "
          f"(threshold C = {res['threshold']:.1f})"
          + ("" if args.extend else f"; {len(res['codes'])} merges"))
    if extension:
        print(f"extended {args.extend}: {extension['new_words']} new words, "
              f"{extension['new_symbols']} new symbols")
    print(f"ε_V = {e['analytic_gaussian']:.4f} (analytic Gaussian, used); "
          f"Corollary 1: {e['corollary_1']:.4f}; δ_V = {2 * args.delta:g}")
    print(f"wrote {out}")
    return 0
