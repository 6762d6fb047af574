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
import os

from ..errors import InputError
from ..fileio import public_name
from ..fileio import MANIFEST, atomic_writer, prepare_output_dir, read_json, sha256_file, \
    tool_versions, write_json

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


def read_runs(path):
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
    return out


def collect(spec, base):
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
                    row["avg_output_tokens"] = s.get("avg_output_tokens")
                    row["avg_reference_tokens"] = s.get("avg_reference_tokens")
                    sig = s.get("significance") or {}
                    row["p_bleu"] = (sig.get("BLEU") or {}).get("p_value")
                    row["p_chrf"] = (sig.get("chrF") or {}).get("p_value")
                    row["test_lines"] = rep.get("params", {}).get("lines")
                elif field == "reconstruction":
                    row["reconstruction"] = _reconstruction_figures(rep)
                elif field == "exposure":
                    row["exposure"] = rep["summary_by_repeats"]
                elif field == "membership":
                    row["membership"] = {"auc": rep["auc"],
                                         "tpr_at_1pct_fpr": rep["tpr_at_1pct_fpr"],
                                         "calibrated": "calibrated" in rep}
                else:
                    tot = rep.get("total", rep)
                    if "epsilon" not in tot:
                        raise InputError(f"run {name!r}: {p} has no total.epsilon")
                    row["epsilon"] = tot["epsilon"]
                    row["delta"] = tot.get("delta")
        if r.get("epsilon") is not None:
            try:
                row["epsilon"] = float(r["epsilon"])
            except (TypeError, ValueError):
                raise InputError(f"run {name!r}: epsilon must be a number") from None
        rows.append(row)
    return rows, inputs


def _leak(row):
    """Headline canary leakage: mean exposure of the most-repeated planted canaries."""
    ex = row.get("exposure") or {}
    planted = [k for k in ex if int(k) > 0]
    if not planted:
        return None, None
    k = max(planted, key=int)
    return ex[k]["exposure_mean"], int(k)


