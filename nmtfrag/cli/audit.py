"""Confidentiality audits: what a release or a trained model gives away.

  nmtfrag audit reconstruct --release release/ --src train.de --tgt train.en \\
      --mode both --out audit/
      rebuild as much text as the release justifies (the attack reads only the
      release; conservative floor and greedy guesses side by side), then score it
      against the original corpus: a lower bound on what the release leaks
  nmtfrag audit canaries insert --src train.de --tgt train.en --count 20 \\
      --repeats 1,10,100 --out canaried/
      plant synthetic sentence pairs carrying random secrets (new corpus + canaries.json;
      secret randomness unless --seed)
  nmtfrag audit exposure --model adapted/ --canaries canaried/canaries.json --out audit/
      exposure of each planted secret and whether beam search outputs it verbatim
  nmtfrag audit membership --model adapted/ --members train.de train.en \\
      --non-members heldout.de heldout.en --out mi/
      loss-threshold membership inference: AUC and TPR at 1% FPR
  nmtfrag audit compare --runs runs.yaml --out comparison/
      one report (report.md, report.json, privacy-utility plot): BLEU × leakage × ε
"""
from __future__ import annotations

import argparse
import sys
from typing import Callable

from . import options as opt
from . import arg_types as ct
from ..limits import MAX_BEAM, MAX_CANARIES, MAX_PHRASE_LEN

HELP = ("audit a release (reconstruction attack) or a model (canary exposure, membership "
        "inference); compare runs")


def _canaries(low: int) -> Callable[[str], int]:
    """--count/--unseen: an integer from `low` up to MAX_CANARIES (nmtfrag.limits)."""
    return ct.int_between(low, MAX_CANARIES, "canaries have distinct 5-digit record "
                                             "numbers")


def _sub(subparsers: argparse._SubParsersAction, name: str, help_text: str,
         description: str) -> argparse.ArgumentParser:
    return subparsers.add_parser(name, help=help_text, description=description,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="audit_command", metavar="AUDIT", parser_class=type(p))
    sub.required = True
    _add_reconstruct(sub)
    _add_canaries(sub, parser_class=type(p))
    _add_exposure(sub)
    _add_membership(sub)
    _add_compare(sub)


def _add_reconstruct(sub: argparse._SubParsersAction) -> None:
    r = _sub(sub, "reconstruct", "rebuild text from a release and score it against the corpus",
             "Reconstruction attack on a phrase-pair release (in the spirit of Gallé & "
             "Tealdi 2015): chains fragments whose targets AND sources overlap into the "
             "longest pieces the release justifies; --mode conservative keeps only mutual, "
             "unambiguous best overlaps, --mode greedy also guesses at ambiguous ones by "
             "frequency, --mode both reports the two side by side. The attack reads only "
             "--release; --src/--tgt (the original corpus) are used to score it: sentences "
             "rebuilt exactly (a released fragment, a chain, or a span of one delimited by "
             "its ends or sentence-final punctuation), n-grams longer than max-len recovered, "
             "longest recovered span per sentence, and the precision of the joins. Figures "
             "are what this attack achieves: a lower bound on what the release leaks."
             "\n\nexample:\n  nmtfrag audit reconstruct --release release/ --src train.de "
             "--tgt train.en --mode both --out audit/")
    r.add_argument("--release", required=True, metavar="DIR",
                   help="release directory written by `nmtfrag extract`")
    opt.add_parallel_files(r, "original source side the release was made from (scoring "
                              "only)", "original target side", required=True)
    opt.add_out(r, "output directory")
    r.add_argument("--mode", choices=("conservative", "greedy", "both"),
                   default="conservative",
                   help="conservative: unambiguous joins only (a floor); greedy: also join "
                        "ambiguous overlaps by frequency (more rebuilt, lower precision); "
                        "both: the two side by side, bracketing what leaks (default: "
                        "conservative)")
    r.add_argument("--min-overlap", type=ct.positive_int, default=None, metavar="N",
                   help="fewest shared target words to chain two fragments (default: 2, or "
                        "1 when no fragment is longer than 2 words)")
    opt.add_pretokenized(r, "the corpus is already Moses-tokenised (default: as recorded "
                            "in the release manifest)", default=None)
    r.add_argument("--max-len", type=ct.int_between(1, MAX_PHRASE_LEN, "extract's largest --max-len"),
                   default=None, metavar="N",
                   help="max-len of the release (default: from its manifest, else the "
                        "longest fragment)")
    r.add_argument("--write-chains", action="store_true",
                   help="also write the rebuilt chains to OUT/chains.LANG (confidential: "
                        "they are pieces of the corpus)")
    opt.add_overwrite(r)
    r.set_defaults(_audit_run=_run_reconstruct)


