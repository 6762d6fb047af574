"""Fine-tune a WMT19-format model directory on a release (phrase pairs) or on sentences.

Preprocessing is the model's own hub pipeline (sacremoses with fairseq's settings, fastBPE
with the model's bpecodes, the model's dictionaries); tagged releases get <P> and </P>
added to the dictionaries as single symbols, with the embedding matrices grown to match.
Training is fairseq's own (fairseq-train through its Python API) from the model's
checkpoint with --restore-file and every --reset-* flag; defaults follow Kim et al.
(2021): lr 0.000175, weight decay 0.0001, dropout 0.2, label smoothing 0.1, Adam, early
stopping on the full-sentence validation set. OUT becomes a model directory (model.pt,
dict.*.txt, bpecodes) plus train.log and manifest.json.

examples:
  nmtfrag finetune --model wmt19.de-en/ --train release/ \\
      --valid-src valid.de --valid-tgt valid.en --out adapted/ --max-updates 2000
  nmtfrag finetune --model wmt19.de-en/ --train train.de train.en --pretokenized \\
      --valid-src valid.de --valid-tgt valid.en --out adapted/ --max-epochs 3
  nmtfrag finetune ... --out adapted/ --resume      # continue a killed run
  nmtfrag finetune --model wmt19.de-en/ --train dp-release/ --no-validation \\
      --out adapted/ --max-epochs 3                # no validation set: last checkpoint
  nmtfrag finetune --model wmt19.de-en/ --train train.de train.en --pretokenized \\
      --valid-src valid.de --valid-tgt valid.en --out dp-adapted/ \\
      --dp --epsilon 8 --delta 1e-5               # the default DP recipe (--dp below)
"""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from . import options as opt
from . import arg_types as ct
from . import dp_options as dp_cli

if TYPE_CHECKING:
    from ..train.finetune import FineTuneConfig
    from ..train.job import FineTuneJob

HELP = "fine-tune a WMT19-format model on a release or parallel files (fairseq)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    _add_input_output(p.add_argument_group("input and output"))
    _add_public(p.add_argument_group(
        "public text (reads nothing private: no guarantee or audit of the private "
        "material changes)"))
    tr = p.add_argument_group("training (defaults: Kim et al. 2021)")
    _add_training(tr)
    dp_cli.add_trainable_arguments(tr)
    dp_cli.add_arguments(p)


def _add_input_output(io: opt.OptionGroup) -> None:
    opt.add_model(io, "model directory in the WMT19 release layout (model.pt or "
                      "model1.pt…, dict.SRC.txt, dict.TGT.txt, bpecodes)")
    opt.add_checkpoint(io, "checkpoint file in --model to adapt (default: model.pt, else "
                           "model1.pt, the first member of an ensemble; name model2.pt … "
                           "to adapt another member: one member per run)")
    io.add_argument("--train", nargs="+", metavar="PATH",
                    help="a release directory (phrases.SRC/phrases.TGT + manifest.json), "
                         "a file prefix (PREFIX.SRC, PREFIX.TGT), two files SRC TGT, or "
                         "a translation memory FILE.tmx[.gz] (as --tmx)")
    opt.add_tmx(io, "for --dp --privacy-unit document, instead of --documents",
                instead_of="--train")
    io.add_argument("--valid-src", metavar="FILE",
                    help="full-sentence validation source (early stopping, the kept "
                         "checkpoint); required unless --no-validation")
    io.add_argument("--valid-tgt", metavar="FILE",
                    help="validation target, line-aligned with --valid-src")
    opt.add_out(io, "output model directory (refused if it holds a finished run, unless "
                    "--overwrite)")
    opt.add_languages(io)
    opt.add_pretokenized(io, "plain --train files and the validation files are "
                             "Moses-tokenised but not escaped (like EMEA): they are "
                             "detokenised and re-tokenised with the model's hub pipeline. "
                             "A release's own manifest decides for the release.")
    io.add_argument("--tags", action="store_true",
                    help="add <P> and </P> to the dictionaries (growing the embeddings). "
                         "Default: only when the training data holds them; under --dp only "
                         "this flag decides (the model's shape must not reveal the data)")
    opt.add_overwrite(io, "replace a finished or interrupted run in --out")
    io.add_argument("--resume", action="store_true",
                    help="continue an interrupted run in --out from its last checkpoint, saved "
                         "at each epoch's end and every 2 minutes of training, longer where "
                         "saving is slow (with --dp: from its last saved state, see "
                         "--dp-save-every; the same settings are required); where the run "
                         "saved nothing yet, start it from the beginning, and say so")
    io.add_argument("--train-fraction", type=ct.rate, default=1.0, metavar="F",
                    help="train on a random share of the training pairs, each kept with "
                         "probability F (seeded; default 1: all): a data-size curve. Under "
                         "--dp it is a run on that subset (the others spend nothing)")
    opt.add_keep_work(io, "keep OUT/.work (subword text and binaries of the training data)")
    io.add_argument("--keep-checkpoints", action="store_true",
                    help="keep OUT/checkpoints (with optimizer state)")


