#!/usr/bin/env python3
"""Train a toy WMT19-layout de→en model on raw parallel text, for the demo and tests
(nmtfrag.train.toymodel.train_toy_model).

  python3 scripts/toy_model.py --train corpora/demo/train --valid corpora/demo/valid --out base/
"""
import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # run from a checkout: this one's nmtfrag, installed or not
    sys.path.insert(0, ROOT)

from nmtfrag.quiet import install
from nmtfrag.train.toymodel import DEMO_ARCH_ARGS, read_raw, train_toy_model


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="Train a toy WMT19-layout de→en model on "
                                             "raw parallel text (for demos and tests).")
    ap.add_argument("--train", required=True, metavar="PREFIX", help="PREFIX.de/.en")
    ap.add_argument("--valid", required=True, metavar="PREFIX", help="PREFIX.de/.en")
    ap.add_argument("--out", required=True, metavar="DIR")
    ap.add_argument("--updates", type=int, default=300)
    ap.add_argument("--merges", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="show fairseq's, hydra's and torch's warnings and INFO lines")
    a = ap.parse_args(argv)
    install(verbose=a.verbose)
    train_toy_model(a.out, read_raw(a.train), read_raw(a.valid), updates=a.updates,
                    merges=a.merges, seed=a.seed, max_tokens=2000, lr=0.003,
                    arch_args=DEMO_ARCH_ARGS)
    print(f"toy model in {a.out}")


if __name__ == "__main__":
    sys.exit(main())
