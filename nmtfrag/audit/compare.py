"""One comparison report: every approach side by side, BLEU × leakage × ε.

Why: the point of the toolkit is a choice between approaches (no fine-tuning, phrase
releases of several shapes, full-sentence fine-tuning, DP fine-tuning at several ε); a
data owner needs their utility and their leakage in one table and one picture.

Input: a YAML file listing runs; each names the reports it has (paths relative to the
YAML file; a directory means its report.json):

    title: EMEA, generic-deen-small
    runs:
      - name: baseline
        approach: no fine-tuning
        evaluate: eval/baseline            # `nmtfrag evaluate` → BLEU, chrF
        exposure: exposure/baseline        # `nmtfrag audit exposure`
      - name: phrases L4 tag
        approach: phrase release, max-len 4, sample-rate 0.5, tag
        evaluate: eval/phrases-L4-tag
        reconstruction: audit/rel-L4       # `nmtfrag audit reconstruct`
        exposure: exposure/phrases-L4-tag
        membership: mi/phrases-L4-tag      # `nmtfrag audit membership`
      - name: DP eps 8
        evaluate: eval/dp8
        privacy: models/dp8/privacy.json   # ε from total.epsilon (or give epsilon: 8)

Output: report.json, report.md and privacy_utility.png (compare_plot.py's figure: the
share of the full-sentence gain each run keeps against each leakage measure some run
has, with ε beside every run with a DP guarantee — DP fine-tuning or a DP release).
"""
from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

from . import exposure_stats
from .compare_notes import old_membership_rule, pct, table_notes
from .compare_plot import plot
from .compare_reference import reference_rows
from ..errors import InputError
from ..fileio import (MANIFEST, atomic_writer, public_name, read_json, sha256_file,
                      tool_versions, write_json)
from ..outdir import prepare_output_dir

REPORT_KINDS = {
    "evaluate": "nmtfrag-evaluation",
    "reconstruction": "nmtfrag-reconstruction-audit",
    "exposure": "nmtfrag-exposure-audit",
    "membership": "nmtfrag-membership-audit",
}


def _resolve(base, path, field, run_name):
    p = path if os.path.isabs(path) else os.path.join(base, path)
    if os.path.isdir(p):
        p = os.path.join(p, "report.json")
    if not os.path.exists(p):
        raise InputError(f"run {run_name!r}: {field} report {p} does not exist")
    return p


def _load(path, field, run_name):
    try:
        rep = read_json(path)
    except ValueError as exc:
        raise InputError(f"run {run_name!r}: {path} is not JSON ({exc})") from None
    kind = REPORT_KINDS.get(field)
    if kind and rep.get("kind") != kind:
        raise InputError(f"run {run_name!r}: {path} is not a {kind} report "
                         f"(kind={rep.get('kind')!r})")
    return rep


def _check_epsilon(value, run_name, where):
    """ε as a float: finite and ≥ 0 (0 for a run that used no client data). Why: NaN
    or a negative ε used to reach report.json as a bare NaN (invalid JSON) or a point
    left of zero on the plot."""
    if value is None:  # a certificate whose parts do not compose: no single ε
        return None
    try:
        eps = float(value)
    except (TypeError, ValueError):
        raise InputError(f"run {run_name!r}: {where} must be a number, got "
                         f"{value!r}") from None
    if not math.isfinite(eps) or eps < 0:
        raise InputError(f"run {run_name!r}: {where} must be a finite number ≥ 0, got "
                         f"{value!r}")
    return eps


def read_runs(path: str) -> dict:
    import yaml

    if not os.path.exists(path):
        raise InputError(f"{path}: no such file")
    try:
        with open(path, encoding="utf-8") as f:
            spec = yaml.safe_load(f)
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("runs"), list) or not spec["runs"]:
        raise InputError(f"{path}: expected a mapping with a non-empty list `runs`")
    names = set()
    for i, r in enumerate(spec["runs"], 1):
        if not isinstance(r, dict) or not r.get("name"):
            raise InputError(f"{path}: run {i} needs a `name`")
        if r["name"] in names:
            raise InputError(f"{path}: two runs are named {r['name']!r}")
        names.add(r["name"])
        unknown = set(r) - {"name", "approach", "evaluate", "reconstruction", "exposure",
                            "membership", "privacy", "epsilon", "notes"}
        if unknown:
            raise InputError(f"{path}: run {r['name']!r} has unknown keys "
                             f"{', '.join(sorted(unknown))}")
    return spec


