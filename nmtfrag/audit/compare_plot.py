"""privacy_utility.png: the comparison's figure, what each approach keeps of the gain
against what leaks, one panel per leakage measure.

Why a module of its own: drawing (matplotlib, the panels, labels placed on their
rendered extents so none hides a point or another label) is apart from collecting the
audit reports into rows and writing the tables (compare.py); both read the same rows.
"""
from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from .compare_notes import old_membership_rule
from .compare_reference import common_ngram_order, gain_shares, reference_rows

if TYPE_CHECKING:  # matplotlib is imported only to draw
    from matplotlib.axes import Axes
    from matplotlib.backend_bases import RendererBase
    from matplotlib.backends.backend_agg import FigureCanvasAgg

LabelledPoint = tuple[float, float, float | None, float | None, str]  # x, y, low, high, label
RUN_COLOURS = tuple(f"C{i}" for i in range(10) if i != 7)  # matplotlib's cycle less its grey


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
    # colours for the runs drawn, in row order: a control or a run without a point takes
    # none, so up to nine drawn runs never share one (two points of one colour read as one
    # run); the default cycle's grey (C7) is left out, the legend's markers are grey
    drawn = [r["name"] for r in rows
             if r["name"] in yv and any(r["name"] in pts for _, pts in panels)]
    colours = {n: RUN_COLOURS[i % len(RUN_COLOURS)] for i, n in enumerate(drawn)}
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
            old = "membership" in xlabel and old_membership_rule(row)
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
    # the Agg backend (chosen above) has a renderer to measure the labels with
    renderer = cast("FigureCanvasAgg", fig.canvas).get_renderer()
    legend = _legend_and_title(fig, handles, renderer,
                               f"{title}: what each approach keeps of the gain vs what "
                               "leaks (up-left is better)")
    # tight_layout leaves room for the title itself; the legend's is given
    fig.tight_layout(rect=(0, legend.get_window_extent(renderer).height / fig.bbox.height
                           + 0.01, 1, 0.99))
    for ax, items in placements:
        place_labels(ax, items, renderer)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _legend_and_title(fig, handles, renderer, title):
    """The legend below the panels and the title above, each on as few rows as fit the
    canvas' width (a one-panel figure is narrow: on one row both ran off its sides); the
    legend, whose height the panels must leave free."""
    room = fig.bbox.width * 0.96
    for ncol in range(len(handles), 0, -1):
        legend = fig.legend(handles=handles, loc="lower center", ncol=ncol, fontsize=8,
                            frameon=False)
        if ncol == 1 or legend.get_window_extent(renderer).width <= room:
            break
        legend.remove()
    heading = fig.suptitle(title, fontsize=10)
    width = len(title)  # re-measured after each wrap: lines of wide letters can run off
    while width > 1 and (wide := heading.get_window_extent(renderer).width) > room:
        width = max(1, min(width - 1, int(width * room / wide)))
        heading.set_text(textwrap.fill(title, width=width))
    return legend


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
