"""Runs that are not private: cheap simulations of a planned DP run, and noise-free
controls. Neither has a certificate; every output says so.

Why a simulation: Sander et al. 2023 ("TAN without a burn: Scaling laws of DP-SGD")
observe that DP-SGD runs with the same noise per averaged gradient, σ/B, and the same
number of steps T train alike. So a candidate recipe (lr, clipping, trained set,
epochs) planned for a logical batch B with noise multiplier σ can be tried on Poisson
batches of B_SIM ≪ B with σ_sim = σ·B_SIM/B for the planned T steps, at B_SIM/B of the
compute. The noise is then far too small for the smaller batch's guarantee: the run
protects nothing, and is marked "simulation: not private".

Why a control: the same schedule with clipping but σ = 0 separates what clipping and
few steps cost from what the noise costs (the study table shows both). With
--dp-simulate-batch it runs the planned steps on batches of B_SIM: zero noise per averaged
gradient, like the full-size control, at the simulation's cost.

Why a public-only control: a run with public pairs in every logical batch
(--dp-public-train) may owe its gain to them alone; the same steps with the public pairs
alone (no owner pair, σ = 0, the same update divisor) say how much.
"""
from __future__ import annotations

from enum import Enum
from typing import Any, Protocol

from ..errors import InputError
from ..randomness import Seed

# a plan's batch segments: (first step, expected batch: B, or q·ñ at a fixed rate q)
PlanSegment = tuple[int, "float | None"]


class PlannedRun(Protocol):
    """What this module reads of a run's settings (nmtfrag.dp.config.DPConfig, which
    imports this module: a protocol keeps the two apart)."""
    simulate_batch: int | None
    control: bool
    public_only: bool
    batch_schedule: str | None
    delta: float
    accountant: str


class RunMode(str, Enum):
    """Whether a run is private, a simulation of a planned private run, or a noise-free
    control (the last two are not private: no certificate). A str, so records and
    comparisons read 'private', 'simulation' or 'control' as before."""
    PRIVATE = "private"
    SIMULATION = "simulation"
    CONTROL = "control"

    @property
    def private(self) -> bool:
        return self is RunMode.PRIVATE


# by kind(): what every output of a run that is not private says it is
NOT_PRIVATE = {"simulation": "simulation: not private",
               "control": "noise-free control: not private",
               "simulated control": "noise-free control: not private",
               "public-only control": "public-only control: not private"}
WHY = {"simulation": "a simulation of a planned DP run (Sander et al. 2023): batches of "
                     "{b_sim} with noise multiplier {sigma_sim:.4g} = σ·{b_sim}/{b}, the "
                     "noise per averaged gradient of the planned run; that noise gives "
                     "no useful guarantee for the smaller batches, so no certificate",
       "control": "the planned DP schedule with per-unit clipping but no noise (σ = 0): "
                  "no guarantee at all, so no certificate",
       "simulated control": "the planned number of steps with per-unit clipping but no "
                            "noise (σ = 0), on batches of {b_sim} instead of {b} (zero "
                            "noise per averaged gradient either way, as in the "
                            "simulation): no guarantee at all, so no certificate",
       "public-only control": "the planned DP schedule's public pairs alone: no owner pair "
                              "joins a logical batch and σ = 0, the update divided as in "
                              "the run with them (by its plan's expected batch: an "
                              "unseeded plan's noisy count is drawn anew); what that run "
                              "owes to its public pairs, so no certificate"}


def public_randomness(seed: Seed, not_private: dict[str, Any] | None) -> dict[str, Any]:
    """The shipped manifest's randomness record: a simulation or control is not private
    whatever its randomness, so it never says `private: true` (issue 31)."""
    rec = seed.public_record()
    if not_private:
        rec = {**rec, "private": False,
               "note": f"{not_private['not_private']}: {rec['note']}; no guarantee "
                       "whatever the randomness"}
    return rec


def check(config: PlannedRun) -> None:
    """Refuse simulation and control settings that have no planned run to mirror."""
    if config.simulate_batch is not None:
        if config.batch_schedule:
            raise InputError("--dp-simulate-batch with --batch-schedule is not supported: "
                             "simulate one logical batch size (--logical-batch)")
        if config.simulate_batch < 1:
            raise InputError("--dp-simulate-batch must be ≥ 1, got "
                             f"{config.simulate_batch}")


def mode(config: PlannedRun) -> RunMode:
    """Private, simulation or control (DPConfig.mode)."""
    # a noise-free control (with --dp-simulate-batch too: on smaller batches) or the
    # public-only control
    if config.control or config.public_only:
        return RunMode.CONTROL
    return RunMode.SIMULATION if config.simulate_batch is not None else RunMode.PRIVATE


def kind(config: PlannedRun) -> str:
    """Which run that is not private this is (WHY's and NOT_PRIVATE's key)."""
    if config.public_only:
        return "public-only control"
    m = mode(config)
    return "simulated control" if m is RunMode.CONTROL and config.simulate_batch else m.value


def training_noise(config: PlannedRun, sigma: float, segments: list[PlanSegment],
                   n: float) -> tuple[float, list[PlanSegment]]:
    """(σ, batch segments) the run trains with, for the planned (σ, segments): the plan
    itself when private, σ·B_SIM/B on batches of B_SIM for a simulation, σ = 0 for a
    control."""
    m = mode(config)
    if m.private:
        return sigma, segments
    if config.simulate_batch is None:  # a control at the planned batch size
        return 0.0, segments
    b = segments[0][1]
    assert b is not None  # the planned expected batch (B, or q·ñ: planning.plan_run)
    if config.simulate_batch > n:
        raise InputError(f"--dp-simulate-batch {config.simulate_batch} exceeds the {n} "
                         "training units")
    small: list[PlanSegment] = [(0, config.simulate_batch)]
    return (0.0, small) if m is RunMode.CONTROL else (sigma * config.simulate_batch / b, small)


def record(config: PlannedRun, sigma: float, segments: list[PlanSegment], steps: int,
           train_sigma: float, planned_epsilon: float | None) -> dict[str, Any]:
    """The public record of a run that is not private (manifest, CLI summary)."""
    m = mode(config)
    b = segments[0][1]
    b = round(b) if isinstance(b, float) else b  # q·ñ of a fixed-rate plan, expected
    why = kind(config)
    rec = {"mode": m.value, "not_private": NOT_PRIVATE[why],
           "why": WHY[why].format(b=b, b_sim=config.simulate_batch, sigma_sim=train_sigma),
           "planned": {"noise_multiplier": sigma, "logical_batch": b,
                       "batch_schedule": config.batch_schedule, "steps": steps,
                       "delta": config.delta, "accountant": config.accountant,
                       "epsilon_if_private": planned_epsilon},
           "trained": {"noise_multiplier": train_sigma, "steps": steps,
                       # a public-only control: no owner unit in any batch
                       "logical_batch": 0 if config.public_only
                       else config.simulate_batch or b}}
    return rec
