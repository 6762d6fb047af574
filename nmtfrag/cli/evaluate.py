"""Translate a test set with a model directory and score it with SacreBLEU.

Batch translation through fairseq's generation (beam 5 by default; every input line
gets exactly one output line, checked), BPE and <P>/</P> removed, Moses-detokenised; then
SacreBLEU BLEU and chrF with their signatures, brevity penalty, length ratio and the
average output vs reference length in tokens (Kim et al. 2021, Figure 3). With
--baseline (an earlier evaluate output on the same test set): sacrebleu's paired
bootstrap resampling against it. With --pretokenized, SRC and REF are Moses-tokenised
(like the OPUS EMEA and GNOME files): the reference is detokenised before scoring, and the
report says so. Writes OUT/hyp.txt, OUT/report.json, OUT/report.md (and
OUT/lengths.png with --plot). With --engine ctranslate2 the model is converted once
(cached, see --ct2-cache) and decoded with CTranslate2; the report records the engine,
the compute type and the translation time.

examples:
  nmtfrag evaluate --model adapted/ --src test.de --ref test.en --out eval/
  nmtfrag evaluate --model adapted/ --src test.de --ref test.en --pretokenized \\
      --out eval_ft/ --baseline eval_base/ --plot
  nmtfrag evaluate --hyp output.txt --src test.de --ref test.en --out eval/
  nmtfrag evaluate --model adapted/ --src test.de --ref test.en --out eval_ct2/ \\
      --engine ctranslate2 --compute-type int8 --threads 2
"""
import argparse

from . import options as opt
from . import arg_types as ct
from ..limits import MAX_BOOTSTRAP_SAMPLES

HELP = "translate a test set and report SacreBLEU, chrF, lengths, significance"


def add_arguments(p: argparse.ArgumentParser) -> None:
    io = p.add_argument_group("input and output")
    opt.add_model(io, "model directory (WMT19 layout) to translate --src with",
                  required=False)
    io.add_argument("--hyp", metavar="FILE",
                    help="score this detokenised output instead of translating")
    opt.add_checkpoint(io, "checkpoint(s) in --model, colon-separated for an ensemble "
                           "(default: model.pt, else model1.pt, model2.pt, …)")
    io.add_argument("--src", required=True, metavar="FILE", help="test source")
    io.add_argument("--ref", required=True, metavar="FILE",
                    help="reference translations, line-aligned with --src")
    opt.add_out(io, "output directory (hyp.txt, report.json, report.md)")
    opt.add_languages(io)
    opt.add_pretokenized(io, "--src and --ref are Moses-tokenised (not escaped): "
                             "detokenise the reference before scoring, re-run the model's "
                             "pipeline on the detokenised source")
    io.add_argument("--first", type=ct.positive_int, default=None, metavar="N",
                    help="evaluate only the first N lines")
    io.add_argument("--baseline", metavar="DIR",
                    help="earlier evaluate output on the same test set: paired bootstrap")
    io.add_argument("--bootstrap-samples", default=1000, metavar="N",
                    type=ct.int_between(1, MAX_BOOTSTRAP_SAMPLES,
                                        "memory grows with samples × sentences"),
                    help=f"paired-bootstrap resamples against --baseline (default "
                         f"%(default)s; at most {MAX_BOOTSTRAP_SAMPLES:,})")
    io.add_argument("--plot", action="store_true",
                    help="write OUT/lengths.png (output vs reference length)")
    io.add_argument("--name", help="system name in the report (default: model dir name)")
    opt.add_overwrite(io)
    gen = p.add_argument_group("generation")
    opt.add_decoding(gen)
    gen.add_argument("--lenpen-from", metavar="DIR", default=None,
                     help="the length penalty chosen by `nmtfrag length-penalty` into DIR "
                          "(on public text), instead of --lenpen")


def lenpen_of(args: argparse.Namespace) -> float:
    """--lenpen, or the value a `nmtfrag length-penalty` output chose (--lenpen-from)."""
    from ..errors import InputError
    from ..translate.length_penalty import chosen_lenpen

    if args.lenpen_from is None:
        return args.lenpen
    if args.lenpen != 1.0:
        raise InputError("give --lenpen or --lenpen-from, not both")
    return chosen_lenpen(args.lenpen_from)


def run(args: argparse.Namespace) -> int:
    import sys

    from ..translate.evaluate import Decoding, evaluate

    device = args.device
    if args.model and device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    decoding = Decoding(engine=args.engine, beam=args.beam, max_tokens=args.max_tokens,
                        batch_size=args.batch_size, device=device or "cpu", fp16=args.fp16,
                        checkpoint=args.checkpoint, compute_type=args.compute_type,
                        ct2_cache=args.ct2_cache, threads=args.threads,
                        max_len_a=args.max_len_a, max_len_b=args.max_len_b,
                        lenpen=lenpen_of(args))
    rep = evaluate(args.out, src=args.src, ref=args.ref, model=args.model, hyp=args.hyp,
                   decoding=decoding, src_lang=args.src_lang, tgt_lang=args.tgt_lang,
                   pretokenized=args.pretokenized, baseline=args.baseline, plot=args.plot,
                   first=args.first, bootstrap_samples=args.bootstrap_samples,
                   overwrite=args.overwrite, name=args.name, show_progress=True)
    s = rep["scores"]
    print(f"BLEU {s['bleu']:.2f}  chrF {s['chrf']:.2f}  BP {s['brevity_penalty']:.3f}  "
          f"ratio {s['length_ratio']}  avg len {s['avg_output_tokens']} / "
          f"{s['avg_reference_tokens']}  ({s['sentences']} sentences)")
    sig = s.get("significance")
    if sig:
        b = sig["BLEU"]
        print(f"vs baseline: BLEU {b['baseline']:.2f} → {b['system']:.2f}, "
              f"p = {b['p_value']}")
    print(s["bleu_signature"], file=sys.stderr)
    return 0
