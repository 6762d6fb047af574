"""A differentially private vocabulary: noisy thresholded word histogram → BPE codes.

Implements Hoory et al. (2021), "Learning and Evaluating a Differentially Private
Pre-trained Language Model", §3.2 and Appendix B. A BPE vocabulary learned from the raw
corpus can leak rare strings (a name, an ID) as whole symbols; learned from a DP
histogram it reveals only words that many records share.

1. The unit is one sentence pair (with `dedup`, one distinct sentence pair: a pair
   repeated k times is otherwise protected only as a group of k). Each distinct word
   counts once per unit, and at most N (`--tuple-len`) distinct words of a unit are
   counted (the first N in order of appearance), so one unit changes at most N counts
   by 1: L2 sensitivity √N.
2.–3. The DP histogram of nmtfrag.dp.histogram: Gaussian noise N(0, σ²) on every count,
   a word kept iff its noisy count reaches C = 1 + σ·Φ⁻¹(1 − δ/N), so the ≤ N words only
   one unit holds pass with probability ≤ δ. (The paper writes σ·erf⁻¹(1 − δ/N), which
   lacks a √2: its per-word tail is ~4.6e-7 instead of δ/N; see DESIGN.md.)
4. BPE merges are learned (subword-nmt, `--dict-input` semantics) from the kept words
   with their rounded noisy counts only — never from the raw corpus — and written in
   fastBPE format (`a b count`); the vocabulary is the noisy counts of the subwords.

Guarantee: (ε_V, 2δ)-DP per unit (δ from the Gaussian mechanism, δ from the threshold),
with ε_V from the analytic Gaussian mechanism (Balle & Wang 2018) at noise σ/√N — used —
and, for reference, the paper's Corollary 1: ε = (√N/σ)·√(2 ln(1.25/δ)) (valid < 1).
Noise is drawn from secret randomness unless a seed is given (nmtfrag.randomness).

The stage (`build_vocabulary`, what `nmtfrag vocab --dp` calls) reads the corpus and
writes OUT: the DP files (bpecodes, dictionaries, noisy_counts.txt, privacy.json,
manifest.json) and OUT/owner/manifest.json (exact counts, input hashes, the seed).
"""
from __future__ import annotations

import io
import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from ..data.corpus import SkipLog, read_parallel, validate_parallel
from ..errors import InputError
from ..fileio import (OWNER_DIR, atomic_writer, sha256_file, tool_versions, write_json,
                      write_owner_json)
from ..outdir import prepare_output_dir, remove_empty_output
from ..randomness import Seed, resolve_seed
from ..data.tokenize import to_tokens
from . import cert_files
from .accounting import OUTSIDE_VOCABULARY, unit_key
from .histogram import noisy_threshold, tail_probability, threshold, unit_counts

__all__ = ["threshold", "tail_probability", "noisy_threshold", "dp_vocabulary",
           "VocabularyJob", "VocabularyResult", "build_vocabulary"]

UNIT = ("one sentence pair (a pair repeated k times in the corpus is protected only as "
        "a group of k: ε grows with k; use --dedup)")
UNIT_DEDUP = "one distinct sentence pair (duplicates counted once with --dedup)"


def paper_threshold(sigma: float, delta: float, tuple_len: int) -> float:
    """Hoory et al.'s printed C = 1 + σ·erf⁻¹(1 − δ/N) (missing √2; reference only)."""
    from scipy.special import erfinv

    return 1.0 + sigma * float(erfinv(1.0 - delta / tuple_len))


def vocab_epsilon(sigma: float, delta: float, tuple_len: int) -> dict[str, float]:
    """ε_V of the noisy histogram (L2 sensitivity √N, noise σ) by both methods."""
    from .accounting import analytic_gaussian_epsilon, classic_gaussian_epsilon

    return {
        "analytic_gaussian": analytic_gaussian_epsilon(sigma, delta, math.sqrt(tuple_len)),
        "corollary_1": classic_gaussian_epsilon(sigma, delta, math.sqrt(tuple_len)),
    }


