"""Planning a DP run's noise: the steps, σ and the rates, from the DP count ñ (never from
the exact n, which stays with the owner). How the rate is set, a public rate or a logical
batch over ñ, is the run's rate policy (nmtfrag.dp.rates); this module draws ñ once,
plans with it, and refuses plans over too few units.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import InputError
from ..randomness import Seed
from . import accounting, resume, schedule, simulate, unit_count
from .config import MIN_UNITS, DPConfig
from .rates import NoiseSchedule


def total_steps(config: DPConfig, segments: Sequence[schedule.Segment], n: float) -> int:
    """Noisy steps of the run: `steps`, else enough for `epochs` passes over n units
    (with --sample-rate Q: ceil(epochs / Q), no n needed)."""
    return config.rate.total_steps(config, segments, n)


def plan_noise(config: DPConfig, n_units: float, fixed: Sequence[tuple] = ()
               ) -> NoiseSchedule:
    """σ, schedule segments, steps, rate segments and composition for n_units privacy
    units (in a run: the DP planning count of nmtfrag.dp.unit_count, never the exact n).

    --sample-rate: q and the steps do not depend on n_units, so the training's curve is
    fixed in advance and a target ε is reached with the `fixed` segments (the count's)
    composed in front (RDP composition). Logical batch: q = B/n_units is chosen from the
    count, so σ makes the training alone reach E − ε_count at δ_train (basic
    composition; the split is fixed in advance, whatever n_units is)."""
    return config.rate.plan(config, n_units, fixed)


def largest_batch(config: DPConfig, n: int) -> int:
    """The largest scheduled logical batch; refused when above the n units (the owner's
    terminal only: q = batch / ñ is then clamped to 1 at most). With --sample-rate no
    rate comes from ñ: 1 (ñ only scales the update)."""
    return config.rate.largest_batch(config, n)


def check_enough_units(config: DPConfig, n_units: int) -> None:
    """Refuse a guarantee over fewer than MIN_UNITS units, saying what it would cost."""
    if n_units >= MIN_UNITS or config.allow_few_units:
        return
    planned = plan_noise(config, n_units)
    sigma = planned.sigma
    batch = config.rate.few_units_batch(planned.segments, n_units)
    raise InputError(
        f"only {n_units} {config.unit}s: a DP guarantee over so few units is refused. "
        f"Each noisy step averages at most {n_units} clipped gradients; this plan needs "
        f"σ = {sigma:.2f}, so the noise of each averaged step has standard deviation "
        f"{sigma / batch:.2f}·C per coordinate, against a signal of norm at most C. Use a "
        f"smaller unit or more data, or pass --allow-few-units to train anyway")


@dataclass
class NoisePlan:
    """The run's plan from the DP count: n stays with the owner, everything else comes
    from ñ (`n_hat`) and the planning count."""
    n: int
    n_hat: float
    n_plan: float
    count_segment: tuple
    sigma: float
    segments: list
    steps: int
    rate_segments: list
    composition: dict
    train_sigma: float
    train_segments: list
    planned_segments: list  # (first step, expected batch): q·ñ at a fixed rate q


def with_releases(config: DPConfig, releases: Sequence[dict]) -> tuple[DPConfig, list]:
    """The config σ is calibrated with, and the segments composed in front of the count's,
    when the base model was trained on DP releases: --epsilon is then the total over the
    releases and this training. Rates fixed in advance: the releases' Gaussian counts are
    accounted together with the training (accounting.joint_release_epsilon), at δ plus
    their δ_G. Rates from the DP count: the training's target is what the releases
    left (basic composition)."""
    from dataclasses import replace

    if not releases or config.target_epsilon is None:
        return config, []
    spent = sum(float(r["epsilon"]) for r in releases)
    if config.sample_rate is not None:
        delta = config.delta + sum(float(r["delta_gauss"]) for r in releases)
        segs = accounting.release_segments(releases)
        if accounting.epsilon(segs + [unit_count.count_segment()], delta,
                              config.accountant) >= config.target_epsilon:
            raise InputError(f"--epsilon {config.target_epsilon:g} is the total with the "
                             f"base model's DP release(s) (ε {spent:g} on their own): they "
                             "and the unit count spend all of it; raise --epsilon or use a "
                             "release at a smaller ε")
        return replace(config, delta=delta), segs
    left = config.target_epsilon - spent
    if left <= unit_count.basic_split(config.delta)[0]:
        raise InputError(f"--epsilon {config.target_epsilon:g} is the total with the base "
                         f"model's DP release(s), which spent {spent:g}: what is left does "
                         "not exceed the unit count's ε; raise --epsilon, or use "
                         "--sample-rate Q")
    return replace(config, target_epsilon=left), []


def plan_run(config: DPConfig, out: str, seed: Seed, resuming: bool, n: int,
             units: list[list[int]] | None, releases: Sequence[dict] = ()) -> NoisePlan:
    """Check n exactly, draw the DP count ñ once (a resumed run reads the one its
    interrupted part drew and accounted), plan σ and the steps from it (with the base
    model's DP `releases` in the budget: with_releases)."""
    if units is not None:
        check_enough_units(config, n)  # after skipped lines, if any
    accounting.check_delta(config.delta, n_examples=n)  # exact: lines may be skipped
    count_seg = unit_count.count_segment()
    n_hat = resume.saved_count(out) if resuming else None
    if n_hat is None:
        n_hat = unit_count.noisy_count(n, unit_count.count_rng(seed))
        resume.save_count(out, n_hat)
    n_plan = unit_count.planning_count(n_hat, largest_batch(config, n))
    calibrated, in_front = with_releases(config, releases)
    planned = plan_noise(calibrated, n_plan, fixed=in_front + [count_seg])
    sigma = planned.sigma
    saved_sigma = resume.saved_sigma(out) if resuming else None
    if saved_sigma is not None:  # a resumed run keeps the σ it planned: no recalibration
        sigma = saved_sigma
    else:
        resume.save_count(out, n_hat, sigma=sigma, accountant=config.accountant)
    # a simulation mirrors the planned expected batch: B, or q·ñ at a fixed rate q
    mirrored = config.rate.planned_segments(planned.segments, n_plan)
    train_sigma, train_segs = simulate.training_noise(config, sigma, mirrored, n)
    return NoisePlan(n, n_hat, n_plan, count_seg, sigma, planned.segments, planned.steps,
                     planned.rate_segments, planned.composition, train_sigma, train_segs,
                     mirrored)
