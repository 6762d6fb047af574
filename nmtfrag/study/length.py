"""Where a cell's BLEU gain goes: into n-gram precision, or back out through the brevity
penalty.

Why: BLEU is the brevity penalty (BP) times the geometric mean of the 1–4-gram precisions.
Phrase releases can teach a model the domain's words and still shorten its output (Kim et
al. 2021, Figure 3); a share of the full-sentence gain read from BLEU alone cannot tell the
two apart. BLEU / BP is the precision part; its share of the full-sentence cell's gain,
beside the BLEU share, says how much of a cell's shortfall is length.
"""
from __future__ import annotations

import math
from typing import Sequence

from ..audit.compare import or_dash
from ..audit.compare_reference import reference_rows

LENGTH_LOSS = 0.2  # a gap of 20 points of the full gain: wider than a cell's bootstrap interval


def precision_bleu(row: dict) -> float | None:
    """BLEU without its length penalty: the geometric mean of the n-gram precisions (from
    the precisions themselves; BLEU / BP, both rounded, where one of them is 0)."""
    precisions = row.get("precisions") or []
    if precisions and all(p > 0 for p in precisions):
        return math.exp(sum(math.log(p) for p in precisions) / len(precisions))
    bleu, bp = row.get("bleu"), row.get("brevity_penalty")
    return bleu / bp if bleu is not None and bp else None


def precision_shares(rows: Sequence[dict]) -> dict[str, float]:
    """{name: share of the full-sentence cell's BLEU / BP gain}; empty without a baseline and
    a full-sentence cell whose BLEU / BP is above the baseline's, or when the full cell's
    BLEU gain is within the paired bootstrap's noise (as compare_reference.gain_shares)."""
    base, full = reference_rows(rows)
    if not base or not full or (full.get("p_bleu") is not None and full["p_bleu"] >= 0.05):
        return {}
    b, f = precision_bleu(base), precision_bleu(full)
    if b is None or f is None or f <= b:
        return {}
    return {r["name"]: (p - b) / (f - b) for r in rows
            if (p := precision_bleu(r)) is not None}


def render(rows: Sequence[dict]) -> list[str]:
    """The report's section (Markdown lines); none when no cell has BP and precisions."""
    have = [r for r in rows if r.get("brevity_penalty") is not None and r.get("precisions")]
    base, _ = reference_rows(have)
    if not [r for r in have if r is not base]:  # a baseline alone compares with nothing
        return []
    shares = precision_shares(have)
    lines = ["## Length against precision", "",
             "| cell | BLEU | BP | len ratio | precisions 1/2/3/4 | BLEU / BP | "
             "share of the gain in BLEU / BP |", "|---|---:|---:|---:|---|---:|---:|"]
    for r in have:
        share = shares.get(r["name"])
        lines.append(
            f"| {r['name']} | {or_dash(r.get('bleu'))} | {r['brevity_penalty']:.3f} | "
            f"{or_dash(r.get('length_ratio'), '{:.3f}')} | "
            f"{' / '.join(f'{p:.1f}' for p in r['precisions'])} | "
            f"{or_dash(precision_bleu(r))} | {or_dash(share, '{:.0%}')} |")
    lines += ["", "BLEU = BP × the geometric mean of the n-gram precisions; BLEU / BP is "
              "that mean, the score without its length penalty. A cell whose share of the "
              "full-sentence gain is much higher in BLEU / BP than in BLEU gained in "
              "precision and lost it to short output. Part of such a precision gain is the "
              "shortness itself: words a model leaves out cannot be wrong.", ""]
    lost = [r["name"] for r in have if r["name"] in shares and r.get("share_of_gain")
            is not None and shares[r["name"]] >= LENGTH_LOSS
            and shares[r["name"]] - r["share_of_gain"] >= LENGTH_LOSS]
    if lost:
        pts = f"{100 * LENGTH_LOSS:.0f}"
        lines.append(f"Here: {', '.join(lost)} (a share of at least {pts}% in BLEU / BP, "
                     f"at least {pts} points above their share in BLEU).")
    return lines + [""]
