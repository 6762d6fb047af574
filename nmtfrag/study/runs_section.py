"""A study's cells over their runs: mean ± sd of each figure (the audits' headline figures
among them), and the comparisons the owner's pick rests on (the config's `compare` pairs,
and each cell against the baseline and the full-sentence cell) tested with run-to-run
variance (nmtfrag.study.run_aware).

Why: one training run per cell cannot carry "A beats B" when two runs with the same
settings differ by more than the test-line bootstrap's interval. Runs of a cell are cells
of their own (NAME, NAME.r2, …: config key `runs`); this section puts them together.
"""
from __future__ import annotations

import os
import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any

from ..audit.compare_notes import old_membership_rule
from . import run_aware
from .config import BASELINE, StudyConfig, base_name
from .plan import EVALUATE, Paths


def groups(rows: Sequence[dict]) -> dict[str, list[dict]]:
    """{cell: its rows, run 1 first} in report order."""
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(base_name(r["name"]), []).append(r)
    return out


def _mean_sd(values: Sequence[float | None]) -> tuple[float, float | None] | None:
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return statistics.fmean(vals), (statistics.stdev(vals) if len(vals) > 1 else None)


def _fmt(ms: tuple[float, float | None] | None, fmt: str = "{:.2f}") -> str:
    if ms is None:
        return "–"
    mean, sd = ms
    return fmt.format(mean) + ("" if sd is None else " ± " + fmt.format(sd))


def _exposure_at(row: dict, repeats: str) -> float | None:
    return ((row.get("exposure") or {}).get(repeats) or {}).get("exposure_mean")


def _over_runs(values: Sequence[float | None], fmt: str) -> str | None:
    """mean ± sd of the runs that have the figure, "(n of N runs)" where some do not."""
    ms = _mean_sd(values)
    if ms is None:
        return None
    n = sum(v is not None for v in values)
    return _fmt(ms, fmt) + ("" if n == len(values) else f" ({n} of {len(values)} runs)")


def _leak_figures(rs: Sequence[dict]) -> str:
    """The audits' headline figures over a cell's runs: pairs rebuilt from its release,
    canary exposure for each planted repeat count r (bits), membership AUC (‡: some run
    audited under the old rule, audit.compare_notes.old_membership_rule)."""
    parts = []
    rebuilt = _over_runs([(r.get("reconstruction") or {}).get("pairs_rebuilt_share")
                          for r in rs], "{:.2%}")
    if rebuilt:
        parts.append(f"pairs rebuilt {rebuilt}")
    planted = sorted({str(k) for r in rs for k in (r.get("exposure") or {})} - {"0"}, key=int)
    for k in planted:
        parts.append(f"exposure at r = {k} (bits): "
                     f"{_over_runs([_exposure_at(r, k) for r in rs], '{:.2f}')}")
    auc = _over_runs([(r.get("membership") or {}).get("auc") for r in rs], "{:.3f}")
    if auc:
        old = "‡" if any(old_membership_rule(r) for r in rs) else ""
        parts.append(f"MI AUC {auc}{old}")
    return "; ".join(parts) or "–"


def reference_lines(config: StudyConfig) -> list[str]:
    from ..data.bpe import moses_detokenize
    from ..translate.evaluate import read_lines

    refs = read_lines(config.data.files(config.data.test)[1])
    if config.decode.test_lines:
        refs = refs[:config.decode.test_lines]
    if config.data.pretokenized:
        refs = [moses_detokenize(r, config.data.tgt_lang) for r in refs]
    return refs


