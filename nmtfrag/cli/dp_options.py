"""DP-SGD options of `nmtfrag finetune --dp`, turned into the façade's typed config.

`nmtfrag finetune` calls `add_arguments(parser)` and, when `args.dp` is set, builds its
`FineTuneJob` and, here, a `DPConfig` (`config_from_args`), and calls
`nmtfrag.dp.engine.dp_finetune`: the library never sees argparse. Light imports only:
torch/opacus are imported inside the engine.
"""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from . import options as opt
from . import arg_types as ct
from ..errors import InputError
from ..train.lora_targets import LORA_DEFAULT_MODULES
from ..train.trainable import CHOICES, TrainableSet
from ..dp import recipe
from ..dp.accounting import DEFAULT_ACCOUNTANT

if TYPE_CHECKING:
    from ..dp.config import DPConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group(
        "differential privacy (DP-SGD)",
        "With --dp, training uses per-example clipping, Gaussian noise and Poisson "
        "sampling of logical batches (see `nmtfrag privacy` to plan ε before "
        "training); the certificate goes to OUT/privacy.json and OUT/manifest.json. "
        "Options left out take the default recipe's values (nmtfrag.dp.recipe, "
        f"docs/results/dp-recipe.md): {recipe.DEFAULT.describe()}, C 1.")
    _add_guarantee(g)
    _add_batches(g)
    _add_units(g)
    _add_recipe(g)
    _add_public(g)


def _add_public(g: opt.OptionGroup) -> None:
    """Public pairs in every logical batch (ε unchanged)."""
    g.add_argument("--dp-public-train", metavar="PREFIX", default=None,
                   help="public parallel text PREFIX.SRC / PREFIX.TGT (raw): pairs of it join "
                        "every logical batch unclipped and noise-free; they read nothing "
                        "private, so the certificate's ε is unchanged (it records their "
                        "SHA-256)")
    g.add_argument("--dp-public-batch", type=ct.positive_int, default=0, metavar="N",
                   help="public pairs per logical batch (with --dp-public-train)")
    g.add_argument("--dp-public-weight", type=ct.positive_float, default=1.0, metavar="W",
                   help="weight of a public pair against a private one in the update's "
                        "mean (default %(default)s)")
    g.add_argument("--dp-public-only", action="store_true",
                   help="NOT PRIVATE, a control: the planned steps with their public pairs "
                        "alone (no owner pair joins a logical batch, σ = 0, the same update "
                        "divisor): what a run with --dp-public-train owes to its public "
                        "pairs; no certificate")


def _add_guarantee(g: opt.OptionGroup) -> None:
    """--dp and the (ε, δ) it is calibrated to; the clipping norm; the accountant."""
    opt.add_dp(g, "train with DP-SGD (requires --delta and one of --epsilon / "
                  "--noise-multiplier; the rate is --sample-rate (default "
                  f"{recipe.DEFAULT.sample_rate}), --logical-batch or --batch-schedule; "
                  "--noise-multiplier not with --logical-batch/--batch-schedule)")
    opt.add_epsilon(g, "calibrate the noise multiplier so that training reaches this ε at "
                       "--delta", dest="target_epsilon")
    opt.add_noise_multiplier(g, "noise std / max-grad-norm (σ); alternative to --epsilon")
    opt.add_delta(g, "δ of the (ε, δ) guarantee; should be < 1/(number of training "
                     "examples)")
    g.add_argument("--max-grad-norm", type=ct.positive_float, default=1.0,
                   help="per-example gradient clipping norm C (default 1.0)")
    opt.add_accountant(g, "privacy accountant that calibrates σ to --epsilon and whose ε "
                          "the certificate states (default prv: the upper end of its "
                          "estimate, the tighter one; rdp is the earlier default); both "
                          "are reported. --resume keeps the interrupted run's",
                       default=None)