def learn_bpe_codes(noisy: Mapping[str, float], merges: int,
                    min_frequency: int = 2) -> list[tuple[str, str, int]]:
    """Learn BPE merges from {word: noisy count} with subword-nmt; return
    [(left, right, frequency), …] in merge order (fastBPE codes)."""
    import contextlib

    from subword_nmt.learn_bpe import learn_bpe

    if merges <= 0 or not any(len(w) > 1 for w in noisy):
        return []  # nothing to merge (subword-nmt fails on single-character words only)
    dict_text = "".join(f"{w} {max(1, int(round(c)))}\n" for w, c in sorted(noisy.items()))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        learn_bpe(io.StringIO(dict_text), out, merges, min_frequency=min_frequency,
                  verbose=True, is_dict=True)
    pairs = [ln.split(" ") for ln in out.getvalue().splitlines()
             if ln and not ln.startswith("#version")]
    freqs = [int(m) for m in re.findall(r"pair \d+: \S+ \S+ -> \S+ \(frequency (\d+)\)",
                                        err.getvalue())]
    if len(freqs) != len(pairs):
        raise RuntimeError("could not read merge frequencies from subword-nmt")
    return [(a, b, f) for (a, b), f in zip(pairs, freqs)]


def write_codes(codes: Iterable[tuple[str, str, int]], path: str) -> None:
    with atomic_writer(path) as f:
        for a, b, freq in codes:
            f.write(f"{a} {b} {freq}\n")


def subword_vocab(noisy: Mapping[str, float], codes_path: str) -> Counter:
    """Noisy subword counts: each kept word's BPE pieces get its (rounded) noisy count."""
    from ..data.bpe import load_fastbpe

    words = sorted(noisy)
    if not words:
        return Counter()
    bpe = load_fastbpe(codes_path)
    vocab: Counter[str] = Counter()  # {BPE piece: noisy count}
    for w, seg in zip(words, bpe.apply(words)):
        for piece in seg.split():
            vocab[piece] += max(1, int(round(noisy[w])))
    return vocab


def write_fairseq_dict(vocab: Mapping[str, int], path: str) -> None:
    with atomic_writer(path) as f:
        for sym, c in sorted(vocab.items(), key=lambda kv: (-kv[1], kv[0])):
            f.write(f"{sym} {c}\n")


def pair_words(pairs: Iterable[tuple[Sequence[str], Sequence[str]]], dedup: bool = False,
               stats: dict | None = None) -> Iterator[list[str]]:
    """The words of each unit: one sentence pair (src + tgt tokens); with `dedup`, each
    distinct pair once."""
    seen = set()
    for src, tgt in pairs:
        if dedup:
            key = (tuple(src), tuple(tgt))
            if key in seen:
                if stats is not None:
                    stats["duplicates_removed"] = stats.get("duplicates_removed", 0) + 1
                continue
            seen.add(key)
        yield list(src) + list(tgt)


def check_vocab_delta(delta: float, n_units: int | None, what: str = "units") -> None:
    """Refuse δ_V = 2δ ≥ 1/n: such a δ allows releasing a whole unit outright."""
    if n_units is not None and 2 * delta >= 1.0 / max(1, n_units):
        raise InputError(f"--delta {delta:g} gives δ_V = 2δ = {2 * delta:g}, not below "
                         f"1/n = 1/{n_units} ({what}): such a δ allows releasing a unit "
                         "outright; use a smaller --delta")


def dp_vocabulary(pairs: Iterable[tuple[Sequence[str], Sequence[str]]], sigma: float,
                  delta: float, tuple_len: int, merges: int,
                  seed: int | Seed | None = None,
                  dedup: bool = False, min_frequency: int = 2) -> dict:
    """Run the whole DP-vocabulary mechanism on an iterable of (src_tokens, tgt_tokens).

    Returns a dict with `noisy` ({word: noisy count} of the kept words), `codes`
    (fastBPE merges), the threshold, ε_V by both methods and counts. Only `noisy` and
    what is derived from it is DP; `stats` holds corpus-level counts (owner-only).
    `seed` None draws the noise from secret randomness.
    """
    if sigma is None or not sigma > 0:
        raise InputError(f"--sigma must be positive, got {sigma}")
    if delta is None or not 0 < delta < 1:
        raise InputError("--delta is required and must be in (0, 1): a DP vocabulary "
                         "without δ is void")
    if tuple_len < 1:
        raise InputError("--tuple-len must be ≥ 1")
    seed = resolve_seed(seed)
    stats: dict[str, int] = {}
    counts = unit_counts(pair_words(pairs, dedup, stats), tuple_len, stats=stats)
    # exact n (after skipped lines and --dedup); the caller checked the line count early
    check_vocab_delta(delta, stats.get("units", 0),
                      "distinct sentence pairs" if dedup else "sentence pairs")
    thr = threshold(sigma, delta, tuple_len)
    noisy = noisy_threshold(counts, sigma, thr, seed.numpy_rng())
    codes = learn_bpe_codes(noisy, merges, min_frequency=min_frequency)
    eps = vocab_epsilon(sigma, delta, tuple_len)
    stats.update(distinct_words=len(counts), kept_words=len(noisy), merges=len(codes))
    return {
        "noisy": noisy, "codes": codes, "threshold": thr,
        "paper_threshold": paper_threshold(sigma, delta, tuple_len),
        "tail_probability": tail_probability(sigma, thr),
        "epsilon": eps, "stats": stats, "seed": seed,
        "privacy": {"epsilon": eps["analytic_gaussian"], "delta": 2 * delta,
                    "method": "analytic Gaussian mechanism (Balle & Wang 2018) at "
                              "sensitivity √N, plus δ for the threshold",
                    "epsilon_corollary_1": eps["corollary_1"],
                    "corollary_1_valid": eps["corollary_1"] < 1.0,
                    "sigma": sigma, "tuple_len": tuple_len, "threshold": thr,
                    "unit": UNIT_DEDUP if dedup else UNIT,
                    "unit_key": unit_key(dedup=dedup),
                    "neighbouring": "add/remove one unit; the number of units is "
                                    "not shipped",
                    "randomness": seed.public_record(),
                    "outside_epsilon": list(OUTSIDE_VOCABULARY)},
    }


