"""Translate a test set and score it with SacreBLEU: the report of Kim et al. (2021).

Kim, Bisazza & Turkmen (2021) report SacreBLEU per domain (their Table 2) and the average
output vs reference length (their Figure 3: phrase-trained models produce shorter
output). `evaluate` gives both, plus chrF, the signatures, the brevity penalty, the
system/reference length ratio and, against a baseline evaluation of the same test set,
sacrebleu's paired bootstrap resampling (Koehn 2004).

Text handling:
- the source is translated through the model's own pipeline (`nmtfrag.translate.fairseq_engine`);
  with `pretokenized=True` the source and reference are Moses-tokenised (like
  ../shared/data/indomain): the source is detokenised and re-tokenised as the model's
  pipeline expects (see nmtfrag.data.bpe, mode "moses") and the reference is
  Moses-detokenised before scoring, since SacreBLEU scores detokenised text with its
  own tokenisation; the report says so;
- hypotheses are detokenised, with `<P>`/`</P>` removed.
Decoding engine: fairseq (default, the reference) or CTranslate2 (`engine`, see
nmtfrag.translate.ct2_engine); the text handling above is the same code for both, and the report
records the engine, its compute type and the translation time.
Lengths "in tokens" are SacreBLEU's 13a tokens, the ones BLEU counts.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import cast

from ..errors import InputError
from ..fileio import public_name
from ..fileio import atomic_writer, read_json, sha256_file, tool_versions, write_json
from ..outdir import prepare_output_dir


def read_lines(path: str) -> list[str]:
    """The lines of a UTF-8 text file without their endings (checked first: a bad file
    is an InputError naming it), as `translate` and scoring read hypotheses and sources:
    CRLF and a byte-order mark normalised as extract normalises its corpus
    (nmtfrag.data.corpus.read_text_lines), so a source, reference or hypothesis scores
    the same with or without them."""
    from ..data.corpus import read_text_lines

    return read_text_lines(path)


def pretokenized_alias(pretokenized: bool, tokenized: bool | None, caller: str) -> bool:
    """`pretokenized`, or `tokenized`, its older keyword (a DeprecationWarning): the
    command line says --pretokenized, and so does every other stage's Python call."""
    if tokenized is None:
        return pretokenized
    import warnings

    warnings.warn(f"{caller}(tokenized=...) is deprecated: use pretokenized=...",
                  DeprecationWarning, stacklevel=3)
    if pretokenized and not tokenized:
        raise TypeError(f"{caller}: give pretokenized or its older name tokenized, not "
                        f"both")
    return tokenized


def score(hyps: Sequence[str], refs: Sequence[str],
          baseline_hyps: Sequence[str] | None = None,
          bootstrap_samples: int = 1000) -> tuple[dict, list[int], list[int]]:
    """SacreBLEU figures for detokenised hypotheses vs references (same length)."""
    from sacrebleu.metrics import BLEU, CHRF
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses for {len(refs)} references")
    bleu, chrf = BLEU(), CHRF()
    b = bleu.corpus_score(hyps, [refs])
    c = chrf.corpus_score(hyps, [refs])
    tok = Tokenizer13a()
    hyp_len = [len(tok(h).split()) for h in hyps]
    ref_len = [len(tok(r).split()) for r in refs]
    n = max(1, len(hyps))
    result = {
        "bleu": round(b.score, 2), "chrf": round(c.score, 2),
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
        "bleu_detail": str(b),
        "brevity_penalty": round(b.bp, 4), "length_ratio": round(b.sys_len / b.ref_len, 4)
        if b.ref_len else None,
        "sys_len": b.sys_len, "ref_len": b.ref_len,
        "precisions": [round(p, 2) for p in b.precisions],
        "avg_output_tokens": round(sum(hyp_len) / n, 2),
        "avg_reference_tokens": round(sum(ref_len) / n, 2),
        "sentences": len(hyps),
    }
    if baseline_hyps is not None:
        result["significance"] = paired_bootstrap(baseline_hyps, hyps, refs,
                                                  bootstrap_samples)
    return result, hyp_len, ref_len