def _add_batches(g: opt.OptionGroup) -> None:
    """How noisy steps are sampled and how many there are."""
    g.add_argument("--logical-batch", type=ct.positive_int, default=None,
                   help="expected examples per noisy step (Poisson sampling rate = "
                        "logical batch / training examples)")
    opt.add_sampling_rate(g, "public Poisson sampling rate of every noisy step, in (0, 1]; "
                             "instead of --logical-batch/--batch-schedule (default "
                             f"{recipe.DEFAULT.sample_rate} when none is given). The rate is "
                             "fixed in advance (no unit count needed for it; --max-epochs "
                             "E gives ceil(E/Q) steps), so the DP unit count and the "
                             "training compose by RDP and --noise-multiplier is allowed. "
                             "With a logical batch q = B/ñ comes from the DP count ñ: only "
                             "--epsilon, certified by basic composition (ε_count + "
                             "ε_train)")
    g.add_argument("--physical-batch", type=ct.positive_int, default=32,
                   help="examples per forward/backward pass (and at most --max-tokens "
                        "padded source+target tokens); physical batches are "
                        "accumulated into one noisy step (default 32)")
    opt.add_batch_schedule(g, 'increasing logical batch sizes "SIZE:FROM_STEP,...", e.g. '
                              '"256:0,1024:200" (Anil et al. 2021 §5.2.2); overrides '
                              "--logical-batch")
    g.add_argument("--dp-steps", type=ct.positive_int, default=None,
                   help="number of noisy (logical) steps; default: --max-updates, else "
                        "enough steps for --max-epochs passes over the data (default "
                        f"{recipe.DEFAULT.epochs:g} passes)")
    g.add_argument("--world-size", type=ct.positive_int, default=None, metavar="N",
                   help="DP-SGD in N processes through torch.distributed (gloo on CPU; on "
                        "CUDA one GPU each, as --gpus N): each clips its share of the "
                        "logical batch, the clipped sums are all-reduced and the noise is "
                        "added once, so ε is that of one process")


def _add_units(g: opt.OptionGroup) -> None:
    """What one unit of the guarantee is."""
    opt.add_privacy_unit(g, "what one unit of the guarantee is: a sentence pair (default) "
                            "or a document (all its pairs: sampled, and clipped, together)",
                         "with --privacy-unit document: one document id per training line "
                         "(as `nmtfrag split` writes them)")
    g.add_argument("--allow-few-units", action="store_true",
                   help="train even with fewer than 100 privacy units (refused by "
                        "default: the noise then drowns the signal)")
    opt.add_dedup(g, "train on each distinct sentence pair once: the privacy unit becomes "
                     "one distinct pair (without it, a pair repeated k times is protected "
                     "only as a group of k)")


