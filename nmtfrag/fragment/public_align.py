"""Word alignment of one sentence pair under a model learned on PUBLIC parallel text only.

Why: the DP phrase release (`extract --dp`) bounds what one unit adds to the phrase-pair
counts, which holds only if each unit's phrase pairs depend on that unit alone and on
public inputs. eflomal learns its alignment jointly on the whole private corpus, so one
added sentence moves other sentences' links. Here the model is learned once on public
text; each private pair is then aligned on its own by a pure function of (the pair, the
model, fixed parameters): no state across sentences, no randomness.

What we chose, and why (figures: docs/guide/differential-privacy.md, "A release with a guarantee"):

* Learning. The public text is tokenised as `extract` tokenises (nmtfrag.data.tokenize),
  lowercased as eflomal lowercases, and aligned by eflomal (nmtfrag.fragment.align). Its links
  are counted into two lexical tables: c(src, tgt) from the link file in which every
  target word has at most one link (t(tgt|src), plus NULL for unlinked target words),
  and the same for the other direction. eflomal's Bayesian HMM alignment is better than
  EM on IBM-1 and costs nothing extra to reuse; what it learns is public.
* Smoothing: Witten-Bell per conditioning word w: a seen pair gets c(w, x)/(C(w)+D(w))
  (C: links of w, D: distinct words linked to w), the rest (D(w) plus the mass of
  pruned rare entries) is spread uniformly over the other vocabulary; a word the public
  text never showed gets 1/V (all its mass is "unseen"). Most in-domain words are unseen
  in generic text; this makes two unseen words cost the same wherever they sit, so the
  diagonal prior decides, and keeps a frequent function word from taking them.
  Entries seen fewer than `min_count` times are pruned (their mass goes to the rest):
  the model stays small.
* Identical tokens (numbers, names, punctuation, which generic text rarely pairs with
  each other when unseen) get t = max(t, `identical`).
* Aligning: fast_align's IBM-2 with a diagonal prior (Dyer, Chahuneau & Smith 2013):
  p(a_j = i) = (1 - p0)·exp(-λ|(i+½)/m - (j+½)/n|)/Z_j, p(a_j = NULL) = p0; Viterbi per
  word (IBM-2 links are independent given the pair), in both directions, then the same
  symmetrisation as eflomal's links (nmtfrag.fragment.symmetrize). λ and p0 are fixed, never
  fitted to the private text (fast_align re-estimates λ on its corpus: that would make
  every pair depend on the others again). λ = 16, p0 = 0.35 gave the best link F against
  eflomal on PUBLIC text, the first 2,000 pairs of newstest2018 (the generic corpus'
  validation set, not used to learn the model), of 30 settings (λ 2–32, p0 0.02–0.5;
  F 0.69–0.77, where two eflomal runs agree at 0.90): benchmarks/public_align_quality.py.
  (Before 2026-11-27 the defaults were λ = 8, p0 = 0.2, chosen on 2,000 EMEA training
  pairs: a choice made on an owner's data, which the ε of EMEA's DP releases did not
  cover; on the public text they score F 0.758.)
* Reproducible runs. eflomal 2.0.0 cannot be seeded (it reads /dev/urandom), so two
  models learned from the same public text differ, and so did two `extract
  --align-public PUB --seed N` releases (20,182 and 21,045 occurrences from 500 EMEA
  pairs). A seeded run that names no --align-model therefore learns the model once per
  public text into the user's cache ($XDG_CACHE_HOME/nmtfrag/align-models, else
  ~/.cache/nmtfrag/align-models; `cached_model`, keyed by the public files' hashes, the
  languages, the line limit, the parameters and the tools' versions) and reuses it
  after: the same seed, inputs and public text give the same release byte for byte.
  Aligning with a model is deterministic already. A run with secret randomness learns
  its model afresh in its private work dir, as before; the model is learned from public
  text only, so keeping it reveals nothing private.
"""
from __future__ import annotations

import collections
import hashlib
import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from .. import __version__
from .align import ALIGNER_MAX_TOKENS, align_files
from ..data.corpus import validate_parallel
from ..errors import InputError
from ..fileio import (MANIFEST, atomic_writer, progress, sha256_file, tool_versions,
                      write_json)
from ..outdir import make_output_dir
from ..outlock import release_output_lock
from ..workdir import private_workdir
from .symmetrize import Point, parse_pharaoh, symmetrize
from ..data.tokenize import to_tokens

