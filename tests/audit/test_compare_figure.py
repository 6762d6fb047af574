"""privacy_utility.png is read at a glance only if nothing in it hides anything: the figure
is rendered (Agg) on synthetic report rows, every text's window extent is taken from the
renderer, and no two texts may intersect, no text may cover the marker of a point it
does not label, no legend may cover a point, and no axes may be empty."""
import itertools

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import PathCollection  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from matplotlib.text import Annotation  # noqa: E402

from nmtfrag.audit import compare_plot  # noqa: E402


def _rec(pairs, ngrams, max_len):
    by_order = {str(n): ngrams for n in range(max_len + 1, 2 * max_len + 1)}
    return {"max_len": max_len, "pairs_rebuilt_share": pairs, "tgt_ngrams_recovered_share":
            ngrams, "tgt_ngrams_by_order": by_order, "tgt_longest_span_median": 5}


def _row(name, bleu, ci=0.8, rec=None, auc=None, eps=None, approach=""):
    r = {"name": name, "approach": approach, "bleu": bleu, "chrf": bleu + 20,
         "length_ratio": 1.0}
    if name != "baseline":
        r.update(p_bleu=0.01, bleu_mean=bleu, bleu_ci95=ci)
    if rec:
        r["reconstruction"] = rec
    if auc is not None:
        r["membership"] = {"auc": auc, "tpr_at_1pct_fpr": 0.01}
        r["exposure"] = {"0": {"canaries": 1, "exposure_mean": 1.0, "extracted": 0},
                         "5": {"canaries": 1, "exposure_mean": 2.0, "extracted": 0}}
    if eps is not None:
        r["epsilon"] = eps
    return r


FULL = [_row("baseline", 20.0, auc=0.5, eps=0, approach="no fine-tuning"),
        _row("len4", 24.0, rec=_rec(0.02, 0.10, 4), auc=0.52),
        _row("len4-tag", 25.0, rec=_rec(0.03, 0.12, 4), auc=0.52),
        _row("len7", 26.0, rec=_rec(0.10, 0.30, 7), auc=0.55),
        _row("len7-tag", 26.5, rec=_rec(0.11, 0.31, 7), auc=0.55),
        _row("sent", 30.0, auc=0.7, approach="full sentences"),
        _row("dp-release", 21.0, rec=_rec(0.0, 0.0, 4), auc=0.5, eps=8),
        _row("dp-sgd", 22.0, auc=0.51, eps=7.9)]
# len4's and len7's membership from an older audit (held-out pairs also in train kept)
OLD_RULE = [dict(r, membership=dict(r["membership"], members_left_out=False))
            if r["name"] in ("len4", "len7") else r for r in FULL]
# AUDIT=0: no exposure, no membership; cells at the same place
CROWDED = [_row("baseline", 20.0, eps=0, approach="no fine-tuning"),
           _row("len4", 24.0, rec=_rec(0.02, 0.10, 4)),
           _row("len4-tag", 24.0, rec=_rec(0.02, 0.10, 4)),
           _row("len7", 24.0, rec=_rec(0.02, 0.10, 7)),
           _row("len7-tag", 20.0, rec=_rec(0.0, 0.0, 7)),
           _row("sent", 20.0, approach="full sentences"),
           _row("dp-release", 20.0, rec=_rec(0.0, 0.0, 4), eps=8)]
# AUDIT=0 and no release: no leakage figure at all
NO_LEAKAGE = [_row("baseline", 20.0, eps=0, approach="no fine-tuning"),
              _row("sent", 25.0, approach="full sentences"),
              _row("dp-sgd", 20.0, eps=8)]


def _render(rows, tmp_path, monkeypatch, title="test"):
    """Draw the figure as `compare_plot.plot` does and return it (kept open)."""
    monkeypatch.setattr(plt, "close", lambda *a, **k: None)
    before = set(plt.get_fignums())
    compare_plot.plot(rows, str(tmp_path / "f.png"), title)
    (num,) = set(plt.get_fignums()) - before
    fig = plt.figure(num)
    fig.canvas.draw()
    return fig


def _markers(ax, renderer):
    """(display bbox, data point) of every data marker of the axes."""
    out = []
    scale = ax.figure.dpi / 72.0
    for coll in ax.collections:
        if not isinstance(coll, PathCollection) or not len(coll.get_offsets()):
            continue
        sizes = coll.get_sizes()
        for k, xy in enumerate(coll.get_offsets()):
            r = (sizes[k % len(sizes)] if len(sizes) else 36) ** 0.5 * scale / 2
            x, y = ax.transData.transform(xy)
            out.append(((x - r, y - r, x + r, y + r), tuple(map(float, xy))))
    for line in ax.lines:
        if line.get_marker() in (None, "None", "", " "):
            continue
        r = line.get_markersize() * scale / 2
        for xy in line.get_xydata():
            x, y = ax.transData.transform(xy)
            out.append(((x - r, y - r, x + r, y + r), tuple(map(float, xy))))
    return out


def _box(t, renderer):
    b = t.get_window_extent(renderer)
    return (b.x0, b.y0, b.x1, b.y1)


def _hit(a, b, pad=0.5):
    return a[0] < b[2] - pad and b[0] < a[2] - pad and a[1] < b[3] - pad and b[1] < a[3] - pad


@pytest.mark.parametrize("rows", [FULL, CROWDED, NO_LEAKAGE, OLD_RULE],
                         ids=["full", "crowded", "no-leakage", "old-membership-rule"])
