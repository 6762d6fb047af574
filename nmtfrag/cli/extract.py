"""Build a fragmentation release from a confidential parallel corpus.

Aligns the sentence pairs (eflomal, --alignments, or a model learned on public text with
--align-public/--align-model: required with --dp), extracts every phrase pair
consistent with the alignment (Moses `extract` semantics, at most --max-len words on each
side), shuffles all occurrences, keeps a random --sample-rate share, optionally wraps each
side in <P> ... </P>, and writes OUT/phrases.<src-lang>, OUT/phrases.<tgt-lang> and
OUT/manifest.json: the files that may be shared. OUT/owner/ (mode 0700) holds what must
never leave the data owner: manifest.json with input paths, hashes, exact counts, skipped
line numbers and the seed, and with --keep-alignments the corpus alignment.

Shuffling and sampling draw from the operating system's cryptographic source unless
--seed is given. A phrase pair one of whose sides is a whole sentence is dropped unless
--allow-whole-sentences. Temporary files holding the corpus live in a private work dir
that is removed at the end.

example:
  nmtfrag extract --src train.de --tgt train.en --out release/ \\
      --max-len 4 --sample-rate 0.5 --tag
"""
import argparse

from . import options as opt
from . import arg_types as ct
from ..limits import MAX_PHRASE_LEN, MAX_UNIT_CAP

HELP = "build a release of shuffled, subsampled phrase pairs from a parallel corpus"
# the bounds' reasons, as the error line gives them (nmtfrag.limits: the measurements)
_PHRASE_LEN = ct.int_between(1, MAX_PHRASE_LEN, "a phrase pair that long is a sentence")
_UNIT_CAP = ct.int_between(1, MAX_UNIT_CAP, "σ grows with √K: a larger cap only adds noise")


def add_arguments(p: argparse.ArgumentParser) -> None:
    _add_input_output(p.add_argument_group("input and output"))
    _add_alignment(p.add_argument_group("alignment"))
    _add_phrase_pairs(p.add_argument_group("phrase pairs"))
    _add_dp(p.add_argument_group(
        "differential privacy (a release with an (ε, δ) guarantee)",
        "With --dp the released pairs are chosen by a DP set union instead of sampling: "
        "each unit (sentence pair or document) contributes at most --unit-cap of its "
        "distinct phrase pairs, their unit counts get Gaussian noise, and only pairs "
        "whose noisy count clears a threshold are released. A pair only one unit holds "
        "is released with probability at most δ/2 in all. OUT/privacy.json is the "
        "certificate (`nmtfrag privacy OUT`)."))
    _add_files(p.add_argument_group("files"))


def _add_input_output(io: opt.OptionGroup) -> None:
    opt.add_parallel_files(io, "source side, one sentence per line, UTF-8 (never modified)",
                           "target side, line-aligned with --src")
    opt.add_tmx(io, "for --privacy-unit document, instead of --documents")
    opt.add_out(io, "release directory to create (refused if it holds a finished release, "
                    "unless --overwrite)")
    opt.add_languages(io, "used by the tokenizer and to name phrases.LANG")
    opt.add_pretokenized(io, "input is already Moses-tokenised: split on whitespace "
                             "instead of tokenising with sacremoses as fairseq's WMT19 hub "
                             "does")
    opt.add_overwrite(io, "replace a finished release in --out")


