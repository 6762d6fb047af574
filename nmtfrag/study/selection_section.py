"""Cells scored without the test lines their settings were chosen on.

Why: a recipe picked by its BLEU on the first N lines of the test set is optimistic on
those lines (EMEA's DP-SGD recipe was chosen on its first 500). The cell is scored again
on the other lines only, beside the baseline and the full-sentence cell on the same lines
(from their existing hypotheses: nothing is decoded again), with sacrebleu's paired
bootstrap against the baseline.
"""
from __future__ import annotations

import os
from typing import Any, Sequence

from ..audit.compare import or_dash
from .config import BASELINE, StudyConfig
from .plan import EVALUATE, Paths


def rescored(config: StudyConfig, out: str, rows: Sequence[dict]) -> list[dict[str, Any]]:
    """One entry per cell with `chosen_on_test_lines`: its BLEU, the baseline's and the
    full cell's on the test lines after them, p against the baseline, and the share."""
    from ..translate.evaluate import paired_bootstrap, read_lines, score
    from .runs_section import reference_lines

    have = {r["name"] for r in rows}
    cells = [c for c in config.cells if c.chosen_on_test_lines and c.name in have]
    full = config.full_sentence_cell
    if not cells or BASELINE not in have:
        return []
    paths, refs = Paths(out), reference_lines(config)

    def hyps(name: str) -> list[str]:
        return read_lines(os.path.join(paths.step(name, EVALUATE), "hyp.txt"))
    out_rows: list[dict[str, Any]] = []
    for c in cells:
        skip = c.chosen_on_test_lines
        entry: dict[str, Any] = {"name": c.name, "skipped": skip}
        names = [BASELINE, c.name] + ([full] if full is not None and full in have else [])
        all_hyps = {n: hyps(n) for n in names}
        if any(len(h) != len(refs) for h in all_hyps.values()):
            entry["note"] = ("its hypotheses and the references differ in length (the "
                             "test lines changed since it was decoded): not rescored")
        elif skip >= len(refs):
            entry["note"] = ("every scored line was used for the choice: no figure free "
                             "of it")
        else:
            rest = refs[skip:]
            base_h, cell_h = all_hyps[BASELINE][skip:], all_hyps[c.name][skip:]
            b, cs = score(base_h, rest)[0]["bleu"], score(cell_h, rest)[0]
            entry.update(lines=len(rest), bleu=cs["bleu"], bleu_baseline=b,
                         p_bleu=paired_bootstrap(base_h, cell_h, rest)["BLEU"]["p_value"],
                         bleu_full=None, share=None)
            if full in all_hyps:
                full_h = all_hyps[full][skip:]
                f = score(full_h, rest)[0]["bleu"]
                gain_p = paired_bootstrap(base_h, full_h, rest)["BLEU"]["p_value"]
                entry["bleu_full"] = f
                if f > b and gain_p is not None and gain_p < 0.05:  # a share of noise is noise
                    entry["share"] = (cs["bleu"] - b) / (f - b)
        out_rows.append(entry)
    return out_rows


def render(entries: Sequence[dict]) -> list[str]:
    if not entries:
        return []
    lines = ["## Without the test lines a cell's settings were chosen on", "",
             "| cell | lines scored | BLEU | baseline | full sentences | p vs baseline | "
             "share of the gain |", "|---|---:|---:|---:|---:|---:|---:|"]
    for e in entries:
        if "note" in e:
            lines.append(f"| {e['name']} | {e['note']} | – | – | – | – | – |")
            continue
        lines.append(f"| {e['name']} | {e['lines']:,} (first {e['skipped']:,} left out) | "
                     f"{e['bleu']:.2f} | {e['bleu_baseline']:.2f} | "
                     f"{or_dash(e['bleu_full'])} | {or_dash(e['p_bleu'], '{:.3f}')} | "
                     f"{or_dash(e['share'], '{:.0%}')} |")
    lines += ["", "The cell's settings were chosen by BLEU on the test set's first lines "
              "(`chosen_on_test_lines`): on the other lines its figure is not optimistic "
              "by that choice. Same hypotheses, rescored; the decode with the public-chosen "
              "length penalty and the Runs section still include those lines. No share "
              "where the full cell's gain on these lines is within noise.", ""]
    return lines