def _add_canaries(sub: argparse._SubParsersAction,
                  parser_class: type[argparse.ArgumentParser]) -> None:
    c = _sub(sub, "canaries", "plant canaries (synthetic pairs carrying random secrets)",
             "Canaries (Carlini et al. 2019): synthetic sentence pairs whose target carries "
             "a random secret, inserted into a corpus with chosen repetition before any "
             "release or training.")
    csub = c.add_subparsers(dest="canaries_command", metavar="ACTION",
                            parser_class=parser_class)
    csub.required = True
    ci = _sub(csub, "insert", "write a copy of the corpus with canaries and canaries.json",
              "Write OUT/<src name>, OUT/<tgt name> (the corpus with canaries at random "
              "lines; the input is never modified), OUT/canaries.json (the secrets: keep it "
              "with the data owner) and OUT/manifest.json. --count canaries per repeat "
              "value, plus --unseen canaries never inserted (the reference for exposure)."
              "\n\nexample:\n  nmtfrag audit canaries insert --src train.de --tgt train.en "
              "--count 20 --repeats 1,10,100 --out canaried/")
    opt.add_parallel_files(ci, "source side of the corpus", "target side", required=True)
    opt.add_out(ci, "output directory")
    ci.add_argument("--count", type=_canaries(1), default=20, metavar="N",
                    help=f"canaries per repeat value (default: 20; at most {MAX_CANARIES:,} "
                         f"canaries in all, unseen ones included)")
    ci.add_argument("--repeats", default="1,10,100", metavar="LIST",
                    help="comma-separated repeat counts (default: 1,10,100)")
    ci.add_argument("--unseen", type=_canaries(0), default=None, metavar="N",
                    help="canaries drawn but not inserted (default: --count)")
    ci.add_argument("--kinds", default="dosage,name", metavar="LIST",
                    help="secret kinds, alternating: dosage (6 digits, |R|=10^6), name "
                         "(first name + surname, |R|=1600) (default: dosage,name)")
    opt.add_seed(ci, "seed: reproducible, but then the secrets are predictable by whoever "
                     "knows it (default: secret randomness from the operating system)")
    opt.add_overwrite(ci)
    ci.set_defaults(_audit_run=_run_canaries_insert)


def _add_exposure(sub: argparse._SubParsersAction) -> None:
    e = _sub(sub, "exposure", "exposure and extraction of canaries in a trained model",
             "For each canary: rank its true secret among the candidate space by the "
             "model's teacher-forced log-probability of the target given the canary source, "
             "summed over the secret's subword tokens; exposure = log2|R| - log2 rank "
             "(skew-normal extrapolation from a sample when |R| > --enumerate-limit, "
             "clipped at log2|R|); and whether beam search outputs the secret verbatim."
             "\n\nexample:\n  nmtfrag audit exposure --model adapted/ --canaries "
             "canaried/canaries.json --out audit/")
    opt.add_model(e, "model dir in the WMT19 layout (model.pt, dicts, bpecodes)")
    e.add_argument("--canaries", required=True, metavar="FILE",
                   help="canaries.json written by `nmtfrag audit canaries insert`")
    opt.add_out(e, "output directory")
    opt.add_checkpoint(e, "checkpoint file(s) in --model, ':'-separated (default: "
                          "model*.pt)", metavar="FILE")
    opt.add_languages(e)
    e.add_argument("--enumerate-limit", type=ct.positive_int, default=10000, metavar="N",
                   help="score every candidate when |R| <= N (default: 10000)")
    e.add_argument("--samples", type=ct.positive_int, default=2000, metavar="N",
                   help="candidates sampled for the skew-normal fit (default: 2000)")
    e.add_argument("--beam", type=ct.int_between(1, MAX_BEAM, opt.BEAM_WHY), default=5,
                   help=f"beam size for extraction (default: 5; at most {MAX_BEAM})")
    e.add_argument("--batch-size", type=ct.positive_int, default=256, metavar="N",
                   help="candidates scored per forward pass (default: 256)")
    opt.add_device(e, "where the model scores and decodes (default %(default)s)",
                   default="cpu")
    opt.add_threads(e)
    opt.add_seed(e, "seed of the candidate sample (default: secret randomness)")
    opt.add_overwrite(e)
    e.set_defaults(_audit_run=_run_exposure)