def plot(rows, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    panels = [
        (axes[0], lambda r: _leak(r)[0], "canary exposure, most-repeated canaries (bits)"),
        (axes[1], lambda r: 100 * r["reconstruction"]["tgt_ngrams_recovered_share"]
         if r.get("reconstruction") else None,
         "target n-grams (max-len+1 … 2·max-len) rebuilt from the release (%)"),
    ]
    for ax, xfun, xlabel in panels:
        n = 0
        for r in rows:
            x, y = xfun(r), r.get("bleu")
            if x is None or y is None:
                continue
            n += 1
            ax.scatter([x], [y], s=40)
            label = r["name"] + (f" (ε={r['epsilon']:.3g})" if r.get("epsilon") is not None
                                 else "")
            ax.annotate(label, (x, y), textcoords="offset points", xytext=(5, 5), fontsize=8)
        if ax is axes[0]:
            ref = [r["exposure"]["0"]["exposure_mean"] for r in rows
                   if "0" in (r.get("exposure") or {})]
            if ref:
                ax.axvline(sum(ref) / len(ref), color="grey", linestyle="--", linewidth=1,
                           label="never-planted canaries (reference)")
                ax.legend(fontsize=8, loc="best")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("BLEU")
        ax.grid(alpha=0.3)
        if not n:
            ax.text(0.5, 0.5, "no run has both figures", ha="center", va="center",
                    transform=ax.transAxes)
    _frontier_panel(axes[2], rows)
    fig.suptitle(f"{title}: privacy–utility (up-left is better)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def frontier(points):
    """The (ε, BLEU) points no other point beats on both (lower ε, higher BLEU), by ε."""
    best, out = float("-inf"), []
    for eps, bleu in sorted(points, key=lambda p: (p[0], -p[1])):
        if bleu > best:
            out.append((eps, bleu))
            best = bleu
    return out


def _frontier_panel(ax, rows):
    """BLEU against ε for the runs with a guarantee; runs without one as lines (give
    the baseline `epsilon: 0` in the YAML: it uses no client data)."""
    dp = [(r["epsilon"], r["bleu"], r["name"]) for r in rows
          if r.get("epsilon") is not None and r.get("bleu") is not None]
    for eps, bleu, name in dp:
        ax.scatter([eps], [bleu], s=40)
        ax.annotate(name, (eps, bleu), textcoords="offset points", xytext=(5, 5), fontsize=8)
    if dp:
        line = frontier([(e, b) for e, b, _ in dp])
        ax.step([e for e, _ in line], [b for _, b in line], where="post", color="black",
                linewidth=1, label="frontier")
    for r in rows:
        if r.get("epsilon") is None and r.get("bleu") is not None:
            ax.axhline(r["bleu"], linestyle=":", linewidth=1, color="grey")
            ax.annotate(f"{r['name']} (no ε)", (0, r["bleu"]), xycoords=(
                "axes fraction", "data"), xytext=(3, 2), textcoords="offset points",
                fontsize=7, color="grey")
    ax.set_xlabel("ε (runs with a DP guarantee)")
    ax.set_ylabel("BLEU")
    ax.grid(alpha=0.3)
    if not dp:
        ax.text(0.5, 0.5, "no run has a DP guarantee", ha="center", va="center",
                transform=ax.transAxes)
    else:
        ax.legend(fontsize=8, loc="lower right")


def _f(x, fmt="{:.2f}"):
    return "–" if x is None else fmt.format(x)


def _pct(x):
    return "–" if x is None else f"{100 * x:.2f}%"


def _mark(p):
    """`*` when the paired bootstrap against the baseline gives p < 0.05."""
    return "*" if p is not None and p < 0.05 else ""


def render_markdown(title, rows):
    repeats = sorted({int(k) for r in rows for k in (r.get("exposure") or {})})
    head = ["run", "approach", "BLEU", "chrF", "len out/ref", "ε"]
    head += [f"exposure r={k}" for k in repeats] + ["extracted (planted)"]
    head += ["MI AUC", "MI TPR@1%FPR"]
    head += ["pairs rebuilt", "tgt n-grams rebuilt", "longest span (median)"]
    lines = [f"# Comparison: {title}", "", "| " + " | ".join(head) + " |",
             "|" + "---|" * len(head)]
    for r in rows:
        ex = r.get("exposure") or {}
        planted = [v for k, v in ex.items() if int(k) > 0]
        extracted = (f"{sum(v['extracted'] for v in planted)}/"
                     f"{sum(v['canaries'] for v in planted)}") if planted else "–"
        rec = r.get("reconstruction") or {}
        cells = [r["name"], r.get("approach", ""), _f(r.get("bleu")) + _mark(r.get("p_bleu")),
                 _f(r.get("chrf"), "{:.1f}") + _mark(r.get("p_chrf")),
                 _f(r.get("length_ratio"), "{:.2f}"), _f(r.get("epsilon"), "{:.3g}")]
        cells += [_f(ex[str(k)]["exposure_mean"]) if str(k) in ex else "–" for k in repeats]
        mi = r.get("membership") or {}
        cells += [extracted, _f(mi.get("auc"), "{:.3f}"), _f(mi.get("tpr_at_1pct_fpr"), "{:.3f}")]
        cells += [_pct(rec.get("pairs_rebuilt_share")),
                  _pct(rec.get("tgt_ngrams_recovered_share")),
                  _f(rec.get("tgt_longest_span_median"), "{}")]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines += ["", "`*`: differs from the baseline at p < 0.05 (sacrebleu's paired bootstrap, "
              "as run by `nmtfrag evaluate --baseline`). len out/ref: output/reference "
              "length ratio (BLEU's), the length effect of untagged phrases. "
              "Exposure r=k: mean exposure (bits) of canaries planted k times (r=0: "
              "never planted, the reference); log2|R| is its ceiling. Extracted: planted "
              "canaries whose secret beam search outputs verbatim. MI: loss-threshold "
              "membership inference on training vs held-out pairs (AUC 0.5 = chance; TPR "
              "at 1% false positives). Pairs rebuilt: share of "
              "training sentence pairs the reconstruction attack rebuilds exactly from the "
              "release; n-grams: distinct target n-grams longer than max-len found in its "
              "chains; each the most any attack mode that was run (conservative, greedy) "
              "achieved. ε: (ε, δ)-DP of the training run where defined.",
              "", "![privacy-utility](privacy_utility.png)", ""]
    return "\n".join(lines)


def compare_runs(runs_yaml, out, overwrite=False):
    spec = read_runs(runs_yaml)
    base = os.path.dirname(os.path.abspath(runs_yaml))
    rows, inputs = collect(spec, base)
    out = prepare_output_dir(out, overwrite, inputs=[runs_yaml], kind="nmtfrag-comparison")
    title = str(spec.get("title", "comparison"))
    report = {"kind": "nmtfrag-comparison", "title": title, "runs": rows}
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
