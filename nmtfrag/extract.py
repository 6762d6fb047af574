"""The fragmentation release: corpus → tokens → alignment → phrase pairs → sample → release.

Kim, Bisazza & Turkmen (2021), "Using Confidential Data for Domain Adaptation of Neural
Machine Translation": the data owner releases only shuffled, subsampled phrase pairs
consistent with a word alignment. This module chains the stages (each callable on its
own) and writes `phrases.<lang>` files plus a minimal `manifest.json` (what may be shared)
and `owner/manifest.json` (what must not: paths, hashes, exact counts, line numbers, the
seed). Full sentences exist only in the private work dir, which is removed at the end;
a phrase pair one of whose sides is a whole sentence is dropped unless the user opts in.
"""
import array
import os
import resource
import shutil
import time
from dataclasses import dataclass, field
from operator import itemgetter

from . import __version__
from .align import ALIGNER_MAX_TOKENS, align_files, check_priors
from .corpus import SkipLog, read_parallel, scan_text_file, validate_parallel
from .errors import InputError
from .fileio import (MANIFEST, OWNER_DIR, atomic_writer, check_not_input, owner_path,
                     prepare_output_dir, private_workdir, progress, sha256_file,
                     tool_versions, write_json, write_owner_json)
from .phrases import phrase_records
from .randomness import resolve_seed
from .release import TAGS, ReleaseWriter, release_file_names
from .sample import ExternalShuffle, buckets_for
from .symmetrize import (SYMMETRIZERS, canonical_points, format_pharaoh, parse_pharaoh,
                         symmetrize)
from .tokenize import to_tokens

ALIGNMENT_FILE = "corpus.align"  # kept (--keep-alignments) only in OUT/owner/


@dataclass
class ExtractResult:
    manifest: dict  # OUT/manifest.json: what may be shared with the release
    owner: dict = field(default_factory=dict)  # OUT/owner/manifest.json: never shared
    timings: dict = field(default_factory=dict)  # seconds per step (in no manifest)


