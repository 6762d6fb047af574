"""A DP run's configuration, `DPConfig`: the mechanism and its budget (everything the
certificate is about), with the checks that refuse settings which would void or silently
change the guarantee. Read by every other part of the DP façade (nmtfrag.dp.engine).

Names: `DPConfig.epochs` is `--max-epochs` (`max_epochs` in the plain fine-tuning
config); the field names are the resumable run's identity (nmtfrag.dp.resume.run_identity,
recorded in OUT/owner/), so they are kept as they are.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..errors import InputError
from ..train.trainable import TrainableSet
from . import accounting, recipe, simulate
from .rates import RatePolicy, rate_policy
from .simulate import RunMode

# Below this many privacy units a DP guarantee is refused unless asked for explicitly:
# each noisy step averages at most that many clipped gradients, so noise that gives a
# meaningful ε drowns the signal (EMEA train has 17 documents).
MIN_UNITS = 100
UNITS = ("sentence", "document")


@dataclass
class DPConfig:
    """The mechanism and its budget: everything the certificate is about."""
    delta: float
    target_epsilon: Optional[float] = None
    noise_multiplier: Optional[float] = None
    max_grad_norm: float = 1.0
    logical_batch: Optional[int] = None        # expected units per noisy step
    sample_rate: Optional[float] = None        # public Poisson rate q (instead of a batch)
    batch_schedule: Optional[str] = None       # "SIZE:FROM_STEP,..." (overrides it)
    physical_batch: int = 32                   # pairs per forward/backward pass
    physical_max_tokens: Optional[int] = 4096  # and padded (source+target) tokens
    steps: Optional[int] = None
    epochs: Optional[float] = None             # used when steps is None
    accountant: str = accounting.DEFAULT_ACCOUNTANT  # calibrates σ, states the ε
    # False: --accountant was left out, so --resume continues with the interrupted run's
    # (a run recorded with "rdp" keeps it). Not part of the run's identity.
    accountant_given: bool = field(default=True, metadata={"identity": False})
    lr: float = recipe.DEFAULT.lr
    weight_decay: float = 0.0
    params: TrainableSet = field(default_factory=recipe.DEFAULT.trainable)
    unit: str = "sentence"
    documents: Optional[str] = None            # one document id per training line
    dedup: bool = False
    allow_few_units: bool = False
    seed: Optional[int] = None                 # None: secret randomness
    valid_every: int = 0
    clipping: str = "auto"                     # auto, ghost or hooks (fairseq_opacus)
    clip_mode: str = "clip"                    # clip, or normalize (automatic clipping)
    loss: str = "sum"                          # each pair's token loss: sum or mean
    warmup_steps: int = 0                      # linear lr warm-up over these steps
    simulate_batch: Optional[int] = None       # not private: nmtfrag.dp.simulate
    control: bool = False                      # σ = 0, not private: nmtfrag.dp.simulate
    # public pairs in every logical batch, unclipped and noise-free (ε unchanged):
    # PREFIX of public parallel text, pairs per step, weight of each against a private one
    public_train: Optional[str] = None
    public_batch: int = 0
    public_weight: float = 1.0
    public_only: bool = False                  # the public pairs alone: a control, σ = 0

    def __post_init__(self) -> None:
        """Left out, the rate and the length of the run are the default recipe's
        (nmtfrag.dp.recipe), as are the lr and the trained set above."""
        if self.sample_rate is None and not (self.logical_batch or self.batch_schedule):
            self.sample_rate = recipe.DEFAULT.sample_rate
        if self.steps is None and self.epochs is None:
            self.epochs = recipe.DEFAULT.epochs

    def check(self) -> None:
        """Refuse configurations that would void (or silently change) the guarantee."""
        if self.delta is None:
            raise InputError("--dp needs --delta: a DP guarantee without δ is void")
        if (self.target_epsilon is None) == (self.noise_multiplier is None):
            raise InputError("--dp needs exactly one of --epsilon and "
                             "--noise-multiplier")
        if self.max_grad_norm is None or not self.max_grad_norm > 0:
            raise InputError("--max-grad-norm must be positive")
        if self.physical_max_tokens is not None and self.physical_max_tokens < 1:
            raise InputError("--max-tokens must be ≥ 1")
        if self.physical_batch is None or self.physical_batch < 1:
            raise InputError("--physical-batch must be ≥ 1")
        self.rate.check(self)
        if self.unit not in UNITS:
            raise InputError(f"--privacy-unit must be one of {UNITS}, got {self.unit!r}")
        if (self.unit == "document") != (self.documents is not None):
            raise InputError("--privacy-unit document needs --documents FILE (one document "
                             "id per training line), and --documents needs it")
        from .clipping import CLIPPING

        if self.clipping not in CLIPPING:
            raise InputError(f"--dp-clipping must be one of {CLIPPING}, "
                             f"got {self.clipping!r}")
        from .clipping import CLIP_MODES, LOSSES

        if self.clip_mode not in CLIP_MODES:
            raise InputError(f"--dp-clip-mode must be one of {CLIP_MODES}")
        if self.loss not in LOSSES:
            raise InputError(f"--dp-loss must be one of {LOSSES}")
        if self.warmup_steps is None or self.warmup_steps < 0:
            raise InputError("--dp-warmup-steps must be ≥ 0")
        simulate.check(self)
        if (self.public_train is None) != (self.public_batch == 0):
            raise InputError("--dp-public-train PREFIX and --dp-public-batch N go together "
                             "(public pairs per logical batch)")
        if self.public_batch < 0 or not self.public_weight > 0:
            raise InputError("--dp-public-batch must be ≥ 1 and --dp-public-weight > 0")
        if self.public_only and not self.public_train:
            raise InputError("--dp-public-only needs --dp-public-train and --dp-public-batch "
                             "(the public pairs the control trains on alone)")
        if self.public_only and (self.control or self.simulate_batch is not None):
            raise InputError("--dp-public-only is a control of its own: not with "
                             "--dp-control or --dp-simulate-batch")
        if self.unit == "document" and self.dedup:
            raise InputError("--dedup with --privacy-unit document: a document is the "
                             "unit, so its repeated pairs are already protected with it")

    @property
    def unit_key(self) -> str:
        """The certificate's unit (nmtfrag.dp.accounting.unit_key)."""
        return accounting.unit_key(self.unit, self.dedup)

    @property
    def rate(self) -> RatePolicy:
        """How the sampling rate is set: --sample-rate Q (q public, fixed in advance) or
        a logical batch (q = B/ñ, from the DP count): nmtfrag.dp.rates."""
        return rate_policy(self.sample_rate, self.logical_batch, self.batch_schedule)

    @property
    def mode(self) -> RunMode:
        """Private, a simulation or a noise-free control (nmtfrag.dp.simulate)."""
        return simulate.mode(self)
