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

Output: report.json, report.md and privacy_utility.png (BLEU against canary exposure,
against the share of n-grams rebuilt from the release where there is one, and against ε
for the runs with a DP guarantee — DP fine-tuning or a DP release — with their frontier).
"""
from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

from . import exposure_stats
from .compare_notes import pct, table_notes
from .compare_reference import common_ngram_order, gain_shares, reference_rows
from ..errors import InputError
from ..fileio import (MANIFEST, atomic_writer, public_name, read_json, sha256_file,
                      tool_versions, write_json)
from ..outdir import prepare_output_dir

if TYPE_CHECKING:  # matplotlib is imported only to draw
    from matplotlib.axes import Axes
    from matplotlib.backend_bases import RendererBase
    from matplotlib.backends.backend_agg import FigureCanvasAgg

REPORT_KINDS = {
    "evaluate": "nmtfrag-evaluation",
    "reconstruction": "nmtfrag-reconstruction-audit",
    "exposure": "nmtfrag-exposure-audit",
    "membership": "nmtfrag-membership-audit",
}
LabelledPoint = tuple[float, float, float | None, float | None, str]  # x, y, low, high, label


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


def leakage_panels(rows: Sequence[dict]
                   ) -> list[tuple[str, dict[str, tuple[float, bool]]]]:
    """[(x label, {name: (x, measured)})] for each leakage measure some run has measured:
    sentence pairs rebuilt, target n-grams of one order rebuilt, membership-inference AUC.
    For the release measures the baseline (nothing shared) counts 0 and the full-sentence
    run (the sentences themselves are shared) 100%, by definition (measured=False)."""
    base, full = reference_rows(rows)
    by_def = {}
    if base is not None:
        by_def[base["name"]] = 0.0
    if full is not None:
        by_def[full["name"]] = 100.0
    panels = []
    recs = {r["name"]: r["reconstruction"] for r in rows if r.get("reconstruction")}
    if recs:
        pts = {n: (100 * rec["pairs_rebuilt_share"], True) for n, rec in recs.items()
               if rec.get("pairs_rebuilt_share") is not None}
        panels.append(("sentence pairs rebuilt from what is shared (%)", pts))
        order = common_ngram_order(rows)
        pts = {n: (100 * rec["tgt_ngrams_by_order"][str(order)], True)
               for n, rec in recs.items()
               if (rec.get("tgt_ngrams_by_order") or {}).get(str(order)) is not None}
        panels.append((f"target {order}-grams rebuilt from what is shared (%)", pts))
        for _, pts in panels:
            for n, x in by_def.items():
                pts.setdefault(n, (x, False))
    mi = {r["name"]: (r["membership"]["auc"], True) for r in rows
          if (r.get("membership") or {}).get("auc") is not None}
    if mi:
        panels.append(("membership inference AUC of the model (0.5 = chance)", mi))
    return [(label, pts) for label, pts in panels if any(m for _, m in pts.values())]


def epsilon_text(row: dict) -> str:
    """A row's ε for a table: the guarantee, or the stated ε with the mark that says why
    it is none (seeded, chosen on private data, …), or –."""
    if row.get("epsilon") is not None:
        return f"{row['epsilon']:.3g}"
    if row.get("epsilon_stated") is not None and row.get("epsilon_labels"):
        marks = "; ".join(label.split(":")[0] for label in row["epsilon_labels"])
        return f"({row['epsilon_stated']:.3g}: {marks})"
    return "–"


def point_label(row: dict) -> str:
    """A point's label: the run's name, and its ε where it has a guarantee (a stated ε
    that is none says so)."""
    eps = row.get("epsilon")
    if eps is None and row.get("epsilon_stated") is not None and row.get("epsilon_labels"):
        return row["name"] + f" (ε={row['epsilon_stated']:.3g}, no guarantee)"
    return row["name"] + ("" if eps is None else f" (ε={eps:.3g})")


def plot(rows: Sequence[dict], path: str, title: str) -> None:
    """privacy_utility.png: one panel per leakage measure that has data (x: what leaks;
    y: share of the full-sentence gain kept, with its bootstrap interval, or BLEU when
    there is no gain to share), every run a point labelled with its name and ε; labels
    placed where they cover no other label and no other point, the legend below the
    panels. Without any leakage measure, one panel of the share of gain per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shares = gain_shares(rows)
    by_name = {r["name"]: r for r in rows if r.get("bleu") is not None}
    yv: dict[str, tuple[float, float | None, float | None]]  # name → (y, low, high)
    if shares:
        ylabel = "share of the full-sentence BLEU gain kept (%)"
        yv = {n: (100 * s, None if lo is None else 100 * lo, None if hi is None else 100 * hi)
              for n, (s, lo, hi) in shares.items()}
    else:
        ylabel = "BLEU"
        yv = {n: (r["bleu"], None, None) for n, r in by_name.items()}
        for n, r in by_name.items():
            if r.get("bleu_mean") is not None and r.get("bleu_ci95") is not None:
                yv[n] = (r["bleu"], r["bleu_mean"] - r["bleu_ci95"],
                         r["bleu_mean"] + r["bleu_ci95"])
    panels = leakage_panels(rows)
    if not panels:  # nothing measured leaks: the runs side by side
        panels = [("run (no leakage measured: no release audited, no model audited)",
                   {n: (float(i), True) for i, n in enumerate(by_name)})]
    colours = {r["name"]: f"C{i % 10}" for i, r in enumerate(rows)}
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels) + 0.6, 5.2),
                             squeeze=False)
    axes = axes[0]
    placements: list[tuple[Axes, list[LabelledPoint]]] = []
    cut = old_rule = False
    for ax, (xlabel, pts) in zip(axes, panels):
        items: list[LabelledPoint] = []
        for name, (x, measured) in pts.items():
            if name not in yv:
                continue
            y, lo, hi = yv[name]
            row = by_name[name]
            if lo is not None:
                ax.vlines([x], [lo], [hi], color=colours[name], linewidth=1, alpha=0.4)
            ax.scatter([x], [y], s=40, marker="D" if row.get("epsilon") is not None else "o",
                       facecolors=colours[name] if measured else "none",
                       edgecolors=colours[name], zorder=3)
            old = "membership" in xlabel and _old_membership_rule(row)
            old_rule |= old
            items.append((x, y, lo, hi, point_label(row) + (" ‡" if old else "")))
        if xlabel.startswith("run ("):
            ax.set_xticks([])
        if shares:
            ax.axhline(0, color="grey", linewidth=0.8, linestyle=":")
            ax.axhline(100, color="grey", linewidth=0.8, linestyle=":")
        cut |= _pad_limits(ax, items, (0, 100) if shares else ())
        ax.set_xlabel(xlabel, fontsize=9)
        ax.set_ylabel(ylabel, fontsize=9)
        ax.grid(alpha=0.3)
        placements.append((ax, items))
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], marker="D", linestyle="", color="grey",
                      label="with a DP guarantee (ε beside the name)"),
               Line2D([], [], marker="o", linestyle="", color="grey", label="no guarantee"),
               Line2D([], [], marker="o", linestyle="", color="grey", markerfacecolor="none",
                      label="by definition: nothing shared (0) / the sentences (100%)"),
               Line2D([], [], color="grey", label="paired-bootstrap 95% interval"
                      + (" (cut at the frame)" if cut else ""))]
    if old_rule:
        handles.append(Line2D([], [], linestyle="", label="‡ an older membership audit "
                              "(understates the attack)"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8,
               frameon=False)
    fig.suptitle(f"{title}: what each approach keeps of the gain vs what leaks "
                 "(up-left is better)", fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 0.95))
    # the Agg backend (chosen above) has a renderer to measure the labels with
    renderer = cast("FigureCanvasAgg", fig.canvas).get_renderer()
    for ax, items in placements:
        place_labels(ax, items, renderer)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _pad_limits(ax, items, anchors=()):
    """Axis limits with room around the points (and `anchors`, e.g. 0 and 100% of the
    gain) for their labels. An interval reaches beyond them by at most the points' own
    span, so that a wide interval (a small test set, a small gain) cannot squeeze the
    points into a line; returns True if an interval is cut at the frame."""
    if not items:
        return False
    xs = [i[0] for i in items]
    ys = [i[1] for i in items] + list(anchors)
    ends = [v for i in items for v in (i[2], i[3]) if v is not None]
    lo, hi = min(xs), max(xs)
    span = (hi - lo) or max(abs(hi), 1.0)
    ax.set_xlim(lo - 0.25 * span, hi + 0.25 * span)
    lo, hi = min(ys), max(ys)
    span = (hi - lo) or max(abs(hi), 1.0)
    lo_e = max(min(ends + [lo]), lo - span)
    hi_e = min(max(ends + [hi]), hi + span)
    ax.set_ylim(min(lo - 0.25 * span, lo_e - 0.05 * span),
                max(hi + 0.25 * span, hi_e + 0.05 * span))
    return any(e < lo_e or e > hi_e for e in ends)