def _add_public(g: opt.OptionGroup) -> None:
    g.add_argument("--public-train", metavar="PREFIX",
                   help="public parallel text PREFIX.SRC / PREFIX.TGT (raw text, one "
                        "sentence a line) to train on beside --train (mixed fine-tuning), "
                        "untagged, shuffled in; with --pack public, also the sentence "
                        "lengths packing follows. Its SHA-256 is recorded like the model's")
    g.add_argument("--public-share", type=ct.probability, default=None, metavar="S",
                   help="the public pairs' share of the training target tokens (after "
                        "BPE), e.g. 0.5: as many public target tokens as --train's")
    g.add_argument("--public-min-words", type=ct.nonnegative_int, default=0, metavar="N",
                   help="draw only public pairs whose target has ≥ N words (default 0: "
                        "all; a choice of public text, e.g. longer sentences)")
    g.add_argument("--public-only", action="store_true",
                   help="train on the drawn public pairs alone, sized as if mixed with "
                        "--train (packed first with --pack, as the packed run was): the "
                        "control that says what a mixed run owes to --train")
    g.add_argument("--pack", metavar="public|N", default=None,
                   help="pack the release's phrase pairs into examples of sentence length: "
                        "'public' draws each example's target length (words) from "
                        "--public-train's sentences, N fixes it; every occurrence is used "
                        "once (one pass over the packed data is one over the release). "
                        "Post-processing of the release: its guarantee is unchanged")
    g.add_argument("--pack-tags", choices=("keep", "drop"), default="keep",
                   help="with --pack: keep each fragment's <P> … </P> (default) or drop them")


def reshape_from_args(args: argparse.Namespace):
    """The job's Reshape (public pairs, packing) from the options, or None."""
    from ..errors import InputError
    from ..train.packing import PackSpec
    from ..train.public_mix import PublicMix
    from ..train.reshape import Reshape

    public = getattr(args, "public_train", None)
    given = [o for o, v in (("--public-share", args.public_share),
                            ("--public-min-words", args.public_min_words),
                            ("--public-only", args.public_only)) if v]
    if not public:
        if given:
            raise InputError(f"{given[0]} needs --public-train")
        if args.pack is None:
            if args.pack_tags != "keep":
                raise InputError("--pack-tags needs --pack")
            return None
    if public and args.public_share is None and args.pack != "public":
        raise InputError("--public-train needs --public-share (how much public text to "
                         "mix in), or --pack public (its sentence lengths only)")
    mix = PublicMix.of_prefix(public, args.src_lang, args.tgt_lang, args.public_share,
                              min_words=args.public_min_words,
                              only=args.public_only) if public else None
    pack = PackSpec.of_text(args.pack, args.pack_tags) if args.pack is not None else None
    return Reshape(mix, pack)


