"""Exposure of planted canaries in a trained translation model, and verbatim extraction.

Carlini et al. (2019), "The Secret Sharer" (USENIX Security): the exposure of a secret
s from a space R is log2|R| − log2 rank(s), where candidates are ranked by the model's
likelihood; a model that never saw s ranks it at random (expected exposure ≈ 1.4 bits),
one that memorised it ranks it first (exposure log2|R|). When R is too big to score
every candidate, a skew-normal is fitted to the scores of a uniform sample and the
exposure is −log2 P(score ≥ score(s)) under the fit (Carlini et al. §4.3), clipped at
log2|R|.

Seq2seq specifics (DESIGN.md, "Exposure for seq2seq"):
- a candidate's score is the teacher-forced log-probability of the canary's target with
  that candidate in the secret slot, given the canary's source (encoder on the source,
  decoder on the target prefix), summed over the subword tokens of the secret span
  only: different secrets split into different numbers of BPE tokens, so a per-token
  mean would favour long splits, and the tokens outside the span are the same for
  every candidate. fairseq's hub `score()` does not support translation, so the model
  is called directly.
- extraction: does beam search on the canary's source output the secret verbatim?

The model is loaded with `nmtfrag.translate.fairseq_engine.Translator` (the model's own BPE pipeline,
ensembles average probabilities).
"""
from __future__ import annotations

import math
import os
import random
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import InputError
from ..fileio import public_name
from ..fileio import MANIFEST, atomic_writer, sha256_file, tool_versions, write_json
from ..outdir import prepare_output_dir
from .canaries import index_of_secret, read_canaries, secret_from_index

if TYPE_CHECKING:  # generate loads fairseq: import it only to score
    from ..translate.fairseq_engine import Translator
    from ..randomness import Seed


class CanaryScorer:
    """Teacher-forced secret-span log-probabilities with a loaded Translator."""

    def __init__(self, translator: Translator, batch_size: int = 256,
                 mode: str = "raw") -> None:
        self.tr = translator
        self.batch_size = batch_size
        self.mode = mode

    def _sub(self, text, lang):
        sub, _ = self.tr.bpe.encode_lines([text], lang, self.mode, keep_tags=False)
        return sub[0].split()

    def _ids(self, subwords, dictionary):
        return [dictionary.index(w) for w in subwords]

    def target_pieces(self, template: str) -> tuple[list[str], list[str]]:
        """(prefix subwords, suffix subwords) of a target template around `{secret}`."""
        if template.count("{secret}") != 1:
            raise InputError(f"canary target template needs exactly one {{secret}}: "
                             f"{template!r}")
        before, after = template.split("{secret}")
        lang = self.tr.tgt_lang
        pre = self._sub(before, lang) if before.strip() else []
        post = self._sub(after, lang) if after.strip() else []
        return pre, post

    def scores(self, src: str, template: str, secrets: Sequence[str]) -> list[float]:
        """Summed log-probability of each secret's tokens (list of floats)."""
        import torch

        tr = self.tr
        src_ids = self._ids(self._sub(src, tr.src_lang), tr.src_dict) + [tr.src_dict.eos()]
        pre, post = self.target_pieces(template)
        td = tr.tgt_dict
        pre_ids, post_ids = self._ids(pre, td), self._ids(post, td)
        # check once that pieces encode as the whole sentence does
        whole = self._sub(template.replace("{secret}", secrets[0]), tr.tgt_lang)
        sec0 = self._sub(secrets[0], tr.tgt_lang)
        if whole != pre + sec0 + post:
            raise RuntimeError(f"BPE of the target with its secret differs from the pieces: "
                               f"{whole} vs {pre + sec0 + post}")
        out: list[float] = []
        dev = tr.device  # the model's device (cpu or cuda)
        src_t = torch.tensor([src_ids], dtype=torch.long, device=dev)
        src_len = torch.tensor([len(src_ids)], dtype=torch.long, device=dev)
        with torch.no_grad():
            encs = [m.encoder(src_t, src_lengths=src_len) for m in tr.models]
            for start in range(0, len(secrets), self.batch_size):
                chunk = secrets[start:start + self.batch_size]
                seqs, spans = [], []
                for s in chunk:
                    sid = self._ids(self._sub(s, tr.tgt_lang), td)
                    seqs.append(pre_ids + sid + post_ids + [td.eos()])
                    spans.append((len(pre_ids), len(pre_ids) + len(sid)))
                T = max(len(x) for x in seqs)
                tgt = torch.full((len(seqs), T), td.pad(), dtype=torch.long)
                prev = torch.full((len(seqs), T), td.pad(), dtype=torch.long)
                mask = torch.zeros((len(seqs), T), dtype=torch.bool)
                for i, (x, (a, b)) in enumerate(zip(seqs, spans)):
                    tgt[i, :len(x)] = torch.tensor(x)
                    prev[i, 0] = td.eos()
                    prev[i, 1:len(x)] = torch.tensor(x[:-1])
                    mask[i, a:b] = True
                order = torch.zeros(len(seqs), dtype=torch.long, device=dev)
                tgt, prev, mask = tgt.to(dev), prev.to(dev), mask.to(dev)
                lps = []
                for m, enc in zip(tr.models, encs):
                    enc_b = m.encoder.reorder_encoder_out(enc, order)
                    net = m.decoder(prev, encoder_out=enc_b)
                    lp = m.get_normalized_probs(net, log_probs=True)
                    lps.append(lp.gather(-1, tgt.unsqueeze(-1)).squeeze(-1))
                lp = lps[0] if len(lps) == 1 else (
                    torch.logsumexp(torch.stack(lps), 0) - math.log(len(lps)))
                out.extend((lp.double() * mask).sum(1).tolist())
        return out


