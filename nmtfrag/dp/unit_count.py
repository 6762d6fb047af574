"""A DP estimate of the number of privacy units, so that DP-SGD never ships n.

Why: the certificates state add/remove-one-unit DP, under which the exact number of
units n alone tells whether a unit is in. DP-SGD needs a count to turn a logical batch
B into a Poisson rate q = B/n and --max-epochs into steps, and q ships (in the history
every accountant recomputes ε from). So the engine releases ñ = n + N(0, s²) with a fixed
public s (sensitivity 1: one unit changes n by 1), drawn from the run's own randomness,
records it as the history's first segment (noise multiplier s, sample rate 1, one
step), and derives every rate and step count from ñ, never from n. What ships (q, B, the
history) then gives ñ at most, which is DP; n stays in OUT/owner/.

How the count composes with the training depends on whether the training's privacy
curve is fixed before ñ is seen (nmtfrag.dp.accounting.certify_training):
- --sample-rate Q: q = Q and the steps are public inputs; ñ only scales the update
  (post-processing), so the training's RDP curve is fixed in advance and the count's
  segment composes with it by RDP/PRV composition (adaptive composition with a fixed
  curve per mechanism).
- --logical-batch/--batch-schedule: q = B/ñ is chosen from ñ, so its RDP curve is not
  fixed in advance. Basic composition holds for adaptively chosen mechanisms whose
  (ε_i, δ_i) are fixed in advance: δ_count = δ/10 (COUNT_DELTA_SHARE), ε_count = the
  analytic-Gaussian ε of the count at δ_count, and σ makes the training alone reach
  ε_train ≤ E − ε_count at δ − δ_count whatever ñ is.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported where the count is drawn
    import numpy as np

    from ..randomness import Seed

# Public noise of the count. In logical-batch mode the count costs ε_count by basic
# composition (not the ~0.01 of an RDP segment): s = 20 costs 0.22 at δ_count = 1e-7,
# a fifth of ε = 1; s = 100 costs 0.039 (s = 50: 0.082). Its price in utility is small:
# q and the epoch's step count move by s/n (1 % at n = 10,000, 10 % at 1,000: a
# learning-rate-sized change, below the 1/√B own spread of a Poisson batch of B ≤ 100
# at n = 1,000), so s = 100 buys half the ε of s = 50 for an error that does not
# matter; corpora so small that it does can use --sample-rate, whose rate needs no n.
COUNT_NOISE = 100.0
# Share of δ spent on the count in logical-batch mode (basic composition).
COUNT_DELTA_SHARE = 0.1


def count_segment(noise: float = COUNT_NOISE) -> tuple[float, float, int]:
    """The count's entry in a privacy history: one Gaussian step of sensitivity 1."""
    return (float(noise), 1.0, 1)


def count_rng(seed: Seed) -> np.random.Generator:
    """numpy generator of the count noise: from the seed (a stream of its own, so it
    is not the one other mechanisms draw) when the run is seeded, else secret."""
    import numpy as np

    if seed.reproducible:
        return np.random.default_rng([seed.value, 0x6E636F756E74])
    return seed.numpy_rng()


def noisy_count(n: float, rng: np.random.Generator, noise: float = COUNT_NOISE) -> float:
    """ñ = n + N(0, noise²): the only form in which n may leave the owner."""
    return float(n) + float(rng.normal(0.0, noise))


def planning_count(n_hat: float, largest_batch: float) -> float:
    """The count every rate and step is computed from: ñ, raised to the largest
    scheduled logical batch when it is below (so q ≤ 1). A function of ñ only."""
    if not math.isfinite(n_hat):
        raise ValueError(f"noisy count must be finite, got {n_hat}")
    return max(float(n_hat), float(largest_batch), 1.0)


def basic_split(delta: float, noise: float = COUNT_NOISE) -> tuple[float, float, float]:
    """(ε_count, δ_count, δ_train) of the basic composition in logical-batch mode: the
    count's analytic-Gaussian ε at δ_count = δ/10, and the δ left to the training.
    Functions of public inputs only, so the split is fixed before ñ is drawn."""
    from .histogram import gaussian_epsilon

    delta_count = float(delta) * COUNT_DELTA_SHARE
    return gaussian_epsilon(noise, delta_count, 1), delta_count, float(delta) - delta_count
