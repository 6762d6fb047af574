"""The sentences under a comparison's table ("What the table shows"), worked out from its rows.

Why a module of its own: compare.py collects the audit reports into rows and draws the
tables and the figure; these notes say in words which differences in those rows are real
and which are noise, and compare.render_markdown puts them under the tables.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from . import exposure_stats
from .compare_reference import common_ngram_order, gain_shares, reference_rows


def pct(x: float | None) -> str:
    """A share as the tables print it (two decimals), – where there is none."""
    return "–" if x is None else f"{100 * x:.2f}%"


def old_membership_rule(row: dict) -> bool:
    """The run's membership audit kept held-out pairs also found in training among its
    non-members (made before they were left out)."""
    return (row.get("membership") or {}).get("members_left_out") is False


LENGTH_DROP = 0.05  # a length ratio this far below the baseline's is named


def table_notes(rows: Sequence[dict]) -> list[str]:
    """Sentences about this table computed from its figures (never a fixed sentence that
    may be untrue of a given run): which cells shortened the output against the
    baseline, which differ in BLEU from it at p < 0.05, what share of the full-sentence
    gain each keeps, membership inference on pairs held once, which models output a
    planted canary."""
    notes = []
    base, full = reference_rows(rows)
    if base is not None and base.get("length_ratio") is not None:
        b = base["length_ratio"]
        ratios = [r for r in rows if r is not base and r.get("length_ratio") is not None]
        short = [r for r in ratios if r["length_ratio"] < b - LENGTH_DROP]
        long = [r for r in ratios if r["length_ratio"] > b + LENGTH_DROP]
        for which, these in (("shorter", short), ("longer", long)):
            if these:
                notes.append(f"Output {which} than the baseline's (length ratio more than "
                             f"{LENGTH_DROP} {'below' if which == 'shorter' else 'above'} "
                             f"its {b:.2f}): " + ", ".join(
                                 f"{r['name']} ({r['length_ratio']:.2f})" for r in these) + ".")
        if not short and not long:
            notes.append(f"No cell's length ratio is more than {LENGTH_DROP} off the "
                         f"baseline's ({b:.2f}).")
    better = [r["name"] for r in rows if r.get("p_bleu") is not None and r["p_bleu"] < 0.05
              and base is not None and r["bleu"] > base["bleu"]]
    worse = [r["name"] for r in rows if r.get("p_bleu") is not None and r["p_bleu"] < 0.05
             and base is not None and r["bleu"] < base["bleu"]]
    tested = [r for r in rows if r.get("p_bleu") is not None]
    if tested and base is not None:
        notes.append("BLEU above the baseline's at p < 0.05: "
                     + (", ".join(better) or "none") + "; below it: "
                     + (", ".join(worse) or "none") + f" (of {len(tested)} tested).")
    shares = gain_shares(rows)  # not None only with both reference rows
    kept = [f"{n} {100 * v[0]:.0f}%" for n, v in (shares or {}).items()
            if base is not None and full is not None and n not in (base["name"], full["name"])]
    if kept and base is not None and full is not None:
        notes.append(f"Share of the full-sentence gain ({full['name']}: "
                     f"{full['bleu'] - base['bleu']:+.2f} BLEU over the baseline) kept: "
                     + ", ".join(kept) + ".")
    elif shares is None and base is not None and full is not None and \
            full.get("bleu") is not None:  # a gain within the noise, not a lone pair
        notes.append(f"Full sentences ({full['name']}) gained nothing measurable over the "
                     f"baseline ({full['bleu'] - base['bleu']:+.2f} BLEU"
                     + (f", p = {full['p_bleu']:.3f}" if full.get("p_bleu") is not None
                        else "")
                     + ("; its 95% interval reaches the baseline" if
                        full.get("bleu_ci95") is not None else "")
                     + "): no share of gain is shown, neither the cells' nor its own.")
    elif base is not None and full is None and len(rows) > 1:
        notes.append("No full-sentence cell has been evaluated: the share of the "
                     "full-sentence gain cannot be computed, so every share is –.")
    notes += membership_noise_notes(rows)
    order = common_ngram_order(rows)
    rebuilt = [f"{r['name']} {pct(r['reconstruction']['tgt_ngrams_by_order'][str(order)])}"
               for r in rows if str(order) in
               ((r.get("reconstruction") or {}).get("tgt_ngrams_by_order") or {})]
    if rebuilt:
        notes.append(f"Target {order}-grams rebuilt (one order for every release: no "
                     f"fragment of any holds one): " + ", ".join(rebuilt) + ".")
    held_once = [(r["name"], r["membership"]) for r in rows
                 if (r.get("membership") or {}).get("auc_once") is not None]
    if held_once:
        notes.append("Membership inference AUC on the pairs the training data holds once "
                     "(in brackets: on those it repeats, where measured, then on all sampled "
                     "pairs): " + ", ".join(
                         f"{n} {m['auc_once']:.3f} ("
                         + (f"{m['auc_repeated']:.3f}; " if m.get("auc_repeated") is not None
                            else "") + f"{m['auc']:.3f})" for n, m in held_once) + ".")
    same = [(r["name"], r["membership"]) for r in rows
            if (r.get("membership") or {}).get("auc_same_files") is not None]
    if same:
        notes.append("Membership inference against the pairs of the same files a model "
                     "did not train on (cells on a share of the corpus: the same documents, "
                     "so what the attack reads of the pairs alone; in brackets: on the "
                     "pairs held once, then the figure against the held-out test pairs): "
                     + ", ".join(f"{n} {m['auc_same_files']:.3f} ("
                                 + (f"{m['auc_once_same_files']:.3f}; "
                                    if m.get("auc_once_same_files") is not None else "")
                                 + f"{m['auc']:.3f})" for n, m in same) + ".")
    notes += exposure_notes(rows, full)
    notes += exposure_floor_notes(rows)
    leaked = [r["name"] for r in rows if any(
        v.get("extracted") for k, v in (r.get("exposure") or {}).items() if int(k) > 0)]
    if leaked:
        notes.append("A planted canary's secret is output verbatim by: "
                     + ", ".join(leaked) + ".")
    return notes


def exposure_floor_notes(rows: Sequence[dict]) -> list[str]:
    """Runs whose never-planted canaries (r=0, the noise floor) show as much exposure as
    planted ones: with S sampled secrets per canary the estimate resolves about log₂ S
    bits, and such differences are noise, not leakage or protection. The baseline is left
    out: it never saw a canary, so every one of its exposures is the floor by construction
    (the tables measure the other runs against it)."""
    noisy = []
    base = reference_rows(rows)[0]
    for r in rows:
        if r is base:
            continue
        ex = r.get("exposure") or {}
        floor = (ex.get("0") or {}).get("exposure_mean")
        planted = {k: v["exposure_mean"] for k, v in ex.items()
                   if int(k) > 0 and v.get("exposure_mean") is not None}
        exact = set(r.get("exposure_exact") or ())
        if "0" in exact:  # an exact floor: the comparison is a fact, not sampling noise
            continue
        below = [k for k, v in planted.items()
                 if floor is not None and v <= floor and k not in exact]
        if below:
            s = r.get("exposure_samples")
            repeats = ", r=".join(sorted(below, key=int))
            noisy.append(f"{r['name']} (r=0: {floor:.2f} bits ≥ r={repeats}"
                         + (f"; {s} samples, about {math.log2(s):.1f} bits resolved"
                            if s else "") + ")")
    if not noisy:
        return []
    return ["Canaries never planted (r=0, the noise floor) as exposed as planted ones: "
            + ", ".join(noisy) + ": those planted exposures are noise at this sample size."]


def membership_noise_notes(rows: Sequence[dict]) -> list[str]:
    """Which membership AUCs are within sampling noise of chance (0.5), by the AUC's
    standard error under no signal for their sample sizes (Hanley & McNeil 1982), and
    which lie below chance: the attack then does worse than guessing (members harder than
    non-members, or noise), which is no protection either."""
    noise, below = [], []
    for r in rows:
        m = r.get("membership") or {}
        n1, n0 = m.get("members"), m.get("non_members")
        if m.get("auc") is None or not n1 or not n0:
            continue
        se = math.sqrt((n1 + n0 + 1) / (12 * n1 * n0))
        text = f"{r['name']} {m['auc']:.3f} (n = {n1} + {n0}, ±{2 * se:.3f})"
        if abs(m["auc"] - 0.5) < 2 * se:
            noise.append(text)
        elif m["auc"] < 0.5:
            below.append(text)
    notes = []
    if noise:
        notes.append("Membership AUC within sampling noise of chance (0.5 ± two standard "
                     "errors under no signal, for its sample sizes): " + ", ".join(noise)
                     + ": no evidence either way.")
    if below:
        notes.append("Membership AUC below chance beyond that noise: " + ", ".join(below)
                     + ": the attack does worse than guessing (the members are harder for "
                     "the model than the held-out pairs), which is no protection.")
    return notes


def exposure_notes(rows: Sequence[dict], full: dict | None) -> list[str]:
    """Per planted repeat count: which runs' canary exposure lies below the
    full-sentence run's (paired interval under 0), and which its canaries cannot tell
    apart from it."""
    if full is None:
        return []
    iv = exposure_stats.exposure_intervals(rows, full)
    notes = []
    for k in sorted({r for by_r in iv.values() for r, c in by_r.items() if "diff" in c},
                    key=int):
        below, unclear, above = exposure_stats.separable(iv, k)
        times = "once" if k == "1" else f"{k} times"
        notes.append(f"Canaries planted {times}: exposure below {full['name']}'s (paired "
                     f"95% interval under 0): {', '.join(below) or 'none'}; not told "
                     f"apart from it: {', '.join(unclear) or 'none'}"
                     + (f"; above it: {', '.join(above)}" if above else "") + ".")
    return notes