def comparisons(config: StudyConfig, out: str, rows: Sequence[dict]) -> dict[str, Any]:
    """Run-aware differences against the baseline and the full-sentence cell, the
    share of the gain, per cell and metric, and the config's `compare` pairs (A − B).
    Until the test can run (no cell with two runs, or no baseline), only the pairs, each
    saying why it is not tested; {} when the config has none."""
    by = groups(rows)
    pairs = _configured_pairs(config, by)
    why = ("the baseline is not evaluated yet" if BASELINE not in by else
           None if any(len(v) > 1 for v in by.values()) else
           "no cell has two evaluated runs yet (no run-to-run spread to test with)")
    if why:
        return _untested(pairs, why)
    from ..translate.evaluate import read_lines

    paths, refs = Paths(out), reference_lines(config)
    hyps = {g: [read_lines(os.path.join(paths.step(r["name"], EVALUATE), "hyp.txt"))
                for r in rs] for g, rs in by.items()}
    full = config.full_sentence_cell
    result: dict[str, Any] = {"method": run_aware.METHOD, "cells": {}, "pairs": pairs}
    stats: dict[Any, dict[str, run_aware.System]] = {}  # BLEU and BLEU / BP share theirs
    for metric, (stats_of, score) in run_aware.METRICS.items():
        if stats_of not in stats:
            stats[stats_of] = {g: run_aware.System([stats_of(h, refs) for h in hs])
                               for g, hs in hyps.items()}
        systems = stats[stats_of]
        reps = run_aware.replicates(systems, score, fixed=(BASELINE,))
        if reps is None:
            return _untested(pairs, "no run-to-run spread to test with")
        means = run_aware.run_means(systems, score)
        for g in systems:
            if g == BASELINE:
                continue
            cell = result["cells"].setdefault(g, {"runs": len(systems[g].runs)})
            fig = {"mean": means[g],
                   "vs_baseline": run_aware.difference(reps, means, g, BASELINE).__dict__}
            if full in systems and g != full:
                fig["vs_full"] = run_aware.difference(reps, means, g, full).__dict__
                s = run_aware.share(reps, means, g, BASELINE, full)
                fig["share"] = s.__dict__ if s is not None else None
            cell[metric] = fig
        for pair in pairs:
            if "why" not in pair:
                pair[metric] = run_aware.difference(reps, means, pair["a"], pair["b"]).__dict__
    return result


def _untested(pairs: list[dict[str, Any]], why: str) -> dict[str, Any]:
    for pair in pairs:
        pair.setdefault("why", why)
    return {"pairs": pairs} if pairs else {}


def _configured_pairs(config: StudyConfig, by: dict[str, list[dict]]) -> list[dict[str, Any]]:
    """The config's `compare` pairs, each with its runs evaluated and configured, or why
    it cannot be tested yet."""
    configured = Counter([BASELINE] + [base_name(c.name) for c in config.cells])
    out = []
    for a, b in config.compare_pairs:
        pair: dict[str, Any] = {"a": a, "b": b}
        missing = [n for n in (a, b) if n not in by]
        if missing:
            pair["why"] = f"{' and '.join(missing)} not evaluated yet"
        else:
            pair["runs"] = [len(by[a]), len(by[b])]
            pair["runs_configured"] = [configured[a], configured[b]]
        out.append(pair)
    return out


def _called(fig: dict | None) -> bool:
    """The run-aware test's call on a figure as stored (an Interval's fields)."""
    return fig is not None and run_aware.Interval(**fig).called


def _diff(fig: dict | None) -> str:
    if not fig:
        return "–"
    return (f"{fig['estimate']:+.2f}{'*' if _called(fig) else ''} "
            f"[{fig['low']:+.2f}, {fig['high']:+.2f}]")