def _add_training(tr: opt.OptionGroup) -> None:
    tr.add_argument("--lr", type=ct.positive_float, default=None,
                    help="learning rate, constant after warmup (default 0.000175, "
                         "WMT19's divided by 4); with --dp give --dp-lr instead")
    tr.add_argument("--warmup-updates", type=ct.nonnegative_int, default=0,
                    help="linear warmup updates (default 0)")
    tr.add_argument("--weight-decay", type=ct.nonnegative_float, default=None,
                    help="Adam weight decay (default 0.0001, the paper's); with --dp give "
                         "--dp-weight-decay instead")
    tr.add_argument("--dropout", type=ct.fraction, default=0.2,
                    help="dropout while fine-tuning (default %(default)s, the paper's)")
    tr.add_argument("--label-smoothing", type=ct.fraction, default=0.1,
                    help="label smoothing of the cross-entropy loss (default %(default)s)")
    tr.add_argument("--max-tokens", type=ct.positive_int, default=4096,
                    help="tokens per batch per device (default 4096); with --dp, the "
                         "padded source+target tokens of a physical batch at most")
    tr.add_argument("--update-freq", type=ct.positive_int, default=1,
                    help="batches accumulated per update (default 1)")
    tr.add_argument("--max-updates", "--max-update", dest="max_updates", type=ct.positive_int,
                    default=None, metavar="N", help="stop after N updates"
                    + opt.also_spelled("--max-update", "fairseq's spelling"))
    tr.add_argument("--max-epochs", "--max-epoch", dest="max_epochs", type=ct.positive_int,
                    default=None, metavar="N",
                    help="stop after N epochs (with --dp: N expected passes, default 10)"
                    + opt.also_spelled("--max-epoch", "fairseq's spelling"))
    tr.add_argument("--patience", type=ct.int_at_least(-1), default=None,
                    help="stop when the validation loss has not improved for N "
                         "validations (default 5; -1 disables); not with --dp: a DP "
                         "run's length is its plan (--max-epochs, --dp-steps)")
    tr.add_argument("--validate-every", type=ct.positive_int, default=None, metavar="UPDATES",
                    help="validate (and save) every N updates; default: every epoch; "
                         "with --dp give --dp-valid-every instead")
    tr.add_argument("--no-validation", action="store_true",
                    help="read no validation set (no --valid-src/--valid-tgt): train for "
                         "the whole budget (fairseq's --disable-validation, no early "
                         "stopping, no loss measured before) and keep the LAST checkpoint, "
                         "so the budget and the chosen checkpoint depend on the training "
                         "data and fixed settings only; for a DP release, nothing outside "
                         "its ε (choosing on the data owner's validation set would be). "
                         "With --dp: no owner-only validation loss is measured (a DP run "
                         "never chooses by one). Not with --patience, --validate-every "
                         "or --dp-valid-every")
    opt.add_seed(tr, "seed of fairseq training (default 1). With --dp it also seeds Poisson "
                     "sampling and noise, which are otherwise drawn from the OS's "
                     "cryptographic source: a seeded DP run is reproducible but NOT "
                     "private, and is marked so")
    opt.add_device(tr)
    tr.add_argument("--gpus", type=ct.positive_int, default=1,
                    help="GPUs for fairseq's distributed data-parallel training "
                         "(default %(default)s)")
    tr.add_argument("--fp16", action="store_true", help="mixed precision (CUDA only)")
    opt.add_threads(tr)
    tr.add_argument("--log-interval", type=ct.positive_int, default=50, metavar="N",
                    help="log a loss line every N updates (default %(default)s)")
    tr.add_argument("-q", "--quiet", action="store_true",
                    help="only warnings on the console (train.log keeps everything)")


def run(args: argparse.Namespace) -> int:
    from ..errors import InputError
    from ..data.tmx import is_tmx
    from .tmx_input import tmx_corpus

    check_validation_options(args)
    if args.train and len(args.train) == 1 and is_tmx(args.train[0]):
        if args.tmx:
            raise InputError("give --tmx FILE or --train FILE.tmx, not both")
        args.tmx, args.train = args.train[0], None
    if not args.tmx:
        if not args.train:
            raise InputError("give --train (or --tmx FILE)")
        return _run(args)
    if args.train:
        raise InputError("give --tmx or --train, not both")
    args.train_src = args.train_tgt = None
    with tmx_corpus(args, src="train_src", tgt="train_tgt",
                    documents="documents" if hasattr(args, "documents") else None):
        args.train = [args.train_src, args.train_tgt]  # converted privately, plain text
        return _run(args)


def start_if_nothing_saved(args: argparse.Namespace) -> bool:
    """`--resume` where the run saved nothing yet (it stopped before its first checkpoint
    or DP state, or never began): start it from the beginning and say so, instead of
    refusing. Only over such leftovers: a finished run, or an OUT holding anything else,
    is still the run's own refusal. Returns whether it did."""
    import os
    import sys

    from ..dp.resume import state_path
    from ..fileio import MANIFEST, OWNER_DIR
    from ..train.finetune import CKPT, WORK

    out = args.out
    if not getattr(args, "resume", False) or not out:
        return False
    if os.path.isdir(out):
        if os.path.isfile(os.path.join(out, MANIFEST)) or \
                os.path.isfile(os.path.join(out, CKPT, "checkpoint_last.pt")) or \
                os.path.isfile(state_path(out)):
            return False  # finished (refused), or a saved state to resume
        if set(os.listdir(out)) - {".nmtfrag.lock", WORK, CKPT, OWNER_DIR, "train.log"}:
            return False  # not only a run's leftovers: the run refuses, naming OUT
    print(f"nmtfrag finetune: --resume: {out} holds no saved state (the run stopped "
          f"before its first save, or never began): starting it from the beginning",
          file=sys.stderr)
    args.resume, args.overwrite = False, os.path.isdir(out)
    return True


def _run(args):
    """Build the job and the chosen method's config from the options, and call it."""
    start_if_nothing_saved(args)
    dp = getattr(args, "dp", False)
    if dp:
        dp_cli.check_compatible(args)
    elif getattr(args, "dp_public_train", None) or getattr(args, "dp_public_only", False):
        from ..errors import InputError

        raise InputError("--dp-public-train and --dp-public-only are DP-SGD's (with --dp); "
                         "without --dp give --public-train and --public-share (and "
                         "--public-only)")
    job = job_from_args(args, world_size=dp_cli.world_size(args) if dp else args.gpus)
    if dp:
        from ..dp.engine import dp_finetune

        return _report_dp(dp_finetune(job, dp_cli.config_from_args(args)),
                          seeded=args.seed is not None)
    from ..dp.release_privacy import ReleaseCertifier
    from ..train.finetune import finetune

    # a model trained on a DP release only carries the release's certificate
    return _report(finetune(job, config_from_args(args), ReleaseCertifier()), args.out)


