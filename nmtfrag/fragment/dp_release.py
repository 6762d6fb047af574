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

`DPSetUnionRelease` is the release collector (nmtfrag.fragment.release.PairCollector) of
`nmtfrag extract --dp`: it groups the extracted pairs by unit and writes what clears the
threshold.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InputError
from ..fileio import sha256_file
from ..limits import MAX_UNIT_CAP
from ..randomness import Seed
from .release import CollectorRecords, ReleaseWriter
from ..dp import histogram
from ..dp.accounting import OUTSIDE_RELEASE, RELEASE_UNIT_TEXT

if TYPE_CHECKING:
    import numpy as np

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

    def check(self, n_units: int | None = None) -> None:
        histogram.check_params(self.delta, self.cap)
        if self.cap > MAX_UNIT_CAP:  # nmtfrag.limits: policy_threshold loops to K
            raise InputError(f"--unit-cap must be at most {MAX_UNIT_CAP:,}, got {self.cap}")
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


def calibrate(params: DPReleaseParams) -> tuple[float, float]:
    """(σ, threshold T) for the requested (ε, δ) and cap."""
    half = params.delta / 2
    if params.weights == "policy":  # sensitivity 1 whatever the cap
        sigma = histogram.sigma_for_epsilon(params.epsilon, half, 1)
        return sigma, histogram.policy_threshold(sigma, half, params.cap)
    sigma = histogram.sigma_for_epsilon(params.epsilon, half, params.cap)
    return sigma, histogram.threshold(sigma, half, params.cap)


def certificate(params: DPReleaseParams, sigma: float, thr: float,
                randomness: dict) -> dict:
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
        "unit": RELEASE_UNIT_TEXT[params.unit],
        "unit_key": params.unit,
        "neighbouring": "add/remove one unit; the number of units is not shipped",
        "epsilon": eps, "delta": params.delta, "delta_gauss": half,
        "delta_threshold": half, "sigma": sigma, "threshold": thr, "cap": params.cap,
        "single_unit_pass_probability": (None if policy else
                                         histogram.tail_probability(sigma, thr)),
        "repeat": params.repeat, "randomness": randomness,
        "outside_epsilon": list(OUTSIDE_RELEASE),
    }
    return {"release": release,
            "total": {"epsilon": eps, "delta": params.delta,
                      "composition": "one mechanism (ε, δ_G + δ_T)"}}


def select_pairs(unit_pairs: Iterable[Sequence[tuple[str, str]]], params: DPReleaseParams,
                 sigma: float, thr: float, rng: np.random.Generator,
                 stats: dict | None = None) -> dict[tuple[str, str], float]:
    """{(src, tgt): noisy count} of the released pairs.

    `unit_pairs` yields, per unit, the (src, tgt) phrase pairs it holds (repeats and
    order allowed)."""
    def random_subset(distinct, k):
        return [distinct[i] for i in sorted(rng.choice(len(distinct), k, replace=False))]

    counts: Mapping[tuple[str, str], float]
    if params.weights == "policy":
        counts = histogram.policy_weights(list(unit_pairs), params.cap,
                                          thr + params.cutoff_sigmas * sigma, rng, stats)
    else:
        counts = histogram.unit_counts(unit_pairs, params.cap, random_subset, stats)
    if stats is not None:
        stats["distinct_pairs"] = len(counts)
    return histogram.noisy_threshold(counts, sigma, thr, rng)


def release_lines(kept: dict[tuple[str, str], float], repeat: str,
                  rng: np.random.Generator) -> list[tuple[str, str]]:
    """The released (src, tgt) lines in a uniformly random order: each kept pair once or
    round(noisy count) times (a post-processing of the DP counts)."""
    pairs = sorted(kept)
    times = [1 if repeat == "once" else max(1, int(round(kept[p]))) for p in pairs]
    lines = [p for p, k in zip(pairs, times) for _ in range(k)]
    return [lines[i] for i in rng.permutation(len(lines))]


class DPSetUnionRelease:
    """Phrase pairs per privacy unit, released by the DP set union (a
    nmtfrag.fragment.release.PairCollector).

    Exact counts stay in memory and in the owner's manifest; only the pairs that clear
    the noisy threshold reach the release. `doc_ids` (one per input line) makes
    documents the unit, else each sentence pair is one; `documents` is the file they
    came from (its path and hash go to the owner's manifest)."""

    sample_rate = None  # the threshold decides, not a share

    def __init__(self, params: DPReleaseParams, rng: np.random.Generator, seed: Seed,
                 doc_ids: Sequence[str] | None = None,
                 documents: str | None = None) -> None:
        self.params, self.rng, self.seed = params, rng, seed
        self.doc_ids, self.documents = doc_ids, documents
        self.units: dict = {}
        self.total = 0
        self.stats: dict = {}
        self.certificate: dict | None = None

    def add_unit(self, line_no: int, records: Sequence[str]) -> None:
        key = line_no if self.doc_ids is None else self.doc_ids[line_no - 1]
        self.units.setdefault(key, []).extend(tuple(r.split("\t")[:2]) for r in records)
        self.total += len(records)

    def write_release(self, writer: ReleaseWriter) -> float:
        """Write the released pairs; returns 0.0 (the seconds spent in the writer are
        not told apart from the selection's)."""
        for s_phrase, t_phrase in self.release_pairs():
            writer.write(s_phrase, t_phrase)
        return 0.0

    def release_pairs(self) -> list[tuple[str, str]]:
        """The released (src, tgt) lines, in a random order; sets the certificate."""
        self.params.check(n_units=len(self.units))
        sigma, thr = calibrate(self.params)
        if thr > len(self.units):
            raise InputError(
                f"the DP threshold is {thr:.1f} {self.params.unit}s but there "
                f"are only {len(self.units)}: no phrase pair could ever be released. Use "
                f"more data, a larger --epsilon or --delta, or a smaller --unit-cap")
        kept = select_pairs(self.units.values(), self.params, sigma, thr, self.rng,
                            self.stats)
        self.stats["released_distinct_pairs"] = len(kept)
        self.stats["units"] = len(self.units)  # owner-only: n never ships
        self.certificate = certificate(self.params, sigma, thr, self.seed.public_record())
        return release_lines(kept, self.params.repeat, self.rng)

    def records(self, aligner: str) -> CollectorRecords:
        """The parameters, the certificate (OUT/privacy.json and the manifest's
        "privacy") and the owner's exact counts. The certificate states the aligner:
        it holds only if each unit was aligned on its own."""
        assert self.certificate is not None, "records() comes after write_release()"
        self.certificate["release"]["aligner"] = aligner
        documents = ({"path": self.documents, "sha256": sha256_file(self.documents)}
                     if self.documents else None)
        return CollectorRecords(
            params={"dp": {k: getattr(self.params, k) for k in (
                "epsilon", "delta", "cap", "unit", "repeat", "weights")}},
            shared={"privacy": self.certificate},
            owner={"dp_counts": self.stats, "documents": documents},
            files={"privacy.json": self.certificate})

    def close(self) -> None:
        self.units = {}
