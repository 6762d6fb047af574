"""The fragmentation release: corpus → tokens → alignment → phrase pairs → sample → release.

Kim, Bisazza & Turkmen (2021), "Using Confidential Data for Domain Adaptation of Neural
Machine Translation": the data owner releases only shuffled, subsampled phrase pairs
consistent with a word alignment. This module chains the stages (each callable on its
own) and writes `phrases.<lang>` files plus `manifest.json`. Full sentences exist only
in the private work dir, which is removed at the end.
"""
import array
import os
import resource
import time
from dataclasses import dataclass, field

from . import __version__
from .align import ALIGNER_MAX_TOKENS, align_files, check_priors
from .corpus import SkipLog, read_parallel, scan_text_file, validate_parallel
from .errors import InputError
from .fileio import (MANIFEST, check_not_input, prepare_output_dir, private_workdir,
                     progress, sha256_file, tool_versions, write_json)
from .phrases import extract_phrase_pairs
from .release import ReleaseWriter, release_file_names
from .sample import ExternalShuffle, buckets_for
from .symmetrize import SYMMETRIZERS, format_pharaoh, parse_pharaoh, symmetrize
from .tokenize import to_tokens

ALIGNMENT_FILE = "corpus.align"


@dataclass
class ExtractResult:
    manifest: dict
    timings: dict = field(default_factory=dict)  # seconds per step (not in the manifest)


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
                    skips, normalised, max_tokens=None, total=None):
    """Write the usable pairs tokenised, one per line; return their input line numbers."""
    line_numbers = array.array("q")
    with open(out_src, "w", encoding="utf-8", newline="\n") as fs, \
            open(out_tgt, "w", encoding="utf-8", newline="\n") as ft:
        pairs = read_parallel(src, tgt, skips, normalised)
        for line_no, s, t in progress(pairs, total=total, desc="tokenise", unit="pair"):
            s_tok = to_tokens(s, src_lang, pretokenized)
            t_tok = to_tokens(t, tgt_lang, pretokenized)
            if max_tokens is not None and max(len(s_tok), len(t_tok)) > max_tokens:
                skips.add("too_long_for_aligner", line_no)
                continue
            fs.write(" ".join(s_tok) + "\n")
            ft.write(" ".join(t_tok) + "\n")
            line_numbers.append(line_no)
    return line_numbers


def _given_alignments(path, line_numbers):
    """(line_no, points) of the used pairs from a file with one line per input line."""
    wanted = iter(line_numbers)
    next_wanted = next(wanted, None)
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if line_no == next_wanted:
                try:
                    yield line_no, parse_pharaoh(line)
                except ValueError as exc:
                    raise InputError(f"{path} line {line_no}: {exc}") from None
                next_wanted = next(wanted, None)


def _eflomal_alignments(fwd_path, rev_path, method, line_numbers, tokenised):
    """(line_no, points) symmetrised from eflomal's two directional link files."""
    with open(fwd_path, encoding="utf-8") as ff, open(rev_path, encoding="utf-8") as fr:
        for line_no, fwd, rev, (s_tok, t_tok) in zip(line_numbers, ff, fr, tokenised):
            yield line_no, symmetrize(parse_pharaoh(fwd), parse_pharaoh(rev), method,
                                      len(s_tok), len(t_tok))


def write_corpus_alignment(aligned, tokenised, n_lines, path, source_name):
    """Write one canonical Pharaoh line per input line (empty for skipped lines).

    Checks every point lies inside its sentence pair, so extraction can trust it.
    """
    written = 0
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for (line_no, points), (s_tok, t_tok) in zip(aligned, tokenised):
            for i, j in points:
                if i >= len(s_tok) or j >= len(t_tok):
                    raise InputError(
                        f"{source_name} line {line_no}: point {i}-{j} is outside a pair "
                        f"of {len(s_tok)} and {len(t_tok)} tokens (was it made for this "
                        f"corpus and tokenisation?)")
            f.write("\n" * (line_no - 1 - written) + format_pharaoh(points) + "\n")
            written = line_no
        f.write("\n" * (n_lines - written))


def _tokenised(src_path, tgt_path):
    with open(src_path, encoding="utf-8") as fs, open(tgt_path, encoding="utf-8") as ft:
        for s, t in zip(fs, ft):
            yield s.split(), t.split()


