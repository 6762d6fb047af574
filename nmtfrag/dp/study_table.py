"""The table of a DP fine-tuning study (scripts/dp_recipe.sh): one row per cell.

Why: choosing a DP recipe means comparing cells on what DP costs — BLEU against the
baseline and against non-private fine-tuning on the same data ("share of the gain") —
next to why a cell lands where it does: ε under both accountants, the noise multiplier,
the mean gradient signal-to-noise ratio of the noisy steps (Anil et al. 2021 §5.2.1) and
the share of clipped examples. A cell trained on a DP set-union phrase release (the other
formal-guarantee option) shows the release's ε. Everything is read from the cells' own
records (RUNS/DOMAIN/ft-NAME: manifest.json, privacy.json, owner/; rel-NAME/privacy.json;
eval-NAME/report.json).

    python3 -m nmtfrag.dp.study_table RUNS/DOMAIN --reference nonprivate-all [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from typing import Any


def _load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def _train_log(cell_dir):
    path = os.path.join(cell_dir, "owner", "train.log")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _epochs_in_log(cell_dir):
    """The last epoch fairseq validated in a cell's train.log (runs made before the
    manifest recorded `epochs_completed`; their cells validate once per epoch)."""
    last = None
    try:
        with open(os.path.join(cell_dir, "train.log"), encoding="utf-8") as f:
            for line in f:
                m = re.search(r"\| epoch (\d+) \| valid on ", line)
                last = int(m.group(1)) if m else last
    except FileNotFoundError:
        pass
    return last


NOT_PRIVATE_MARK = {"simulation": "sim", "control": "control"}


def _release_certificate(root, name, params):
    """The guarantee of the DP release a cell was trained on, or None (not a DP release)."""
    if params.get("train_kind") != "release" or not (params.get("release_params") or {}).get("dp"):
        return None
    for rel in (os.path.join(root, f"rel-{name}"), params.get("train") or ""):
        cert = _load(os.path.join(rel, "privacy.json")) if rel else None
        if cert:
            return cert["total"]
    return None


def cell_row(root: str, name: str) -> dict[str, Any]:
    """One cell's figures (None where they do not apply, e.g. ε of a non-private cell)."""
    ev = _load(os.path.join(root, f"eval-{name}", "report.json"))
    ft = os.path.join(root, f"ft-{name}")
    man = _load(os.path.join(ft, "manifest.json")) or {}
    priv = _load(os.path.join(ft, "privacy.json"))
    params = man.get("params", {})
    not_private = man.get("not_private")  # a simulation or a control (dp/simulate.py)
    row = {"name": name, "bleu": ev["scores"]["bleu"] if ev else None,
           "p_value": ((ev["scores"].get("significance") or {}).get("BLEU") or {})
           .get("p_value") if ev else None,
           "trained": (params.get("trained_parameters") or {"kind": "all"}).get("kind"),
           "lr": params.get("lr"), "dp": bool(priv),
           "mode": (not_private or {}).get("mode", "private" if priv else "nonprivate")}
    steps = _train_log(ft) if (priv or not_private) else []
    if steps:  # DP cells, whatever the mode: the per-step log has it all
        row.update(
            steps=len(steps), epochs=sum(s["sample_rate"] for s in steps),
            cpu_hours=sum(s["seconds"] for s in steps) / 3600,
            snr_mean=(sum(s["snr"] for s in steps) / len(steps)
                      if all(s["noise_norm"] > 0 for s in steps) else None),
            clipped_share=sum(s["clipped_share"] for s in steps) / len(steps))
    # a DP-SGD certificate takes precedence: a cell is shown with the ε of its training
    release = None if priv else _release_certificate(root, name, params)
    if release:
        row.update(mode="release", epsilon_release=release["epsilon"],
                   release_pairs=(man.get("counts") or {}).get("train", {}).get("pairs"))
    if not_private:
        trained = not_private["trained"]
        row.update(sigma=trained["noise_multiplier"],
                   logical_batch=trained["logical_batch"],
                   epsilon_planned=not_private["planned"].get("epsilon_if_private"))
    elif priv:
        t = priv["training"]
        row.update(
            epsilon_rdp=t["epsilon_all_accountants"].get("rdp"),
            epsilon_prv=t["epsilon_all_accountants"].get("prv"),
            sigma=t["noise_multiplier"], steps=t["steps"],
            logical_batch=(params.get("logical_batch") or params.get("batch_schedule")
                           or (f"q {params['sample_rate']}" if params.get("sample_rate")
                               else None)),
            clipping=t.get("clipping"))
    else:
        result = man.get("result") or {}
        row["updates"] = result.get("num_updates")
        done = result.get("epochs_completed")
        row["epochs"] = done if done is not None else _epochs_in_log(ft)
        seconds = result.get("train_seconds", result.get("train_seconds_this_run"))
        if seconds is not None:  # a resumed run's earlier parts included
            row["cpu_hours"] = seconds / 3600
    return row


