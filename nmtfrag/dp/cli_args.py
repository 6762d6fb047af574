"""DP-SGD options of `nmtfrag finetune --dp` and the dispatch to the DP fine-tuning loop.

`nmtfrag finetune` calls `add_arguments(parser)` and, when `args.dp` is set,
`run(args)`. Light imports only: torch/opacus are imported inside `run`.
"""


def add_arguments(parser):
    g = parser.add_argument_group(
        "differential privacy (DP-SGD)",
        "With --dp, training uses per-example clipping, Gaussian noise and Poisson "
        "sampling of logical batches (see `nmtfrag privacy` to plan ε before "
        "training); the certificate goes to OUT/privacy.json and OUT/manifest.json.")
    g.add_argument("--dp", action="store_true",
                   help="train with DP-SGD (requires --delta and one of "
                        "--target-epsilon / --noise-multiplier)")
    g.add_argument("--target-epsilon", type=float, default=None,
                   help="calibrate the noise multiplier so that training reaches this ε "
                        "at --delta")
    g.add_argument("--noise-multiplier", type=float, default=None,
                   help="noise std / max-grad-norm (σ); alternative to --target-epsilon")
    g.add_argument("--delta", type=float, default=None,
                   help="δ of the (ε, δ) guarantee; should be < 1/(number of training "
                        "examples)")
    g.add_argument("--max-grad-norm", type=float, default=1.0,
                   help="per-example gradient clipping norm C (default 1.0)")
    g.add_argument("--logical-batch", type=int, default=None,
                   help="expected examples per noisy step (Poisson sampling rate = "
                        "logical batch / training examples)")
    g.add_argument("--physical-batch", type=int, default=32,
                   help="examples per forward/backward pass; physical batches are "
                        "accumulated into one noisy step (default 32)")
    g.add_argument("--batch-schedule", default=None,
                   help='increasing logical batch sizes "SIZE:FROM_STEP,...", e.g. '
                        '"256:0,1024:200" (Anil et al. 2021 §5.2.2); overrides '
                        "--logical-batch")
    g.add_argument("--dp-steps", type=int, default=None,
                   help="number of noisy (logical) steps; default: --max-updates, else "
                        "enough steps for --max-epochs passes over the data")
    g.add_argument("--accountant", choices=("rdp", "prv"), default="rdp",
                   help="privacy accountant used for calibration and the certificate "
                        "(default rdp; the other one is reported as a cross-check)")
    g.add_argument("--dp-weight-decay", type=float, default=0.0,
                   help="decoupled weight decay towards zero (large values help DP "
                        "training, Anil et al. 2021 §4.3)")
    g.add_argument("--dp-lr", type=float, default=None,
                   help="learning rate of the DP optimizer (default: finetune's --lr)")
    g.add_argument("--dp-freeze-embeddings", action="store_true",
                   help="train everything but the (tied) embedding matrices: far fewer "
                        "noisy dimensions and a faster step")
    g.add_argument("--dedup", action="store_true",
                   help="train on each distinct sentence pair once: the privacy unit "
                        "becomes one distinct pair (without it, a pair repeated k times "
                        "is protected only as a group of k)")
    g.add_argument("--dp-valid-every", type=int, default=0, metavar="STEPS",
                   help="validation loss every STEPS noisy steps (default: only at the end)")


def run(args):
    """Run DP fine-tuning for `nmtfrag finetune --dp`."""
    from .sgd import dp_finetune

    return dp_finetune(args)
