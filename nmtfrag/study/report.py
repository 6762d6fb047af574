"""The study's report: every finished cell on one footing, BLEU kept × what leaks × ε.

Why: a data owner chooses between approaches from one table. Each row shows what the
cell's own records say (nothing re-measured here but the paired bootstrap against the
full-sentence cell): BLEU and chrF with sacrebleu's paired bootstrap against the baseline
and against the full-sentence cell, the length ratio, the share of the full-sentence gain
kept (with its bootstrap interval), how training ended (stopped early on validation, or at
its cap, or its DP plan), updates, target tokens seen and passes over the cell's own data,
CPU hours, the audits, and ε — labelled where it is not a guarantee (a seeded or simulated
DP run, hyperparameters chosen on the owner's data) and with what lies outside it.

OUT/report/: report.md, report.json, privacy_utility.png (nmtfrag.audit.compare_plot's figure),
runs.yaml (the same cells as input for `nmtfrag audit compare`), vs-full/CELL/ (the
bootstrap against the full-sentence cell, an `nmtfrag evaluate --hyp` output).
"""
from __future__ import annotations

import os
import re
from typing import Any

from ..audit import compare, compare_plot
from ..audit.compare import or_dash
from ..audit.compare_reference import gain_shares
from ..fileio import atomic_writer, read_json, write_json
from . import (data_size, length, public_section, release_secrets, runs_section,
               selection_section)
from .public_section import public_figures
from .privacy_figures import privacy_figures
from .config import BASELINE, RELEASE_APPROACHES, Cell, StudyConfig
from .machine import machine_text, read_machines
from .plan import EVALUATE, EXPOSURE, FINETUNE, MEMBERSHIP, RECONSTRUCT, Paths, Planner
from .state import read_state
from .training_end import how_training_ended, passes_text
from .transfer import IMPORTED, steps_run_here

RELEASING = RELEASE_APPROACHES  # the approaches whose cells ship a release
UNCOUNTED_SLACK_S = 120  # fairseq's and the study's clocks differ by its start-up
# compare_reference.reference_rows finds the full-sentence row by it
FULL_APPROACH = "full sentences"


def approach_text(cell: Cell | None, reference: bool = True) -> str:
    if cell is None:
        return "no fine-tuning"
    if cell.approach == "public":
        return f"public pairs alone (the control of {cell.like})"
    if cell.approach == "sentences":
        return FULL_APPROACH + _public_text(cell) + ("" if reference else
                                                     " (not the reference of the shares)")
    if cell.approach == "phrases":
        return (f"phrase pairs ≤ {cell.max_len}{', tagged' if cell.tags else ''}, "
                f"rate {cell.sample_rate:g}{_public_text(cell)}")
    if cell.approach == "dp-release":
        return (f"DP set-union release ≤ {cell.max_len}{', tagged' if cell.tags else ''}, "
                f"{passes_text(cell.passes)}{_public_text(cell)}")
    opts = " ".join(cell.options) or "the default recipe"
    if cell.approach == "dp-composed":
        return (f"DP set-union release ≤ {cell.max_len} (ε {cell.release_epsilon:g})"
                f"{', tagged' if cell.tags else ''}, {passes_text(cell.passes)}"
                f"{_public_text(cell)}, then DP-SGD ({opts}): total ε {cell.epsilon:g}")
    public = (f", + {cell.public_batch:,} public pairs a step (weight {cell.public_weight:g})"
              if cell.public_batch else "")
    share = (f", on {cell.train_fraction:.0%} of the owner's pairs"
             if cell.train_fraction < 1 else "")
    return f"DP-SGD ({opts}){public}{share}"


def _public_text(cell: Cell) -> str:
    """", packed to public lengths, + public pairs (50% of target tokens)" and the like."""
    out = ""
    if cell.pack:
        words = "public sentence lengths" if cell.pack == "public" else f"{cell.pack} words"
        out += f", packed to {words}" + ("" if cell.pack_tags else ", tags dropped")
    if cell.public_share:
        out += f", + public pairs ({cell.public_share:.0%} of target tokens"
        out += f", ≥ {cell.public_min_words} words)" if cell.public_min_words else ")"
    return out


def _json(path: str) -> Any:
    return read_json(path) if os.path.isfile(path) else None