MODEL_KIND = "nmtfrag-align-model"
MODEL_FORMAT = 1
DESCRIPTION = "public model (IBM-2 diagonal, learned on public text)"
TABLES, VOCAB = "tables.npz", "vocab.json"
DEFAULT_PUBLIC_LINES = 300_000  # the generic stand-in (262,664 pairs) learns in full
CACHE_NAME = os.path.join("nmtfrag", "align-models")  # under the user's cache directory


class AlignParams:
    """Fixed parameters of the per-sentence aligner (public; recorded in the manifest)."""

    def __init__(self, tension: float = 16.0, p0: float = 0.35, identical: float = 0.5,
                 min_count: int = 2):
        self.tension, self.p0, self.identical, self.min_count = \
            float(tension), float(p0), float(identical), int(min_count)

    def as_dict(self) -> dict[str, float | int]:
        return {"tension": self.tension, "p0": self.p0, "identical": self.identical,
                "min_count": self.min_count}


def public_paths(prefix: str, src_lang: str, tgt_lang: str) -> tuple[str, str]:
    """PREFIX.<src-lang>, PREFIX.<tgt-lang>; InputError if either is missing."""
    paths = (f"{prefix}.{src_lang}", f"{prefix}.{tgt_lang}")
    for path in paths:
        if not os.path.isfile(path):
            raise InputError(f"--align-public {prefix}: {path} not found (give PREFIX "
                             f"with PREFIX.{src_lang} and PREFIX.{tgt_lang})")
    return paths


# ---------------------------------------------------------------- learning


def _write_public_tokens(src, tgt, src_lang, tgt_lang, pretokenized, max_lines,
                         out_src, out_tgt):
    """Tokenise and lowercase up to `max_lines` public pairs; return how many were kept."""
    kept = 0
    with open(src, encoding="utf-8", errors="replace") as fs, \
            open(tgt, encoding="utf-8", errors="replace") as ft, \
            open(out_src, "w", encoding="utf-8", newline="\n") as gs, \
            open(out_tgt, "w", encoding="utf-8", newline="\n") as gt:
        pairs = zip(fs, ft)
        for n, (s, t) in progress(enumerate(pairs), total=max_lines, desc="tokenise public",
                                  unit="pair"):
            if n >= max_lines:
                break
            s_tok = to_tokens(s.strip(), src_lang, pretokenized)
            t_tok = to_tokens(t.strip(), tgt_lang, pretokenized)
            if not s_tok or not t_tok or max(len(s_tok), len(t_tok)) > ALIGNER_MAX_TOKENS:
                continue
            gs.write(" ".join(s_tok).lower() + "\n")
            gt.write(" ".join(t_tok).lower() + "\n")
            kept += 1
    return kept


def _count_links(tok_src: str, tok_tgt: str, link_path: str, cond_src: bool
                 ) -> tuple[collections.Counter[tuple[str, str]], collections.Counter[str]]:
    """Counts of one eflomal link file: (Counter of (cond word, gen word), Counter of
    unlinked gen words), where cond is the source side if `cond_src` (eflomal's forward
    file: every target word has at most one link), else the target side. If the file
    shows the other orientation (eflomal changed its convention), it is followed."""
    pairs: collections.Counter[tuple[str, str]] = collections.Counter()
    null: collections.Counter[str] = collections.Counter()
    tgt_unique = src_unique = True
    with open(tok_src, encoding="utf-8") as fs, open(tok_tgt, encoding="utf-8") as ft, \
            open(link_path, encoding="utf-8") as fl:
        rows = [(s.split(), t.split(), parse_pharaoh(links)) for s, t, links in
                zip(fs, ft, fl)]
    for _, _, points in rows:
        tgt_unique &= len({j for _, j in points}) == len(points)
        src_unique &= len({i for i, _ in points}) == len(points)
    if tgt_unique != src_unique:  # one side has a single link per word: it is the gen
        cond_src = tgt_unique
    for s, t, points in rows:
        if cond_src:
            pairs.update((s[i], t[j]) for i, j in points)
            linked = {j for _, j in points}
            null.update(w for j, w in enumerate(t) if j not in linked)
        else:
            pairs.update((t[j], s[i]) for i, j in points)
            linked = {i for i, _ in points}
            null.update(w for i, w in enumerate(s) if i not in linked)
    return pairs, null