# --- --extend BASE_MODEL: teach a pretrained model DP-selected domain words ----------

def _pieces_to_codes_space(pieces):
    """fastBPE output pieces ('ab@@', 'c') → codes symbols ('ab', 'c</w>')."""
    return [p[:-2] for p in pieces[:-1]] + [pieces[-1] + "</w>"]


def _codes_to_dict_symbol(sym):
    return sym[:-4] if sym.endswith("</w>") else sym + "@@"


def plan_extension(noisy: Mapping[str, float], base_codes_path: str, base_symbols: set[str],
                   min_pieces: int = 3, max_new_words: int = 1000) -> dict:
    """Choose DP-selected words the base BPE shatters into ≥ `min_pieces` pieces and
    build the merges that make each a single symbol.

    The new merges are appended after the base merges, so fastBPE applies them only to
    a word's final base segmentation (ranked last). Returns a dict with `words`
    [(word, base pieces)], `merges` [(a, b)], `symbols` {new dict symbol: [base pieces]}.
    """
    from ..data.bpe import load_fastbpe

    words = sorted(noisy, key=lambda w: (-noisy[w], w))
    bpe = load_fastbpe(base_codes_path)
    chosen, merges, symbols, seen_merges = [], [], {}, set()
    for w, seg in zip(words, bpe.apply(words)):
        pieces = seg.split()
        if len(pieces) < min_pieces or w in base_symbols:
            continue
        if any(p not in base_symbols for p in pieces):
            continue  # a piece unknown to the base model: no embedding to start from
        chosen.append((w, pieces))
        codes = _pieces_to_codes_space(pieces)
        cur = codes[0]
        for k, nxt in enumerate(codes[1:], start=1):
            new = cur + nxt
            if (cur, nxt) not in seen_merges:
                seen_merges.add((cur, nxt))
                merges.append((cur, nxt))
            sym = _codes_to_dict_symbol(new)
            if sym not in base_symbols and sym not in symbols:
                symbols[sym] = pieces[:k + 1]
            cur = new
        if len(chosen) >= max_new_words:
            break
    return {"words": chosen, "merges": merges, "symbols": symbols}


def _read_dict_symbols(path):
    with open(path, encoding="utf-8") as f:
        return [ln.rsplit(" ", 1)[0] for ln in f if ln.strip()]


