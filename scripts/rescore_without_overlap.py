#!/usr/bin/env python3
"""Each finished cell of a study rescored on the test lines its training set cannot have
taught it by heart: is a cell's gain (and its share of the full-sentence gain) carried by
test lines that also occur in train, or by the test set's repeated lines?

usage: python3 scripts/rescore_without_overlap.py CONFIG --study OUT --out DIR

Subsets of the config's test set (line numbers from the data alone, not from any output):
  all           every line, as the study's report scores them
  unseen        lines whose source sentence is not a training source
  dedup         the first occurrence of each (source, reference) pair
  dedup-unseen  both
Each cell's study output (cells/NAME/evaluate/hyp.txt) is cut to the subset and scored by
`nmtfrag evaluate --hyp` (the same detokenisation and SacreBLEU signature as the study),
with the paired bootstrap against the baseline cut the same way. DIR gets one evaluate
output per subset and cell; the table (BLEU, and the share of the full-sentence gain) is
printed.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SUBSETS = ("all", "unseen", "dedup", "dedup-unseen")


def subsets(test_src: list[str], test_ref: list[str], train_src: set[str]
            ) -> dict[str, list[int]]:
    """Line numbers (0-based) of each subset."""
    seen: set[tuple[str, str]] = set()
    out: dict[str, list[int]] = {name: [] for name in SUBSETS}
    for i, pair in enumerate(zip(test_src, test_ref)):
        first, unseen = pair not in seen, pair[0] not in train_src
        seen.add(pair)
        for name, keep in (("all", True), ("unseen", unseen), ("dedup", first),
                           ("dedup-unseen", first and unseen)):
            if keep:
                out[name].append(i)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config", metavar="CONFIG")
    ap.add_argument("--study", required=True, metavar="OUT", help="the study directory")
    ap.add_argument("--out", required=True, metavar="DIR", help="where the scores go")
    args = ap.parse_args()

    from nmtfrag.translate.evaluate import evaluate, read_lines
    from nmtfrag.fileio import atomic_writer
    from nmtfrag.study.config import BASELINE, read_config
    from nmtfrag.study.plan import EVALUATE, Paths

    config = read_config(args.config)
    d, paths = config.data, Paths(args.study)
    src, ref = d.files(d.test)
    test_src, test_ref = read_lines(src), read_lines(ref)
    if config.decode.test_lines:  # the study scored (and its hyp.txt holds) these only
        test_src, test_ref = (test_src[:config.decode.test_lines],
                              test_ref[:config.decode.test_lines])
    train_src = set(read_lines(d.files(d.train)[0]))
    names = [n for n in [BASELINE] + [c.name for c in config.cells]
             if os.path.isfile(os.path.join(paths.step(n, EVALUATE), "manifest.json"))]
    if BASELINE not in names:
        sys.exit(f"error: {args.study}: its baseline is not evaluated yet")
    full = config.full_sentence_cell if config.full_sentence_cell in names else None
    bleu: dict[tuple[str, str], float] = {}
    for sub, lines in subsets(test_src, test_ref, train_src).items():
        sub_dir = os.path.join(args.out, sub)
        os.makedirs(sub_dir, exist_ok=True)
        files = {}
        for kind, text in (("src", test_src), ("ref", test_ref)):
            files[kind] = os.path.join(sub_dir, f"test.{kind}")
            with atomic_writer(files[kind]) as f:
                f.writelines(text[i] + "\n" for i in lines)
        for name in names:
            hyps = read_lines(os.path.join(paths.step(name, EVALUATE), "hyp.txt"))
            hyp = os.path.join(sub_dir, f"{name}.hyp")
            with atomic_writer(hyp) as f:
                f.writelines(hyps[i] + "\n" for i in lines)
            rep = evaluate(os.path.join(sub_dir, name), src=files["src"], ref=files["ref"],
                           hyp=hyp, pretokenized=d.pretokenized, src_lang=d.src_lang,
                           tgt_lang=d.tgt_lang, name=name, overwrite=True,
                           baseline=(None if name == BASELINE
                                     else os.path.join(sub_dir, BASELINE)))
            bleu[sub, name] = rep["scores"]["bleu"]
        print(f"{sub}: {len(lines)} lines", file=sys.stderr)
    head = ["subset", "lines"] + names
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    counts = {k: len(v) for k, v in subsets(test_src, test_ref, train_src).items()}
    for sub in SUBSETS:
        cells = []
        for name in names:
            text = f"{bleu[sub, name]:.2f}"
            gain = bleu[sub, full] - bleu[sub, BASELINE] if full else 0.0
            if gain > 0 and name not in (BASELINE, full):  # no share of no gain
                text += f" ({100 * (bleu[sub, name] - bleu[sub, BASELINE]) / gain:.0f}%)"
            cells.append(text)
        print(f"| {sub} | {counts[sub]} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
