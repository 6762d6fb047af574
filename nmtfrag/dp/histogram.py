"""The DP histogram: noisy, thresholded counts of items with a bounded contribution per unit.

One mechanism serves the DP vocabulary (items = words; Hoory et al. 2021, §3.2) and the
DP phrase-pair release (items = phrase pairs): differentially private set union
(Gopi et al. 2020, "Differentially Private Set Union", ICML; Kim et al. 2021,
"Differentially Private n-gram Extraction", NeurIPS), in its Gaussian-count form:

1. each unit (a sentence pair, or a document) contributes each of its distinct items
   once, and at most `cap` = K items, so adding or removing one unit changes at most K
   counts by 1: L2 sensitivity √K;
2. every item present gets Gaussian noise N(0, σ²) on its count;
3. an item is released iff its noisy count reaches T = 1 + σ·Φ⁻¹(1 − δ_T/K). An item
   only the added unit holds (count 1, absent without it) then passes with probability
   exactly δ_T/K, so its ≤ K such items pass with probability ≤ δ_T.

Guarantee: (ε, δ_G + δ_T)-DP per unit, ε from the analytic Gaussian mechanism (Balle &
Wang 2018) at noise σ/√K and δ_G. Only the released items and their noisy counts are
DP; the exact counts never leave this module's caller's owner-only records.

The Policy Gaussian of Gopi et al. (Alg. 4, `policy_weights`) spends each unit's budget
better: units, in a random order, spread an L2 budget of 1 over their ≤ Δ0 items, and
only over the items whose weight is still below a cutoff Γ (ℓ2 descent towards Γ), so
frequent items stop absorbing budget. Its weights have L2 sensitivity 1 (Gopi et al.
2020, §5: ℓ2-contractive update policies); an item only the added unit holds gets weight at
most 1/√t when that unit has t new items, hence the threshold
ρ = max_t [1/√t + σ·Φ⁻¹((1 − δ_T)^(1/t))].
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Optional, TypeVar

from ..errors import InputError

if TYPE_CHECKING:  # numpy is imported by the callers that draw noise
    import numpy as np

# What is counted: a vocabulary word (nmtfrag.dp.vocab) or a phrase pair (phrase_release).
Item = TypeVar("Item", str, tuple[str, str])


def threshold(sigma: float, delta_threshold: float, cap: int) -> float:
    """T = 1 + σ·Φ⁻¹(1 − δ_T/K): a count-1 item passes with probability δ_T/K."""
    from scipy.stats import norm

    return 1.0 + sigma * float(norm.isf(delta_threshold / cap))


def tail_probability(sigma: float, thr: float) -> float:
    """P(1 + N(0, σ²) ≥ T): chance that an item held by one unit is released."""
    from scipy.stats import norm

    return float(norm.sf((thr - 1.0) / sigma))


def gaussian_epsilon(sigma: float, delta_gauss: float, cap: float) -> float:
    """ε of the noisy counts (L2 sensitivity √K, noise σ), analytic Gaussian mechanism."""
    from .accounting import analytic_gaussian_epsilon

    return analytic_gaussian_epsilon(sigma, delta_gauss, math.sqrt(cap))


def sigma_for_epsilon(epsilon: float, delta_gauss: float, cap: float,
                      rel_tol: float = 1e-6) -> float:
    """Smallest σ whose counts are (ε, δ_G)-DP at sensitivity √K (bisection; ε falls
    as σ grows)."""
    if not (epsilon > 0) or math.isinf(epsilon):
        raise InputError(f"--epsilon must be a positive number, got {epsilon}")
    lo, hi = 0.0, 1.0
    while gaussian_epsilon(hi, delta_gauss, cap) > epsilon:
        lo, hi = hi, hi * 2
    while hi - lo > rel_tol * hi:
        mid = (lo + hi) / 2
        if gaussian_epsilon(mid, delta_gauss, cap) > epsilon:
            lo = mid
        else:
            hi = mid
    return hi


def check_params(delta: Optional[float], cap: Optional[int]) -> None:
    if delta is None or not 0 < delta < 1:
        raise InputError("--delta is required and must be in (0, 1): a DP histogram "
                         "without δ is void")
    if cap is None or cap < 1:
        raise InputError(f"the per-unit cap must be ≥ 1, got {cap}")


def unit_counts(units: Iterable[Iterable[Item]], cap: int,
                select: Optional[Callable[[list[Item], int], list[Item]]] = None,
                stats: Optional[dict[str, int]] = None) -> Counter[Item]:
    """Counter of items over units: each distinct item once per unit, ≤ `cap` per unit.

    `units` yields iterables of items. A unit with more than `cap` distinct items keeps
    `select(distinct, cap)` of them (default: the first `cap` in order of appearance);
    any choice that depends only on the unit itself keeps the sensitivity bound.
    """
    counts: Counter[Item] = Counter()
    stats = stats if stats is not None else {}
    for key in ("units", "truncated_units", "dropped_items"):
        stats.setdefault(key, 0)
    for items in units:
        distinct = list(dict.fromkeys(items))
        if len(distinct) > cap:
            stats["truncated_units"] += 1
            stats["dropped_items"] += len(distinct) - cap
            distinct = select(distinct, cap) if select else distinct[:cap]
        counts.update(distinct)
        stats["units"] += 1
    return counts


def noisy_threshold(counts: Mapping[Item, float], sigma: float, thr: float,
                    rng: np.random.Generator) -> dict[Item, float]:
    """{item: noisy count} of the items whose noisy count reaches `thr`.

    Items are noised in sorted order, so a seeded run is reproducible whatever the
    insertion order of `counts`."""
    items = sorted(counts)
    noise = rng.normal(0.0, sigma, size=len(items))
    return {w: counts[w] + z for w, z in zip(items, noise) if counts[w] + z >= thr}


def policy_threshold(sigma: float, delta_threshold: float, cap: int) -> float:
    """ρ = max over t ≤ Δ0 of 1/√t + σ·Φ⁻¹((1 − δ_T)^(1/t)) (Gopi et al. 2020, §5.2): the
    items of one unit all stay below ρ with probability ≥ 1 − δ_T, however it spreads
    its budget of 1 over t of them."""
    from scipy.stats import norm

    return max(1.0 / math.sqrt(t) + sigma * float(norm.ppf((1.0 - delta_threshold) ** (1.0 / t)))
               for t in range(1, cap + 1))


def policy_weights(units: Sequence[Sequence[Item]], cap: int, cutoff: float,
                   rng: np.random.Generator,
                   stats: Optional[dict[str, int]] = None) -> dict[Item, float]:
    """Gopi et al.'s ℓ2-descent weights: {item: weight}, each unit's increments of L2
    norm ≤ 1 pushing its (≤ `cap`, random) items still below `cutoff` Γ towards it.

    `units` is a list of item lists; they are visited in a random order."""
    weights: dict[Item, float] = {}
    stats = stats if stats is not None else {}
    for key in ("units", "truncated_units", "dropped_items"):
        stats.setdefault(key, 0)
    for i in rng.permutation(len(units)):
        distinct = list(dict.fromkeys(units[i]))
        stats["units"] += 1
        if len(distinct) > cap:
            stats["truncated_units"] += 1
            stats["dropped_items"] += len(distinct) - cap
            distinct = [distinct[j] for j in sorted(rng.choice(len(distinct), cap,
                                                               replace=False))]
        gaps = {u: cutoff - weights.get(u, 0.0) for u in distinct
                if weights.get(u, 0.0) < cutoff}
        norm = math.sqrt(sum(g * g for g in gaps.values()))
        if norm == 0.0:
            continue
        scale = min(1.0, 1.0 / norm)
        for u, g in gaps.items():
            weights[u] = weights.get(u, 0.0) + g * scale
    return weights
