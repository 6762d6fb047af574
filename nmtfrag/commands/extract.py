"""Build a fragmentation release from a confidential parallel corpus.

Aligns the sentence pairs (eflomal, or --alignments), extracts every phrase pair
consistent with the alignment (Moses `extract` semantics, at most --max-len words on each
side), shuffles all occurrences, keeps a random --sample-rate share, optionally wraps each
side in <P> ... </P>, and writes OUT/phrases.<src-lang>, OUT/phrases.<tgt-lang> and
OUT/manifest.json. Full sentences never reach OUT; temporary files holding them live in a
private work dir that is removed at the end.

example:
  nmtfrag extract --src train.de --tgt train.en --out release/ \\
      --max-len 4 --sample-rate 0.5 --tag --seed 1
"""
HELP = "build a release of shuffled, subsampled phrase pairs from a parallel corpus"


def add_arguments(p):
    io = p.add_argument_group("input and output")
    io.add_argument("--src", required=True, metavar="FILE",
                    help="source side, one sentence per line, UTF-8 (never modified)")
    io.add_argument("--tgt", required=True, metavar="FILE",
                    help="target side, line-aligned with --src")
    io.add_argument("--out", required=True, metavar="DIR",
                    help="release directory to create (refused if it holds a finished "
                         "release, unless --overwrite)")
    io.add_argument("--src-lang", default="de", metavar="LANG",
                    help="source language code, used by the tokenizer and to name "
                         "phrases.LANG (default: de)")
    io.add_argument("--tgt-lang", default="en", metavar="LANG",
                    help="target language code (default: en)")
    io.add_argument("--pretokenized", action="store_true",
                    help="input is already Moses-tokenised: split on whitespace instead "
                         "of tokenising with sacremoses as fairseq's WMT19 hub does")
    io.add_argument("--overwrite", action="store_true",
                    help="replace a finished release in --out")

    al = p.add_argument_group("alignment")
    al.add_argument("--symmetrize", default="union",
                    choices=["union", "intersection", "grow-diag-final-and"],
                    help="how eflomal's forward and reverse alignments are combined "
                         "(default: union, as in Kim et al. 2021)")
    al.add_argument("--alignments", metavar="FILE",
                    help="use this symmetrised Pharaoh alignment (one line per input "
                         "line, 'i-j' source-target, 0-based) instead of running eflomal; "
                         "e.g. OUT/corpus.align of an earlier --keep-alignments run")
    al.add_argument("--priors", metavar="FILE",
                    help="eflomal priors learned on PUBLIC data (eflomal-makepriors); a "
                         "priors file made from private data must never be released")

    ph = p.add_argument_group("phrase pairs")
    ph.add_argument("--max-len", type=int, default=4, metavar="N",
                    help="maximum words on each side of a phrase pair (default: 4)")
    ph.add_argument("--min-len", type=int, default=1, metavar="N",
                    help="minimum words on each side (default: 1)")
    ph.add_argument("--sample-rate", type=float, default=0.5, metavar="R",
                    help="share of phrase-pair occurrences to keep after shuffling; "
                         "0.5 discards half (default: 0.5)")
    ph.add_argument("--tag", action="store_true",
                    help="wrap each side as '<P> ... </P>' (separate tokens)")
    ph.add_argument("--seed", type=int, default=1,
                    help="seed for shuffling and sampling (default: 1); with the same "
                         "alignment the release is identical byte for byte")

    wk = p.add_argument_group("files")
    wk.add_argument("--keep-alignments", action="store_true",
                    help="also write OUT/phrases.extract (Moses extract format "
                         "'src ||| tgt ||| i-j ...' of the released pairs) and "
                         "OUT/corpus.align (the corpus alignment, for the data owner "
                         "only, to reproduce the release with --alignments)")
    wk.add_argument("--work-dir", metavar="DIR",
                    help="parent of the private temporary directory (default: system temp)")
    wk.add_argument("--keep-work", action="store_true",
                    help="keep the private work dir (it holds the full tokenised corpus)")
    wk.add_argument("-v", "--verbose", action="store_true", help="show eflomal's progress")


def run(args):
    import sys

    from ..extract import extract_release

    result = extract_release(
        args.src, args.tgt, args.out, src_lang=args.src_lang, tgt_lang=args.tgt_lang,
        max_len=args.max_len, min_len=args.min_len, sample_rate=args.sample_rate,
        tag=args.tag, seed=args.seed, symmetrize_method=args.symmetrize,
        alignments=args.alignments, priors=args.priors, pretokenized=args.pretokenized,
        keep_alignments=args.keep_alignments, work_dir=args.work_dir,
        keep_work=args.keep_work, overwrite=args.overwrite, verbose=args.verbose)
    c = result.manifest["counts"]
    print(f"nmtfrag extract: {c['sentence_pairs_used']} sentence pairs used "
          f"({c['skipped_lines']} skipped), {c['occurrences_extracted']} phrase-pair "
          f"occurrences extracted, {c['occurrences_released']} released to {args.out}",
          file=sys.stderr)
    return 0