RECONSTRUCTION_FIGURES = {
    "pairs_rebuilt_share": lambda sc: sc["pair"]["rebuilt_exactly_share"],
    "tgt_rebuilt_share": lambda sc: sc["tgt"]["rebuilt_exactly_share"],
    "tgt_ngrams_recovered_share": lambda sc: sc["tgt"]["ngrams_recovered_share"],
    "src_ngrams_recovered_share": lambda sc: sc["src"]["ngrams_recovered_share"],
    "tgt_longest_span_median": lambda sc: sc["tgt"]["longest_span"].get("median"),
    "tgt_longest_span_share_mean":
        lambda sc: sc["tgt"]["longest_span_share_of_sentence"].get("mean"),
}


def _reconstruction_figures(rep):
    """Each figure from the attack mode that rebuilt the most (`--mode both` runs the
    conservative and the greedy attack; an attacker runs both, so the report must not
    show the conservative floor when the greedy one found more). Every figure counts
    only text that is in the corpus, so the larger one is still a lower bound."""
    modes = rep.get("modes") or {rep.get("mode", "single"): {"scores": rep["scores"]}}
    out = {"max_len": rep["max_len"],
           "sample_rate": rep["release"]["params"].get("sample_rate"),
           "modes": sorted(modes), "strongest_mode": {}}
    for name, get in RECONSTRUCTION_FIGURES.items():
        values = [(get(m["scores"]), mode) for mode, m in sorted(modes.items())
                  if get(m["scores"]) is not None]
        value, mode = max(values, key=lambda v: v[0]) if values else (None, None)
        out[name] = value
        out["strongest_mode"][name] = mode
    # each order's share of distinct target n-grams recovered, the most any mode got:
    # releases of different max-len are compared on one order (see
    # compare_reference.common_ngram_order)
    by_order = {}
    for m in modes.values():
        for n, g in (m["scores"]["tgt"].get("ngrams") or {}).items():
            v = g.get("distinct_recovered_share")
            if v is not None and (by_order.get(n) is None or v > by_order[n]):
                by_order[n] = v
    out["tgt_ngrams_by_order"] = by_order
    return out


def collect(spec: dict, base: str) -> tuple[list[dict], dict[str, str]]:
    """One row per run with the figures the report shows, plus the input hashes."""
    rows, inputs = [], {}
    for r in spec["runs"]:
        name = r["name"]
        row = {"name": name, "approach": r.get("approach", ""), "notes": r.get("notes")}
        for field in ("evaluate", "reconstruction", "exposure", "membership", "privacy"):
            if r.get(field):
                p = _resolve(base, r[field], field, name)
                inputs[f"{name}/{field}"] = sha256_file(p)
                rep = _load(p, field, name)
                if field == "evaluate":
                    s = rep["scores"]
                    row["bleu"], row["chrf"] = s.get("bleu"), s.get("chrf")
                    row["bleu_signature"] = s.get("bleu_signature")
                    row["length_ratio"] = s.get("length_ratio")
                    row["brevity_penalty"] = s.get("brevity_penalty")
                    row["precisions"] = s.get("precisions")
                    row["avg_output_tokens"] = s.get("avg_output_tokens")
                    row["avg_reference_tokens"] = s.get("avg_reference_tokens")
                    sig = s.get("significance") or {}
                    row["p_bleu"] = (sig.get("BLEU") or {}).get("p_value")
                    row["p_chrf"] = (sig.get("chrF") or {}).get("p_value")
                    # the paired bootstrap's mean and 95% half-width, for the figure
                    row["bleu_mean"] = (sig.get("BLEU") or {}).get("system_mean")
                    row["bleu_ci95"] = (sig.get("BLEU") or {}).get("system_ci95")
                    row["test_lines"] = rep.get("params", {}).get("lines")
                elif field == "reconstruction":
                    row["reconstruction"] = _reconstruction_figures(rep)
                    if rep["release"].get("contents"):
                        row["release_contents"] = rep["release"]["contents"]
                elif field == "exposure":
                    row["exposure"] = rep["summary_by_repeats"]
                    row["exposure_samples"] = (rep.get("params") or {}).get("samples")
                    # repeat counts whose exposures were all enumerated (exact, no sample)
                    row["exposure_exact"] = sorted({str(c["repeats"]) for c in
                                                    rep.get("canaries") or ()} - {
                        str(c["repeats"]) for c in rep.get("canaries") or ()
                        if c.get("method") != "enumerated"})
                    row["exposure_canaries"] = exposure_stats.canaries_by_repeats(rep)
                    row["exposure_canary_set"] = exposure_stats.canary_set_digest(rep)
                elif field == "membership":
                    by_repeats = rep.get("by_repeats") or {}
                    once = by_repeats.get("once") or {}
                    row["membership"] = {"auc": rep["auc"],
                                         "members": rep.get("members"),
                                         "non_members": rep.get("non_members"),
                                         "tpr_at_1pct_fpr": rep["tpr_at_1pct_fpr"],
                                         "auc_once": once.get("auc"),
                                         "auc_repeated":
                                             (by_repeats.get("repeated") or {}).get("auc"),
                                         "calibrated": "calibrated" in rep,
                                         **same_files_figures(rep),
                                         # older audits kept held-out pairs that are
                                         # also training pairs among the non-members
                                         "members_left_out":
                                             "non_members_dropped_as_members" in rep}
                else:
                    tot = rep.get("total", rep)
                    if "epsilon" not in tot:
                        raise InputError(f"run {name!r}: {p} has no total.epsilon")
                    row["epsilon"] = _check_epsilon(tot["epsilon"], name,
                                                    f"{p}: total.epsilon")
                    row["delta"] = tot.get("delta")
        if r.get("epsilon") is not None:
            row["epsilon"] = _check_epsilon(r["epsilon"], name, "epsilon")
        rows.append(row)
    return rows, inputs


