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
that found something, as `warning:` lines (what scripts/compare.sh shows before training).

examples:
  nmtfrag stats --src train.de --tgt train.en --name EMEA
  nmtfrag stats --train train.de train.en --test test.de test.en
  nmtfrag stats --release runs/compare/EMEA/rel-dp-release
  nmtfrag stats --dir data/indomain/EMEA --dir data/indomain/GNOME --out stats/
"""
import argparse

from .. import cli_options as opt

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


def run(args):
    import os
    import sys

    from ..errors import InputError
    from ..fileio import public_name
    from ..fileio import (MANIFEST, atomic_writer, prepare_output_dir, sha256_file,
                          tool_versions, write_json)
    from ..audit.reconstruct import read_release
    from ..stats import (checks_markdown, checks_warnings, corpus_stats, data_checks,
                         overlap_with_train, release_contents, release_markdown,
                         splits_in_dir, to_markdown)

    if len(args.src) != len(args.tgt):
        raise InputError(f"give one --tgt per --src ({len(args.src)} --src, "
                         f"{len(args.tgt)} --tgt)")
    if args.name and len(args.name) != len(args.src):
        raise InputError(f"give one --name per --src or none ({len(args.name)} --name, "
                         f"{len(args.src)} --src)")
    corpora = []
    for i, (s, t) in enumerate(zip(args.src, args.tgt)):
        corpora.append((args.name[i] if args.name else None, s, t))
    overlaps_wanted = []  # (test name, train name, test files, train files)
    if args.train:
        corpora.append(("train", *args.train))
    if args.test:
        corpora.append(("test", *args.test))
        if args.train:
            overlaps_wanted.append(("test", "train", args.test, args.train))
    for d in args.dir:
        found = splits_in_dir(d, args.src_lang, args.tgt_lang)
        corpora.extend(found)
        by_split = {name.rsplit(" ", 1)[1]: (name, (s, t)) for name, s, t in found}
        if "train" in by_split and "test" in by_split:
            overlaps_wanted.append((by_split["test"][0], by_split["train"][0],
                                    by_split["test"][1], by_split["train"][1]))
    if not corpora and not args.release:
        raise InputError("nothing to count: give --src/--tgt, --train/--test, --dir or "
                         "--release")
    for r in args.release:
        if not os.path.isdir(r):
            raise InputError(f"--release {r}: no such directory")

    out = prepare_output_dir(args.out, args.overwrite, inputs=[c[1:] for c in corpora]) \
        if args.out else None
    results = [corpus_stats(s, t, name=n, src_lang=args.src_lang,
                            tgt_lang=args.tgt_lang, tokenize=args.tokenize)
               for n, s, t in corpora]
    checks = [(r["name"], data_checks(s, t)) for r, (_, s, t) in zip(results, corpora)]
    overlaps = [(test, train, overlap_with_train(*tr, *te))
                for test, train, te, tr in overlaps_wanted]
    releases = []
    for r in args.release:
        pairs, _ = read_release(r)
        releases.append((os.path.basename(os.path.normpath(r)), release_contents(pairs)))
    if args.warn:
        for w in checks_warnings(checks, overlaps):
            print(f"warning: {w}", file=sys.stderr)
        return 0
    md = "\n".join(part for part in (
        to_markdown(results), checks_markdown(checks, overlaps) if checks else "",
        release_markdown(releases) if releases else "") if part)
    print(md)
    if out:
        report = {"corpora": results, "tokenized_here": args.tokenize,
                  "data_checks": [{"name": n, **c} for n, c in checks],
                  "test_in_train": [{"test": te, "train": tr, **o} for te, tr, o in overlaps],
                  "releases": [{"name": n, **c} for n, c in releases],
                  "conventions": "see nmtfrag/stats.py"}
        write_json(os.path.join(out, "report.json"), report)
        with atomic_writer(os.path.join(out, "report.md")) as f:
            f.write(md)
        write_json(os.path.join(out, MANIFEST), {
            "stage": "stats",
            "params": {"src_lang": args.src_lang, "tgt_lang": args.tgt_lang,
                       "tokenize": args.tokenize},
            # corpus name / file name, not the path: the manifest may be shared
            "inputs": {f"{r['name']}/{public_name(p)}": sha256_file(p)
                       for r, (_, s, t) in zip(results, corpora) for p in (s, t)},
            "counts": {r["name"]: r["sentences"] for r in results},
            "tool_versions": tool_versions("nmtfrag", "sacremoses"),
        })
    return 0
