"""A beam-search length penalty chosen on public text, for one model.

Why: a model fine-tuned on fragments stops early, and its output is shorter than its
baseline's (the brevity penalty then takes most of its gain). Beam search's length
penalty (fairseq's --lenpen, CTranslate2's length_penalty: hypotheses ranked by
log-probability / length^P) trades that back. Choosing P on the owner's test or
validation set would make the choice a function of private data; this stage decodes
only a public validation set (e.g. newstest) with each candidate and keeps the one with
the best BLEU there. It opens the model directory and the public files only.

OUT/report.json holds every candidate's BLEU, chrF and length ratio; OUT/manifest.json
the chosen value (`evaluate --lenpen-from OUT` reads it).
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, replace

from ..errors import InputError
from ..fileio import (MANIFEST, atomic_writer, public_name, read_json, sha256_file,
                      tool_versions, write_json)
from ..outdir import prepare_output_dir
from .evaluate import Decoding, pretokenized_alias, read_lines, score, translate_lines

KIND = "nmtfrag-length-penalty"
CANDIDATES = (0.8, 1.0, 1.3, 1.6, 2.0)


def choose_length_penalty(out: str, *, model: str, src: str, ref: str,
                          decoding: Decoding = Decoding(),
                          candidates: Sequence[float] = CANDIDATES, first: int | None = 500,
                          src_lang: str = "de", tgt_lang: str = "en",
                          pretokenized: bool = False, overwrite: bool = False,
                          tokenized: bool | None = None) -> dict:
    """Decode the first `first` lines of the public `src` with each candidate penalty and
    keep the one with the highest BLEU against `ref` (a tie: the one nearest 1, no
    penalty). Writes OUT/report.json, report.md and manifest.json; returns the manifest.
    `tokenized`: the deprecated name of `pretokenized`, as in evaluate."""
    from ..data.bpe import moses_detokenize

    pretokenized = pretokenized_alias(pretokenized, tokenized, "choose_length_penalty")

    if not candidates or any(not (isinstance(c, (int, float)) and 0 < c <= 10)
                             for c in candidates):
        raise InputError(f"--candidates must be numbers in (0, 10], got {list(candidates)}")
    src_lines, ref_lines = read_lines(src), read_lines(ref)
    if len(src_lines) != len(ref_lines):
        raise InputError(f"{src} has {len(src_lines)} lines but {ref} has {len(ref_lines)}")
    if first:
        src_lines, ref_lines = src_lines[:first], ref_lines[:first]
    if pretokenized:
        ref_lines = [moses_detokenize(r, tgt_lang) for r in ref_lines]
    out = prepare_output_dir(out, overwrite, inputs=[model, src, ref], kind=KIND)
    rows = []
    for lp in sorted(set(float(c) for c in candidates)):
        hyps, _ = translate_lines(model, src_lines, "moses" if pretokenized else "raw", False,
                             dict(asdict(replace(decoding, lenpen=lp)), src_lang=src_lang,
                                  tgt_lang=tgt_lang))
        s, _, _ = score(hyps, ref_lines)
        rows.append({"lenpen": lp, "bleu": s["bleu"], "chrf": s["chrf"],
                     "length_ratio": s["length_ratio"],
                     "brevity_penalty": s["brevity_penalty"]})
    best = max(rows, key=lambda r: (r["bleu"], -abs(r["lenpen"] - 1.0)))
    manifest = {
        "kind": KIND, "lenpen": best["lenpen"],
        "chosen_by": "highest BLEU on the public validation text (ties: nearest 1)",
        "params": {"model": public_name(model), "src": public_name(src),
                   "ref": public_name(ref), "lines": len(src_lines),
                   "candidates": [r["lenpen"] for r in rows], "engine": decoding.engine,
                   "beam": decoding.beam, "tokenized": pretokenized},
        "inputs_sha256": {"src": sha256_file(src), "ref": sha256_file(ref)},
        "tool_versions": tool_versions("sacrebleu"),
    }
    write_json(os.path.join(out, "report.json"), {"candidates": rows, **manifest})
    with atomic_writer(os.path.join(out, "report.md")) as f:
        f.write(_markdown(rows, best["lenpen"], len(src_lines)))
    write_json(os.path.join(out, MANIFEST), manifest)
    return manifest


def _markdown(rows: list[dict], chosen: float, lines: int) -> str:
    out = [f"# Length penalty chosen on public text ({lines:,} lines)", "",
           "| lenpen | BLEU | chrF | len ratio | BP |", "|---:|---:|---:|---:|---:|"]
    for r in rows:
        mark = " ← chosen" if r["lenpen"] == chosen else ""
        out.append(f"| {r['lenpen']:g}{mark} | {r['bleu']:.2f} | {r['chrf']:.1f} | "
                   f"{r['length_ratio']} | {r['brevity_penalty']} |")
    return "\n".join(out) + "\n"


def chosen_lenpen(directory: str) -> float:
    """The penalty a finished `nmtfrag length-penalty` output chose (InputError if DIR is
    none)."""
    path = os.path.join(directory, MANIFEST)
    if not os.path.isfile(path):
        raise InputError(f"--lenpen-from {directory}: no manifest.json (not a finished "
                         f"`nmtfrag length-penalty` output)")
    man = read_json(path)
    if man.get("kind") != KIND or not isinstance(man.get("lenpen"), (int, float)):
        raise InputError(f"--lenpen-from {directory}: not a `nmtfrag length-penalty` output")
    return float(man["lenpen"])