LABEL_RADII = (5, 12, 20, 30, 42, 56, 72, 90)  # points from the marker


def _candidates():
    """Label offsets (points) in rings around the point, nearest first: 8 directions on
    the first rings, 16 beyond."""
    for k, r in enumerate(LABEL_RADII):
        n = 8 if k < 3 else 16
        for j in range(n):
            a = math.pi / 4 - 2 * math.pi * j / n  # start up-right, go round
            yield r * math.cos(a), r * math.sin(a)


def _overlaps(a, b, pad=1.0):
    return a.x0 < b.x1 + pad and b.x0 < a.x1 + pad and a.y0 < b.y1 + pad and b.y0 < a.y1 + pad


def place_labels(ax: Axes, items: Sequence[LabelledPoint], renderer: RendererBase) -> None:
    """Label each point (x, y, low, high, text) at the nearest offset where, as rendered,
    the label stays inside the axes and touches no label placed before, no marker and no
    interval bar but its own point's; a label set apart gets a thin leader line. Why: a
    label over another label or point makes a figure that is read at a glance wrong."""
    from matplotlib.transforms import Bbox

    scale = ax.figure.dpi / 72.0
    half = 40 ** 0.5 * scale / 2 + 1  # the markers are s=40
    pts = [ax.transData.transform((x, y)) for x, y, *_ in items]
    obstacles = [(k, Bbox([[px - half, py - half], [px + half, py + half]]))
                 for k, (px, py) in enumerate(pts)]
    for k, (x, _, lo, hi, _) in enumerate(items):
        if lo is not None and hi is not None:  # an interval has both ends
            (bx, by0), (_, by1) = ax.transData.transform([(x, lo), (x, hi)])
            obstacles.append((k, Bbox([[bx - 1, by0], [bx + 1, by1]])))
    frame = ax.get_window_extent(renderer)
    placed: list[Bbox] = []
    unplaced: list[str] = []
    order = sorted(range(len(items)), key=lambda k: (-pts[k][1], pts[k][0]))
    for k in order:
        x, y, _, _, text = items[k]
        others = [b for i, b in obstacles if i != k]
        ann = None
        for dx, dy in _candidates():
            ann = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points",
                              fontsize=8, ha="left" if dx > 0.5 else "right" if dx < -0.5
                              else "center", va="bottom" if dy > 0.5 else "top"
                              if dy < -0.5 else "center", annotation_clip=False)
            box = ann.get_window_extent(renderer)
            if (frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1)
                    and not any(_overlaps(box, b) for b in placed + others)):
                break
            ann.remove()
            ann = None
        if ann is None:  # no free place: named above the panel instead
            unplaced.append(text)
            continue
        placed.append(box)
        # a leader line beyond the first ring, and wherever another point lies as near
        # the label as its own (a label must not be read as another point's)
        if (dx * dx + dy * dy) ** 0.5 > LABEL_RADII[0] + 1 or not nearest_is_own(
                box, pts, k):
            tx, ty = ax.transData.inverted().transform(
                (min(max(pts[k][0], box.x0), box.x1), min(max(pts[k][1], box.y0), box.y1)))
            ax.plot([x, tx], [y, ty], color="dimgrey", linewidth=0.7, zorder=4)
    if unplaced:
        ax.set_title("no room to label: " + ", ".join(unplaced), fontsize=7)