def _skewnorm_exposure(sample_scores, true_score, log2_size):
    """Exposure from a skew-normal fit of the sampled candidates' scores. scipy's fit can
    fail to converge (a few hundred nearly equal scores, as from a barely trained model);
    then the normal distribution (skewness fixed at 0) is fitted instead, and the fit
    record says so."""
    from scipy.stats import skewnorm
    from scipy.stats import FitError

    fit = {}
    try:
        a, loc, scale = skewnorm.fit(sample_scores)
    except FitError as exc:
        a, loc, scale = skewnorm.fit(sample_scores, f0=0.0)
        fit["fallback"] = f"normal (skew-normal fit failed: {exc})"
    logsf = skewnorm.logsf(true_score, a, loc, scale)
    exposure = -logsf / math.log(2)
    return min(max(exposure, 0.0), log2_size), {"a": a, "loc": loc, "scale": scale, **fit}


def canary_exposure(scorer: CanaryScorer, canary: dict, enumerate_limit: int = 10000,
                    samples: int = 2000, seed: int = 1) -> dict:
    """Exposure of one canary record (see nmtfrag.audit.canaries for its fields)."""
    space, size = canary["space"], canary["space_size"]
    true = canary["secret"]
    true_idx = index_of_secret(space, true)
    log2_size = math.log2(size)
    if size <= enumerate_limit:
        secrets = [secret_from_index(space, i) for i in range(size)]
        sc = scorer.scores(canary["src"], canary["tgt_template"], secrets)
        t = sc[true_idx]
        rank = 1 + sum(1 for x in sc if x > t)
        return {"method": "enumerated", "candidates": size, "log2_space": log2_size,
                "rank": rank, "exposure": log2_size - math.log2(rank),
                "secret_logprob": t}
    rng = random.Random(f"{seed}-{canary['name']}")
    drawn: set[int] = set()
    while len(drawn) < min(samples, size - 1):
        i = rng.randrange(size)
        if i != true_idx:
            drawn.add(i)
    idx = sorted(drawn)
    secrets = [true] + [secret_from_index(space, i) for i in idx]
    sc = scorer.scores(canary["src"], canary["tgt_template"], secrets)
    t, rest = sc[0], sc[1:]
    above = sum(1 for x in rest if x > t)
    exposure, fit = _skewnorm_exposure(rest, t, log2_size)
    rank_est = 1 + above / len(rest) * (size - 1)
    return {"method": "skew-normal", "candidates": len(rest), "log2_space": log2_size,
            "sample_above": above, "rank_estimate_from_sample": rank_est,
            "exposure_from_sample_rank": log2_size - math.log2(rank_est),
            "exposure": exposure, "fit": fit, "secret_logprob": t}


def contains_secret(hypothesis: str, secret: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(secret) + r"(?!\w)", hypothesis) is not None


def measure_exposure(translator: Translator, canaries: Sequence[dict], *,
                     enumerate_limit: int = 10000, samples: int = 2000,
                     seed: int = 1, beam: bool = True, show_progress: bool = False,
                     batch_size: int = 256) -> tuple[list[dict], dict]:
    """Per-canary results (exposure, extraction) and a summary per repeat count."""
    from ..fileio import progress

    scorer = CanaryScorer(translator, batch_size=batch_size)
    hyps = translator.translate([c["src"] for c in canaries]) if beam else [None] * len(canaries)
    rows = []
    for c, hyp in zip(progress(canaries, desc="canaries", disable=not show_progress)
                      if show_progress else canaries, hyps):
        r = canary_exposure(scorer, c, enumerate_limit, samples, seed)
        r.update({"name": c["name"], "kind": c["kind"], "repeats": c["repeats"],
                  "secret": c["secret"]})
        if hyp is not None:
            r["hypothesis"] = hyp
            r["extracted"] = contains_secret(hyp, c["secret"])
        rows.append(r)
    return rows, summarize(rows)


