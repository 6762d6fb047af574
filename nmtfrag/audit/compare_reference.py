"""The two runs a comparison measures every other run against, and what is read off them.

The baseline (no fine-tuning) and the full-sentence run (fine-tuning on the owner's own
sentences) bracket every approach: a cell's BLEU gain is read as a share of the full
run's gain over the baseline, and the releases of different max-len are compared on one
n-gram order. Why a module of its own: the comparison's tables and figure (compare.py),
the notes under the tables (compare_notes.py) and the study report all measure against
these rows; here each of them finds them without importing another.
"""
from __future__ import annotations

from collections.abc import Sequence

BASELINE_NAMES = ("baseline", "base")
FULL_NAMES = ("sent", "sentences")


def reference_rows(rows: Sequence[dict]) -> tuple[dict | None, dict | None]:
    """(baseline row, full-sentence row), either None: the run named baseline/base or
    whose approach is "no fine-tuning", and the run named sent/sentences or whose
    approach is "full sentences". Why: the figure measures every cell against what
    fine-tuning on the owner's full sentences gains over not fine-tuning at all."""
    def find(names, approach):
        for r in rows:
            if r["name"] in names or (r.get("approach") or "").strip() == approach:
                return r
        return None
    return find(BASELINE_NAMES, "no fine-tuning"), find(FULL_NAMES, "full sentences")


def gain_shares(rows: Sequence[dict]
                ) -> dict[str, tuple[float, float | None, float | None]] | None:
    """{name: (share, low, high)}: the share of the full-sentence BLEU gain each run keeps,
    (BLEU − baseline) / (full − baseline), with the run's paired-bootstrap 95% interval
    carried through the same map (low/high None without one); None when there is no
    baseline or full-sentence run, or fine-tuning on full sentences gained nothing, or
    its gain is within the paired bootstrap's noise (p ≥ 0.05 where the run has a p):
    a share of noise is noise (a toy model's −1,016% once)."""
    base, full = reference_rows(rows)
    if not base or not full or base.get("bleu") is None or full.get("bleu") is None:
        return None
    b, gain = base["bleu"], full["bleu"] - base["bleu"]
    if gain <= 0 or (full.get("p_bleu") is not None and full["p_bleu"] >= 0.05):
        return None
    if full.get("bleu_mean") is not None and full.get("bleu_ci95") is not None and \
            full["bleu_mean"] - full["bleu_ci95"] <= b:
        return None  # the reference's own interval reaches the baseline: a share of noise
    out = {}
    for r in rows:
        if r.get("bleu") is None:
            continue
        lo = hi = None
        if r.get("bleu_mean") is not None and r.get("bleu_ci95") is not None:
            lo = (r["bleu_mean"] - r["bleu_ci95"] - b) / gain
            hi = (r["bleu_mean"] + r["bleu_ci95"] - b) / gain
        out[r["name"]] = ((r["bleu"] - b) / gain, lo, hi)
    return out


def common_ngram_order(rows: Sequence[dict]) -> int | None:
    """The one n-gram order every audited release can be compared on: the shortest n
    longer than every release's max-len (no single fragment of any of them holds such
    an n-gram); rows whose audit did not count it are left out by the caller."""
    lens = [r["reconstruction"]["max_len"] for r in rows if r.get("reconstruction")]
    return max(lens) + 1 if lens else None