def extract_release(src, tgt, out, *, src_lang="de", tgt_lang="en", max_len=4, min_len=1,
                    sample_rate=0.5, tag=False, seed=1, symmetrize_method="union",
                    alignments=None, priors=None, pretokenized=False,
                    keep_alignments=False, work_dir=None, keep_work=False,
                    overwrite=False, verbose=False):
    """Build a release of phrase pairs from a confidential parallel corpus.

    Returns an ExtractResult whose manifest is also written to `out/manifest.json`.
    Raises InputError for anything the user must fix; nothing is written then.
    """
    _check_params(max_len, min_len, sample_rate, symmetrize_method, src_lang, tgt_lang)
    timings = {}
    n_lines = validate_parallel(src, tgt)
    if priors is not None:
        check_priors(priors)
    if alignments is not None:
        n_align = scan_text_file(alignments)
        if n_align != n_lines:
            raise InputError(f"{alignments} has {n_align} lines but the corpus has "
                             f"{n_lines}: give one alignment line per input line")
    names = release_file_names(src_lang, tgt_lang, keep_alignments)
    out = prepare_output_dir(out, overwrite)
    for name in list(names.values()) + [ALIGNMENT_FILE, MANIFEST]:
        check_not_input(os.path.join(out, name), [src, tgt, alignments, priors])

    skips, normalised = SkipLog(), SkipLog()
    with private_workdir(work_dir, keep_work) as work:
        tok_src, tok_tgt = os.path.join(work, "corpus.src"), os.path.join(work, "corpus.tgt")
        t0 = time.perf_counter()
        line_numbers = tokenize_corpus(
            src, tgt, src_lang, tgt_lang, pretokenized, tok_src, tok_tgt, skips, normalised,
            max_tokens=None if alignments else ALIGNER_MAX_TOKENS, total=n_lines)
        timings["tokenise"] = time.perf_counter() - t0
        if not line_numbers:
            raise InputError(f"{src}, {tgt}: no usable sentence pair "
                             f"({skips.total} skipped)")

        align_path = os.path.join(work, ALIGNMENT_FILE)
        t0 = time.perf_counter()
        if alignments is None:
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
        write_corpus_alignment(aligned, _tokenised(tok_src, tok_tgt), n_lines, align_path,
                               source_name)
        timings["symmetrise"] = time.perf_counter() - t0

        t0, cpu0 = time.perf_counter(), time.process_time()
        shuffle = ExternalShuffle(work, seed, buckets_for(n_lines))
        sentences_without_pairs = short_sentence_pairs = 0
        try:
            aligned = _given_alignments(align_path, line_numbers)
            pairs = zip(aligned, _tokenised(tok_src, tok_tgt))
            for (_, points), (s_tok, t_tok) in progress(
                    pairs, total=len(line_numbers), desc="extract", unit="sent"):
                phrase_pairs = extract_phrase_pairs(s_tok, t_tok, points, max_len, min_len,
                                                    with_alignment=True)
                for s_phrase, t_phrase, inner in phrase_pairs:
                    shuffle.add(f"{s_phrase}\t{t_phrase}\t{inner}")
                sentences_without_pairs += not phrase_pairs
                short_sentence_pairs += max(len(s_tok), len(t_tok)) <= max_len
            timings["extract"] = time.perf_counter() - t0
            timings["extract_cpu"] = time.process_time() - cpu0

            t0 = time.perf_counter()
            with ReleaseWriter(out, names, max_len, tag) as writer:
                for record in shuffle.sample(sample_rate):
                    s_phrase, t_phrase, inner = record.split("\t")
                    writer.write(s_phrase, t_phrase, inner)
            timings["sample+write"] = time.perf_counter() - t0
        finally:
            shuffle.close()

        alignment_sha = sha256_file(align_path)
        if keep_alignments:
            os.replace(align_path, os.path.join(out, ALIGNMENT_FILE))

    manifest = {
        "kind": "nmtfrag-release",
        "nmtfrag_version": __version__,
        "files": names,
        "params": {
            "src_lang": src_lang, "tgt_lang": tgt_lang, "max_len": max_len,
            "min_len": min_len, "sample_rate": sample_rate, "tag": tag, "seed": seed,
            "symmetrize": None if alignments else symmetrize_method,
            "aligner": "given" if alignments else "eflomal",
            "pretokenized": pretokenized,
            "tokenizer": None if pretokenized else
            "sacremoses (fairseq hub: aggressive_dash_splits, escape)",
            "priors": bool(priors),
        },
        "counts": {
            "input_lines": n_lines,
            "skipped_lines": skips.total,
            "sentence_pairs_used": len(line_numbers),
            "sentence_pairs_without_phrase_pairs": sentences_without_pairs,
            "sentence_pairs_within_max_len": short_sentence_pairs,
            "occurrences_extracted": shuffle.total,
            "occurrences_released": writer.count,
        },
        "length_histogram": writer.length_histogram(),
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
        "owner_only_files": [ALIGNMENT_FILE] if keep_alignments else [],
        "tool_versions": tool_versions("nmtfrag", "eflomal", "sacremoses", "numpy"),
    }
    write_json(os.path.join(out, MANIFEST), manifest)
    return ExtractResult(manifest, timings)