def summarize(rows: Sequence[dict]) -> dict:
    by: dict[int, list[dict]] = {}
    for r in rows:
        by.setdefault(r["repeats"], []).append(r)
    out = {}
    for rep in sorted(by):
        rs = by[rep]
        ex = sorted(r["exposure"] for r in rs)
        out[str(rep)] = {
            "canaries": len(rs),
            "exposure_mean": round(sum(ex) / len(ex), 4),
            "exposure_median": round(ex[len(ex) // 2] if len(ex) % 2 else
                                     (ex[len(ex) // 2 - 1] + ex[len(ex) // 2]) / 2, 4),
            "exposure_max": round(ex[-1], 4),
            "log2_space_mean": round(sum(r["log2_space"] for r in rs) / len(rs), 4),
            "extracted": sum(1 for r in rs if r.get("extracted")),
        }
    return out


def audit_exposure(model: str, canaries_path: str, out: str, *, src_lang: str = "de",
                   tgt_lang: str = "en", checkpoint: str | None = None,
                   enumerate_limit: int = 10000, samples: int = 2000,
                   seed: int | Seed | None = None, beam: int = 5, batch_size: int = 256,
                   device: str = "cpu", overwrite: bool = False,
                   show_progress: bool = False) -> dict:
    """Load `model` (a WMT19-layout dir), measure every canary, write the report.
    `seed` None: the candidate sample comes from secret randomness."""
    from ..translate.fairseq_engine import Translator
    from ..randomness import resolve_seed

    from ..model_dir import check_model_files

    seed = resolve_seed(seed)
    check_model_files(model, src_lang, tgt_lang, checkpoint, flag="--model")
    canaries = read_canaries(canaries_path)
    out = prepare_output_dir(out, overwrite, inputs=[model, canaries_path],
                             kind="nmtfrag-exposure-audit")
    translator = Translator(model, src_lang, tgt_lang, checkpoint=checkpoint, beam=beam,
                            device=device)
    rows, summary = measure_exposure(translator, canaries, enumerate_limit=enumerate_limit,
                                     samples=samples, seed=seed.value,
                                     show_progress=show_progress,
                                     batch_size=batch_size)
    report = {"kind": "nmtfrag-exposure-audit", "model": public_name(model),
              "canaries_file": public_name(canaries_path),
              "params": {"enumerate_limit": enumerate_limit, "samples": samples,
                         "seed": seed.value if seed.reproducible else None, "beam": beam,
                         "randomness": seed.source},
              "summary_by_repeats": summary, "canaries": rows}
    write_json(os.path.join(out, "report.json"), report)
    with atomic_writer(os.path.join(out, "report.md")) as f:
        f.write(render_markdown(report))
    write_json(os.path.join(out, MANIFEST), {
        "kind": "nmtfrag-exposure-audit", "params": report["params"],
        "inputs": {"canaries": sha256_file(canaries_path),
                   "checkpoints": {os.path.basename(p): sha256_file(p)
                                   for p in translator.md.checkpoints}},
        "counts": {"canaries": len(rows)}, "files": ["report.json", "report.md"],
        "tool_versions": tool_versions("nmtfrag", "fairseq-fixed", "torch", "scipy"),
    })
    return report


def render_markdown(report: dict) -> str:
    lines = ["# Canary exposure", "", f"Model: `{report['model']}`", "",
             "| repeats | canaries | exposure mean | median | max | log2 |R| (mean) | "
             "extracted by beam search |", "|---|---|---|---|---|---|---|"]
    for rep, s in report["summary_by_repeats"].items():
        lines.append(f"| {rep} | {s['canaries']} | {s['exposure_mean']:.2f} | "
                     f"{s['exposure_median']:.2f} | {s['exposure_max']:.2f} | "
                     f"{s['log2_space_mean']:.1f} | {s['extracted']} |")
    lines += ["", "Repeats 0: canaries drawn the same way but never inserted (the "
              "reference: exposure near zero, about 1.4 bits on average for a random rank).",
              "", "| canary | kind | repeats | exposure | method | extracted |",
              "|---|---|---|---|---|---|"]
    for r in report["canaries"]:
        lines.append(f"| {r['name']} | {r['kind']} | {r['repeats']} | {r['exposure']:.2f} | "
                     f"{r['method']} | {r.get('extracted', '–')} |")
    return "\n".join(lines) + "\n"