def epsilon_text(row: dict) -> str:
    """A row's ε for a table: the guarantee, or the stated ε with the mark that says why
    it is none (seeded, chosen on private data, …), or –."""
    if row.get("epsilon") is not None:
        return f"{row['epsilon']:.3g}"
    if row.get("epsilon_stated") is not None and row.get("epsilon_labels"):
        marks = "; ".join(label.split(":")[0] for label in row["epsilon_labels"])
        return f"({row['epsilon_stated']:.3g}: {marks})"
    return "–"


def same_files_figures(rep: dict) -> dict:
    """A membership audit's figures against the pairs of the same files the model did
    not train on (`audit membership --member-lines`), where it has them."""
    sf = rep.get("same_files")
    if not sf:
        return {}
    return {"auc_same_files": sf["auc"],
            "auc_once_same_files": (sf.get("by_repeats", {}).get("once") or {}).get("auc")}


def or_dash(x: Any, fmt: str = "{:.2f}") -> str:
    """A table cell: the figure formatted, or "–" where it was not measured."""
    return "–" if x is None else fmt.format(x)


def _mark(p):
    """`*` when the paired bootstrap against the baseline gives p < 0.05."""
    return "*" if p is not None and p < 0.05 else ""


def render_markdown(title: str, rows: Sequence[dict]) -> str:
    repeats = sorted({int(k) for r in rows for k in (r.get("exposure") or {})})
    head = ["run", "approach", "BLEU", "chrF", "len out/ref", "ε"]
    if repeats:  # canary columns only where canaries were measured
        head += [f"exposure r={k}" for k in repeats] + ["extracted (planted)"]
    head += ["MI AUC", "MI TPR@1%FPR", "MI AUC (pairs seen once)"]
    head += ["pairs rebuilt", "tgt n-grams rebuilt", "longest span (median)"]
    lines = [f"# Comparison: {title}", "", "| " + " | ".join(head) + " |",
             "|" + "---|" * len(head)]
    for r in rows:
        ex = r.get("exposure") or {}
        planted = [v for k, v in ex.items() if int(k) > 0]
        extracted = (f"{sum(v['extracted'] for v in planted)}/"
                     f"{sum(v['canaries'] for v in planted)}") if planted else "–"
        rec = r.get("reconstruction") or {}
        cells = [r["name"], r.get("approach", ""), or_dash(r.get("bleu")) + _mark(r.get("p_bleu")),
                 or_dash(r.get("chrf"), "{:.1f}") + _mark(r.get("p_chrf")),
                 or_dash(r.get("length_ratio"), "{:.2f}"), epsilon_text(r)]
        if repeats:
            cells += [or_dash(ex[str(k)]["exposure_mean"]) if str(k) in ex else "–"
                      for k in repeats] + [extracted]
        mi = r.get("membership") or {}
        old = "‡" if old_membership_rule(r) else ""
        cells += [or_dash(mi.get("auc"), "{:.3f}") + old,
                  or_dash(mi.get("tpr_at_1pct_fpr"), "{:.3f}") + old,
                  or_dash(mi.get("auc_once"), "{:.3f}")]
        cells += [pct(rec.get("pairs_rebuilt_share")),
                  pct(rec.get("tgt_ngrams_recovered_share")),
                  or_dash(rec.get("tgt_longest_span_median"), "{}")]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines += ["", "`*`: differs from the baseline at p < 0.05 (sacrebleu's paired bootstrap, "
              "as run by `nmtfrag evaluate --baseline`). len out/ref: output/reference "
              "length ratio (BLEU's). "
              + ("Exposure r=k: mean exposure (bits) of canaries planted k times (r=0: "
                 "never planted, the reference); log2|R| is its ceiling. Extracted: planted "
                 "canaries whose secret beam search outputs verbatim. " if repeats else "")
              + "MI: loss-threshold "
              "membership inference on training vs held-out pairs (AUC 0.5 = chance; TPR "
              "at 1% false positives; held-out pairs that are also training pairs left "
              "out); pairs seen once: on the members the training data holds once (DP-SGD's "
              "ε is per occurrence: a pair held k times has only kε). Pairs rebuilt: share of "
              "training sentence pairs the reconstruction attack rebuilds exactly from the "
              "release; n-grams: distinct target n-grams longer than max-len found in its "
              "chains; each the most any attack mode that was run (conservative, greedy) "
              "achieved. ε: (ε, δ)-DP of the training run where defined."
              + (" ‡: an older membership audit that counted held-out pairs also found in "
                 "training among the non-members: it understates the attack; rerun it."
                 if any(old_membership_rule(r) for r in rows) else ""),
              ""]
    lines += exposure_markdown(rows)
    held = [(r["name"], r["release_contents"]) for r in rows if r.get("release_contents")]
    if held:
        from ..data.stats import release_markdown

        lines += release_markdown(held).splitlines() + [""]
    notes = table_notes(rows)
    if notes:
        lines += ["## What the table shows", ""] + [f"- {n}" for n in notes] + [""]
    lines += ["![privacy-utility](privacy_utility.png)", ""]
    return "\n".join(lines)


