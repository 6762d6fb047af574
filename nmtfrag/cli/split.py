"""Split a corpus into train / valid / test by document, as Kim et al. (2021) did.

Reads a TSV with one sentence pair per line, `doc_id<TAB>src<TAB>tgt` (make one from an
OPUS download with `nmtfrag opus2tsv`), shuffles the documents with --seed, fills
valid, then test, then train with whole documents, and writes OUT/{train,valid,test}.
<src-lang>/<tgt-lang>, OUT/documents.tsv (which document went where) and
OUT/manifest.json. Test pairs that also occur exactly in train are removed and counted.

A document that would overflow a split (--overflow):
  cut    its first pairs fill the split exactly; the rest of it is discarded (default)
  whole  it is taken whole; the split exceeds its target
  skip   it is left for the next split; the split may stay below its target
No document ever appears in two splits. When the corpus is too small, the splits get
what there is and a `warning:` line (and the manifest) says by how much they fall short;
a split asked for pairs that no document is left for is refused (exit 2) before any work.

Bad TSV lines (not exactly 3 fields, empty doc_id, invalid UTF-8) are refused with exit
2 naming the line; pairs empty on a side are skipped and counted in the manifest.

example:
  nmtfrag split --docs docs.tsv --train 10000 --valid 150 --test 2000 --seed 1 \\
      --out corpora/EMEA
  nmtfrag split --tmx memory.tmx.gz --tmx-doc-prop x-document --out split/
"""
from __future__ import annotations

import argparse

from . import options as opt

HELP = "split a doc_id/src/tgt TSV into train/valid/test by whole documents"


def _size(text: str) -> int | None:
    """--train: a number of pairs ≥ 0, or 'all' (None)."""
    if text == "all":
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of pairs or 'all', "
                                         f"got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _count(text: str) -> int:
    """--valid, --test: a number of pairs ≥ 0."""
    value = _size(text)
    if value is None:
        raise argparse.ArgumentTypeError("'all' is only allowed for --train")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--docs", metavar="TSV",
                   help="input: one pair per line, 'doc_id<TAB>src<TAB>tgt', UTF-8 "
                        "(never modified)")
    opt.add_tmx(p, "required with --tmx: documents are what split keeps together",
                instead_of="--docs")
    opt.add_out(p, "output directory (refused if it holds a finished split, unless "
                   "--overwrite)")
    p.add_argument("--train", type=_size, default=10000, metavar="N",
                   help="train pairs, or 'all' for every remaining document "
                        "(default: 10000, as in the paper)")
    p.add_argument("--valid", type=_count, default=150, metavar="N",
                   help="validation pairs (default: 150)")
    p.add_argument("--test", type=_count, default=2000, metavar="N",
                   help="test pairs (default: 2000)")
    opt.add_seed(p, "seed for shuffling the documents (default: 1); the same seed and TSV "
                    "give identical files", default=1)
    p.add_argument("--overflow", choices=["cut", "whole", "skip"], default="cut",
                   help="what happens to a document that would overflow a split "
                        "(default: cut; see above)")
    p.add_argument("--dedup", choices=["test", "valid-test", "none"], default="test",
                   help="remove pairs that also occur in train from test (default), "
                        "from valid and test, or from neither; removed pairs are "
                        "replaced from unused documents when there are any")
    opt.add_languages(p, "names the files")
    opt.add_overwrite(p, "replace a finished split in --out")


def run(args: argparse.Namespace) -> int:
    from ..errors import InputError

    if bool(args.docs) == bool(args.tmx):
        raise InputError("give exactly one of --docs TSV or --tmx FILE")
    if not args.tmx:
        if args.tmx_doc_prop:
            raise InputError("--tmx-doc-prop needs --tmx")
        return _run(args)
    import os

    from ..workdir import private_workdir
    from ..data.opus import tmx_pairs, write_tsv

    if not args.tmx_doc_prop:
        raise InputError("split --tmx needs --tmx-doc-prop NAME: documents are what "
                         "split keeps together")
    with private_workdir(prefix="nmtfrag-tmx-") as work:  # confidential text
        args.docs = os.path.join(work, "tmx.docs.tsv")
        write_tsv(tmx_pairs(args.tmx, args.src_lang, args.tgt_lang, args.tmx_doc_prop),
                  args.docs)
        return _run(args)


def _run(args):
    import sys

    from ..data.split import split_corpus, summary_markdown

    manifest = split_corpus(
        args.docs, args.out, train=args.train, valid=args.valid, test=args.test,
        seed=args.seed, overflow=args.overflow, dedup=args.dedup,
        src_lang=args.src_lang, tgt_lang=args.tgt_lang, overwrite=args.overwrite)
    print(summary_markdown(manifest))
    print(f"nmtfrag split: wrote {args.out}", file=sys.stderr)
    return 0