def _cpu_seconds():
    """CPU time of this process and its finished children (eflomal runs as a child)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _check_params(max_len, min_len, sample_rate, method, src_lang, tgt_lang):
    if max_len < 1:
        raise InputError(f"--max-len must be at least 1 (got {max_len})")
    if not 1 <= min_len <= max_len:
        raise InputError(f"--min-len must be between 1 and --max-len (got {min_len})")
    if not 0 < sample_rate <= 1:
        raise InputError(f"--sample-rate must be in (0, 1] (got {sample_rate})")
    if method not in SYMMETRIZERS:
        raise InputError(f"--symmetrize must be one of {', '.join(SYMMETRIZERS)}")
    for lang in (src_lang, tgt_lang):
        if not lang.isalnum():
            raise InputError(f"language code {lang!r} must be letters/digits (e.g. de, en)")
    if src_lang == tgt_lang:
        raise InputError("--src-lang and --tgt-lang must differ")


def tokenize_corpus(src, tgt, src_lang, tgt_lang, pretokenized, out_src, out_tgt,
                    skips, normalised, max_tokens=None, total=None, forbidden=frozenset()):
    """Write the usable pairs tokenised, one per line; return their input line numbers.

    A token in `forbidden` (the tags, under --tag) is refused: released as is, it would
    give lines like `<P> ein <P> Haus </P>` that no reader can untag correctly.
    """
    line_numbers = array.array("q")
    with open(out_src, "w", encoding="utf-8", newline="\n") as fs, \
            open(out_tgt, "w", encoding="utf-8", newline="\n") as ft:
        pairs = read_parallel(src, tgt, skips, normalised)
        for line_no, s, t in progress(pairs, total=total, desc="tokenise", unit="pair"):
            s_tok = to_tokens(s, src_lang, pretokenized)
            t_tok = to_tokens(t, tgt_lang, pretokenized)
            if forbidden:
                _refuse_tokens(forbidden, ((src, s_tok), (tgt, t_tok)), line_no)
            if max_tokens is not None and max(len(s_tok), len(t_tok)) > max_tokens:
                skips.add("too_long_for_aligner", line_no)
                continue
            fs.write(" ".join(s_tok) + "\n")
            ft.write(" ".join(t_tok) + "\n")
            line_numbers.append(line_no)
    return line_numbers


def _refuse_tokens(forbidden, sides, line_no):
    for path, tokens in sides:
        if not forbidden.isdisjoint(tokens):
            token = next(t for t in tokens if t in forbidden)
            raise InputError(f"{path} line {line_no}: holds the token {token}, which is a "
                             f"release tag under --tag; remove {' and '.join(sorted(forbidden))} "
                             f"from the input or run without --tag")


def phrase_pairs(s_tok, t_tok, points, max_len, min_len, allow_whole_sentences,
                 with_alignment=True):
    """(src, tgt, inner alignment) of one sentence pair, and how many were whole-sentence.

    The inner alignment is computed only `with_alignment` (it is written only with
    --keep-alignments); else it is "".

    A pair whose source side is the whole source sentence, or whose target side is the
    whole target sentence, releases that sentence verbatim: it is dropped unless
    `allow_whole_sentences`. (phrases.py keeps Moses semantics; the rule is applied here.)
    """
    records, whole = phrase_records(s_tok, t_tok, points, max_len, min_len,
                                    with_alignment, keep_whole=allow_whole_sentences)
    return [tuple(r.split("\t")) for r in records], whole


def _given_alignments(path, line_numbers):
    """(line_no, (points, canonical text)) of the used pairs from a file with one line
    per input line (points sorted, without repeats)."""
    wanted = iter(line_numbers)
    next_wanted = next(wanted, None)
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if line_no == next_wanted:
                try:
                    yield line_no, canonical_points(line)
                except ValueError as exc:
                    raise InputError(f"{path} line {line_no}: {exc}") from None
                next_wanted = next(wanted, None)


def _eflomal_alignments(fwd_path, rev_path, method, line_numbers, tokenised):
    """(line_no, (points, canonical text)) symmetrised from eflomal's two link files."""
    with open(fwd_path, encoding="utf-8") as ff, open(rev_path, encoding="utf-8") as fr:
        for line_no, fwd, rev, (s_tok, t_tok) in zip(line_numbers, ff, fr, tokenised):
            points = sorted(symmetrize(parse_pharaoh(fwd), parse_pharaoh(rev), method,
                                       len(s_tok), len(t_tok)))
            yield line_no, (points, format_pharaoh(points))


def checked_alignments(aligned, tokenised, n_lines, f, source_name, clock):
    """Yield (line_no, points, src tokens, tgt tokens) of each used pair, writing one
    canonical Pharaoh line per input line to `f` (empty for skipped lines) as it goes.

    Checks every point lies inside its sentence pair, so extraction can trust it. One
    pass serves both the corpus alignment and extraction (no second parse of either
    file). `clock[0]` accumulates the seconds spent here and upstream (parsing,
    symmetrising), so the caller can tell them from extraction.
    """
    written = 0
    now = time.perf_counter
    start = now()
    for (line_no, (points, text)), (s_tok, t_tok) in zip(aligned, tokenised):
        if points and (points[-1][0] >= len(s_tok) or
                       max(map(itemgetter(1), points)) >= len(t_tok)):
            i, j = next((i, j) for i, j in points if i >= len(s_tok) or j >= len(t_tok))
            raise InputError(
                f"{source_name} line {line_no}: point {i}-{j} is outside a pair "
                f"of {len(s_tok)} and {len(t_tok)} tokens (was it made for this "
                f"corpus and tokenisation?)")
        f.write("\n" * (line_no - 1 - written) + text + "\n")
        written = line_no
        clock[0] += now() - start
        yield line_no, points, s_tok, t_tok
        start = now()
    f.write("\n" * (n_lines - written))
    clock[0] += now() - start


def _tokenised(src_path, tgt_path):
    with open(src_path, encoding="utf-8") as fs, open(tgt_path, encoding="utf-8") as ft:
        for s, t in zip(fs, ft):
            yield s.split(), t.split()


