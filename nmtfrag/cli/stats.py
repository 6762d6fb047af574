"""Corpus statistics as in Table 1 of Kim, Bisazza & Turkmen (2021).

For each corpus: sentence pairs, tokens per side, types per side, type/token ratio,
sentence-length distribution (mean, std, min, median, p90, p99, max, histogram). Prints
a Markdown report; with --out DIR also writes DIR/report.md, DIR/report.json and
DIR/manifest.json. Several corpora go into one report: repeat --src/--tgt (and --name),
or give --dir for a directory holding train/valid/test.<src-lang>/<tgt-lang>.

Tokens are whitespace-separated units as the files stand (right for Moses-tokenised data
such as the paper's splits); --raw-text Moses-tokenises raw text first, as fairseq's WMT19
hub interface does.

Data checks, for every corpus: targets that contain their source copied, all-caps
segments, duplicated pairs; with --train and --test (or --dir), test pairs also in train.
--release DIR: what a phrase release holds (distinct pairs, share punctuation/numbers
only, share identical on both sides, length histogram). --warn prints only the checks
that found something, as `warning:` lines (what `nmtfrag study` shows before training).

examples:
  nmtfrag stats --src train.de --tgt train.en --name EMEA
  nmtfrag stats --train train.de train.en --test test.de test.en
  nmtfrag stats --release runs/compare/EMEA/rel-dp-release
  nmtfrag stats --dir data/indomain/EMEA --dir data/indomain/GNOME --out stats/
"""
import argparse

from . import options as opt

HELP = "sentence, token, type and length statistics of parallel corpora (Markdown, JSON)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--src", action="append", default=[], metavar="FILE",
                   help="source side of a corpus (repeat for several corpora)")
    p.add_argument("--tgt", action="append", default=[], metavar="FILE",
                   help="target side, line-aligned with the --src of the same position")
    p.add_argument("--name", action="append", default=[], metavar="NAME",
                   help="name of the corpus in the report, one per --src (default: the "
                        "file name without its extension)")
    p.add_argument("--dir", action="append", default=[], metavar="DIR",
                   help="a directory with train/valid/test.<src-lang>/.<tgt-lang>; each "
                        "split present is reported as '<dirname> <split>' (repeatable)")
    p.add_argument("--train", nargs=2, metavar=("SRC", "TGT"),
                   help="training corpus (reported as 'train'; its pairs are what --test "
                        "is checked against)")
    p.add_argument("--test", nargs=2, metavar=("SRC", "TGT"),
                   help="test corpus (reported as 'test'): counts its pairs also in --train")
    p.add_argument("--release", action="append", default=[], metavar="DIR",
                   help="a release written by `nmtfrag extract`: what it holds (repeatable)")
    p.add_argument("--warn", action="store_true",
                   help="print only `warning:` lines for the data checks that found "
                        "something (nothing else)")
    opt.add_languages(p, "file suffix for --dir, tokenizer")
    opt.add_raw_text(p, "the input is raw text: Moses-tokenise each line (as fairseq's "
                        "WMT19 hub does) before counting; default: count "
                        "whitespace-separated tokens as given")
    opt.add_out(p, "also write DIR/report.md, DIR/report.json and DIR/manifest.json",
                required=False)
    opt.add_overwrite(p, "replace a finished report in --out")


def run(args: argparse.Namespace) -> int:
    import sys

    from ..outdir import prepare_output_dir
    from ..data.stats import describe_corpora, stats_inputs, write_report

    inputs = stats_inputs(args.src, args.tgt, args.name, train=args.train, test=args.test,
                          dirs=args.dir, releases=args.release, src_lang=args.src_lang,
                          tgt_lang=args.tgt_lang)
    out = prepare_output_dir(args.out, args.overwrite, inputs=inputs.files()) \
        if args.out else None
    report = describe_corpora(inputs, src_lang=args.src_lang, tgt_lang=args.tgt_lang,
                              tokenize=args.tokenize)
    if args.warn:
        for w in report.warnings():
            print(f"warning: {w}", file=sys.stderr)
        return 0
    print(report.markdown())
    if out:
        write_report(report, out)
    return 0