def _spec(config: StudyConfig, paths: Paths) -> dict:
    """The runs of `nmtfrag audit compare` for every cell evaluated so far."""
    runs = []
    for plan in Planner(config, paths.out).all_plans():
        done = {s.name: s.out for s in plan.steps if s.done}
        if EVALUATE not in done:
            continue
        cell = None if plan.cell == BASELINE else config.cell(plan.cell)
        run = {"name": plan.cell, "evaluate": done[EVALUATE],
               "approach": approach_text(cell, plan.cell == config.full_sentence_cell)}
        for key, step in (("reconstruction", RECONSTRUCT), ("exposure", EXPOSURE),
                          ("membership", MEMBERSHIP)):
            if step in done:
                run[key] = done[step]
        runs.append(run)
    return {"title": config.title, "runs": runs}


def training_figures(config: StudyConfig, paths: Paths, name: str) -> dict[str, Any]:
    """How a cell's training went, from its own records (finetune's manifests and logs)."""
    if name == BASELINE:
        return {}
    cell, rule = config.cell(name), config.training_rule(name)
    ft = paths.step(name, FINETUNE)
    man = _json(os.path.join(ft, "manifest.json")) or {}
    state = read_state(paths, name)
    steps = state.get("steps", {})
    out: dict[str, Any] = {
        "cpu_hours_training": (steps.get(FINETUNE) or {}).get("cpu_seconds", 0) / 3600,
        "cpu_hours_cell": sum(s.get("cpu_seconds", 0) for s in steps.values()) / 3600}
    if rule.approach == "dp-sgd" or cell.approach == "dp-composed":
        rates = _dp_rates(os.path.join(ft, "owner", "train.log"))
        out.update(ended="its DP plan", updates=len(rates))
        if cell.approach != "public":  # a control's steps hold no owner pair to pass over
            owner = _json(os.path.join(ft, "owner", "manifest.json")) or {}
            tgt = ((owner.get("counts") or {}).get("train") or {}).get("tgt_tokens")
            out.update(passes=sum(rates) or None,
                       tokens_seen=round(sum(rates) * tgt) if tgt and rates else None)
        return out
    result = man.get("result") or {}
    tgt = ((man.get("counts") or {}).get("train") or {}).get("tgt_tokens")
    updates = result.get("num_updates")
    ended = how_training_ended(rule, man)
    # fairseq's training time over every run of the cell: more than the study counted
    # means attempts it never saw (killed before it saved CPU time every minute)
    missed = (result.get("train_seconds") or 0) - (steps.get(FINETUNE) or {}).get(
        "wall_seconds", 0)
    if missed > UNCOUNTED_SLACK_S:
        out["training_hours_uncounted"] = missed / 3600
    seen = tokens_seen(os.path.join(ft, "train.log"))
    out.update(ended=ended, updates=updates, best_updates=result.get("best_checkpoint_updates"),
               # fairseq logs words per batch to one decimal: passes to two
               tokens_seen=seen, passes=round(seen / tgt, 2) if seen is not None and tgt
               else None,
               train_pairs=((man.get("counts") or {}).get("train") or {}).get("pairs"))
    return out


