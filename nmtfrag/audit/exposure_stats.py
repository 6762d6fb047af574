"""Intervals for canary exposure: are there enough canaries per repeat count to tell two
models apart?

Why: a study plants about ten canaries per repeat count, and one canary the model has
learned by heart moves a mean of ten by bits. A mean without its spread invites reading
noise as a difference. The models of one study are audited on the same planted canaries,
so two of them are compared canary by canary (a paired bootstrap), which is tighter than
two separate intervals. Percentile bootstrap, seeded: this is an analysis of figures
already in the reports, not a privacy mechanism.
"""
from __future__ import annotations

import hashlib
from typing import Any, Sequence

import numpy as np

SAMPLES = 2000
SEED = 0
MIN_CANARIES = 5  # fewer: a percentile interval of a handful says little, none is given
ROW_KEYS = ("exposure_canaries", "exposure_canary_set")  # in memory only, never written


def canaries_by_repeats(report: dict) -> dict[str, dict[str, float]]:
    """{repeats: {canary name: exposure}} from an `audit exposure` report."""
    out: dict[str, dict[str, float]] = {}
    for c in report.get("canaries") or ():
        if c.get("exposure") is not None:
            out.setdefault(str(c["repeats"]), {})[c["name"]] = float(c["exposure"])
    return out


def canary_set_digest(report: dict) -> str:
    """Which canaries were planted (names, secrets, repeats), without the secrets: two
    reports are paired only when they audit the same canaries."""
    items = sorted((c["name"], str(c.get("secret")), int(c["repeats"]))
                   for c in report.get("canaries") or ())
    return hashlib.sha256(repr(items).encode()).hexdigest()[:16]


def _interval(samples: np.ndarray) -> tuple[float, float]:
    lo, hi = np.percentile(samples, [2.5, 97.5])
    return float(lo), float(hi)


def mean_interval(values: Sequence[float], rng: np.random.Generator
                  ) -> tuple[float, float, float]:
    """(mean, low, high): the mean and its 95% percentile-bootstrap interval."""
    v = np.asarray(values, dtype=float)
    means = v[rng.integers(0, len(v), (SAMPLES, len(v)))].mean(axis=1)
    return (float(v.mean()), *_interval(means))


def exposure_intervals(rows: Sequence[dict], reference: dict | None
                       ) -> dict[str, dict[str, dict[str, Any]]]:
    """{run: {repeats: {mean, low, high[, diff, diff_low, diff_high]}}} for every planted
    repeat count (r > 0) with at least MIN_CANARIES canaries; diff*: the paired mean
    difference against `reference` (the full-sentence run) where both audited the same
    canaries. Intervals are per comparison (no correction for the many in a report)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    ref = (reference or {}).get("exposure_canaries") or {}
    for row in rows:
        by_r = row.get("exposure_canaries") or {}
        paired = (reference is not None and row is not reference and
                  row.get("exposure_canary_set") == reference.get("exposure_canary_set"))
        for r, exp in by_r.items():
            if int(r) <= 0 or len(exp) < MIN_CANARIES:
                continue
            rng = np.random.default_rng([SEED, int(r)])
            mean, lo, hi = mean_interval(list(exp.values()), rng)
            cell: dict[str, Any] = {"mean": mean, "low": lo, "high": hi, "n": len(exp)}
            common = sorted(set(exp) & set(ref.get(r) or {}))
            if paired and len(common) >= MIN_CANARIES:
                d = [exp[k] - ref[r][k] for k in common]
                cell["diff"], cell["diff_low"], cell["diff_high"] = mean_interval(d, rng)
            out.setdefault(row["name"], {})[r] = cell
    return out


def separable(intervals: dict[str, dict[str, dict[str, Any]]], repeats: str
              ) -> tuple[list[str], list[str], list[str]]:
    """(runs whose exposure at `repeats` lies below the reference's, paired interval
    under 0; runs the canaries cannot tell from it, interval across 0; runs above it)."""
    below: list[str] = []
    unclear: list[str] = []
    above: list[str] = []
    for name, by_r in intervals.items():
        c = by_r.get(repeats) or {}
        if "diff" not in c:
            continue
        (below if c["diff_high"] < 0 else unclear if c["diff_low"] <= 0 else above
         ).append(name)
    return below, unclear, above