def _add_recipe(g: opt.OptionGroup) -> None:
    """The DP training recipe: optimizer, clipping, loss, schedule, saving; and the two
    runs that are not private."""
    g.add_argument("--dp-weight-decay", type=ct.nonnegative_float, default=0.0,
                   help="decoupled weight decay towards zero (large values help DP "
                        "training, Anil et al. 2021 §4.3)")
    g.add_argument("--dp-lr", type=ct.positive_float, default=None,
                   help=f"learning rate of the DP optimizer (Adam; default "
                        f"{recipe.DEFAULT.lr}, the default recipe's)")
    g.add_argument("--dp-freeze-embeddings", action="store_true",
                   help="train everything but the (tied) embedding matrices: far fewer "
                        "noisy dimensions and a faster step (--dp-params all, the set it "
                        "implies when --dp-params is left out)")
    g.add_argument("--dp-clipping", choices=("auto", "ghost", "hooks"), default="auto",
                   help="how per-example gradients are clipped: hooks (per-example "
                        "gradients materialised; faster), ghost (opacus' ghost clipping: "
                        "norms only, a second backward pass; for trained sets whose "
                        "per-example gradients do not fit in memory; not with tied trained "
                        "matrices or document units), or auto (default: hooks unless a "
                        "physical batch's per-example gradients would take over 1/4 of "
                        "free memory); the log says which and why")
    g.add_argument("--dp-valid-every", type=ct.nonnegative_int, default=0, metavar="STEPS",
                   help="validation loss every STEPS noisy steps (default: only at the end)")
    g.add_argument("--dp-clip-mode", choices=("clip", "normalize"), default="clip",
                   help="what is done to each unit's gradient g: clip (default: scaled to "
                        "norm ≤ --max-grad-norm C) or normalize (automatic clipping, Bu "
                        "et al. 2022: C·g/(‖g‖ + 0.01), every contribution of norm < C; "
                        "C is then only a scale of the update)")
    g.add_argument("--dp-loss", choices=("sum", "mean"), default="sum",
                   help="each pair's loss: the sum over its target tokens (default) or "
                        "their mean (long pairs then weigh no more than short ones)")
    g.add_argument("--dp-warmup-steps", type=ct.nonnegative_int, default=None, metavar="STEPS",
                   help="raise the learning rate linearly over the first STEPS noisy steps, "
                        "then keep it constant (default: --warmup-updates, i.e. 0)")
    g.add_argument("--dp-save-every", type=ct.nonnegative_int, default=10, metavar="STEPS",
                   help="save the state of the run (parameters, optimizer, accountant "
                        "history, generator states) to OUT/owner/ every STEPS noisy steps, "
                        "every 2 minutes (longer where saving is slow), and when Ctrl-C or "
                        "SIGTERM stops the run (its last whole step), so --resume continues "
                        "it exactly (default 10; 0: never)")
    g.add_argument("--dp-simulate-batch", type=ct.positive_int, default=None, metavar="B_SIM",
                   help="NOT PRIVATE: a cheap simulation of the planned run (Sander et "
                        "al. 2023): Poisson batches of B_SIM with noise multiplier "
                        "σ·B_SIM/B (the planned run's noise per averaged gradient; B is "
                        "the --logical-batch, or q·ñ at a --sample-rate q) for the planned "
                        "steps; no certificate")
    g.add_argument("--dp-control", action="store_true",
                   help="NOT PRIVATE: the planned schedule with clipping but no noise "
                        "(σ = 0), to see what clipping and few steps cost apart from the "
                        "noise; with --dp-simulate-batch B_SIM, the planned steps on "
                        "batches of B_SIM (a cheap control); no certificate")


def add_trainable_arguments(group: opt.OptionGroup) -> None:
    """--dp-params and the LoRA options (they serve fine-tuning with and without --dp)."""
    group.add_argument("--dp-params", choices=CHOICES, default=None,
                       help="which parameters train: all (default without --dp), lora "
                            "(low-rank adapters, merged into the weights at the end; "
                            "default with --dp), bias (BitFit) or decoder (its layers). "
                            "Fewer trained parameters means less DP noise")
    group.add_argument("--lora-rank", type=ct.positive_int, default=8,
                       help="LoRA rank r (default 8)")
    group.add_argument("--lora-alpha", type=ct.positive_float, default=16.0,
                       help="LoRA scaling α (the update is α/r·BA; default 16)")
    group.add_argument("--lora-modules", default=",".join(LORA_DEFAULT_MODULES),
                       help="projections that get adapters, among q,k,v,out,fc1,fc2 "
                            "(default: all of them)")


def trainable_set(args: argparse.Namespace) -> TrainableSet:
    """The trained parameter set of --dp-params and the LoRA options (both methods)."""
    try:
        freeze = bool(getattr(args, "dp_freeze_embeddings", False))
        # left out: every parameter without --dp or with --dp-freeze-embeddings (all but
        # the embeddings), else the default recipe's set
        kind = args.dp_params or ("all" if freeze or not getattr(args, "dp", False)
                                  else recipe.DEFAULT.params)
        return TrainableSet(kind, lora_rank=args.lora_rank,
                            lora_alpha=args.lora_alpha, lora_modules=args.lora_modules,
                            freeze_embeddings=freeze)
    except ValueError as exc:
        raise InputError(str(exc)) from None


