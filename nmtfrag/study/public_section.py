"""What public text adds: the mixed cells against their public-only control, and every
cell decoded with a length penalty chosen on public text.

Why: a cell trained on public sentences beside the owner's material may owe part of its
gain to the public text alone; its control (the same public pairs, no owner material,
the same training rule) says how much, and a mixed cell's claim is its difference from
that control, tested on the same test lines. A length penalty chosen on public text may
recover what short output costs; it is shown beside, never instead of, the plain decode.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Sequence

from ..audit.compare import or_dash
from ..fileio import read_json
from .config import BASELINE, StudyConfig
from .plan import EVALUATE, EVALUATE_LP, FINETUNE, LENPEN, WARM_START, Paths

Paired = Callable[[str, str, str], "dict[str, Any] | None"]  # (cell, other, step) → test


def _json(path: str) -> Any:
    return read_json(path) if os.path.isfile(path) else None


# What a mixed cell's training holds that its control's does not: the owner's material
# and how it was shaped (and the machine, never a cell setting). Everything else in
# finetune's recorded params is the training rule, which a control must share.
_OWNER_MATERIAL = frozenset({"train", "train_kind", "train_text_mode", "release_params",
                             "pack", "train_fraction", "public_train", "device", "gpus"})
# The public draw: a seeded order over the same public files, taken whole until the share
# is reached, so the same files, seed, filter and count are the same pairs.
_DRAW = ("src", "tgt", "text_mode", "min_words", "tagged", "eligible_pairs",
         "sources_also_in_training", "pairs", "public_tgt_tokens")
_SAME_INPUTS = ("model", "valid_src", "valid_tgt", "public_src", "public_tgt")


def _finetune_manifest(paths: Paths, name: str, step: str = FINETUNE) -> dict:
    """A cell's finetune manifest (or its composed warm start's: `step`), {} if none."""
    return _json(os.path.join(paths.step(name, step), "manifest.json")) or {}


def same_public_training(mixed: dict, control: dict) -> bool:
    """Whether a public-only run is, by the two finetune manifests alone, the control of a
    mixed run it was not declared for (`like`): the same public pairs (files by hash,
    seed, filter, count) and the same training rule, only the owner's material left out.
    A packed cell beside the same public draw as its unpacked twin shares its control."""
    a, b = mixed.get("params") or {}, control.get("params") or {}
    pa, pb = a.get("public_train") or {}, b.get("public_train") or {}
    if not pa or not pb or pa.get("only") or not pb.get("only"):
        return False
    if any(pa.get(k) != pb.get(k) for k in _DRAW):
        return False
    ha, hb = mixed.get("inputs_sha256") or {}, control.get("inputs_sha256") or {}
    if any(ha.get(k) != hb.get(k) for k in _SAME_INPUTS):
        return False
    rule = (set(a) | set(b)) - _OWNER_MATERIAL
    return all(a.get(k) == b.get(k) for k in rule)


def public_figures(config: StudyConfig, paths: Paths, name: str, paired: Paired
                   ) -> dict[str, Any]:
    """A row's public-data figures: what its training drew, its control's BLEU and the
    paired test against it, and its decode with the public-chosen length penalty."""
    out: dict[str, Any] = {}
    if name != BASELINE:
        cell = config.cell(name)
        man = _finetune_manifest(paths, name)
        params = man.get("params") or {}
        if cell.approach == "dp-composed":  # its public pairs are in its warm start
            warm = _finetune_manifest(paths, name, WARM_START).get("params") or {}
            if warm.get("public_train"):
                out["public"] = warm["public_train"]
        elif params.get("public_train"):
            out["public"] = params["public_train"]
        elif params.get("dp_public"):  # DP-SGD: public pairs in every logical batch
            out["public"] = {"per_step": params["dp_public"].get("pairs_per_step")}
        if params.get("pack"):
            out["pack"] = params["pack"]
        control = next((c.name for c in config.cells
                        if c.approach == "public" and c.like == name), None)
        matched = False
        if control is None and params.get("public_train") and cell.approach != "public":
            control = next((c.name for c in config.cells if c.approach == "public"
                            and same_public_training(man, _finetune_manifest(paths, c.name))),
                           None)
            matched = control is not None
        if control is not None:
            test = paired(name, control, EVALUATE)
            if test is not None:
                out["control"] = {"name": control, "by_records": matched, **test}
        if cell.approach == "public":
            out["control_of"] = cell.like
    lp = _json(os.path.join(paths.step(name, EVALUATE_LP), "report.json"))
    chosen = _json(os.path.join(paths.step(name, LENPEN), "manifest.json"))
    if lp and chosen:
        s = lp["scores"]
        sig = (s.get("significance") or {}).get("BLEU") or {}
        out["lp"] = {"lenpen": chosen.get("lenpen"), "bleu": s.get("bleu"),
                     "chrf": s.get("chrf"), "length_ratio": s.get("length_ratio"),
                     "brevity_penalty": s.get("brevity_penalty"),
                     "p_bleu": sig.get("p_value")}
    return out


def lp_shares(rows: Sequence[dict], full: str | None) -> dict[str, float]:
    """{name: share of the full-sentence gain} of the decodes with the chosen penalty,
    against the baseline's and the full cell's decodes with theirs (empty unless both
    are there and the full gain is positive)."""
    by = {r["name"]: r["lp"] for r in rows if r.get("lp")}
    if BASELINE not in by or full not in by:
        return {}
    b, gain = by[BASELINE]["bleu"], by[full]["bleu"] - by[BASELINE]["bleu"]
    if gain <= 0:
        return {}
    return {n: (x["bleu"] - b) / gain for n, x in by.items()}


def _control_cell(row: dict, served: dict[str, list[str]]) -> str:
    """The "its control" column: the control's name, or for a control the cells it serves."""
    ctl = row.get("control")
    if ctl:
        return ctl["name"] + (" (by records)" if ctl.get("by_records") else "")
    if row.get("control_of"):
        return "the control of " + ", ".join(served.get(row["name"]) or [row["control_of"]])
    return "–"