def paired_bootstrap(base_hyps: Sequence[str], hyps: Sequence[str], refs: Sequence[str],
                     n_samples: int = 1000) -> dict:
    """sacrebleu's paired bootstrap resampling, baseline vs this system (BLEU, chrF)."""
    from sacrebleu.metrics import BLEU, CHRF
    from sacrebleu.significance import PairedTest, Result

    test = PairedTest([("baseline", base_hyps), ("system", hyps)],
                      {"BLEU": BLEU(references=[refs]), "chrF": CHRF(references=[refs])},
                      references=None, test_type="bs", n_samples=n_samples)
    sigs, scores = test()
    out = {"test": "paired bootstrap resampling (sacrebleu)", "samples": n_samples,
           "seed": os.environ.get("SACREBLEU_SEED", "12345")}
    for key in [k for k in scores if k != "System"]:
        metric = "chrF" if key.lower().startswith("chrf") else key
        # a metric's column holds Results (only the "System" column holds names)
        base, sys_ = cast("list[Result]", scores[key])
        out[metric] = {"baseline": round(base.score, 2),
                       "baseline_mean": _r(base.mean), "baseline_ci95": _r(base.ci),
                       "system": round(sys_.score, 2), "system_mean": _r(sys_.mean),
                       "system_ci95": _r(sys_.ci), "p_value": _r(sys_.p_value, 4),
                       "significant_at_0.05": sys_.p_value is not None
                       and sys_.p_value < 0.05}
        out[metric + "_signature"] = str(sigs[key]) if key in sigs else None
    return out


def _r(x, nd=2):
    return None if x is None else round(float(x), nd)