def exposure_markdown(rows: Sequence[dict]) -> list[str]:
    """The canary exposures with their 95% intervals, and each run's paired difference
    from the full-sentence run: whether the canaries suffice to tell the runs apart."""
    _, full = reference_rows(rows)
    iv = exposure_stats.exposure_intervals(rows, full)
    repeats = sorted({r for by_r in iv.values() for r in by_r}, key=int)
    if not repeats:
        return []
    lines = ["## Canary exposure with its spread", "",
             "| run | " + " | ".join(f"r={r}" for r in repeats) + " |",
             "|---|" + "---|" * len(repeats)]
    for name, by_r in iv.items():
        cells = []
        for r in repeats:
            c = by_r.get(r)
            text = "–" if c is None else f"{c['mean']:.2f} [{c['low']:.2f}, {c['high']:.2f}]"
            if c is not None and "diff" in c:
                text += f"; Δ {c['diff']:+.2f} [{c['diff_low']:+.2f}, {c['diff_high']:+.2f}]"
            cells.append(text)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "Mean exposure (bits) of the canaries planted r times, with its 95% "
              "percentile-bootstrap interval over those canaries "
              f"({exposure_stats.SAMPLES:,} resamples)"
              + (f"; Δ: the mean difference from {full['name']}, paired canary by canary "
                 "(the same planted canaries), with its interval" if full else "")
              + ". An interval across 0 means these canaries cannot tell the two apart.",
              ""]
    return lines


def shareable(row: dict) -> dict:
    """A row as report.json keeps it: without the per-canary exposures and the canary
    set's digest, which serve the intervals only (an enumerated canary's exposure is its
    secret's exact rank under the model)."""
    return {k: v for k, v in row.items() if k not in exposure_stats.ROW_KEYS}


def compare_runs(runs_yaml: str, out: str, overwrite: bool = False) -> dict:
    spec = read_runs(runs_yaml)
    base = os.path.dirname(os.path.abspath(runs_yaml))
    rows, inputs = collect(spec, base)
    out = prepare_output_dir(out, overwrite, inputs=[runs_yaml], kind="nmtfrag-comparison")
    title = str(spec.get("title", "comparison"))
    report = {"kind": "nmtfrag-comparison", "title": title,
              "runs": [shareable(r) for r in rows]}
    write_json(os.path.join(out, "report.json"), report)
    with atomic_writer(os.path.join(out, "report.md")) as f:
        f.write(render_markdown(title, rows))
    plot(rows, os.path.join(out, "privacy_utility.png"), title)
    write_json(os.path.join(out, MANIFEST), {
        "kind": "nmtfrag-comparison", "params": {"runs": public_name(runs_yaml)},
        "inputs": {"runs_yaml": sha256_file(runs_yaml), **inputs},
        "counts": {"runs": len(rows)},
        "files": ["report.json", "report.md", "privacy_utility.png"],
        "tool_versions": tool_versions("nmtfrag", "matplotlib"),
    })
    return report