def render(rows: Sequence[dict], full: str | None) -> list[str]:
    """The report's sections on public data (Markdown lines; none without such cells)."""
    lines: list[str] = []
    mixed = [r for r in rows if r.get("public") or r.get("pack") or r.get("control")
             or r.get("control_of")]
    if mixed:
        lines += ["## Public text beside the owner's material", "",
                  "| cell | public share of target tokens | public pairs | packed examples "
                  "(from fragments) | BLEU | its control | BLEU − control | p |",
                  "|---|---:|---:|---|---:|---|---:|---:|"]
        served: dict[str, list[str]] = {}  # control → the cells it is the control of
        for r in rows:
            if r.get("control"):
                served.setdefault(r["control"]["name"], []).append(r["name"])
        for r in mixed:
            pub, pack, ctl = r.get("public") or {}, r.get("pack") or {}, r.get("control")
            packed = (f"{pack['examples']:,} ({pack['fragments']:,})" if pack else "–")
            pairs = (f"{pub['per_step']:,} a step" if pub.get("per_step")
                     else or_dash(pub.get("pairs"), "{:,}"))
            diff = (r["bleu"] - ctl["other_bleu"]) if ctl and r.get("bleu") is not None \
                and ctl.get("other_bleu") is not None else None
            p_value = ctl.get("p_value") if ctl else None
            lines.append(
                f"| {r['name']} | {or_dash(pub.get('share'), '{:.1%}')} | "
                f"{pairs} | {packed} | {or_dash(r.get('bleu'))} | "
                f"{_control_cell(r, served)} | "
                f"{or_dash(diff, '{:+.2f}')} | {or_dash(p_value, '{:.3f}')} |")
        lines += ["", "A control trains on the same public pairs alone, by the same rule "
                  "(early stopping and cap, a DP release's fixed passes, a composed cell's "
                  "warm start, or DP-SGD's planned steps with no owner pair and no noise): "
                  "what a mixed cell gains over it is what it owes to the "
                  "owner's material (p: sacrebleu's paired bootstrap, the cell against its "
                  "control on the same test lines). Public pairs and packing read nothing "
                  "private: a release's guarantee and its reconstruction audit are "
                  "unchanged."]
        by_records = [r["name"] for r in mixed if (r.get("control") or {}).get("by_records")]
        if by_records:
            lines.append(f"By records ({', '.join(by_records)}): a control declared for "
                         "another cell (`like`), found to be this cell's by the two runs' "
                         "finetune records: the "
                         "same public pairs (the same files by hash, seed, filter and count) "
                         "and the same training rule.")
        lines.append("")
    lp = [r for r in rows if r.get("lp")]
    if lp:
        shares = lp_shares(rows, full)
        lines += ["## With a length penalty chosen on public text", "",
                  "| cell | length penalty | BLEU | chrF | len ratio | BP | share of the "
                  "full gain | BLEU without |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in lp:
            x = r["lp"]
            star = "*" if (x.get("p_bleu") or 1) < 0.05 else ""
            lines.append(f"| {r['name']} | {or_dash(x.get('lenpen'), '{:g}')} | "
                         f"{or_dash(x.get('bleu'))}{star} | "
                         f"{or_dash(x.get('chrf'), '{:.1f}')} | "
                         f"{or_dash(x.get('length_ratio'), '{:.3f}')} | "
                         f"{or_dash(x.get('brevity_penalty'), '{:.3f}')} | "
                         f"{or_dash(shares.get(r['name']), '{:.0%}')} | {or_dash(r.get('bleu'))} |")
        lines += ["", "Each model's penalty is the candidate with the best BLEU on the first "
                  "lines of the public validation text (`nmtfrag length-penalty`): the "
                  "choice reads nothing of the owner's. Shares here are against the baseline "
                  "and the full-sentence cell decoded the same way; `*`: p < 0.05 against "
                  "the baseline so decoded.", ""]
    return lines
