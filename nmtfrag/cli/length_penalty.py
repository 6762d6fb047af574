"""Choose a beam-search length penalty for a model on public validation text.

Decodes the first --first lines of a public validation set (e.g. newstest) with each
candidate penalty and keeps the one with the best BLEU there; `evaluate --lenpen-from
OUT` then decodes with it. It opens the model and the public files only, so the choice
reads nothing of the data owner's (choosing on the owner's validation or test set would).

examples:
  nmtfrag length-penalty --model adapted/ --src newstest2018.de --ref newstest2018.en \\
      --out lenpen/
  nmtfrag evaluate --model adapted/ --src test.de --ref test.en --lenpen-from lenpen/ \\
      --out eval-lp/
"""
import argparse

from . import arg_types as ct
from . import options as opt

HELP = "choose a beam-search length penalty on public validation text"


def add_arguments(p: argparse.ArgumentParser) -> None:
    io = p.add_argument_group("input and output")
    opt.add_model(io, "model directory (WMT19 layout)")
    opt.add_checkpoint(io, "checkpoint in --model (default: model.pt, else model1.pt)")
    io.add_argument("--src", required=True, metavar="FILE",
                    help="PUBLIC validation source (never the data owner's)")
    io.add_argument("--ref", required=True, metavar="FILE",
                    help="its reference translations, line-aligned")
    io.add_argument("--first", type=ct.positive_int, default=500, metavar="N",
                    help="decode the first N lines (default %(default)s)")
    io.add_argument("--candidates", default="0.8,1,1.3,1.6,2", metavar="P,P,…",
                    help="penalties to try (default %(default)s)")
    opt.add_out(io, "output directory (report.json, report.md, manifest.json)")
    opt.add_languages(io)
    opt.add_pretokenized(io, "--src and --ref are Moses-tokenised (not escaped)")
    opt.add_overwrite(io)
    gen = p.add_argument_group("generation")
    gen.add_argument("--beam", type=ct.positive_int, default=5,
                     help="beam size (default %(default)s)")
    opt.add_device(gen)
    opt.add_threads(gen)
    opt.add_engine(gen)


def run(args: argparse.Namespace) -> int:
    import json

    from ..errors import InputError
    from ..translate.evaluate import Decoding
    from ..translate.length_penalty import choose_length_penalty

    try:
        candidates = [float(c) for c in args.candidates.split(",") if c.strip()]
    except ValueError:
        raise InputError(f"--candidates must be numbers separated by commas, got "
                         f"{args.candidates!r}") from None
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    decoding = Decoding(engine=args.engine, beam=args.beam, device=args.device or "cpu",
                        checkpoint=args.checkpoint, compute_type=args.compute_type,
                        ct2_cache=args.ct2_cache, threads=args.threads)
    man = choose_length_penalty(args.out, model=args.model, src=args.src, ref=args.ref,
                                decoding=decoding, candidates=candidates, first=args.first,
                                src_lang=args.src_lang, tgt_lang=args.tgt_lang,
                                pretokenized=args.pretokenized, overwrite=args.overwrite)
    print(json.dumps({"out": args.out, "lenpen": man["lenpen"]}))
    return 0