def _add_membership(sub: argparse._SubParsersAction) -> None:
    mi = _sub(sub, "membership", "membership inference: does the model tell its training "
              "pairs from held-out ones?",
              "The loss-threshold membership-inference attack (Yeom et al. 2018): a pair is "
              "guessed to be a training pair when the model's loss on it is low; with "
              "--reference-model (e.g. the base model before fine-tuning) the score is the "
              "loss difference, calibrated per pair (Watson et al. 2022). Reports the ROC AUC "
              "(0.5 = chance) and the true-positive rate at 1% false positives; writes "
              "OUT/report.json and OUT/report.md.\n\nexample:\n  nmtfrag audit membership "
              "--model adapted/ --reference-model base/ --members train.de train.en "
              "--non-members heldout.de heldout.en --pretokenized --max-pairs 2000 --out mi/")
    opt.add_model(mi, "model dir to attack (WMT19 layout)")
    mi.add_argument("--members", required=True, nargs="+", metavar="PATH",
                    help="pairs the model was trained on: a prefix (PREFIX.SRC, PREFIX.TGT) "
                         "or two files SRC TGT; give the whole training set: the report "
                         "also splits the members by how often it holds each pair")
    mi.add_argument("--non-members", required=True, nargs="+", metavar="PATH",
                    help="held-out pairs of the same kind the model never saw (any that "
                         "are also --members pairs are left out, and counted)")
    mi.add_argument("--member-lines", metavar="FILE",
                    help="0-based line numbers of the --members files the model trained "
                         "on, one a line (a --dp --train-fraction run's OUT/owner/"
                         "trained-lines.txt): the members are those pairs, and the other "
                         "pairs of the same files are a second set of non-members, from "
                         "the same documents")
    mi.add_argument("--leave-out-canaries", metavar="JSON",
                    help="canaries.json of `audit canaries insert`: the planted canary "
                         "pairs in --members are left out of the members and of the "
                         "same-file non-members (the exposure audit measures them); with "
                         "--member-lines, give the planted training files as --members")
    mi.add_argument("--reference-model", metavar="DIR",
                    help="model for per-pair calibration (e.g. the generic base model)")
    opt.add_out(mi, "output directory")
    opt.add_pretokenized(mi, "the pairs are Moses-tokenised, unescaped (like EMEA)")
    mi.add_argument("--max-pairs", type=ct.positive_int, default=2000, metavar="N",
                    help="score a uniform sample of at most N members and N non-members "
                         "(default 2000)")
    opt.add_languages(mi)
    opt.add_checkpoint(mi, "checkpoint file(s) in --model, ':'-separated (default: "
                           "model*.pt)", metavar="FILE")
    opt.add_device(mi, "where the model scores the pairs (default %(default)s)",
                   default="cpu")
    mi.add_argument("--batch-size", type=ct.positive_int, default=64, metavar="N",
                    help="pairs scored per batch (default %(default)s)")
    opt.add_threads(mi)
    opt.add_seed(mi, "seed of the pair sample (default: secret randomness)")
    opt.add_overwrite(mi)
    mi.set_defaults(_audit_run=_run_membership)


def _add_compare(sub: argparse._SubParsersAction) -> None:
    m = _sub(sub, "compare", "one report: BLEU x leakage x epsilon for every run",
             "Read a YAML list of runs (each with the paths of its `nmtfrag evaluate`, "
             "`nmtfrag audit reconstruct`, `nmtfrag audit exposure` reports and its ε where "
             "defined) and write OUT/report.md, OUT/report.json and "
             "OUT/privacy_utility.png. See nmtfrag/audit/compare.py for the YAML format."
             "\n\nexample:\n  nmtfrag audit compare --runs runs.yaml --out comparison/")
    m.add_argument("--runs", required=True, metavar="YAML", help="list of runs")
    opt.add_out(m, "output directory")
    opt.add_overwrite(m)
    m.set_defaults(_audit_run=_run_compare)


def _run_reconstruct(args):
    from ..audit.reconstruction_score import audit_reconstruction

    rep = audit_reconstruction(args.release, args.src, args.tgt, args.out,
                               min_overlap=args.min_overlap, pretokenized=args.pretokenized,
                               max_len=args.max_len, write_chains=args.write_chains,
                               overwrite=args.overwrite, show_progress=True,
                               mode=args.mode)
    from ..audit.reconstruction_report import summary_line

    for w in rep["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    print(f"nmtfrag audit reconstruct: {summary_line(rep)} (what this attack achieves: a "
          f"lower bound on leakage); report in {args.out}", file=sys.stderr)
    return 0


def _int_list(text, flag):
    from ..errors import InputError

    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"{flag} must be comma-separated integers, got {text!r}") from None
    if not values:
        raise InputError(f"{flag} is empty")
    return values