def check_validation_options(args: argparse.Namespace) -> None:
    """The validation set's options: --valid-src and --valid-tgt, or --no-validation
    (without --patience, --validate-every, --dp-valid-every or the validation files)."""
    from ..errors import InputError

    dp = getattr(args, "dp", False)
    valid = {"--valid-src": args.valid_src, "--valid-tgt": args.valid_tgt}
    if args.no_validation:
        if dp and getattr(args, "dp_valid_every", 0):
            raise InputError("--dp-valid-every with --no-validation: nothing is validated")
        if any(v is not None for v in valid.values()):
            raise InputError("--no-validation reads no validation set: leave out "
                             "--valid-src/--valid-tgt")
        for name in ("patience", "validate_every"):
            if getattr(args, name) is not None:
                raise InputError(f"--{name.replace('_', '-')} with --no-validation: nothing "
                                 f"is validated (a run trains for its whole budget)")
        return
    missing = [k for k, v in valid.items() if v is None]
    if missing:
        raise InputError(f"the following arguments are required: {', '.join(missing)} "
                         + ("(or --no-validation: no validation loss measured)" if dp else
                            "(or --no-validation: the whole budget, the last checkpoint)"))


def job_from_args(args: argparse.Namespace, world_size: int) -> FineTuneJob:
    """The FineTuneJob both methods take, from the options."""
    from ..errors import InputError
    from ..train.job import FineTuneJob

    if len(args.train) > 2:
        raise InputError("--train takes a release directory, a prefix, or two files")
    return FineTuneJob(
        model=args.model, train=args.train if len(args.train) == 2 else args.train[0],
        valid_src=args.valid_src, valid_tgt=args.valid_tgt, out=args.out,
        src_lang=args.src_lang, tgt_lang=args.tgt_lang, pretokenized=args.pretokenized,
        checkpoint=args.checkpoint, tags=bool(args.tags), dropout=args.dropout,
        label_smoothing=args.label_smoothing, device=args.device, threads=args.threads,
        overwrite=args.overwrite, keep_work=args.keep_work, quiet=args.quiet,
        log_interval=args.log_interval, world_size=world_size,
        resume=bool(getattr(args, "resume", False)),
        save_every=getattr(args, "dp_save_every", 10), reshape=reshape_from_args(args),
        train_fraction=args.train_fraction)


def config_from_args(args: argparse.Namespace) -> FineTuneConfig:
    """fairseq's training method (FineTuneConfig) from the options."""
    from ..train.finetune import FineTuneConfig

    given = {k: v for k, v in (("lr", args.lr), ("weight_decay", args.weight_decay),
                               ("patience", args.patience)) if v is not None}
    return FineTuneConfig(  # options left out take FineTuneConfig's (the paper's) defaults
        max_updates=args.max_updates, max_epochs=args.max_epochs,
        warmup_updates=args.warmup_updates, max_tokens=args.max_tokens,
        update_freq=args.update_freq, validate_every=args.validate_every,
        seed=1 if args.seed is None else args.seed, params=dp_cli.trainable_set(args),
        fp16=args.fp16, keep_checkpoints=args.keep_checkpoints,
        validate=not args.no_validation, measure_before=not args.no_validation, **given)


def _report(manifest, out):
    import json
    import sys

    from ..train.finetune import loss_note

    r = manifest["result"]
    if loss_note(r):
        print(f"nmtfrag finetune: {loss_note(r)}", file=sys.stderr)
    print(json.dumps({"out": out, "checkpoint": manifest["params"]["checkpoint"],
                      "num_updates": r["num_updates"],
                      "valid_loss_before": r["valid_loss_before"],
                      "valid_loss_best": r["valid_loss_best"],
                      "best_checkpoint_updates": r["best_checkpoint_updates"]}),
          file=sys.stdout)
    return 0


def _report_dp(summary, seeded=False):
    import json
    import sys

    from ..randomness import SEEDED_MARK

    if seeded and not summary.get("not_private"):  # its ε is no guarantee: say so
        summary = {**summary, "randomness": SEEDED_MARK}
    print(json.dumps(summary))
    if seeded and not summary.get("not_private"):
        print(f"{SEEDED_MARK}: ε = {summary['epsilon_total']:.4f} is the mechanism's, not "
              "a guarantee (--seed: whoever learns the seed can replay the noise)",
              file=sys.stderr)
    if summary.get("not_private"):
        print(f"{summary['not_private']}: {summary['out']} has no privacy certificate",
              file=sys.stderr)
    return 0