def extend_model(base_dir: str, out_dir: str, noisy: Mapping[str, float],
                 min_pieces: int = 3, max_new_words: int = 1000,
                 checkpoint: str = "model.pt", src_lang: str = "de",
                 tgt_lang: str = "en") -> dict:
    """Write OUT_DIR: BASE_DIR's model with the planned new symbols appended to its
    dictionaries, their merges appended to its bpecodes, and new embedding rows set to
    the mean of the base pieces' rows (encoder, decoder and output projection)."""
    import torch

    codes_path = os.path.join(base_dir, "bpecodes")
    dict_paths = {lang: os.path.join(base_dir, f"dict.{lang}.txt") for lang in (src_lang, tgt_lang)}
    ckpt_path = os.path.join(base_dir, checkpoint)
    for p in [codes_path, ckpt_path, *dict_paths.values()]:
        if not os.path.isfile(p):
            raise InputError(f"--extend: {p} not found (expected a WMT19-layout model dir)")
    syms = {lang: _read_dict_symbols(p) for lang, p in dict_paths.items()}
    plan = plan_extension(noisy, codes_path, set(syms[src_lang]) & set(syms[tgt_lang]),
                          min_pieces, max_new_words)
    state = torch.load(ckpt_path, map_location="cpu", weights_only=False)
    model = state["model"]
    new_syms = list(plan["symbols"])
    keys_by_lang = {src_lang: ["encoder.embed_tokens.weight"],
                    tgt_lang: ["decoder.embed_tokens.weight",
                               "decoder.output_projection.weight"]}
    for lang in (src_lang, tgt_lang):
        # fairseq Dictionary: 4 specials (<s> <pad> </s> <unk>) precede the file's lines
        index = {s: i + 4 for i, s in enumerate(syms[lang])}
        for key in keys_by_lang[lang]:
            if key not in model:
                continue
            w = model[key]
            if w.shape[0] != len(syms[lang]) + 4:
                raise InputError(f"--extend: {key} has {w.shape[0]} rows but dict.{lang}.txt "
                                 f"implies {len(syms[lang]) + 4}")
            rows = [w[[index[p] for p in plan["symbols"][s]]].float().mean(0).to(w.dtype)
                    for s in new_syms]
            if rows:
                model[key] = torch.cat([w, torch.stack(rows)], 0)
    os.makedirs(out_dir, exist_ok=True)
    with atomic_writer(os.path.join(out_dir, checkpoint), "wb") as f:
        torch.save(state, f)
    for lang, p in dict_paths.items():
        with open(p, encoding="utf-8") as src, \
                atomic_writer(os.path.join(out_dir, f"dict.{lang}.txt")) as dst:
            dst.write(src.read())
            dst.writelines(f"{s} 0\n" for s in new_syms)
    with open(codes_path, encoding="utf-8") as src, \
            atomic_writer(os.path.join(out_dir, "bpecodes")) as dst:
        base = src.read()
        dst.write(base if base.endswith("\n") or not base else base + "\n")
        dst.writelines(f"{a} {b} 1\n" for a, b in plan["merges"])
    # side effect on other words: how many kept words segment differently now
    from ..data.bpe import load_fastbpe

    words = sorted(noisy)
    changed = 0
    if words:
        old = load_fastbpe(codes_path).apply(words)
        new = load_fastbpe(os.path.join(out_dir, "bpecodes")).apply(words)
        chosen = {w for w, _ in plan["words"]}
        changed = sum(1 for w, a, b in zip(words, old, new) if a != b and w not in chosen)
    return {"new_words": len(plan["words"]), "new_symbols": len(new_syms),
            "new_merges": len(plan["merges"]), "other_words_resegmented": changed,
            "examples": [[w, " ".join(p)] for w, p in plan["words"][:20]]}


# --- the stage: corpus files → OUT (what `nmtfrag vocab --dp` calls) -----------------

@dataclass(frozen=True)
class VocabularyJob:
    """What `build_vocabulary` reads, writes and computes (the CLI's options).

    `extend` names a WMT19-layout base model: OUT becomes a copy of it extended with the
    DP-selected words its BPE shatters into at least `min_pieces` pieces (at most
    `max_new_words`), instead of a vocabulary learned from scratch with `merges` merges.
    `seed` None draws the noise from secret randomness."""
    src: str
    tgt: str
    out: str
    sigma: float
    delta: float | None  # required: None is refused (a DP vocabulary without δ is void)
    src_lang: str = "de"
    tgt_lang: str = "en"
    pretokenized: bool = False
    tuple_len: int = 256
    dedup: bool = False
    merges: int = 8000
    min_frequency: int = 2
    extend: str | None = None
    min_pieces: int = 3
    max_new_words: int = 1000
    seed: int | None = None
    overwrite: bool = False

    def public_params(self) -> dict:
        """The parameters the shared manifest states (no path, no seed)."""
        return {k: getattr(self, k) for k in (
            "sigma", "delta", "tuple_len", "dedup", "merges", "min_frequency",
            "min_pieces", "max_new_words", "pretokenized", "src_lang", "tgt_lang")}


@dataclass
class VocabularyResult:
    out: str  # the output directory, as prepared (absolute or as given)
    manifest: dict  # OUT/manifest.json: DP, may be shared
    owner: dict  # OUT/owner/manifest.json: exact corpus counts, never shared


