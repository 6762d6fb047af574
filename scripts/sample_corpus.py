#!/usr/bin/env python3
"""A seeded sample of N sentence pairs, in corpus order: a smaller owner corpus
(nmtfrag.data.sample.sample_corpus).

  python3 scripts/sample_corpus.py --src train.de --tgt train.en --lines 3000 --out sample/
"""
import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # run from a checkout: this one's nmtfrag, installed or not
    sys.path.insert(0, ROOT)

from nmtfrag.data.sample import sample_corpus
from nmtfrag.errors import InputError


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="scripts/sample_corpus.py",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--src", required=True, metavar="FILE")
    p.add_argument("--tgt", required=True, metavar="FILE")
    p.add_argument("--lines", required=True, type=int, metavar="N", help="pairs to keep")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--overwrite", action="store_true")
    args = p.parse_args(argv)
    try:
        m = sample_corpus(args.src, args.tgt, args.lines, args.out, args.seed, args.overwrite)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{m['params']['lines']} of {m['params']['of']} pairs → {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