def _table_arrays(prefix, pairs, null, cond_index, gen_index, min_count):
    """npz arrays of one direction: kept entries, and per conditioning word its link
    total C, distinct partners D and kept mass (for the Witten-Bell rest)."""
    n_cond = len(cond_index)
    total = np.zeros(n_cond, np.int64)
    types = np.zeros(n_cond, np.int64)
    cond, gen, count = [], [], []
    for (c, g), k in pairs.items():
        ci = cond_index[c]
        total[ci] += k
        types[ci] += 1
        if k >= min_count:
            cond.append(ci)
            gen.append(gen_index[g])
            count.append(k)
    null_gen = [gen_index[g] for g, k in null.items() if k >= min_count]
    null_count = [k for g, k in null.items() if k >= min_count]
    return {
        f"{prefix}_cond": np.array(cond, np.int32), f"{prefix}_gen": np.array(gen, np.int32),
        f"{prefix}_count": np.array(count, np.int64), f"{prefix}_total": total,
        f"{prefix}_types": types, f"{prefix}_null_gen": np.array(null_gen, np.int32),
        f"{prefix}_null_count": np.array(null_count, np.int64),
        f"{prefix}_null_stats": np.array([sum(null.values()), len(null)], np.int64),
    }


def learn_model(prefix: str, out_dir: str, *, src_lang: str = "de", tgt_lang: str = "en",
                pretokenized: bool = False, max_lines: int = DEFAULT_PUBLIC_LINES,
                params: AlignParams | None = None, work_dir: str | None = None,
                verbose: bool = False) -> dict[str, Any]:
    """Learn the lexical tables from public parallel text into `out_dir`; return its
    manifest. `out_dir/manifest.json` is written last and marks a finished model."""
    params = params or AlignParams()
    src, tgt = public_paths(prefix, src_lang, tgt_lang)
    n_lines = validate_parallel(src, tgt, f"--public {prefix}")
    if max_lines < 1:
        raise InputError(f"--align-public-lines must be at least 1 (got {max_lines})")
    make_output_dir(out_dir)  # recorded: a failed run leaves no empty model dir
    if os.path.isfile(os.path.join(out_dir, MANIFEST)):  # no longer a finished model
        os.unlink(os.path.join(out_dir, MANIFEST))
    t0 = time.perf_counter()
    with private_workdir(work_dir) as work:
        tok_src, tok_tgt = os.path.join(work, "public.src"), os.path.join(work, "public.tgt")
        used = _write_public_tokens(src, tgt, src_lang, tgt_lang, pretokenized,
                                    min(max_lines, n_lines), tok_src, tok_tgt)
        if not used:
            raise InputError(f"--align-public {prefix}: no usable sentence pair")
        fwd, rev = os.path.join(work, "public.fwd"), os.path.join(work, "public.rev")
        align_files(tok_src, tok_tgt, fwd, rev, work, None, verbose)
        by_side = {"src": _count_links(tok_src, tok_tgt, fwd, True),
                   "tgt": _count_links(tok_src, tok_tgt, rev, False)}
    src_words = sorted({s for s, _ in by_side["src"][0]} | {s for _, s in by_side["tgt"][0]}
                       | set(by_side["tgt"][1]))
    tgt_words = sorted({t for _, t in by_side["src"][0]} | {t for t, _ in by_side["tgt"][0]}
                       | set(by_side["src"][1]))
    src_index = {w: i for i, w in enumerate(src_words)}
    tgt_index = {w: i for i, w in enumerate(tgt_words)}
    arrays = {**_table_arrays("s2t", *by_side["src"], src_index, tgt_index, params.min_count),
              **_table_arrays("t2s", *by_side["tgt"], tgt_index, src_index, params.min_count)}
    with atomic_writer(os.path.join(out_dir, TABLES), "wb") as f:
        np.savez_compressed(f, **arrays)
    with atomic_writer(os.path.join(out_dir, VOCAB)) as f:
        json.dump({"src": src_words, "tgt": tgt_words}, f, ensure_ascii=False)
    manifest = {
        "kind": MODEL_KIND, "format": MODEL_FORMAT, "nmtfrag_version": __version__,
        "description": DESCRIPTION, "src_lang": src_lang, "tgt_lang": tgt_lang,
        "pretokenized": pretokenized, "lowercased": True,
        "public": {"src_sha256": sha256_file(src), "tgt_sha256": sha256_file(tgt),
                   "lines_in_files": n_lines, "lines_read": min(max_lines, n_lines),
                   "pairs_used": used},
        "learner": "eflomal links on the public text, Witten-Bell lexical tables",
        "params": params.as_dict(),
        "files": {TABLES: sha256_file(os.path.join(out_dir, TABLES)),
                  VOCAB: sha256_file(os.path.join(out_dir, VOCAB))},
        "entries": {"s2t": int(arrays["s2t_count"].size),
                    "t2s": int(arrays["t2s_count"].size)},
        "seconds": round(time.perf_counter() - t0, 1),
    }
    write_json(os.path.join(out_dir, MANIFEST), manifest)
    return manifest


