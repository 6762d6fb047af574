"""The two ways a DP run sets its Poisson sampling rate, as one interface (`RatePolicy`),
chosen once from the configuration (`rate_policy`).

- `FixedRate` (--sample-rate Q): q is public and fixed in advance, and so are the steps
  (ceil(epochs / q)); the DP count ñ only scales the update (divisor q·ñ). The training's
  privacy curve does not depend on ñ, so a target ε is reached with the count's segment
  composed in front by the accountant (RDP composition), and a given σ is certifiable.
- `LogicalBatch` (--logical-batch B or --batch-schedule): q = B/ñ comes from the DP count,
  so only a target ε can be certified, by basic composition with a split fixed before ñ
  is drawn (nmtfrag.dp.unit_count.basic_split).

Every place that used to ask `sample_rate is None` asks the policy instead: the checks,
the number of steps, σ (`plan`), the largest batch, the rate of each step, the expected
batch a simulation mirrors, and the certificate's and the terminal's wording.
"""
from __future__ import annotations

import functools
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Optional, Protocol

from ..errors import InputError
from . import accounting, schedule, unit_count
from .simulate import PlanSegment, RunMode


class RateSettings(Protocol):
    """What a policy reads of a run's settings (nmtfrag.dp.config.DPConfig, which
    imports this module: a protocol keeps the two apart)."""
    delta: float
    target_epsilon: Optional[float]
    noise_multiplier: Optional[float]
    sample_rate: Optional[float]
    logical_batch: Optional[int]
    batch_schedule: Optional[str]
    steps: Optional[int]
    epochs: Optional[float]
    accountant: str
    unit: str

    @property
    def mode(self) -> RunMode: ...


@dataclass(frozen=True)
class NoiseSchedule:
    """What `plan_noise` plans for a number of units: σ, the logical-batch segments
    [(first step, size)] ([(0, None)] at a fixed rate), the steps, the rate segments
    [(q, steps)] and the composition record of the certificate."""
    sigma: float
    segments: list
    steps: int
    rate_segments: list
    composition: dict


def rate_at(segments: list[tuple[int, int]], n: float, step: int) -> float:
    """Poisson sampling rate of a step: the scheduled logical batch over n units."""
    return schedule.batch_at(segments, step) / n


def fixed_rate(q: float, step: int) -> float:
    """Poisson sampling rate of a step with --sample-rate: q itself, exactly."""
    return q


class RatePolicy(ABC):
    """How the run's sampling rate is set: a public rate, or a logical batch over ñ."""

    @abstractmethod
    def check(self, config: RateSettings) -> None:
        """Refuse settings whose guarantee this policy cannot certify."""

    def total_steps(self, config: RateSettings, segments: Sequence[schedule.Segment],
                    n: float) -> int:
        """Noisy steps of the run: `steps`, else enough for `epochs` passes over n units
        (at a fixed rate q: ceil(epochs / q), no n needed)."""
        if config.steps:
            return int(config.steps)
        if not config.epochs:
            raise InputError("give a DP training budget: --dp-steps, --max-updates or "
                             "--max-epochs")
        return self.epoch_steps(config, segments, n)

    @abstractmethod
    def epoch_steps(self, config: RateSettings, segments: Sequence[schedule.Segment],
                    n: float) -> int:
        """Noisy steps for `config.epochs` passes over n units."""

    @abstractmethod
    def plan(self, config: RateSettings, n_units: float,
             fixed: Sequence[tuple] = ()) -> NoiseSchedule:
        """σ, segments, steps, rates and composition for n_units (nmtfrag.dp.planning)."""

    @abstractmethod
    def largest_batch(self, config: RateSettings, n: int) -> int:
        """The largest batch ñ must cover (nmtfrag.dp.unit_count.planning_count)."""

    @abstractmethod
    def few_units_batch(self, segments: list, n_units: int) -> float:
        """The expected batch of the first step, for the few-units refusal."""

    @abstractmethod
    def planned_segments(self, segments: list, n_plan: float) -> list[PlanSegment]:
        """(first step, expected batch) a simulation mirrors: B, or q·ñ."""

    @abstractmethod
    def step_rates(self, segments: list, n_plan: float, resized: bool
                   ) -> Callable[[int], float]:
        """rate_of_step for train_dp (picklable, for spawned processes); `resized`: the
        run trains on batches of B_SIM (--dp-simulate-batch), sampled from `segments`
        whatever the planned rate."""

    @abstractmethod
    def describe(self, segments: list) -> str:
        """The rate on the owner's terminal."""

    @abstractmethod
    def count_mechanism(self) -> str:
        """What the DP count ñ decides, for the certificate's unit_count entry."""