def _add_alignment(al: opt.OptionGroup) -> None:
    al.add_argument("--symmetrize", default="union",
                    choices=["union", "intersection", "grow-diag-final-and"],
                    help="how the forward and reverse alignments are combined "
                         "(default: union, as in Kim et al. 2021)")
    al.add_argument("--alignments", metavar="FILE",
                    help="use this symmetrised Pharaoh alignment (one line per input "
                         "line, 'i-j' source-target, 0-based) instead of running eflomal; "
                         "e.g. OUT/owner/corpus.align of an earlier --keep-alignments "
                         "run")
    al.add_argument("--priors", metavar="FILE",
                    help="eflomal priors learned on PUBLIC data (eflomal-makepriors); a "
                         "priors file made from private data must never be released "
                         "(not with --dp)")
    al.add_argument("--align-public", metavar="PREFIX",
                    help="align each sentence pair on its own with a model learned on "
                         "PUBLIC parallel text PREFIX.<src-lang> / PREFIX.<tgt-lang> "
                         "instead of eflomal on the corpus (required with --dp, or "
                         "--align-model)")
    al.add_argument("--align-model", metavar="DIR",
                    help="the public alignment model to use; with --align-public it is "
                         "learned into DIR on first use and reused after "
                         "(`nmtfrag align-model` learns one)")


def _add_phrase_pairs(ph: opt.OptionGroup) -> None:
    ph.add_argument("--max-len", type=_PHRASE_LEN, default=4, metavar="N",
                    help=f"maximum words on each side of a phrase pair (default: 4; at "
                         f"most {MAX_PHRASE_LEN})")
    ph.add_argument("--min-len", type=_PHRASE_LEN, default=1, metavar="N",
                    help="minimum words on each side (default: 1)")
    ph.add_argument("--allow-whole-sentences", action="store_true",
                    help="keep phrase pairs whose source or target side is a whole "
                         "sentence (sentences of at most --max-len words); by default "
                         "they are dropped, so no sentence is released verbatim")
    ph.add_argument("--sample-rate", type=ct.rate, default=None, metavar="R",
                    help="share of phrase-pair occurrences to keep after shuffling; "
                         "0.5 discards half (default: 0.5; not with --dp)")
    ph.add_argument("--tag", action="store_true",
                    help="wrap each side as '<P> ... </P>' (separate tokens); input "
                         "that already holds the token <P> or </P> is refused")
    opt.add_seed(ph, "make the release reproducible: with the same alignment it is "
                     "identical byte for byte (eflomal cannot be seeded: keep the "
                     "alignment with --keep-alignments; with --align-public and no "
                     "--align-model, the public model is learned once into the user's "
                     "cache, $XDG_CACHE_HOME/nmtfrag/align-models, and reused). NOT private: whoever learns the seed can "
                     "undo the shuffle; it is written only to OUT/owner/ and the release "
                     "manifest says 'not private' (default: secret randomness from the "
                     "operating system)")


def _add_dp(dp: opt.OptionGroup) -> None:
    opt.add_dp(dp, "release with an (ε, δ) guarantee")
    opt.add_epsilon(dp, "ε of the guarantee (required with --dp)")
    opt.add_delta(dp, "δ of the guarantee, below 1/(number of units) (required with "
                      "--dp); half goes to the noise, half to the threshold")
    dp.add_argument("--unit-cap", type=_UNIT_CAP, default=16, metavar="K",
                    help=f"distinct phrase pairs counted per unit at most (a random subset "
                         f"when it has more); noise grows with √K (default 16; at most "
                         f"{MAX_UNIT_CAP:,})")
    opt.add_privacy_unit(dp, "what one guarantee protects (default: sentence, i.e. one "
                             "sentence pair)",
                         "one document id per input line (with --privacy-unit document; "
                         "`nmtfrag split` writes one)")
    dp.add_argument("--dp-repeat", choices=("count", "once"), default=None,
                    help="write each released pair round(noisy count) times, keeping "
                         "frequencies as a sampled release does (default with "
                         "--dp-weights count), or once (default and only choice with "
                         "policy)")
    dp.add_argument("--dp-weights", choices=("count", "policy"), default="count",
                    help="count: each unit adds 1 to each of its ≤ K pairs (sensitivity "
                         "√K; noisy counts keep frequencies; default). policy: Gopi et "
                         "al.'s Policy Gaussian (sensitivity 1, budget spent on rare "
                         "pairs: ~1.6× the distinct pairs on EMEA, no frequencies)")