# ---------------------------------------------------------------- the model


class _Table:
    """log t(gen | cond) of one direction, with the Witten-Bell rest and the NULL row."""

    def __init__(self, z, prefix, cond_words, gen_words):
        self.log_floor = -math.log(len(gen_words) + 1)  # an unseen conditioning word
        v = len(gen_words) + 1
        total, types = z[f"{prefix}_total"], z[f"{prefix}_types"]
        cond, gen, count = z[f"{prefix}_cond"], z[f"{prefix}_gen"], z[f"{prefix}_count"]
        kept = np.bincount(cond, weights=count, minlength=len(cond_words))
        denom = (total + types).astype(np.float64)
        self.rest = {}
        for ci, word in enumerate(cond_words):
            if total[ci]:
                self.rest[word] = math.log((denom[ci] - kept[ci]) / (denom[ci] * v))
        self.entries = {}
        logp = np.log(count / denom[cond])
        for ci, gi, lp in zip(cond.tolist(), gen.tolist(), logp.tolist()):
            self.entries[(cond_words[ci], gen_words[gi])] = lp
        null_total, null_types = (int(x) for x in z[f"{prefix}_null_stats"])
        null_den = float(null_total + null_types) or 1.0
        null_kept = int(z[f"{prefix}_null_count"].sum())
        self.null_rest = math.log(max(null_den - null_kept, 1.0) / (null_den * v))
        self.null = {gen_words[g]: math.log(k / null_den) for g, k in
                     zip(z[f"{prefix}_null_gen"].tolist(), z[f"{prefix}_null_count"].tolist())}

    def log_t(self, cond_word: str, gen_word: str) -> float:
        lp = self.entries.get((cond_word, gen_word))
        if lp is None:
            lp = self.rest.get(cond_word, self.log_floor)
        return lp

    def log_null(self, gen_word: str) -> float:
        return self.null.get(gen_word, self.null_rest)


class PublicAligner:
    """A loaded public model: `align(src tokens, tgt tokens)` → sorted (i, j) points."""

    def __init__(self, model_dir: str, params: AlignParams | None = None):
        self.manifest = read_model_manifest(model_dir)
        self.model_id = hashlib.sha256(
            open(os.path.join(model_dir, MANIFEST), "rb").read()).hexdigest()
        self.params = params or AlignParams(**self.manifest["params"])
        with open(os.path.join(model_dir, VOCAB), encoding="utf-8") as f:
            vocab = json.load(f)
        with np.load(os.path.join(model_dir, TABLES)) as z:
            self.s2t = _Table(z, "s2t", vocab["src"], vocab["tgt"])
            self.t2s = _Table(z, "t2s", vocab["tgt"], vocab["src"])

    def check_langs(self, src_lang: str, tgt_lang: str) -> None:
        have = (self.manifest["src_lang"], self.manifest["tgt_lang"])
        if have != (src_lang, tgt_lang):
            raise InputError(f"the alignment model is for {have[0]}-{have[1]}, not "
                             f"{src_lang}-{tgt_lang}")

    def _viterbi(self, table, cond, gen):
        """(cond index or -1 for NULL) of each gen word: argmax of IBM-2 with the
        diagonal prior, each word on its own; ties go to the lowest index."""
        m, n = len(cond), len(gen)
        if not m or not n:
            return [-1] * n
        p = self.params
        log_id = math.log(p.identical) if p.identical > 0 else -math.inf
        log_t = np.array([[max(table.log_t(c, g), log_id) if c == g else table.log_t(c, g)
                           for g in gen] for c in cond])
        i_pos = (np.arange(m) + 0.5) / m
        j_pos = (np.arange(n) + 0.5) / n
        h = -self.params.tension * np.abs(i_pos[:, None] - j_pos[None, :])
        h -= np.log(np.exp(h).sum(axis=0, keepdims=True))  # Z_j over source positions
        score = log_t + h + math.log(1 - self.params.p0)
        best = score.argmax(axis=0)
        null = np.array([table.log_null(g) for g in gen]) + math.log(self.params.p0)
        return [int(i) if score[i, j] > null[j] else -1 for j, i in enumerate(best)]

    def directional(self, s_tok: Sequence[str], t_tok: Sequence[str]
                    ) -> tuple[set[Point], set[Point]]:
        """(forward, reverse) point sets: each target word's link, each source word's."""
        s_low = [w.lower() for w in s_tok]
        t_low = [w.lower() for w in t_tok]
        fwd = {(i, j) for j, i in enumerate(self._viterbi(self.s2t, s_low, t_low)) if i >= 0}
        rev = {(i, j) for i, j in enumerate(self._viterbi(self.t2s, t_low, s_low)) if j >= 0}
        return fwd, rev

    def align(self, s_tok: Sequence[str], t_tok: Sequence[str], method: str = "union"
              ) -> list[Point]:
        """Symmetrised points of one pair, sorted: depends on nothing but its arguments,
        the model and the fixed parameters."""
        fwd, rev = self.directional(s_tok, t_tok)
        return sorted(symmetrize(fwd, rev, method, len(s_tok), len(t_tok)))