def plot_lengths(hyp_len: list[int], ref_len: list[int], path: str, title: str) -> None:
    """PNG: output length vs reference length per sentence, with bucket means."""
    import logging

    logging.getLogger("matplotlib").setLevel(logging.WARNING)  # before its import logs
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4.5), dpi=120)
    ax.scatter(ref_len, hyp_len, s=6, alpha=0.35, label="sentences")
    top = max(ref_len + hyp_len + [1])
    ax.plot([0, top], [0, top], "k--", lw=0.8, label="output = reference")
    buckets: dict[int, list[tuple[int, int]]] = {}
    for r, h in zip(ref_len, hyp_len):
        buckets.setdefault(min(r // 10, 10), []).append((r, h))
    xs = sorted(buckets)
    ax.plot([sum(r for r, _ in buckets[b]) / len(buckets[b]) for b in xs],
            [sum(h for _, h in buckets[b]) / len(buckets[b]) for b in xs],
            "r-o", ms=3, label="mean per 10-token bucket")
    ax.set_xlabel("reference length (tokens)")
    ax.set_ylabel("output length (tokens)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    with atomic_writer(path, "wb") as f:
        fig.savefig(f, format="png")
    plt.close(fig)


def _load_baseline(baseline, ref_sha, n):
    if not os.path.isdir(baseline):
        raise InputError(f"--baseline {baseline}: not a directory (expected an earlier "
                         f"`nmtfrag evaluate` output)")
    hyp = os.path.join(baseline, "hyp.txt")
    rep = os.path.join(baseline, "report.json")
    for p in (hyp, rep):
        if not os.path.isfile(p):
            raise InputError(f"--baseline {baseline}: missing {os.path.basename(p)}")
    report = read_json(rep)
    if report.get("inputs_sha256", {}).get("ref") != ref_sha or \
            report.get("params", {}).get("lines") != n:
        raise InputError(f"--baseline {baseline} was evaluated on a different reference "
                         f"or line range: paired tests need the same test set")
    hyps = read_lines(hyp)
    if len(hyps) != n:
        raise InputError(f"{hyp} has {len(hyps)} lines, expected {n}")
    return hyps, report


@dataclass(frozen=True)
class Decoding:
    """How `model` translates: the engine and its settings (one group, so `evaluate`'s
    own parameters are about what is scored and where the report goes)."""
    engine: str = "fairseq"
    beam: int = 5
    max_tokens: int = 4000
    batch_size: int | None = None
    device: str = "cpu"
    fp16: bool = False
    checkpoint: str | None = None
    compute_type: str | None = None
    ct2_cache: str | None = None
    threads: int | None = None
    max_len_a: float | None = None
    max_len_b: int | None = None
    lenpen: float = 1.0


def evaluate(out: str, *, src: str, ref: str, model: str | None = None,
             hyp: str | None = None, decoding: Decoding = Decoding(),
             src_lang: str = "de", tgt_lang: str = "en", pretokenized: bool = False,
             baseline: str | None = None, plot: bool = False, first: int | None = None,
             bootstrap_samples: int = 1000, overwrite: bool = False,
             name: str | None = None, show_progress: bool = False,
             tokenized: bool | None = None) -> dict:
    """Translate `src` with `model` (or take `hyp`), score against `ref`, write reports.

    The output length limit (`decoding.max_len_a`, `.max_len_b`) defaults to fairseq's
    (0, 200); the report records the values used. `tokenized` is the deprecated name of
    `pretokenized` (the command's --pretokenized), still accepted.

    Returns the report dict (also OUT/report.json).
    """
    from ..data.bpe import moses_detokenize

    pretokenized = pretokenized_alias(pretokenized, tokenized, "evaluate")
    d = decoding
    _check_request(model, hyp, d.engine, d.compute_type, d.ct2_cache, src_lang, tgt_lang,
                   d.checkpoint, src, ref)
    src_lines, ref_lines = read_lines(src), read_lines(ref)
    if len(src_lines) != len(ref_lines):
        raise InputError(f"{src} has {len(src_lines)} lines but {ref} has "
                         f"{len(ref_lines)}: source and reference must be line-aligned")
    if first:
        src_lines, ref_lines = src_lines[:first], ref_lines[:first]
    n = len(src_lines)
    ref_sha = sha256_file(ref)
    base_hyps = base_report = None
    if baseline:
        base_hyps, base_report = _load_baseline(baseline, ref_sha, n)
    out = prepare_output_dir(out, overwrite, inputs=[model, src, ref, hyp, baseline],
                             kind="nmtfrag-evaluation")

    settings: dict = {}
    if model is not None:
        hyps, settings = translate_lines(
            model, src_lines, "moses" if pretokenized else "raw", show_progress,
            dict(asdict(d), src_lang=src_lang, tgt_lang=tgt_lang))
    else:
        hyps = _read_hypotheses(hyp, first, ref, n)
    if len(hyps) != n:
        raise RuntimeError(f"{n} source lines but {len(hyps)} hypotheses")
    refs = [moses_detokenize(r, tgt_lang) for r in ref_lines] if pretokenized else ref_lines

    result, hyp_len, ref_len = score(hyps, refs, base_hyps, bootstrap_samples)
    with atomic_writer(os.path.join(out, "hyp.txt")) as f:
        f.writelines(h + "\n" for h in hyps)
    report = {
        "kind": "nmtfrag-evaluation",
        "name": name or (os.path.basename(os.path.normpath(model)) if model else
                         # _check_request: without a model, a --hyp file is given
                         os.path.basename(cast(str, hyp))),
        "scores": result,
        "reference_handling": ("reference Moses-detokenised (sacremoses, "
                               f"{tgt_lang}) before scoring; source detokenised and "
                               "re-tokenised with the model's hub pipeline"
                               if pretokenized else "reference scored as given"),
        "hypothesis_handling": "BPE removed, <P>/</P> removed, Moses-detokenised"
                               if model else "scored as given",
        "params": {"src": public_name(src), "ref": public_name(ref),
                   "hyp": public_name(hyp),
                   "tokenized": pretokenized, "lines": n, "first": first,
                   "baseline": public_name(baseline),
                   "bootstrap_samples": bootstrap_samples if baseline else None,
                   "src_lang": src_lang, "tgt_lang": tgt_lang, "generation": settings},
        "inputs_sha256": {"src": sha256_file(src), "ref": ref_sha,
                          **({"hyp": sha256_file(hyp)} if hyp else {})},
        "tool_versions": tool_versions("sacrebleu", "fairseq-fixed", "torch", "sacremoses",
                                       *(["ctranslate2"] if settings.get("engine") ==
                                         "ctranslate2" else [])),
    }
    _write_reports(out, report, base_report, hyp_len, ref_len, plot)
    return report


def _check_request(model, hyp, engine, compute_type, ct2_cache, src_lang, tgt_lang,
                   checkpoint, src, ref):
    """Refuse a request that names no system or two, engine options without a model,
    or one file as source and reference; a mistyped --model is refused before anything
    is read."""
    from ..data.corpus import check_distinct_sides

    check_distinct_sides(src, ref, "--src/--ref", "the source and the reference")
    if (model is None) == (hyp is None):
        raise InputError("give exactly one of --model (translate) or --hyp (score a file)")
    if hyp is not None and (engine != "fairseq" or compute_type or ct2_cache):
        raise InputError("--engine, --compute-type and --ct2-cache need --model "
                         "(--hyp is scored as given)")
    if model is not None:
        from ..model_dir import check_model_files

        check_model_files(model, src_lang, tgt_lang, checkpoint, flag="--model")


def translate_lines(model, src_lines, mode, show_progress, options):
    """Hypotheses of `model` for `src_lines`, and the generation settings the report
    records (engine, beam, length limit, truncated sources, model, seconds)."""
    import time

    from .fairseq_engine import load_translator
    from .translator import MAX_LEN_A, MAX_LEN_B

    max_len_a, max_len_b = options.pop("max_len_a"), options.pop("max_len_b")
    tr = load_translator(model, options.pop("engine"), **options,
                         max_len_a=MAX_LEN_A if max_len_a is None else max_len_a,
                         max_len_b=MAX_LEN_B if max_len_b is None else max_len_b)
    t0 = time.perf_counter()
    hyps = tr.translate(src_lines, mode=mode, show_progress=show_progress)
    settings = dict(tr.settings, truncated_sources=tr.truncated,
                    model=public_name(tr.md.path),
                    translation_seconds=round(time.perf_counter() - t0, 2))
    return hyps, settings


def _read_hypotheses(hyp, first, ref, n):
    """The hypotheses of a --hyp file (its first `first` lines), one per reference."""
    hyps = read_lines(hyp)
    if first:
        hyps = hyps[:first]
    if len(hyps) != n:
        raise InputError(f"{hyp} has {len(hyps)} lines but {ref} has {n}")
    return hyps


def _write_reports(out, report, base_report, hyp_len, ref_len, plot):
    """OUT/lengths.png (if `plot`; recorded in the report), report.md, report.json and
    manifest.json."""
    if plot:
        result = report["scores"]
        plot_lengths(hyp_len, ref_len, os.path.join(out, "lengths.png"),
                     f"{report['name']}: output vs reference length "
                     f"(avg {result['avg_output_tokens']} vs {result['avg_reference_tokens']})")
        report["plot"] = "lengths.png"
    with atomic_writer(os.path.join(out, "report.md")) as f:
        f.write(render_markdown(report, base_report))
    write_json(os.path.join(out, "report.json"), report)
    write_json(os.path.join(out, "manifest.json"),
               {k: report[k] for k in ("kind", "params", "inputs_sha256", "tool_versions")})


def render_markdown(report: dict, base_report: dict | None = None) -> str:
    s = report["scores"]
    gen = report.get("params", {}).get("generation") or {}
    engine = ""
    if gen.get("engine"):
        ct = gen.get("compute_type")
        engine = (f" Translated with {gen['engine']}" + (f" ({ct})" if ct else "") +
                  f", beam {gen.get('beam')}" +
                  (f", at most int({gen['max_len_a']:g} × source tokens + "
                   f"{gen['max_len_b']}) output tokens" if "max_len_a" in gen else "") +
                  (f", in {gen['translation_seconds']} s" if "translation_seconds" in gen
                   else "") + ".")
    lines = [f"# Evaluation: {report['name']}", "",
             f"{s['sentences']} sentences; {report['reference_handling']}.{engine}", "",
             "| BLEU | chrF | BP | ratio | hyp len | ref len | avg output tokens | "
             "avg reference tokens |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|",
             f"| {s['bleu']:.2f} | {s['chrf']:.2f} | {s['brevity_penalty']:.3f} | "
             f"{s['length_ratio']} | {s['sys_len']} | {s['ref_len']} | "
             f"{s['avg_output_tokens']} | {s['avg_reference_tokens']} |", "",
             f"- BLEU signature: `{s['bleu_signature']}`",
             f"- chrF signature: `{s['chrf_signature']}`",
             f"- `{s['bleu_detail']}`"]
    sig = s.get("significance")
    if sig:
        lines += ["", f"## Against the baseline ({sig['test']}, {sig['samples']} samples)",
                  "", "| metric | baseline | system | p | significant (p < 0.05) |",
                  "|---|---:|---:|---:|---|"]
        for m in ("BLEU", "chrF"):
            r = sig[m]
            lines.append(f"| {m} | {r['baseline']:.2f} ± {r['baseline_ci95']} | "
                         f"{r['system']:.2f} ± {r['system_ci95']} | {r['p_value']} | "
                         f"{'yes' if r['significant_at_0.05'] else 'no'} |")
    if report.get("plot"):
        lines += ["", f"![output vs reference length]({report['plot']})"]
    return "\n".join(lines) + "\n"