def check_compatible(args: argparse.Namespace) -> None:
    """finetune options that have no meaning (or void the guarantee) under --dp."""
    if getattr(args, "update_freq", 1) not in (None, 1):
        raise InputError("--update-freq with --dp would accumulate unclipped gradients over "
                         "Poisson batches and void the guarantee; use --logical-batch and "
                         "--physical-batch (virtual steps) instead")
    if getattr(args, "fp16", False):
        raise InputError("--fp16 is not supported with --dp")
    # the options of fine-tuning without --dp, which DP-SGD would silently ignore
    for name, instead in (("lr", f"give --dp-lr (default {recipe.DEFAULT.lr}, the default "
                                 "recipe's)"),
                          ("patience", "a run's length is its plan (--max-epochs or "
                                       "--dp-steps), never cut short by validation"),
                          ("validate_every", "give --dp-valid-every"),
                          ("weight_decay", "give --dp-weight-decay"),
                          ("keep_checkpoints", "the state that resumes a run is kept in "
                                               "OUT/owner/ (--dp-save-every)")):
        if getattr(args, name, None) not in (None, False):
            raise InputError(f"--{name.replace('_', '-')} is an option of fine-tuning "
                             f"without --dp; with --dp {instead}")
    gpus, world = getattr(args, "gpus", 1) or 1, getattr(args, "world_size", None)
    if gpus > 1 and world not in (None, gpus):
        raise InputError(f"--gpus {gpus} and --world-size {world} disagree")
    if gpus > 1 and getattr(args, "device", None) == "cpu":
        raise InputError("--gpus with --device cpu: use --world-size N for CPU processes")


def world_size(args: argparse.Namespace) -> int:
    """Processes for DP-SGD: --world-size, else --gpus (one process per GPU)."""
    n = getattr(args, "world_size", None) or getattr(args, "gpus", 1) or 1
    if n < 1:
        raise InputError(f"--world-size must be ≥ 1, got {n}")
    return n


def config_from_args(args: argparse.Namespace) -> DPConfig:
    """The DPConfig of `nmtfrag finetune --dp` (the job is the command's: both methods
    take the same FineTuneJob)."""
    from ..dp.config import DPConfig

    return DPConfig(
        delta=args.delta, target_epsilon=args.target_epsilon,
        noise_multiplier=args.noise_multiplier, max_grad_norm=args.max_grad_norm,
        logical_batch=args.logical_batch, batch_schedule=args.batch_schedule,
        sample_rate=args.sample_rate,
        physical_batch=args.physical_batch, physical_max_tokens=args.max_tokens,
        steps=args.dp_steps or getattr(args, "max_updates", None),
        epochs=getattr(args, "max_epochs", None), accountant=args.accountant or DEFAULT_ACCOUNTANT,
        accountant_given=args.accountant is not None,
        **({"lr": args.dp_lr} if args.dp_lr else {}),  # else DPConfig's: the recipe's
        weight_decay=args.dp_weight_decay,
        params=trainable_set(args), unit=args.privacy_unit, documents=args.documents,
        dedup=args.dedup, allow_few_units=args.allow_few_units, seed=args.seed,
        valid_every=args.dp_valid_every, clipping=args.dp_clipping,
        clip_mode=args.dp_clip_mode, loss=args.dp_loss,
        warmup_steps=(args.dp_warmup_steps if args.dp_warmup_steps is not None
                      else getattr(args, "warmup_updates", 0) or 0),
        simulate_batch=args.dp_simulate_batch, control=args.dp_control,
        public_train=args.dp_public_train, public_batch=args.dp_public_batch,
        public_weight=args.dp_public_weight, public_only=args.dp_public_only)