def _add_files(wk: opt.OptionGroup) -> None:
    wk.add_argument("--keep-alignments", action="store_true",
                    help="also write OUT/phrases.extract (Moses extract format "
                         "'src ||| tgt ||| i-j ...' of the released pairs) and "
                         "OUT/owner/corpus.align (the corpus alignment, owner-only, to "
                         "reproduce the release with --alignments and --seed)")
    wk.add_argument("--work-dir", metavar="DIR",
                    help="parent of the private temporary directory (default: system temp)")
    opt.add_keep_work(wk, "keep the private work dir (it holds the full tokenised corpus)")
    opt.add_verbose(wk, "show eflomal's progress")


def run(args: argparse.Namespace) -> int:
    from .tmx_input import tmx_corpus

    with tmx_corpus(args, work_dir=args.work_dir):  # --tmx: the two files, privately
        return _run(args)


def _run(args):
    import sys

    from ..errors import InputError
    from ..fragment.extract import ExtractOptions, extract_release

    dp = None
    if args.dp:
        from ..fragment.dp_release import DPReleaseParams

        if args.epsilon is None or args.delta is None:
            raise InputError("--dp needs --epsilon and --delta")
        if args.sample_rate is not None:
            raise InputError("--sample-rate does not apply with --dp: the DP threshold "
                             "decides which pairs are released")
        repeat = args.dp_repeat or ("once" if args.dp_weights == "policy" else "count")
        dp = DPReleaseParams(args.epsilon, args.delta, args.unit_cap, args.privacy_unit,
                             repeat, args.dp_weights)
    elif args.epsilon is not None or args.delta is not None:
        raise InputError("--epsilon and --delta are used only with --dp")

    result = extract_release(args.src, args.tgt, args.out, ExtractOptions(
        src_lang=args.src_lang, tgt_lang=args.tgt_lang, max_len=args.max_len,
        min_len=args.min_len,
        sample_rate=0.5 if args.sample_rate is None else args.sample_rate, tag=args.tag,
        seed=args.seed, symmetrize_method=args.symmetrize, alignments=args.alignments,
        priors=args.priors, pretokenized=args.pretokenized,
        allow_whole_sentences=args.allow_whole_sentences,
        keep_alignments=args.keep_alignments, work_dir=args.work_dir,
        keep_work=args.keep_work, overwrite=args.overwrite, verbose=args.verbose, dp=dp,
        documents=args.documents, align_public=args.align_public,
        align_model=args.align_model))
    c = result.owner["counts"]  # owner-side counts: fine on the owner's terminal
    whole = (f"{c['whole_sentence_occurrences_dropped']} whole-sentence ones dropped"
             if not args.allow_whole_sentences else
             f"{c['whole_sentence_occurrences']} whole-sentence ones kept")
    randomness = ("secret randomness" if result.manifest["randomness"]["private"] else
                  f"--seed {args.seed}: reproducible, NOT private")
    print(f"nmtfrag extract: {c['sentence_pairs_used']} sentence pairs used "
          f"({c['skipped_lines']} skipped), {c['occurrences_extracted']} phrase-pair "
          f"occurrences extracted ({whole}), {c['occurrences_released']} released to "
          f"{args.out} ({randomness}); share only the top-level files, never "
          f"{args.out.rstrip('/')}/owner/", file=sys.stderr)
    if dp is not None:
        from ..randomness import SEEDED_MARK

        r = result.manifest["privacy"]["release"]
        print(f"nmtfrag extract --dp: ({r['epsilon']:.3g}, {r['delta']:g})-DP per "
              f"{dp.unit}; σ = {r['sigma']:.2f}, threshold {r['threshold']:.1f} units, "
              f"{result.owner['dp_counts']['released_distinct_pairs']} distinct pairs "
              f"released" + ("" if r["randomness"]["private"] else
                             f" ({SEEDED_MARK})"), file=sys.stderr)
        if not result.owner["dp_counts"]["released_distinct_pairs"]:
            print("warning: the DP release is empty: no phrase pair is shared by enough "
                  f"{dp.unit}s to clear the threshold", file=sys.stderr)
    return 0