def render(rows: Sequence[dict], comp: dict[str, Any], full: str | None) -> list[str]:
    """The Runs section; `full` names the full-sentence cell (the config's reference):
    the per-run shares are of its first run's gain, the run-aware ones of its runs' mean."""
    by = groups(rows)
    multi = {g: rs for g, rs in by.items() if len(rs) > 1}
    pairs = _render_pairs(comp.get("pairs") or [])
    if not multi:
        return ["## Runs", ""] + pairs if pairs else []
    full = full or "the full-sentence cell"
    lines = ["## Runs", "",
             f"| cell | runs | BLEU | chrF | len ratio | share of full gain (run 1 of {full}) "
             "| what leaks |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for g, rs in multi.items():
        lines.append(f"| {g} | {len(rs)} | {_fmt(_mean_sd([r.get('bleu') for r in rs]))} | "
                     f"{_fmt(_mean_sd([r.get('chrf') for r in rs]), '{:.1f}')} | "
                     f"{_fmt(_mean_sd([r.get('length_ratio') for r in rs]), '{:.3f}')} | "
                     f"{_fmt(_mean_sd([r.get('share_of_gain') for r in rs]), '{:.0%}')} | "
                     f"{_leak_figures(rs)} |")
    lines += ["", "Mean ± sample standard deviation over the cell's runs (NAME, NAME.r2, …: "
              "each a new training seed, a new release draw and new DP noise). What leaks: "
              "the audits' headline figures (the share of the owner's pairs the "
              "reconstruction attack rebuilt from the release; mean canary exposure for "
              "canaries planted r times, at each r; membership-inference AUC), over the "
              "runs audited (n of N where some are not yet).", ""]
    if comp.get("cells"):
        lines += _render_cells(comp, full)
    return lines + pairs


def _render_cells(comp: dict[str, Any], full: str) -> list[str]:
    lines = ["### Differences that include run-to-run variance", "",
             f"Against the mean of {full}'s runs (full) and of the baseline.", "",
             "| cell | runs | BLEU − baseline [95%] | BLEU − full [95%] | share of the "
             "gain [95%] | BLEU/BP share [95%] | chrF − baseline [95%] |",
             "|---|---:|---|---|---|---|---|"]

    def pct(fig: dict | None) -> str:
        if not fig:
            return "–"
        return f"{fig['estimate']:.0%} [{fig['low']:.0%}, {fig['high']:.0%}]"

    for g, c in comp["cells"].items():
        b, bp, ch = c.get("BLEU", {}), c.get("BLEU / BP", {}), c.get("chrF", {})
        lines.append(f"| {g} | {c['runs']} | {_diff(b.get('vs_baseline'))} | "
                     f"{_diff(b.get('vs_full'))} | {pct(b.get('share'))} | "
                     f"{pct(bp.get('share'))} | {_diff(ch.get('vs_baseline'))} |")
    lines += ["", f"Method: {comp['method']}; a cell with one run takes the pooled "
              "run-to-run spread of the cells with several. `*`: the difference holds "
              "across runs and test lines (p < 0.05); without it, it is within run-to-run "
              "noise. Checked on simulated studies (tests/study/test_run_aware.py): the "
              "interval covered the truth in 99.5% of 200 (conservative) and called a "
              "difference where there was none in 2%.", ""]
    return lines


METRIC_LABELS = {"BLEU": "BLEU", "BLEU / BP": "BLEU/BP", "chrF": "chrF"}


def _runs_text(pair: dict) -> str:
    return " / ".join(str(n) if n == of else f"{n} of {of}"
                      for n, of in zip(pair["runs"], pair["runs_configured"]))


def _verdict(pair: dict) -> str:
    """Which metrics the run-aware test calls, each with the cell it favours."""
    ahead: dict[str, list[str]] = {}
    for metric, label in METRIC_LABELS.items():
        fig = pair.get(metric)
        if fig is not None and _called(fig):
            ahead.setdefault(pair["a"] if fig["estimate"] > 0 else pair["b"], []).append(label)
    if not ahead:
        return "within run-to-run noise"
    said = "; ".join(f"{c} ahead in {', '.join(ms)}" for c, ms in ahead.items())
    return ("holds: " if len(ahead) == 1 else "mixed: ") + said


def _render_pairs(pairs: Sequence[dict]) -> list[str]:
    """The config's `compare` pairs: A − B in each metric, and whether it holds across
    runs (the same run-aware test) or is within run-to-run noise."""
    if not pairs:
        return []
    lines = ["### The comparisons the owner's pick rests on", "",
             "| A − B | runs | BLEU [95%] | BLEU/BP [95%] | chrF [95%] | across runs |",
             "|---|---:|---|---|---|---|"]
    for p in pairs:
        name = f"{p['a']} − {p['b']}"
        if "why" in p:
            lines.append(f"| {name} | – | – | – | – | not tested: {p['why']} |")
            continue
        lines.append(f"| {name} | {_runs_text(p)} | {_diff(p.get('BLEU'))} | "
                     f"{_diff(p.get('BLEU / BP'))} | {_diff(p.get('chrF'))} | "
                     f"{_verdict(p)} |")
    lines += ["", "Each pair is one of the config's `compare` entries, tested with the "
              "run-aware test above (runs and test lines together; a side with one "
              "evaluated run takes the pooled run-to-run spread; runs: evaluated, of those "
              "configured where some are not yet). A metric is named only where its "
              "difference is called at p < 0.05, with the cell it favours; \"mixed\" where "
              "the metrics favour different cells. Three metrics per pair, each at 5%: a "
              "pair that holds in one metric alone is weaker evidence than one that holds "
              "in all three.", ""]
    return lines
