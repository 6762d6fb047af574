"""Learn a word-alignment model on PUBLIC parallel text, for `extract --align-model`.

Tokenises PREFIX.<src-lang> / PREFIX.<tgt-lang> as `extract` does, aligns them with
eflomal and keeps lexical tables (nmtfrag.fragment.public_align). `extract --align-model DIR`
then aligns each private sentence pair on its own under this model, which `--dp`
requires: nothing in it comes from the private corpus. Never give private text here.

example:
  nmtfrag align-model --public generic/train --out align-model/
"""
import argparse

from . import options as opt
from . import arg_types as ct

HELP = "learn a word-alignment model on public parallel text (for extract --dp)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--public", required=True, metavar="PREFIX",
                   help="public parallel text PREFIX.<src-lang>, PREFIX.<tgt-lang>")
    opt.add_out(p, "model directory to create (refused if it holds a model, unless "
                   "--overwrite)")
    opt.add_languages(p)
    opt.add_pretokenized(p, "the public text is already Moses-tokenised")
    p.add_argument("--lines", type=ct.positive_int, default=None, metavar="N",
                   help="learn from the first N pairs at most (default: 300,000)")
    opt.add_overwrite(p, "replace a model in --out")
    opt.add_verbose(p, "show eflomal's progress")


def run(args: argparse.Namespace) -> int:
    import os
    import sys

    from ..errors import InputError
    from ..fragment.public_align import DEFAULT_PUBLIC_LINES, is_model_dir, learn_model

    if is_model_dir(args.out) and not args.overwrite:
        raise InputError(f"{args.out} already holds an alignment model (add --overwrite "
                         f"to replace it)")
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise InputError(f"--out {args.out} exists and is not a directory")
    m = learn_model(args.public, args.out, src_lang=args.src_lang, tgt_lang=args.tgt_lang,
                    pretokenized=args.pretokenized,
                    max_lines=args.lines or DEFAULT_PUBLIC_LINES, verbose=args.verbose)
    print(f"nmtfrag align-model: learned on {m['public']['pairs_used']} public pairs in "
          f"{m['seconds']:.0f} s ({m['entries']['s2t']} + {m['entries']['t2s']} lexical "
          f"entries) -> {args.out}", file=sys.stderr)
    return 0