class FixedRate(RatePolicy):
    """--sample-rate Q: q and the steps are public, ñ only scales the update."""

    def __init__(self, q: float):
        self.q = q

    def check(self, config: RateSettings) -> None:
        if config.batch_schedule or config.logical_batch:
            raise InputError("--sample-rate excludes --logical-batch and "
                             "--batch-schedule: give the rate or the batch")
        if not 0.0 < self.q <= 1.0:
            raise InputError(f"--sample-rate must be in (0, 1], got {self.q}")

    def epoch_steps(self, config: RateSettings, segments: Sequence[schedule.Segment],
                    n: float) -> int:
        assert config.epochs  # total_steps: steps, else epochs
        return math.ceil(config.epochs / self.q)

    def plan(self, config: RateSettings, n_units: float,
             fixed: Sequence[tuple] = ()) -> NoiseSchedule:
        """q and the steps do not depend on n_units, so the training's curve is fixed in
        advance and a target ε is reached with the `fixed` segments (the count's)
        composed in front (RDP composition)."""
        steps = self.total_steps(config, (), n_units)  # a fixed rate: no batch segments
        no_batch: list[tuple[int, int | None]] = [(0, None)]
        rate_segs = [(float(self.q), steps)]
        comp = accounting.composition_record(accounting.RDP_COMPOSITION, config.delta)
        if config.noise_multiplier is not None:
            return NoiseSchedule(float(config.noise_multiplier), no_batch, steps,
                                 rate_segs, comp)
        assert config.target_epsilon is not None  # DPConfig: σ or a target ε, not neither
        sigma = accounting.noise_multiplier_for(config.target_epsilon, config.delta,
                                                rate_segs, config.accountant, fixed=fixed)
        return NoiseSchedule(sigma, no_batch, steps, rate_segs, comp)

    def largest_batch(self, config: RateSettings, n: int) -> int:
        return 1  # no rate comes from ñ (it only scales the update)

    def few_units_batch(self, segments: list, n_units: int) -> float:
        return max(self.q * n_units, 1.0)

    def planned_segments(self, segments: list, n_plan: float) -> list[PlanSegment]:
        return [(0, self.q * n_plan)]

    def step_rates(self, segments: list, n_plan: float, resized: bool
                   ) -> Callable[[int], float]:
        if resized:  # a simulation samples batches of B_SIM from the segments
            return functools.partial(rate_at, segments, n_plan)
        return functools.partial(fixed_rate, float(self.q))

    def describe(self, segments: list) -> str:
        return f"sample rate {self.q}"

    def count_mechanism(self) -> str:
        return ("q = --sample-rate and the steps are public, ñ only scales the update "
                "(divisor q·ñ)")