def _run_canaries_insert(args):
    from ..audit.canaries import insert_canaries

    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
    cs = insert_canaries(args.src, args.tgt, args.out, count=args.count,
                         repeats=_int_list(args.repeats, "--repeats"), seed=args.seed,
                         kinds=kinds, unseen=args.unseen, overwrite=args.overwrite)
    planted = [c for c in cs if c["repeats"]]
    print(f"nmtfrag audit canaries insert: {len(planted)} canaries planted "
          f"({sum(c['repeats'] for c in planted)} lines), {len(cs) - len(planted)} unseen; "
          f"corpus and canaries.json in {args.out}", file=sys.stderr)
    return 0


def _run_exposure(args):
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    from ..audit.exposure import audit_exposure

    rep = audit_exposure(args.model, args.canaries, args.out, src_lang=args.src_lang,
                         tgt_lang=args.tgt_lang, checkpoint=args.checkpoint,
                         enumerate_limit=args.enumerate_limit, samples=args.samples,
                         seed=args.seed, beam=args.beam, batch_size=args.batch_size,
                         device=args.device, overwrite=args.overwrite, show_progress=True)
    parts = [f"repeats {k}: exposure {v['exposure_mean']:.2f}, extracted {v['extracted']}/"
             f"{v['canaries']}" for k, v in rep["summary_by_repeats"].items()]
    print("nmtfrag audit exposure: " + "; ".join(parts) + f"; report in {args.out}",
          file=sys.stderr)
    return 0


def _run_membership(args):
    from ..audit import membership
    from ..errors import InputError

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.max_pairs is not None and args.max_pairs < 1:
        raise InputError("--max-pairs must be at least 1")
    from ..model_dir import check_model_files

    check_model_files(args.model, args.src_lang, args.tgt_lang, args.checkpoint,
                      flag="--model")  # before reading any pair
    if args.reference_model:
        check_model_files(args.reference_model, args.src_lang, args.tgt_lang,
                          args.checkpoint, flag="--reference-model")
    same = None
    if args.member_lines:
        lines = membership.read_member_lines(args.member_lines)
        if not membership.check_lines_match_members(args.member_lines, args.members,
                                                     args.src_lang, args.tgt_lang):
            print(f"warning: --member-lines {args.member_lines}: no finetune manifest "
                  f"beside it, so nothing shows it numbers these --members files",
                  file=sys.stderr)
        members, same = membership.split_by_lines(args.members, args.src_lang,
                                                   args.tgt_lang, lines)
    else:
        members = membership.read_pairs(args.members, args.src_lang, args.tgt_lang,
                                        "--members")
    nonmembers = membership.read_pairs(args.non_members, args.src_lang, args.tgt_lang,
                                       "--non-members")
    if args.leave_out_canaries:
        members, same = membership.leave_out_canaries(args.leave_out_canaries, members,
                                                      same)
    rep = membership.audit_membership(
        args.model, members, nonmembers, args.out, reference=args.reference_model,
        src_lang=args.src_lang, tgt_lang=args.tgt_lang,
        mode="moses" if args.pretokenized else "raw", max_pairs=args.max_pairs,
        seed=args.seed, checkpoint=args.checkpoint, device=args.device,
        batch_size=args.batch_size, overwrite=args.overwrite, same_files=same,
        input_paths=[p + x for p in args.members + args.non_members
                     for x in ("", f".{args.src_lang}", f".{args.tgt_lang}")]
        + [x for x in (args.member_lines, args.leave_out_canaries) if x])
    print(f"nmtfrag audit membership: AUC {rep['auc']:.3f}, TPR at 1% FPR "
          f"{rep['tpr_at_1pct_fpr']:.3f} ({rep['members']} members, {rep['non_members']} "
          f"non-members); report in {args.out}", file=sys.stderr)
    if "same_files" in rep:
        sf = rep["same_files"]
        print(f"nmtfrag audit membership: against {sf['non_members']} pairs of the same "
              f"files it did not train on: AUC {sf['auc']:.3f}, TPR at 1% FPR "
              f"{sf['tpr_at_1pct_fpr']:.3f}", file=sys.stderr)
    if rep["non_members_dropped_as_members"]:
        print(f"nmtfrag audit membership: {rep['non_members_dropped_as_members']} "
              f"--non-members pair(s) are also --members pairs: left out of the non-members",
              file=sys.stderr)
    return 0


def _run_compare(args):
    from ..audit.compare import compare_runs

    rep = compare_runs(args.runs, args.out, overwrite=args.overwrite)
    print(f"nmtfrag audit compare: {len(rep['runs'])} runs; report in {args.out}",
          file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    return args._audit_run(args)
