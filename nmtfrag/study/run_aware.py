"""Differences and shares that include run-to-run variance, not test-line sampling only.

Why: sacrebleu's paired bootstrap (Koehn 2004) resamples test lines for one trained model
per system; two trainings with the same settings can differ by more than its interval
(the study measured 1.3 BLEU between two machines). Careful MT comparisons report several
runs (Clark, Dyer, Lavie & Smith 2011); a claim "A beats B" has to hold across them.

The method ("runs and lines", named in every report that uses it): each system is the
mean of its runs' corpus scores. One replicate (of `samples`):
1. resample the test lines with replacement, the same lines for every system and run
   (the paired part), and score every run on them from its per-line sufficient
   statistics (sacrebleu's own: BLEU, chrF; BLEU / BP from BLEU's);
2. add run-to-run noise to each system's mean: s/√R · T, T ~ Student's t with R − 1
   degrees of freedom, s the sample standard deviation of its R runs' scores on the whole
   test set (a system with one run takes the pooled s of the systems with several, with
   their pooled degrees of freedom; with none anywhere, no run-aware figure is given).
Differences, shares of the full-sentence gain ((A − base) / (full − base)) and their 95%
intervals are the replicates' percentiles; a difference is called at p < 0.05 (two-sided:
twice the smaller tail). tests/study/test_run_aware.py checks the interval's coverage and
the test's level on simulated studies where the truth is known.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

METHOD = ("runs and lines: test lines resampled (paired) and each system's run mean "
          "perturbed by its run-to-run spread (Student's t), 1,000 replicates")
SAMPLES = 1000

# summed sufficient statistics (m × k) → m scores
Score = Callable[[np.ndarray], np.ndarray]


def _bleu():
    from sacrebleu.metrics import BLEU

    return BLEU()


def bleu_stats(hyps: Sequence[str], refs: Sequence[str]) -> np.ndarray:
    """Per-line BLEU statistics (lines × 10: lengths, matches, totals), sacrebleu's."""
    return np.asarray(_bleu()._extract_corpus_statistics(list(hyps), [list(refs)]),
                      dtype=np.int64)


def chrf_stats(hyps: Sequence[str], refs: Sequence[str]) -> np.ndarray:
    from sacrebleu.metrics import CHRF

    return np.asarray(CHRF()._extract_corpus_statistics(list(hyps), [list(refs)]),
                      dtype=np.int64)


def _rows(metric, stats: np.ndarray, part: Callable) -> np.ndarray:
    return np.array([part(metric._compute_score_from_stats([int(x) for x in row]))
                     for row in np.atleast_2d(stats)])


def bleu_score(stats: np.ndarray) -> np.ndarray:
    return _rows(_bleu(), stats, lambda s: s.score)


def bleu_without_bp(stats: np.ndarray) -> np.ndarray:
    """BLEU / BP: the precision part of BLEU (nmtfrag.study.length)."""
    return _rows(_bleu(), stats, lambda s: s.score / s.bp if s.bp else 0.0)


def chrf_score(stats: np.ndarray) -> np.ndarray:
    from sacrebleu.metrics import CHRF

    return _rows(CHRF(), stats, lambda s: s.score)


METRICS: dict[str, tuple[Callable, Score]] = {
    "BLEU": (bleu_stats, bleu_score), "BLEU / BP": (bleu_stats, bleu_without_bp),
    "chrF": (chrf_stats, chrf_score)}


@dataclass
class System:
    """One system's runs: per-line statistics of each run (same test lines)."""
    runs: list[np.ndarray]


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float
    p_value: float | None = None   # two-sided, against 0 (differences only)

    @property
    def called(self) -> bool:
        return self.p_value is not None and self.p_value < 0.05


def run_spread(scores: Sequence[float]) -> float | None:
    return float(np.std(scores, ddof=1)) if len(scores) >= 2 else None


def replicates(systems: Mapping[str, System], score: Score, samples: int = SAMPLES,
               seed: int = 12345, fixed: Sequence[str] = ()) -> dict[str, np.ndarray] | None:
    """{system: its run mean in each replicate} (see the module doc); None when no
    system has two runs (no run-to-run spread to add). Systems in `fixed` are never
    retrained (the baseline): they vary with the test lines only."""
    rng = np.random.default_rng(seed)
    n = len(next(iter(systems.values())).runs[0])
    whole = {k: [float(score(r.sum(0))[0]) for r in s.runs] for k, s in systems.items()}
    spreads = {k: run_spread(v) for k, v in whole.items()}
    multi = [(len(whole[k]) - 1, s) for k, s in spreads.items() if s is not None]
    if not multi:
        return None
    pooled_df = sum(d for d, _ in multi)
    pooled = math.sqrt(sum(d * s * s for d, s in multi) / pooled_df)
    counts = np.zeros((samples, n), dtype=np.int64)
    for b in range(samples):
        counts[b] = np.bincount(rng.integers(0, n, n), minlength=n)
    out = {}
    for k, s in systems.items():
        means = np.mean([score(counts @ r) for r in s.runs], axis=0)  # over runs
        own = spreads[k]
        sd, df = (own, len(s.runs) - 1) if own is not None else (pooled, pooled_df)
        noise = rng.standard_t(df, samples)  # drawn for every system: seeds stay aligned
        out[k] = means if k in fixed else means + sd / math.sqrt(len(s.runs)) * noise
    return out


def _interval(point: float, draws: np.ndarray, test: bool) -> Interval:
    low, high = np.percentile(draws, [2.5, 97.5])
    p = None
    if test:
        p = min(1.0, 2 * min(float(np.mean(draws <= 0)), float(np.mean(draws >= 0))))
    return Interval(point, float(low), float(high), p)


def difference(reps: Mapping[str, np.ndarray], means: Mapping[str, float], a: str,
               b: str) -> Interval:
    """A − B: the run means' difference, its interval and two-sided p."""
    return _interval(means[a] - means[b], reps[a] - reps[b], test=True)


def share(reps: Mapping[str, np.ndarray], means: Mapping[str, float], cell: str,
          base: str, full: str) -> Interval | None:
    """(cell − base) / (full − base) with its interval; None when the full system's gain
    is not above the base's in the run means."""
    gain = means[full] - means[base]
    if gain <= 0:
        return None
    draws = (reps[cell] - reps[base]) / np.where(reps[full] - reps[base] == 0, np.nan,
                                                 reps[full] - reps[base])
    draws = draws[np.isfinite(draws)]
    return _interval((means[cell] - means[base]) / gain, draws, test=False)


def run_means(systems: Mapping[str, System], score: Score) -> dict[str, float]:
    return {k: float(np.mean([score(r.sum(0))[0] for r in s.runs]))
            for k, s in systems.items()}