def _remove_stale(out, keep_alignments, inputs):
    """Files an earlier run (--overwrite) may have left that this release must not have:
    an alignment it did not keep, or one at the top level (the old layout)."""
    stale = [os.path.join(out, ALIGNMENT_FILE)]
    if not keep_alignments:
        stale += [os.path.join(out, "phrases.extract"),
                  os.path.join(out, OWNER_DIR, ALIGNMENT_FILE)]
    inputs = {os.path.realpath(p) for p in inputs if p}
    for path in stale:
        if os.path.isfile(path) and os.path.realpath(path) not in inputs:
            os.unlink(path)


class _DPCollector:
    """Phrase pairs per privacy unit, for the DP set union (nmtfrag.dp.phrase_release).

    Exact counts stay in memory and in the owner's manifest; only the pairs that clear
    the noisy threshold reach the release."""

    def __init__(self, params, doc_ids):
        self.params, self.doc_ids = params, doc_ids
        self.units = {}
        self.total = 0
        self.stats = {}
        self.sigma = self.threshold = self.certificate = None

    def add_unit(self, line_no, found):
        key = line_no if self.doc_ids is None else self.doc_ids[line_no - 1]
        self.units.setdefault(key, []).extend((s, t) for s, t, _ in found)
        self.total += len(found)

    def release(self, rng, seed):
        from .dp import phrase_release

        self.params.check(n_units=len(self.units))
        self.sigma, self.threshold = phrase_release.calibrate(self.params)
        if self.threshold > len(self.units):
            raise InputError(
                f"the DP threshold is {self.threshold:.1f} {self.params.unit}s but there "
                f"are only {len(self.units)}: no phrase pair could ever be released. Use "
                f"more data, a larger --epsilon or --delta, or a smaller --unit-cap")
        kept = phrase_release.select_pairs(self.units.values(), self.params, self.sigma,
                                           self.threshold, rng, self.stats)
        self.stats["released_distinct_pairs"] = len(kept)
        self.stats["units"] = len(self.units)  # owner-only: n never ships
        self.certificate = phrase_release.certificate(
            self.params, self.sigma, self.threshold, seed.public_record())
        return phrase_release.release_lines(kept, self.params.repeat, rng)

    def close(self):
        self.units = {}


def _dp_units_check(dp, documents, n_lines):
    """Document ids (one per input line) for a document-level DP release, else None."""
    if dp is None:
        if documents is not None:
            raise InputError("--documents is used only with --dp --privacy-unit document")
        return None
    dp.check()
    from .dp.phrase_release import calibrate

    calibrate(dp)  # ε refused now (InputError), not after minutes of alignment
    if dp.unit == "sentence":
        if documents is not None:
            raise InputError("--documents needs --privacy-unit document")
        dp.check(n_units=n_lines)  # δ < 1/n before alignment (n ≤ lines; exact later)
        return None
    if documents is None:
        raise InputError("--privacy-unit document needs --documents FILE (one document "
                         "id per input line)")
    n_docs = scan_text_file(documents)
    if n_docs != n_lines:
        raise InputError(f"{documents} has {n_docs} lines but the corpus has {n_lines}: "
                         "give one document id per input line")
    with open(documents, encoding="utf-8") as f:
        ids = [line.strip() for line in f]
    dp.check(n_units=len(set(ids)))  # δ < 1/n before alignment (exact later)
    return ids


def _check_aligner(dp, alignments, priors, align_public, align_model, src_lang,
                   tgt_lang, private):
    """Refuse, before anything expensive, an alignment source a run cannot use.

    Under --dp each unit's phrase pairs must depend on that unit and public inputs
    alone: an alignment learned on the private corpus (eflomal on it, a given file made
    that way, eflomal priors steering it) lets one added unit move other units' pairs,
    so the set union's sensitivity bound would not hold."""
    from .public_align import check_sources

    public = align_public or align_model
    if public and alignments:
        raise InputError("--alignments cannot be combined with --align-public/--align-model")
    if public and priors:
        raise InputError("--priors steer eflomal; the public aligner does not use them")
    if dp is not None and not public:
        why = ("--alignments" if alignments else "--priors" if priors else
               "eflomal on the corpus (the default)")
        raise InputError(
            f"--dp cannot use {why}: an alignment learned on the private corpus makes each "
            f"unit's phrase pairs depend on other units, so the DP sensitivity bound does "
            f"not hold; align with a public model: --align-public PREFIX and/or "
            f"--align-model DIR")
    if public:
        check_sources(align_public, align_model, src_lang, tgt_lang, private)


