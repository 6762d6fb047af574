"""How much data DP-SGD needs: its share of the full-sentence gain against the share of
the owner's corpus it trained on, and where the trend would keep half the gain.

Why: at a fixed ε the signal-to-noise of DP-SGD grows with the number of units (σ² ∝
E·B/n, so √T·B/σ ∝ n), so a data owner with a small corpus wants to know whether more
data (or pooling with other owners) would make the guarantee affordable. The cells run
the same plan in passes on random shares of the corpus; the share of the gain is fitted
linearly in log₂ of the corpus share, and the corpus size at which the fit reaches half
the gain is printed as an extrapolation, never as a measurement.
"""
from __future__ import annotations

import math
from typing import Sequence

from ..audit.compare import or_dash
from .config import StudyConfig

HALF = 0.5


def curve_points(config: StudyConfig, rows: Sequence[dict]) -> dict[float, list[tuple[float, float]]]:
    """{ε: [(corpus share, share of the gain)]} of the DP-SGD cells without public pairs
    (the default recipe's curve), for each ε with two or more corpus shares."""
    by_eps: dict[float, list[tuple[float, float]]] = {}
    for r in rows:
        if r["name"] == "baseline" or r.get("share_of_gain") is None:
            continue
        cell = config.cell(r["name"])
        if cell.approach != "dp-sgd" or cell.public_batch or cell.options:
            continue
        by_eps.setdefault(cell.epsilon, []).append((cell.train_fraction, r["share_of_gain"]))
    return {e: sorted(p) for e, p in by_eps.items() if len({f for f, _ in p}) >= 2}


def fit(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(a, b) of share ≈ a + b·log₂(corpus share), least squares."""
    xs = [math.log2(f) for f, _ in points]
    ys = [s for _, s in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return my - b * mx, b


def corpus_for(share: float, a: float, b: float) -> float | None:
    """The corpus size (a multiple of the owner's) at which the fit reaches `share`;
    None when the trend does not rise."""
    if b <= 0:
        return None
    return 2 ** ((share - a) / b)


def _times(x: float) -> str:
    """A multiple as precise as an extrapolation deserves: 8.0, 37, 5,600."""
    if x < 10:
        return f"{x:.1f}"
    if x < 1000:
        return f"{x:.0f}"
    return f"{float(f'{x:.2g}'):,.0f}"


def render(config: StudyConfig, rows: Sequence[dict]) -> list[str]:
    curves = curve_points(config, rows)
    if not curves:
        return []
    lines = ["## DP-SGD against corpus size", "",
             "| ε | share of the owner's pairs | share of the full gain |",
             "|---:|---:|---:|"]
    notes = []
    for eps, pts in sorted(curves.items()):
        for f, s in pts:
            lines.append(f"| {eps:g} | {f:.0%} | {or_dash(s, '{:.0%}')} |")
        a, b = fit(pts)
        x = corpus_for(HALF, a, b)
        notes.append(f"At ε {eps:g}: the share of the gain changes by {b * 100:+.0f} "
                     f"percentage points per doubling of the corpus; "
                     + (f"half the gain at about {_times(x)}× the owner's corpus "
                        f"(extrapolated{' far' if x > 4 else ''} beyond the measured "
                        f"range)" if x is not None and x > 1 else
                        "half the gain within the measured range" if x is not None else
                        "no rising trend: no extrapolation"))
    return lines + [""] + [f"- {n}" for n in notes] + [
        "", "Each cell runs the default recipe's plan in passes (its rate and steps) on a "
        "random share of the owner's pairs; the fit is linear in log₂ of that share, and "
        "what lies beyond the measured shares is an extrapolation, not a measurement.", ""]