def read_model_manifest(model_dir: str) -> dict[str, Any]:
    """The manifest of a finished model dir; InputError if it is not one."""
    path = os.path.join(model_dir, MANIFEST)
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        raise InputError(f"--align-model {model_dir}: not a finished alignment model "
                         f"(no readable {MANIFEST}; learn one with `nmtfrag align-model` "
                         f"or add --align-public PREFIX)") from None
    if manifest.get("kind") != MODEL_KIND or manifest.get("format") != MODEL_FORMAT:
        raise InputError(f"--align-model {model_dir}: {MANIFEST} is not an nmtfrag "
                         f"alignment model of format {MODEL_FORMAT}")
    for name, digest in manifest["files"].items():
        if not os.path.isfile(os.path.join(model_dir, name)) or \
                sha256_file(os.path.join(model_dir, name)) != digest:
            raise InputError(f"--align-model {model_dir}: {name} is missing or does not "
                             f"match its manifest")
    return manifest


def is_model_dir(path: str) -> bool:
    return os.path.isfile(os.path.join(path, MANIFEST))


def check_sources(align_public: str | None, align_model: str | None, src_lang: str,
                  tgt_lang: str, private: Iterable[str] = ()) -> None:
    """Refuse (cheaply, before any expensive step) --align-public / --align-model that
    cannot serve: missing files, a dir that is no model, a model for other languages,
    or a model learned on other public text than the --align-public given with it.
    `private`: the corpus files, which --align-public must not be (a model learned on
    them would make every unit's alignment depend on the others again)."""
    if align_model and os.path.exists(align_model) and not os.path.isdir(align_model):
        raise InputError(f"--align-model {align_model} is not a directory")
    paths = public_paths(align_public, src_lang, tgt_lang) if align_public else None
    if paths and {os.path.realpath(p) for p in paths} & \
            {os.path.realpath(p) for p in private}:
        raise InputError(f"--align-public {align_public} is the private corpus itself: "
                         f"the aligner must learn from PUBLIC parallel text only")
    if not align_model or (align_public and not is_model_dir(align_model)):
        return
    model = read_model_manifest(align_model)
    if (model["src_lang"], model["tgt_lang"]) != (src_lang, tgt_lang):
        raise InputError(f"--align-model {align_model} is for {model['src_lang']}-"
                         f"{model['tgt_lang']}, not {src_lang}-{tgt_lang}")
    if paths and [sha256_file(p) for p in paths] != [model["public"]["src_sha256"],
                                                       model["public"]["tgt_sha256"]]:
        raise InputError(f"--align-model {align_model} was learned on other public text "
                         f"than --align-public {align_public}: give another model dir, "
                         f"or remove it to learn again")