class LogicalBatch(RatePolicy):
    """--logical-batch B or --batch-schedule: every rate q = B/ñ comes from the DP count."""

    def __init__(self, schedule_text: str):
        self.schedule_text = schedule_text  # "SIZE:FROM_STEP,…" ("B:0" for one batch)

    def segments(self) -> list[schedule.Segment]:
        return schedule.parse_schedule(self.schedule_text)

    def check(self, config: RateSettings) -> None:
        """Only a target ε can be certified, by basic composition with a budget fixed
        before ñ is drawn."""
        if config.noise_multiplier is not None and config.mode is RunMode.PRIVATE:
            # a simulation or control has no certificate
            raise InputError("--noise-multiplier with --logical-batch/--batch-schedule: "
                             "q = B/ñ comes from the DP count, so the training's ε would "
                             "depend on it and no bound is fixed in advance; use "
                             "--sample-rate Q, or --epsilon")
        accounting.check_delta(config.delta)
        if config.target_epsilon is not None:
            eps_count = unit_count.basic_split(config.delta)[0]
            if not config.target_epsilon > eps_count:
                raise InputError(
                    f"--epsilon {config.target_epsilon} does not exceed the DP unit "
                    f"count's ε_count = {eps_count:.4f} (at δ/10): nothing would be left "
                    "for training; raise it, or use --sample-rate Q (the count then "
                    "costs far less by RDP composition)")

    def epoch_steps(self, config: RateSettings, segments: Sequence[schedule.Segment],
                    n: float) -> int:
        assert config.epochs
        steps, seen = 0, 0.0
        while seen < config.epochs * n:
            seen += schedule.batch_at(segments, steps)
            steps += 1
        return steps

    def plan(self, config: RateSettings, n_units: float,
             fixed: Sequence[tuple] = ()) -> NoiseSchedule:
        """q = B/n_units is chosen from the count, so σ makes the training alone reach
        E − ε_count at δ_train (basic composition; the split is fixed in advance,
        whatever n_units is)."""
        segs = self.segments()
        steps = self.total_steps(config, segs, n_units)
        rate_segs = schedule.rate_segments(segs, steps, n_units)
        if config.noise_multiplier is not None:  # only a simulation or control
            comp = accounting.composition_record(accounting.RDP_COMPOSITION, config.delta)
            return NoiseSchedule(float(config.noise_multiplier), segs, steps, rate_segs,
                                 comp)
        eps_count, d_count, d_train = unit_count.basic_split(config.delta)
        assert config.target_epsilon is not None  # DPConfig: σ or a target ε, not neither
        bound = config.target_epsilon - eps_count  # > 0: LogicalBatch.check
        while eps_count + bound > config.target_epsilon:  # the certificate is ≤ E
            bound = math.nextafter(bound, 0.0)
        sigma = accounting.noise_multiplier_for(bound, d_train, rate_segs,
                                                config.accountant)
        comp = accounting.composition_record(accounting.BASIC_COMPOSITION, config.delta,
                                             epsilon_train_bound=bound,
                                             delta_count=d_count)
        return NoiseSchedule(sigma, segs, steps, rate_segs, comp)

    def largest_batch(self, config: RateSettings, n: int) -> int:
        """Refused when above the n units (the owner's terminal only: q = batch / ñ is
        then clamped to 1 at most)."""
        size = max(s for _, s in self.segments())
        if size > n:
            raise InputError(f"logical batch {size} exceeds the {n} training "
                             f"{config.unit}s (sampling rate would be > 1)")
        return size

    def few_units_batch(self, segments: list, n_units: int) -> float:
        return min(segments[0][1], n_units)  # segments are (from_step, size)

    def planned_segments(self, segments: list, n_plan: float) -> list[PlanSegment]:
        return segments

    def step_rates(self, segments: list, n_plan: float, resized: bool
                   ) -> Callable[[int], float]:
        return functools.partial(rate_at, segments, n_plan)

    def describe(self, segments: list) -> str:
        return f"logical batch {segments}"

    def count_mechanism(self) -> str:
        return ("every rate q = batch / ñ (raised to keep q ≤ 1) and step count comes "
                "from ñ, never from n")


def rate_policy(sample_rate: float | None, logical_batch: int | None,
                batch_schedule: str | None) -> RatePolicy:
    """The one place the rate mode is chosen: a public rate when one is given (after
    DPConfig's defaults, a run without a batch has the recipe's), else the batch."""
    if sample_rate is not None:
        return FixedRate(sample_rate)
    return LogicalBatch(batch_schedule or f"{logical_batch}:0")