def _aligner_name(alignments, public):
    """The alignment source as the shared manifest states it (never a path)."""
    from .public_align import DESCRIPTION

    return DESCRIPTION if public else "given" if alignments else "eflomal"


def _public_alignments(aligner, method, line_numbers, tokenised):
    """(line_no, (points, canonical text)) of each pair, aligned on its own."""
    for line_no, (s_tok, t_tok) in zip(line_numbers, tokenised):
        points = aligner.align(s_tok, t_tok, method)
        yield line_no, (points, format_pharaoh(points))


def extract_release(src, tgt, out, *, src_lang="de", tgt_lang="en", max_len=4, min_len=1,
                    sample_rate=0.5, tag=False, seed=None, symmetrize_method="union",
                    alignments=None, priors=None, pretokenized=False,
                    allow_whole_sentences=False, keep_alignments=False, work_dir=None,
                    keep_work=False, overwrite=False, verbose=False, dp=None,
                    documents=None, align_public=None, align_model=None):
    """Build a release of phrase pairs from a confidential parallel corpus.

    `seed=None` (default) pools and samples from the OS's cryptographic source, so
    the corpus order cannot be replayed; an int makes the release reproducible and marks
    it not private. With `dp` (a DPReleaseParams) the released pairs are chosen by the
    DP set union (nmtfrag.dp.phrase_release) instead of sampling at `sample_rate`;
    `documents` (one id per input line) makes documents the privacy unit.
    `align_public` (PREFIX of public parallel text) and/or `align_model` (a model dir)
    align each pair on its own under a model learned on public text only
    (nmtfrag.public_align); `dp` requires them.
    Returns an ExtractResult whose manifests are also written to
    `out/owner/manifest.json` (first) and `out/manifest.json` (last: the completion mark).
    Raises InputError for anything the user must fix; nothing is written then.
    """
    _check_params(max_len, min_len, sample_rate, symmetrize_method, src_lang, tgt_lang)
    seed = resolve_seed(seed)
    timings = {}
    n_lines = validate_parallel(src, tgt)
    doc_ids = _dp_units_check(dp, documents, n_lines)
    _check_aligner(dp, alignments, priors, align_public, align_model, src_lang, tgt_lang,
                   (src, tgt))
    if priors is not None:
        check_priors(priors)
    if alignments is not None:
        n_align = scan_text_file(alignments)
        if n_align != n_lines:
            raise InputError(f"{alignments} has {n_align} lines but the corpus has "
                             f"{n_lines}: give one alignment line per input line")
    # a DP release selects (src, tgt) pairs: their within-pair alignments are not DP
    names = release_file_names(src_lang, tgt_lang, keep_alignments and dp is None)
    out = prepare_output_dir(out, overwrite, inputs=[src, tgt, alignments, priors, documents],
                             kind="nmtfrag-release")
    inputs = [src, tgt, alignments, priors]
    public = align_public or align_model
    for name in list(names.values()) + [MANIFEST, os.path.join(OWNER_DIR, MANIFEST),
                                        os.path.join(OWNER_DIR, ALIGNMENT_FILE)]:
        check_not_input(os.path.join(out, name), inputs)

    skips, normalised = SkipLog(), SkipLog()
    with private_workdir(work_dir, keep_work) as work:
        tok_src, tok_tgt = os.path.join(work, "corpus.src"), os.path.join(work, "corpus.tgt")
        t0 = time.perf_counter()
        line_numbers = tokenize_corpus(
            src, tgt, src_lang, tgt_lang, pretokenized, tok_src, tok_tgt, skips, normalised,
            max_tokens=None if alignments else ALIGNER_MAX_TOKENS, total=n_lines,
            forbidden=frozenset(TAGS) if tag else frozenset())
        timings["tokenise"] = time.perf_counter() - t0
        if not line_numbers:
            raise InputError(f"{src}, {tgt}: no usable sentence pair "
                             f"({skips.total} skipped)")

        align_path = os.path.join(work, ALIGNMENT_FILE)
        t0 = time.perf_counter()
        if public:
            from .public_align import resolve_aligner

            aligner, public_record = resolve_aligner(align_public, align_model, src_lang,
                                                     tgt_lang, work, verbose=verbose)
            timings["align_model"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            aligned = _public_alignments(aligner, symmetrize_method, line_numbers,
                                         _tokenised(tok_src, tok_tgt))
            source_name = "the public aligner"
        elif alignments is None:
            fwd, rev = os.path.join(work, "align.fwd"), os.path.join(work, "align.rev")
            cpu0 = _cpu_seconds()
            align_files(tok_src, tok_tgt, fwd, rev, work, priors, verbose)
            timings["align"] = time.perf_counter() - t0
            timings["align_cpu"] = _cpu_seconds() - cpu0
            t0 = time.perf_counter()
            aligned = _eflomal_alignments(fwd, rev, symmetrize_method, line_numbers,
                                          _tokenised(tok_src, tok_tgt))
            source_name = "eflomal output"
        else:
            aligned = _given_alignments(alignments, line_numbers)
            source_name = alignments
        symmetrise = [time.perf_counter() - t0]  # the rest happens as extraction reads
        before_pass = symmetrise[0]

        t0, cpu0 = time.perf_counter(), time.process_time()
        rng = seed.numpy_rng()
        pool = (ExternalShuffle(work, rng, buckets_for(n_lines)) if dp is None
                   else _DPCollector(dp, doc_ids))
        sentences_without_pairs = short_sentence_pairs = 0
        whole_occurrences = sentences_with_whole = 0
        try:
            with_alignment = "alignment" in names
            with open(align_path, "w", encoding="utf-8", newline="\n") as align_out:
                checked = checked_alignments(aligned, _tokenised(tok_src, tok_tgt), n_lines,
                                             align_out, source_name, symmetrise)
                for line_no, points, s_tok, t_tok in progress(
                        checked, total=len(line_numbers), desc="extract", unit="sent"):
                    if dp is None:
                        found, whole = phrase_records(s_tok, t_tok, points, max_len,
                                                      min_len, with_alignment,
                                                      allow_whole_sentences)
                        pool.add_many(found)
                    else:
                        found, whole = phrase_pairs(s_tok, t_tok, points, max_len, min_len,
                                                    allow_whole_sentences, False)
                        pool.add_unit(line_no, found)
                    sentences_without_pairs += not found
                    short_sentence_pairs += max(len(s_tok), len(t_tok)) <= max_len
                    whole_occurrences += whole
                    sentences_with_whole += whole > 0
            # the shared pass less its alignment work (extract_cpu: all of the pass)
            timings["extract"] = time.perf_counter() - t0 - (symmetrise[0] - before_pass)
            timings["extract_cpu"] = time.process_time() - cpu0
            timings["symmetrise"] = symmetrise[0]

            t0, writing = time.perf_counter(), 0.0
            if overwrite and os.path.exists(os.path.join(out, MANIFEST)):
                # the old release stops being "finished" before its files change
                os.unlink(os.path.join(out, MANIFEST))
            with ReleaseWriter(out, names, max_len, tag) as writer:
                if dp is None:
                    for records in pool.sample_chunks(sample_rate):
                        t1 = time.perf_counter()
                        writer.write_records(records)
                        writing += time.perf_counter() - t1
                else:
                    for s_phrase, t_phrase in pool.release(rng, seed):
                        writer.write(s_phrase, t_phrase)
            timings["sample+write"] = time.perf_counter() - t0
            timings["write"] = writing  # the rest of sample+write reads and shuffles
        finally:
            pool.close()

        alignment_sha = sha256_file(align_path)
        if keep_alignments:  # copied, not renamed: the work dir may be on another device
            with open(align_path, "rb") as f, \
                    atomic_writer(owner_path(out, ALIGNMENT_FILE), "wb", private=True) as g:
                shutil.copyfileobj(f, g)
    _remove_stale(out, keep_alignments, inputs)
    if dp is not None and os.path.isfile(os.path.join(out, "phrases.extract")):
        os.unlink(os.path.join(out, "phrases.extract"))  # an earlier non-DP run's

    owner_files = [f"{OWNER_DIR}/{MANIFEST}"] + \
        ([f"{OWNER_DIR}/{ALIGNMENT_FILE}"] if keep_alignments else [])
    public_params = {
        "src_lang": src_lang, "tgt_lang": tgt_lang, "max_len": max_len,
        "min_len": min_len, "sample_rate": sample_rate if dp is None else None, "tag": tag,
        "allow_whole_sentences": allow_whole_sentences,
        "symmetrize": None if alignments else symmetrize_method,
        "aligner": _aligner_name(alignments, public),
        "pretokenized": pretokenized,
        "tokenizer": None if pretokenized else
        "sacremoses (fairseq hub: aggressive_dash_splits, escape)",
    }
    if dp is not None:  # the certificate holds only if each unit was aligned on its own
        pool.certificate["release"]["aligner"] = public_params["aligner"]
        public_params["dp"] = {"epsilon": dp.epsilon, "delta": dp.delta, "cap": dp.cap,
                               "unit": dp.unit, "repeat": dp.repeat, "weights": dp.weights}
    histogram = writer.length_histogram()
    # What may travel with the release: nothing that identifies or measures the input
    # beyond what the phrase files show anyway, and never the seed.
    manifest = {
        "kind": "nmtfrag-release",
        "nmtfrag_version": __version__,
        "files": names,
        "params": public_params,
        "randomness": seed.public_record(),
        "counts": {"occurrences_released": writer.count},
        "length_histogram": histogram,
        "owner_only_files": owner_files,
    }
    if dp is not None:
        manifest["privacy"] = pool.certificate
    owner = {
        "kind": "nmtfrag-release-owner",
        "note": "owner-only: never ship this folder (paths, input hashes, exact counts, "
                "line numbers, the seed)",
        "nmtfrag_version": __version__,
        "release_files": names,
        "owner_files": owner_files,
        "params": {**public_params, "priors": bool(priors)},
        **({"public_aligner": public_record} if public else {}),
        "randomness": seed.owner_record(),
        "counts": {
            "input_lines": n_lines,
            "skipped_lines": skips.total,
            "sentence_pairs_used": len(line_numbers),
            "sentence_pairs_without_phrase_pairs": sentences_without_pairs,
            "sentence_pairs_within_max_len": short_sentence_pairs,
            "sentence_pairs_with_whole_sentence_phrase_pairs": sentences_with_whole,
            "whole_sentence_occurrences": whole_occurrences,
            "whole_sentence_occurrences_dropped":
                0 if allow_whole_sentences else whole_occurrences,
            "occurrences_extracted": pool.total,
            "occurrences_released": writer.count,
        },
        "length_histogram": histogram,
        "skipped": skips.to_json(),
        "normalised": normalised.to_json(),
        "inputs": {
            "src": {"path": src, "sha256": sha256_file(src)},
            "tgt": {"path": tgt, "sha256": sha256_file(tgt)},
            **({"alignments": {"path": alignments, "sha256": sha256_file(alignments)}}
               if alignments else {}),
            **({"priors": {"path": priors, "sha256": sha256_file(priors)}} if priors else {}),
        },
        "alignment_sha256": alignment_sha,
        **({"dp_counts": pool.stats, "documents": {"path": documents,
                                                    "sha256": sha256_file(documents)}
            if documents else None} if dp is not None else {}),
        "tool_versions": tool_versions("nmtfrag", "eflomal", "sacremoses", "numpy"),
    }
    write_owner_json(out, owner)
    if dp is not None:
        write_json(os.path.join(out, "privacy.json"), pool.certificate)
    write_json(os.path.join(out, MANIFEST), manifest)  # last: marks a finished release
    return ExtractResult(manifest, owner, timings)
