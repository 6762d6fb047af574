"""A phrase-pair release with an (ε, δ) guarantee: DP set union over phrase pairs.

Fragmentation alone gives no guarantee, only a measured reconstruction rate. Here the
items of the DP histogram (nmtfrag.dp.histogram) are phrase pairs: each unit (a
sentence pair, or a document) contributes at most `cap` of its distinct phrase pairs
(a uniformly random subset when it has more, drawn from the run's secret randomness),
their unit counts get Gaussian noise, and only pairs whose noisy count clears the
threshold are released. A pair held by a single unit — anything specific to one
sentence — passes only with probability δ_T/K, so no sentence can be rebuilt from
pairs only it contains, whatever the attack.

δ is split evenly between the Gaussian counts (δ_G) and the threshold (δ_T); σ is the
smallest noise that makes the counts (ε, δ_G)-DP at sensitivity √K.

`weights="policy"` uses Gopi et al.'s Policy Gaussian instead (nmtfrag.dp.histogram):
sensitivity 1, cutoff Γ = ρ + `cutoff_sigmas`·σ. On EMEA (max-len 4, δ = 1e-6) it
releases about 1.6× as many distinct pairs as the best count (benchmarks/dp_release.py),
but its weights saturate near Γ, so they carry no frequencies: its pairs are written once.
"""
import math
from dataclasses import dataclass

from ..errors import InputError
from . import histogram

UNITS = ("sentence", "document")


@dataclass(frozen=True)
class DPReleaseParams:
    """What the user asks of a DP release (all public)."""
    epsilon: float
    delta: float
    cap: int = 16
    unit: str = "sentence"
    repeat: str = "count"  # write each released pair round(noisy count) times, or once
    weights: str = "count"  # unit counts (sensitivity √K) or "policy" (Gopi et al.)
    cutoff_sigmas: float = 8.0  # policy only: Γ = ρ + cutoff_sigmas·σ (best of 2–8 on EMEA)

    def check(self, n_units=None):
        histogram.check_params(self.delta, self.cap)
        if self.unit not in UNITS:
            raise InputError(f"--privacy-unit must be one of {', '.join(UNITS)}")
        if self.repeat not in ("count", "once"):
            raise InputError("--dp-repeat must be count or once")
        if self.weights not in ("count", "policy"):
            raise InputError("--dp-weights must be count or policy")
        if self.weights == "policy" and self.repeat == "count":
            raise InputError("--dp-weights policy gives no frequencies to repeat by: "
                             "use --dp-repeat once")
        if n_units is not None and self.delta >= 1.0 / n_units:
            raise InputError(f"--delta {self.delta} is not below 1/n = 1/{n_units} "
                             f"({self.unit}s): such a δ allows releasing a unit outright")


def calibrate(params):
    """(σ, threshold T) for the requested (ε, δ) and cap."""
    half = params.delta / 2
    if params.weights == "policy":  # sensitivity 1 whatever the cap
        sigma = histogram.sigma_for_epsilon(params.epsilon, half, 1)
        return sigma, histogram.policy_threshold(sigma, half, params.cap)
    sigma = histogram.sigma_for_epsilon(params.epsilon, half, params.cap)
    return sigma, histogram.threshold(sigma, half, params.cap)


def certificate(params, sigma, thr, randomness):
    """The release's privacy.json content (public). It never holds the number of units:
    under add/remove DP, n alone would tell whether a unit is in (n stays in the owner's
    manifest)."""
    half = params.delta / 2
    policy = params.weights == "policy"
    eps = histogram.gaussian_epsilon(sigma, half, 1 if policy else params.cap)
    release = {
        "mechanism": ("DP set union of phrase pairs: Policy Gaussian (ℓ2 descent, "
                      "Gopi et al. 2020)" if policy else
                      "DP set union of phrase pairs: per-unit cap, Gaussian counts, "
                      "threshold (Gopi et al. 2020; Hoory et al. 2021)"),
        "weights": params.weights, "sensitivity": 1.0 if policy else math.sqrt(params.cap),
        "cutoff": thr + params.cutoff_sigmas * sigma if policy else None,
        "unit": ("one sentence pair (a pair repeated k times in the corpus is protected "
                 "only as a group of k)" if params.unit == "sentence" else "one document"),
        "unit_key": params.unit,
        "neighbouring": "add/remove one unit; the number of units is not shipped",
        "epsilon": eps, "delta": params.delta, "delta_gauss": half,
        "delta_threshold": half, "sigma": sigma, "threshold": thr, "cap": params.cap,
        "single_unit_pass_probability": (None if policy else
                                         histogram.tail_probability(sigma, thr)),
        "repeat": params.repeat, "randomness": randomness,
    }
    return {"release": release,
            "total": {"epsilon": eps, "delta": params.delta,
                      "composition": "one mechanism (ε, δ_G + δ_T)"}}


def select_pairs(unit_pairs, params, sigma, thr, rng, stats=None):
    """{(src, tgt): noisy count} of the released pairs.

    `unit_pairs` yields, per unit, the (src, tgt) phrase pairs it holds (repeats and
    order allowed)."""
    def random_subset(distinct, k):
        return [distinct[i] for i in sorted(rng.choice(len(distinct), k, replace=False))]

    if params.weights == "policy":
        counts = histogram.policy_weights(list(unit_pairs), params.cap,
                                          thr + params.cutoff_sigmas * sigma, rng, stats)
    else:
        counts = histogram.unit_counts(unit_pairs, params.cap, random_subset, stats)
    if stats is not None:
        stats["distinct_pairs"] = len(counts)
    return histogram.noisy_threshold(counts, sigma, thr, rng)


def release_lines(kept, repeat, rng):
    """The released (src, tgt) lines in a uniformly random order: each kept pair once or
    round(noisy count) times (a post-processing of the DP counts)."""
    pairs = sorted(kept)
    times = [1 if repeat == "once" else max(1, int(round(kept[p]))) for p in pairs]
    lines = [p for p, k in zip(pairs, times) for _ in range(k)]
    return [lines[i] for i in rng.permutation(len(lines))]