def test_nothing_hides_anything(rows, tmp_path, monkeypatch):
    fig = _render(rows, tmp_path, monkeypatch)
    renderer = fig.canvas.get_renderer()
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert axes
    texts, legends = [], []
    for ax in axes:
        markers = _markers(ax, renderer)
        assert markers, f"axes '{ax.get_xlabel()}' shows no data point"
        ax_texts = [t for t in ax.texts if t.get_visible() and t.get_text().strip()]
        for t in ax_texts:
            own = (tuple(map(float, t.xy)) if isinstance(t, Annotation) else None)
            box = _box(t, renderer)
            for mbox, xy in markers:
                if own is not None and xy == pytest.approx(own):
                    continue
                assert not _hit(box, mbox), f"{t.get_text()!r} covers the point at {xy}"
        texts += ax_texts
        if ax.get_legend() is not None:
            legends.append((ax.get_legend(), markers))
    for leg in fig.legends:
        legends.append((leg, [m for ax in axes for m in _markers(ax, renderer)]))
    for leg, markers in legends:
        lbox = _box(leg, renderer)
        for mbox, xy in markers:
            assert not _hit(lbox, mbox), f"the legend covers the point at {xy}"
        texts += [t for t in leg.get_texts() if t.get_text().strip()]
    for a, b in itertools.combinations(texts, 2):
        assert not _hit(_box(a, renderer), _box(b, renderer)), \
            f"{a.get_text()!r} and {b.get_text()!r} overlap"
    # nothing cut at the canvas' edge (one panel is narrow: a one-line title and a
    # one-row legend ran off both sides of GNOME's runs figure)
    edge = [fig._suptitle, *fig.legends, *texts,
            *(ax.xaxis.label for ax in axes), *(ax.yaxis.label for ax in axes)]
    for t in edge:
        x0, y0, x1, y1 = _box(t, renderer)
        assert x0 >= -1 and y0 >= -1 and x1 <= fig.bbox.width + 1 and \
            y1 <= fig.bbox.height + 1, f"{getattr(t, 'get_text', lambda: t)()!r} is cut"
    assert (tmp_path / "f.png").stat().st_size > 1000
    plt.close(fig)


def test_a_long_title_of_wide_letters_stays_on_a_one_panel_canvas(tmp_path, monkeypatch):
    """The title is wrapped by measuring it, re-measured after each wrap: a width guessed
    from the average letter ran a title of wide letters off a one-panel canvas."""
    fig = _render(NO_LEAKAGE, tmp_path, monkeypatch, title="W" * 49 + " MMMM WWWW" * 6)
    x0, y0, x1, y1 = _box(fig._suptitle, fig.canvas.get_renderer())
    assert x0 >= -1 and x1 <= fig.bbox.width + 1 and y1 <= fig.bbox.height + 1
    assert fig._suptitle.get_text().count("\n") >= 2
    top = max(ax.get_position().y1 for ax in fig.axes) * fig.bbox.height
    assert y0 >= top, "the title covers the panel"
    plt.close(fig)


def test_drawn_runs_have_colours_of_their_own(tmp_path, monkeypatch):
    """Controls (a BLEU, nothing audited) are in the rows but not in the figure: they must
    not use up the ten colours, or two drawn runs share one (GNOME's keep-gain figure drew
    dp-composed-8 in len4-tag-pub's green)."""
    controls = [_row(f"public-ctl-{k}", 19.0) for k in range(5)]
    rows = FULL[:3] + controls + FULL[3:]  # 13 rows, 8 drawn
    fig = _render(rows, tmp_path, monkeypatch)
    for ax in fig.axes:
        colours = [tuple(coll.get_edgecolor()[0]) for coll in ax.collections
                   if isinstance(coll, PathCollection) and len(coll.get_offsets())]
        assert len(colours) > 3 and len(set(colours)) == len(colours), ax.get_xlabel()
        assert to_rgba("C7") not in colours  # the cycle's grey: the legend's markers look so
    plt.close(fig)


def test_an_older_membership_audit_is_marked_on_its_panel_only(tmp_path, monkeypatch):
    fig = _render(OLD_RULE, tmp_path, monkeypatch)
    by_panel = {ax.get_xlabel(): {t.get_text() for t in ax.texts} for ax in fig.axes}
    mi = [labels for xlabel, labels in by_panel.items() if "membership" in xlabel]
    assert mi and "len4 ‡" in mi[0] and "len7 ‡" in mi[0] and "len4-tag" in mi[0]
    assert not [t for xlabel, labels in by_panel.items() if "membership" not in xlabel
                for t in labels if "‡" in t]
    assert any("‡ an older membership audit" in t.get_text()
               for leg in fig.legends for t in leg.get_texts())
    plt.close(fig)


def test_a_label_as_near_another_point_as_its_own_gets_a_leader_line():
    """The membership panel's dp-sgd-1 label sat nearer the one-pass DP release's point
    than its own: a label placed so must be tied to its point by a line."""
    from matplotlib.transforms import Bbox

    from nmtfrag.audit.compare_plot import nearest_is_own

    box = Bbox([[10, 10], [30, 14]])
    assert nearest_is_own(box, [(8, 12), (60, 60)], 0)       # its own point right beside
    assert not nearest_is_own(box, [(8, 12), (32, 12)], 0)   # another as near: ambiguous
    assert not nearest_is_own(box, [(0, 12), (20, 16)], 0)   # another nearer
