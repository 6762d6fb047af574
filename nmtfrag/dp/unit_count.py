"""A DP estimate of the number of privacy units, so that DP-SGD never ships n.

Why: the certificates state add/remove-one-unit DP, under which the exact number of
units n alone tells whether a unit is in. DP-SGD needs a count to turn a logical batch
B into a Poisson rate q = B/n and --max-epochs into steps, and q ships (in the history
every accountant recomputes ε from). So the engine releases ñ = n + N(0, s²) with a fixed
public s (sensitivity 1: one unit changes n by 1), drawn from the run's own randomness,
accounts it as one more Gaussian segment of the history (noise multiplier s, sample
rate 1, one step, so both accountants compose it: ε grows by about 0.01 at s = 20), and
derives every rate and step count from ñ, never from n. What ships (q, B, the history)
then gives ñ at most, which is DP; n stays in OUT/owner/.

The training's rates and steps are chosen from ñ, i.e. adaptively, after the count is
released; the certificate composes the realised history (count segment first).
"""
import math

# Public noise of the count. At n = 10,000 it moves q by 0.2 % (one std); at the refused
# minimum of 100 units by 20 %.
COUNT_NOISE = 20.0


def count_segment(noise=COUNT_NOISE):
    """The count's entry in a privacy history: one Gaussian step of sensitivity 1."""
    return (float(noise), 1.0, 1)


def count_rng(seed):
    """numpy generator of the count noise: from the seed (a stream of its own, so it
    is not the one other mechanisms draw) when the run is seeded, else secret."""
    import numpy as np

    if seed.reproducible:
        return np.random.default_rng([seed.value, 0x6E636F756E74])
    return seed.numpy_rng()


def noisy_count(n, rng, noise=COUNT_NOISE):
    """ñ = n + N(0, noise²): the only form in which n may leave the owner."""
    return float(n) + float(rng.normal(0.0, noise))


def planning_count(n_hat, largest_batch):
    """The count every rate and step is computed from: ñ, raised to the largest
    scheduled logical batch when it is below (so q ≤ 1). A function of ñ only."""
    if not math.isfinite(n_hat):
        raise ValueError(f"noisy count must be finite, got {n_hat}")
    return max(float(n_hat), float(largest_batch), 1.0)