def cells_in(root: str) -> list[str]:
    """Cell names with an evaluation, in the order the study ran them (cells file)."""
    order = []
    cells = os.path.join(root, "cells")
    if os.path.exists(cells):
        with open(cells, encoding="utf-8") as f:
            order = [ln.split()[0] for ln in f if ln.strip() and not ln.startswith("#")]
    found = [n for n in order if os.path.exists(os.path.join(root, f"eval-{n}"))]
    return ["baseline"] + [n for n in found if n != "baseline"]


def table(root: str, reference: str) -> tuple[list[dict[str, Any]], str]:
    """(rows, markdown): shares of gain are (BLEU − baseline) / (reference − baseline)."""
    rows = [cell_row(root, n) for n in cells_in(root)]
    by = {r["name"]: r for r in rows}
    base, ref = by.get("baseline", {}).get("bleu"), by.get(reference, {}).get("bleu")
    gain = (ref - base) if base is not None and ref is not None else None
    for r in rows:
        r["share_of_gain"] = ((r["bleu"] - base) / gain
                              if gain and r["bleu"] is not None else None)

    def f(x, fmt):
        return "–" if x is None else format(x, fmt)

    lines = ["| cell | trained | lr | ε (RDP / PRV) | σ | steps × batch | epochs | SNR "
             "| clipped | CPU h | BLEU | p | share of gain |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        eps = (f"{r['epsilon_release']:.2f} (release)" if r["mode"] == "release" else
               f"{r['epsilon_rdp']:.2f} / {r['epsilon_prv']:.2f}" if r["dp"] else
               NOT_PRIVATE_MARK.get(r["mode"], "∞"))
        sb = (f"{r['steps']} × {r['logical_batch']}"
              if r["mode"] not in ("nonprivate", "release") else
              f"{r.get('updates') or '–'} updates" if r["name"] != "baseline" else "–")
        trained = (r["trained"] if r["mode"] != "release" else
                   f"{r['trained']} on {f(r.get('release_pairs'), ',')} released pairs")
        lines.append(
            f"| {r['name']} | {trained if r['name'] != 'baseline' else '–'} | "
            f"{f(r['lr'], 'g') if r['name'] != 'baseline' else '–'} | "
            f"{eps if r['name'] != 'baseline' else '–'} | {f(r.get('sigma'), '.3f')} | {sb} | "
            f"{f(r.get('epochs'), '.3g')} | "
            f"{f(r.get('snr_mean'), '.3f')} | {f(r.get('clipped_share'), '.0%')} | "
            f"{f(r.get('cpu_hours'), '.2f')} | "
            f"{f(r['bleu'], '.2f')} | {f(r['p_value'], '.3f')} | "
            f"{f(r['share_of_gain'], '.0%')} |")
    note = ("\nε: sim = a simulation of the planned run (σ·B_SIM/B on batches of B_SIM; "
            "not private), control = the planned steps without noise (not private; "
            "on batches of B_SIM in a sweep); (release) = the (ε, δ) of a DP set-union "
            "phrase release (one mechanism) per training unit, the cell fine-tuned on it "
            "without DP-SGD, its checkpoint chosen on the study's validation set (outside "
            "that ε). "
            "Epochs: passes over the training data (a DP cell's expected passes; a "
            "release cell's over the release); CPU h: training hours (the DP cells' "
            "noisy steps, summed over resumed runs)."
            f"\nShare of gain: (BLEU − baseline) / ({reference} − baseline)"
            + (f" = (BLEU − {base:.2f}) / {gain:.2f}." if gain else
               f": `{reference}` has no evaluation yet."))
    return rows, "\n".join(lines) + "\n" + note + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", help="RUNS/DOMAIN of scripts/dp_recipe.sh")
    ap.add_argument("--reference", default="nonprivate-all",
                    help="the non-private cell whose gain the shares are of")
    ap.add_argument("--json", action="store_true", help="the rows as JSON")
    args = ap.parse_args(argv)
    if not os.path.isdir(args.root):
        print(f"error: {args.root} is not a directory", file=sys.stderr)
        return 2
    rows, md = table(args.root, args.reference)
    print(json.dumps(rows, indent=1) if args.json else md, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