def _box_distance(box: Any, px: float, py: float) -> float:
    dx = max(box.x0 - px, 0.0, px - box.x1)
    dy = max(box.y0 - py, 0.0, py - box.y1)
    return (dx * dx + dy * dy) ** 0.5


def nearest_is_own(box: Any, pts: Sequence[Any], k: int, margin: float = 1.25) -> bool:
    """Whether label `box` is clearly nearer its own point k than any other point (the
    others at least `margin` times as far)."""
    own = _box_distance(box, *pts[k])
    return all(_box_distance(box, *p) > margin * own + 1.0
               for i, p in enumerate(pts) if i != k)


def frontier(points: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The (ε, BLEU) points no other point beats on both (lower ε, higher BLEU), by ε."""
    best, out = float("-inf"), []
    for eps, bleu in sorted(points, key=lambda p: (p[0], -p[1])):
        if bleu > best:
            out.append((eps, bleu))
            best = bleu
    return out


def same_files_figures(rep: dict) -> dict:
    """A membership audit's figures against the pairs of the same files the model did
    not train on (`audit membership --member-lines`), where it has them."""
    sf = rep.get("same_files")
    if not sf:
        return {}
    return {"auc_same_files": sf["auc"],
            "auc_once_same_files": (sf.get("by_repeats", {}).get("once") or {}).get("auc")}


def _old_membership_rule(row: dict) -> bool:
    """The run's membership audit kept held-out pairs also found in training among its
    non-members (made before they were left out)."""
    return (row.get("membership") or {}).get("members_left_out") is False


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
        old = "‡" if _old_membership_rule(r) else ""
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
                 if any(_old_membership_rule(r) for r in rows) else ""),
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