def model_cache_root() -> str | None:
    """Where seeded runs keep the models they learn: $XDG_CACHE_HOME/nmtfrag/align-models,
    else ~/.cache/nmtfrag/align-models (a relative XDG_CACHE_HOME is ignored, as the XDG
    base directory specification says); None without a home directory."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
        if not os.path.isabs(base):
            return None
    return os.path.join(base, CACHE_NAME)


def cache_key(prefix: str, src_lang: str, tgt_lang: str, max_lines: int) -> str:
    """The cache entry of the model learned from public PREFIX: what decides the model
    (the public files' contents, the languages, the lines read, the parameters, the
    code and tools that tokenise and align), hashed."""
    src, tgt = public_paths(prefix, src_lang, tgt_lang)
    info = {"kind": MODEL_KIND, "format": MODEL_FORMAT, "nmtfrag": __version__,
            "src_sha256": sha256_file(src), "tgt_sha256": sha256_file(tgt),
            "src_lang": src_lang, "tgt_lang": tgt_lang, "max_lines": max_lines,
            "params": AlignParams().as_dict(),
            "tools": tool_versions("eflomal", "sacremoses", "numpy")}
    return hashlib.sha256(json.dumps(info, sort_keys=True).encode()).hexdigest()[:32]


def cached_model(prefix: str, src_lang: str, tgt_lang: str, work: str, *,
                 max_lines: int = DEFAULT_PUBLIC_LINES, verbose: bool = False
                 ) -> tuple[str, bool]:
    """(model dir, learned now) of the model learned from public PREFIX, kept in the
    user's cache: learned now into a temporary dir and renamed into place, or the one an
    earlier seeded run learned (two runs learning at once both use the first one's)."""
    root = model_cache_root()
    if root is None:
        raise InputError("--seed with --align-public keeps the public alignment model in "
                         "the user's cache, and there is none (neither XDG_CACHE_HOME nor "
                         "HOME is set): give --align-model DIR as well")
    path = os.path.join(root, cache_key(prefix, src_lang, tgt_lang, max_lines))
    if is_model_dir(path):
        try:
            read_model_manifest(path)
            return path, False
        except InputError:  # a damaged entry: learned again
            shutil.rmtree(path, ignore_errors=True)
    try:
        os.makedirs(root, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".tmp-learn-", dir=root)
    except OSError as exc:
        raise InputError(f"--seed with --align-public keeps the public alignment model in "
                         f"{root}, which cannot be written ({exc.strerror or exc}): give "
                         f"--align-model DIR as well") from None
    try:
        learn_model(prefix, tmp, src_lang=src_lang, tgt_lang=tgt_lang,
                    max_lines=max_lines, work_dir=work, verbose=verbose)
        release_output_lock(tmp)
        try:
            os.rename(tmp, path)
        except OSError:
            if not is_model_dir(path):
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # another run learned it first
            return path, False
    except BaseException:
        release_output_lock(tmp)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path, True


def resolve_aligner(align_public: str | None, align_model: str | None, src_lang: str,
                    tgt_lang: str, work: str, *, max_lines: int = DEFAULT_PUBLIC_LINES,
                    verbose: bool = False, reproducible: bool = False
                    ) -> tuple[PublicAligner, dict[str, Any]]:
    """(PublicAligner, owner record) from --align-public / --align-model.

    --align-model DIR alone loads DIR; with --align-public too, DIR is learned on first
    use and reused after; --align-public alone learns into the private work dir, or, in
    a `reproducible` (seeded) run, into the user's cache once (`cached_model`)."""
    owner: dict[str, Any] = {"align_public": align_public, "align_model": align_model}
    if align_model and is_model_dir(align_model):
        model_dir = align_model
        owner["learned"] = False
    elif not align_model and reproducible:
        assert align_public is not None  # check_sources: else align_model is a model
        model_dir, owner["learned"] = cached_model(align_public, src_lang, tgt_lang, work,
                                                   max_lines=max_lines, verbose=verbose)
        owner["model_cache"] = model_dir
    else:
        model_dir = align_model or os.path.join(work, "align-model")
        assert align_public is not None  # check_sources: else align_model is a model
        learn_model(align_public, model_dir, src_lang=src_lang, tgt_lang=tgt_lang,
                    max_lines=max_lines, work_dir=work, verbose=verbose)
        owner["learned"] = True
    aligner = PublicAligner(model_dir)
    aligner.check_langs(src_lang, tgt_lang)
    owner["model_sha256"] = aligner.model_id
    owner["params"] = aligner.params.as_dict()
    return aligner, owner