def build_vocabulary(job: VocabularyJob) -> VocabularyResult:
    """Run the DP vocabulary stage: count, noise and threshold the words of
    `job.src`/`job.tgt`, then learn BPE codes and dictionaries from the noisy histogram
    (or extend `job.extend`'s). Raises InputError for anything the user must fix; a
    refusal after counting leaves no OUT behind if it did not exist before."""
    if job.delta is None:
        raise InputError("--delta is required: a DP vocabulary without δ is void")
    n_lines = validate_parallel(job.src, job.tgt, "--src/--tgt")
    # before any tokenising: n ≤ the line count, so δ_V ≥ 1/lines means δ_V ≥ 1/n
    check_vocab_delta(job.delta, n_lines, "input lines")
    existed = os.path.isdir(job.out)
    out = prepare_output_dir(job.out, job.overwrite, inputs=[job.src, job.tgt],
                             kind="nmtfrag-dp-vocabulary")
    skips = SkipLog()

    def pairs():
        for _, s, t in read_parallel(job.src, job.tgt, skips):
            yield (to_tokens(s, job.src_lang, job.pretokenized),
                   to_tokens(t, job.tgt_lang, job.pretokenized))

    # --extend keeps the base model's merges and only appends; no codes to learn
    try:
        res = dp_vocabulary(pairs(), job.sigma, job.delta, job.tuple_len,
                            0 if job.extend else job.merges, seed=job.seed,
                            dedup=job.dedup, min_frequency=job.min_frequency)
    except InputError:
        if not existed:
            remove_empty_output(out)  # refused after counting: leave no OUT behind
        raise
    extension = _write_vocabulary_files(job, out, res)
    return _write_manifests(job, out, res, extension, n_lines, skips)


def _write_vocabulary_files(job: VocabularyJob, out: str, res: dict) -> dict | None:
    """noisy_counts.txt, then bpecodes + dictionaries (or the extended model dir);
    returns the extension's summary with --extend, else None."""
    noisy = res["noisy"]
    with atomic_writer(os.path.join(out, "noisy_counts.txt")) as f:
        for w, c in sorted(noisy.items(), key=lambda kv: (-kv[1], kv[0])):
            f.write(f"{w} {c:.1f}\n")
    if job.extend:
        # computed from the DP histogram and the public base model only: post-processing
        return extend_model(job.extend, out, noisy, job.min_pieces, job.max_new_words,
                            src_lang=job.src_lang, tgt_lang=job.tgt_lang)
    codes_path = os.path.join(out, "bpecodes")
    write_codes(res["codes"], codes_path)
    sub = subword_vocab(noisy, codes_path)
    for lang in (job.src_lang, job.tgt_lang):
        write_fairseq_dict(sub, os.path.join(out, f"dict.{lang}.txt"))
    return None


def _write_manifests(job: VocabularyJob, out: str, res: dict, extension: dict | None,
                     n_lines: int, skips: SkipLog) -> VocabularyResult:
    """OUT/owner/manifest.json, OUT/privacy.json, then OUT/manifest.json (last: the
    completion mark)."""
    params = job.public_params()
    owner = {
        "kind": "nmtfrag-dp-vocabulary-owner-record",
        "note": "owner-only: exact corpus counts are not differentially private",
        "params": {**params, "extend": job.extend}, "randomness": res["seed"].owner_record(),
        "input_lines": n_lines, "skipped": skips.to_json(), "counts": res["stats"],
        "inputs": {"src": {"path": job.src, "sha256": sha256_file(job.src)},
                   "tgt": {"path": job.tgt, "sha256": sha256_file(job.tgt)}},
        "tool_versions": tool_versions("subword-nmt", "fastbpe", "numpy", "scipy", "torch"),
    }
    write_owner_json(out, owner)
    write_json(os.path.join(out, "privacy.json"),
               cert_files.bind({"vocabulary": res["privacy"]}, out))
    manifest = {
        "kind": "nmtfrag-dp-vocabulary",
        "mode": "extend" if job.extend else "from_scratch", "params": params,
        "shareable": f"every file here except {OWNER_DIR}/",
        "randomness": res["seed"].public_record(), "threshold": res["threshold"],
        "paper_threshold_not_used": res["paper_threshold"],
        "per_word_tail_probability": res["tail_probability"],
        "privacy": res["privacy"], "epsilon_both_methods": res["epsilon"],
        # noisy words and merges only (DP post-processing), never the corpus counts
        "kept_words": len(res["noisy"]), "merges_learned": len(res["codes"]),
        "extension": extension,
    }
    write_json(os.path.join(out, "manifest.json"), manifest)
    return VocabularyResult(out, manifest, owner)