def tokens_seen(train_log: str) -> int | None:
    """Target tokens fairseq trained on: Σ over its end-of-epoch lines of words per batch ×
    that epoch's updates (a resumed run's log holds each finished epoch once; the last
    line of an epoch wins)."""
    if not os.path.isfile(train_log):
        return None
    per_epoch: dict[int, tuple[float, int]] = {}
    pat = re.compile(r"\| train \| epoch (\d+) \|.*\| wpb ([0-9.]+) \|.*\| num_updates (\d+)")
    with open(train_log, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = pat.search(line)
            if m:
                per_epoch[int(m.group(1))] = (float(m.group(2)), int(m.group(3)))
    total, before = 0.0, 0
    for epoch in sorted(per_epoch):
        wpb, upto = per_epoch[epoch]
        total += wpb * (upto - before)
        before = upto
    return round(total) if per_epoch else None


def _dp_rates(log: str) -> list[float]:
    import json

    if not os.path.isfile(log):
        return []
    with open(log, encoding="utf-8") as f:
        return [json.loads(ln)["sample_rate"] for ln in f if ln.strip()]


def paired_test(config: StudyConfig, paths: Paths, name: str, other: str,
                step: str = EVALUATE) -> dict[str, Any] | None:
    """sacrebleu's paired bootstrap of a cell's `step` output against another cell's
    (cached by both hypotheses' hashes): {"p_value", "other_bleu"}, or None until both
    are there."""
    if name == other:
        return None
    from ..fileio import sha256_file
    from ..translate.evaluate import evaluate

    hyp = os.path.join(paths.step(name, step), "hyp.txt")
    base = paths.step(other, step)
    if not (os.path.isfile(hyp) and os.path.isfile(os.path.join(base, "manifest.json"))):
        return None
    out = os.path.join(paths.report, "vs-full" if other == config.full_sentence_cell
                       and step == EVALUATE else f"vs-{other}-{step}", name)
    rep = _json(os.path.join(out, "report.json"))
    fresh = rep is not None and rep["inputs_sha256"].get("hyp") == sha256_file(hyp) and \
        rep["params"].get("baseline_sha256") == sha256_file(os.path.join(base, "hyp.txt"))
    if not fresh:
        src, ref = config.data.files(config.data.test)
        rep = evaluate(out, src=src, ref=ref, hyp=hyp,
                       pretokenized=config.data.pretokenized,
                       baseline=base, first=config.decode.test_lines or None,
                       src_lang=config.data.src_lang, tgt_lang=config.data.tgt_lang,
                       overwrite=True, name=name)
        rep["params"]["baseline_sha256"] = sha256_file(os.path.join(base, "hyp.txt"))
        write_json(os.path.join(out, "report.json"), rep)
    sig = (rep["scores"].get("significance") or {}).get("BLEU") or {}
    return {"p_value": sig.get("p_value"), "other_bleu": sig.get("baseline")}


def collect_rows(config: StudyConfig, out: str) -> list[dict[str, Any]]:
    paths = Paths(out)
    spec = _spec(config, paths)
    if not spec["runs"]:
        return []
    rows, _ = compare.collect(spec, paths.out)
    full = config.full_sentence_cell
    # the reference first after the baseline: compare_reference.reference_rows takes the first
    # full-sentence row it meets
    rows.sort(key=lambda r: 0 if r["name"] == BASELINE else 1 if r["name"] == full else 2)
    full_done = full is not None and any(r["name"] == full for r in rows)
    for row in rows:
        row.update(training_figures(config, paths, row["name"]))
        row.update(privacy_figures(config, paths, row["name"]))
        if row["name"] != BASELINE and config.cell(row["name"]).approach in RELEASING:
            row["release_secrets"] = release_secrets.release_secrets(paths, row["name"])
        vs = paired_test(config, paths, row["name"], full) if full_done and full else None
        row["p_bleu_vs_full"] = vs["p_value"] if vs else None
        row.update(public_figures(config, paths, row["name"],
                                  lambda a, b, step: paired_test(config, paths, a, b, step)))
        state = read_state(paths, row["name"])
        imported = state.get(IMPORTED)
        if imported:
            row["ran_on"] = list(dict.fromkeys(machine_text(m) for m in imported["machines"]))
            row["rerun_here"] = steps_run_here(state)
    shares = gain_shares(rows) or {}  # none when the full gain is noise
    for row in rows:
        s = shares.get(row["name"])
        row["share_of_gain"], row["share_low"], row["share_high"] = s if s else (None,) * 3
    return rows


def write_report(config: StudyConfig, out: str) -> list[dict[str, Any]]:
    """Rewrite OUT/report from every cell evaluated so far; returns the rows."""
    paths = Paths(out)
    rows = collect_rows(config, out)
    os.makedirs(paths.report, exist_ok=True)
    runs = runs_section.comparisons(config, out, rows)
    rescored = selection_section.rescored(config, out, rows)
    write_json(os.path.join(paths.report, "report.json"),
               {"kind": "nmtfrag-study-report", "title": config.title,
                "rows": [compare.shareable(r) for r in rows], "runs": runs,
                "without_selection_lines": rescored, "pending": pending_cells(config, rows)})
    with atomic_writer(os.path.join(paths.report, "report.md")) as f:
        f.write(render_markdown(config, rows, read_machines(paths), runs, rescored))
    if rows:
        compare_plot.plot(rows, os.path.join(paths.report, "privacy_utility.png"), config.title)
        _write_runs_yaml(config, paths)
    return rows


def _write_runs_yaml(config: StudyConfig, paths: Paths) -> None:
    """The same cells as input for `nmtfrag audit compare` (paths relative to it)."""
    import yaml

    spec = _spec(config, paths)
    for run in spec["runs"]:
        for key in ("evaluate", "reconstruction", "exposure", "membership"):
            if key in run:
                run[key] = os.path.relpath(run[key], paths.report)
    with atomic_writer(os.path.join(paths.report, "runs.yaml")) as f:
        yaml.safe_dump(spec, f, sort_keys=False, allow_unicode=True)


def pending_cells(config: StudyConfig, rows: list[dict]) -> list[str]:
    have = {r["name"] for r in rows}
    return [n for n in [BASELINE] + [c.name for c in config.cells] if n not in have]


def _cpu(r: dict) -> str:
    missed = r.get("training_hours_uncounted")
    if missed is None:
        return or_dash(r.get("cpu_hours_cell"))
    return f"≥ {or_dash(r.get('cpu_hours_cell'))} (+{missed:.2f} h wall)"


def _share(r: dict) -> str:
    if r.get("share_of_gain") is None:
        return "–"
    s = f"{100 * r['share_of_gain']:.0f}%"
    if r.get("share_low") is not None:
        s += f" [{100 * r['share_low']:.0f}, {100 * r['share_high']:.0f}]"
    return s


def _star(p: Any) -> str:
    return "*" if p is not None and p < 0.05 else ""


def render_markdown(config: StudyConfig, rows: list[dict],
                    runs: list[dict] | None = None, run_comparisons: dict | None = None,
                    rescored: list[dict] | None = None) -> str:
    lines = [f"# Study: {config.title}", ""]
    seen = list(dict.fromkeys(machine_text(m) for m in runs or ()))
    if seen:
        lines += ["Ran on: " + "; then ".join(seen) + ".", ""]
    imported: dict[tuple[str, ...], list[str]] = {}  # where they ran: the cells
    for r in rows:
        if r.get("ran_on") is not None:
            imported.setdefault(tuple(r["ran_on"]), []).append(r["name"])
    for where, names in imported.items():
        rerun = [f"{r['name']}'s {step}" for r in rows if r["name"] in names
                 for step in r.get("rerun_here") or ()]
        lines += [f"† {', '.join(names)}: imported from another study directory with the "
                  f"same recorded settings and the same baseline output (`nmtfrag study "
                  f"import`); ran on: {'; then '.join(where) or 'an unrecorded machine'}. "
                  f"Their CPU h are that machine's"
                  + (f", plus steps rerun here: {', '.join(rerun)}" if rerun else "")
                  + ".", ""]
    if not rows:
        return "\n".join(lines + ["No cell has been evaluated yet.", ""])
    lines += [read_first(config, rows), ""]
    test_lines = {r.get("test_lines") for r in rows}
    sig = rows[0].get("bleu_signature")
    lines += [f"Test lines: {', '.join(str(t) for t in sorted(test_lines, key=str))} "
              f"(every cell the same, decoded by {config.decode.engine}, beam "
              f"{config.decode.beam}); `{sig}`.", ""]
    head = ["cell", "approach", "BLEU", "chrF", "len ratio", "share of full gain [95%]",
            "p vs full", "training ended", "updates", "tgt tokens seen", "passes",
            "CPU h", "privacy"]
    lines += ["## Utility and cost", "", "| " + " | ".join(head) + " |",
              "|" + "---|" * len(head)]
    for r in rows:
        dagger = "†" if r.get("ran_on") is not None else ""
        cells = [r["name"] + dagger, r["approach"],
                 or_dash(r.get("bleu")) + _star(r.get("p_bleu")),
                 or_dash(r.get("chrf"), "{:.1f}") + _star(r.get("p_chrf")),
                 or_dash(r.get("length_ratio"), "{:.3f}"), _share(r),
                 or_dash(r.get("p_bleu_vs_full"), "{:.3f}"), r.get("ended") or "–",
                 or_dash(r.get("updates"), "{:,}"), or_dash(r.get("tokens_seen"), "{:,.0f}"),
                 or_dash(r.get("passes"), "{:.3g}"), _cpu(r),
                 r.get("privacy", "")]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines += ["", "`*`: BLEU (chrF) differs from the baseline's at p < 0.05 (sacrebleu's "
              "paired bootstrap, 1,000 samples); p vs full: the same test against the "
              "full-sentence cell. Share of full gain: (BLEU − baseline) / (full − "
              "baseline), its interval the bootstrap's 95% range carried through. Training "
              "ended: early stop (validation loss, patience) or at its cap (stated in the "
              "config, never called converged), a DP cell by its plan. Passes: whole passes "
              "over the cell's own training data (a DP-SGD cell's expected passes). CPU h: "
              "every step of the cell, measured by the study (training, evaluation, audits)"
              "; ≥: a lower bound, where fairseq's own training time shows runs the study "
              "did not count (killed before it saved CPU time every minute); in brackets, "
              "the wall-clock hours of that uncounted training.", ""]
    lines += length.render(rows)
    lines += public_section.render(rows, config.full_sentence_cell)
    lines += data_size.render(config, rows)
    lines += runs_section.render(rows, run_comparisons or {}, config.full_sentence_cell)
    lines += selection_section.render(rescored or [])
    lines += ["## BLEU × what leaks × ε", ""]
    lines += compare.render_markdown(config.title, rows).split("\n", 2)[2].splitlines()
    lines += release_secrets.render(rows)
    sgd = [r for r in rows if "snr_mean" in r or "sigma" in r]
    if sgd:
        lines += ["", "## DP-SGD cells", "", "| cell | certified ε | label | training ε by "
                  "accountant (RDP / PRV) | σ | noisy steps | mean step SNR | clipped |",
                  "|---|---:|---|---:|---:|---:|---:|---:|"]
        for r in sgd:
            acc = r.get("epsilon_by_accountant") or {}
            basic = " (realised, basic composition)" if r.get(
                "composition_kind") == "basic" else ""
            lines.append(f"| {r['name']} | {or_dash(r.get('epsilon_stated'), '{:.3g}')} | "
                         f"{'; '.join(r.get('epsilon_labels') or []) or 'a guarantee'} | "
                         f"{or_dash(acc.get('rdp'))} / {or_dash(acc.get('prv'))}{basic} | "
                         f"{or_dash(r.get('sigma'), '{:.3f}')} | "
                         f"{or_dash(r.get('dp_steps'), '{}')} | "
                         f"{or_dash(r.get('snr_mean'), '{:.3f}')} | "
                         f"{or_dash(r.get('clipped_share'), '{:.0%}')} |")
        lines += ["", "Certified ε: the total the checked certificate states (`nmtfrag "
                  "privacy`), with its label wherever it is no guarantee. Training ε by "
                  "accountant: the training part alone as each accountant computes it (under "
                  "basic composition the realised value, below the bound fixed in advance "
                  "that the certificate adds). Mean step SNR: the norm of the clipped gradient "
                  "sum over the noise's, averaged over steps (Anil et al. 2021); a simulation "
                  "or control shows its own noise.", ""]
    dp = [r for r in rows if r.get("outside_epsilon")]
    if dp:
        lines += ["", "## What each ε covers", ""]
        for r in dp:
            lines.append(f"- {r['name']}: {r['privacy']}. Outside it: "
                         f"{'; '.join(r['outside_epsilon'])}.")
    pending = pending_cells(config, rows)
    if pending:
        lines += ["", f"Not evaluated yet: {', '.join(pending)} (`nmtfrag study status`).", ""]
    return "\n".join(lines) + "\n"


def read_first(config: StudyConfig, rows: list[dict]) -> str:
    """The report's first paragraph: what to read first, and what it cannot show yet."""
    text = ("**Read first:** the *Utility and cost* table: each cell's BLEU against the "
            "baseline (`*`: p < 0.05) and the share of the full-sentence gain it keeps; "
            "then its *privacy* column, which says what each ε guarantees or why it is no "
            "guarantee; then *BLEU × what leaks × ε* for what each approach leaks. The "
            "notes under the tables say which figures are within noise.")
    full = config.full_sentence_cell
    have = {r["name"] for r in rows}
    if full is None:
        text += (" This study has no full-sentence cell, so no share of the gain can be "
                 "computed: every share is –.")
    elif full not in have:
        text += f" The full-sentence cell ({full}) is not evaluated yet: every share is –."
    elif all(r.get("share_of_gain") is None for r in rows):
        text += (" The full-sentence cell's gain is within noise: no share is shown (see "
                 "the notes).")
    return text


def run_report(config: StudyConfig, out: str) -> str:
    """`nmtfrag study report`: rewrite the report; returns its Markdown path."""
    from ..errors import InputError

    if not os.path.isfile(Paths(out).record):
        raise InputError(f"{out}: not a study directory (no study.json)")
    from .record import check_same_study

    check_same_study(config, out)
    write_report(config, out)
    return os.path.join(Paths(out).report, "report.md")
