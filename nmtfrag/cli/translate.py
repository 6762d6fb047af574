"""Translate text from stdin (or --input) to stdout with a model directory.

One output line per input line, in order (checked). Input is raw text unless
--pretokenized (Moses-tokenised, not escaped). Batched through fairseq's generation, or
with --engine ctranslate2 through CTranslate2 (the model is converted once and cached,
see --ct2-cache). A progress bar shows on a terminal (stderr).

examples:
  echo "Das Haus ist klein." | nmtfrag translate --model wmt19.de-en/
  nmtfrag translate --model adapted/ --input test.de --engine ctranslate2 \\
      --compute-type int8 --threads 2 > test.hyp
"""
import argparse

from . import options as opt

HELP = "translate stdin to stdout with a model directory (ad-hoc use)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    opt.add_model(p, "model directory (WMT19 layout)")
    opt.add_checkpoint(p, "checkpoint(s) in --model, colon-separated for an ensemble")
    p.add_argument("--input", metavar="FILE", help="read this file instead of stdin")
    opt.add_languages(p)
    opt.add_pretokenized(p, "input is Moses-tokenised (not escaped)")
    opt.add_decoding(p)


def _refuse_control(lines):
    """Control characters on stdin are refused as in a corpus file (corpus.py)."""
    from ..data.corpus import CONTROL_BYTES
    from ..errors import InputError

    for n, line in enumerate(lines, 1):
        bad = CONTROL_BYTES.search(line.encode("utf-8"))
        if bad:
            raise InputError(f"stdin line {n}: control character (byte "
                             f"0x{line.encode('utf-8')[bad.start()]:02x}); text lines may "
                             f"not hold control characters")


def run(args: argparse.Namespace) -> int:
    import sys

    from ..errors import InputError
    from ..translate.fairseq_engine import load_translator

    if args.input:
        from ..translate.evaluate import read_lines

        lines = read_lines(args.input)
    else:
        try:
            data = sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"stdin: invalid UTF-8 at byte {exc.start + 1}") from None
        lines = data.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        _refuse_control(lines)
    device = args.device
    import torch

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.threads:
        torch.set_num_threads(args.threads)
    tr = load_translator(args.model, args.engine, compute_type=args.compute_type,
                         ct2_cache=args.ct2_cache, threads=args.threads,
                         src_lang=args.src_lang, tgt_lang=args.tgt_lang,
                         checkpoint=args.checkpoint, device=device, fp16=args.fp16,
                         beam=args.beam, lenpen=args.lenpen, max_len_a=args.max_len_a,
                         max_len_b=args.max_len_b, max_tokens=args.max_tokens,
                         batch_size=args.batch_size)
    outs = tr.translate(lines, mode="moses" if args.pretokenized else "raw",
                        show_progress=True)
    sys.stdout.write("".join(o + "\n" for o in outs))
    sys.stdout.flush()
    return 0
