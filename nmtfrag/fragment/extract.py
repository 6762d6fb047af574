"""The fragmentation release: corpus → tokens → alignment → phrase pairs → sample → release.

Kim, Bisazza & Turkmen (2021), "Using Confidential Data for Domain Adaptation of Neural
Machine Translation": the data owner releases only shuffled, subsampled phrase pairs
consistent with a word alignment. This module chains the stages (each callable on its
own) and writes `phrases.<lang>` files plus a minimal `manifest.json` (what may be shared)
and `owner/manifest.json` (what must not: paths, hashes, exact counts, line numbers, the
seed). Full sentences exist only in the private work dir, which is removed at the end;
a phrase pair one of whose sides is a whole sentence is dropped unless the user opts in.

`extract_release` reads as the stages of docs/develop.md's module table: check the inputs →
tokenise → align → extract (each pair's phrase pairs go to a collector as found) →
release (the collector writes what it keeps: a random sample, or the DP set union's
pairs; nmtfrag.fragment.release.PairCollector) → manifests.
"""
from __future__ import annotations

import array
import os
import resource
import shutil
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TYPE_CHECKING, TextIO, TypedDict

from .. import __version__
from .align import ALIGNER_MAX_TOKENS, align_files, check_priors
from ..data.corpus import SkipLog, read_parallel, scan_text_file, validate_parallel
from .dp_release import DPReleaseParams, DPSetUnionRelease, calibrate
from ..errors import (InputError, as_optional_path, as_path, check_bool, check_int,
                      check_number, check_str)
from ..fileio import (MANIFEST, OWNER_DIR, StrPath, atomic_writer, owner_path, progress,
                      sha256_file, tool_versions, write_json, write_owner_json)
from ..outdir import check_not_input, prepare_output_dir
from ..workdir import private_workdir
from ..limits import MAX_PHRASE_LEN
from .phrases import phrase_records
from .public_align import DESCRIPTION as PUBLIC_ALIGNER
from .public_align import check_sources, resolve_aligner
from ..randomness import Seed, resolve_seed
from ..data.release_text import TAGS
from .release import (PairCollector, ReleaseWriter, SampledRelease,
                      release_file_names)
from .sampling import buckets_for
from .symmetrize import (SYMMETRIZERS, canonical_points, format_pharaoh, parse_pharaoh,
                         symmetrize)
from ..data.tokenize import to_tokens

if TYPE_CHECKING:
    from typing_extensions import Unpack

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
    if not 1 <= max_len <= MAX_PHRASE_LEN:  # nmtfrag.limits: what a run can meet
        raise InputError(f"--max-len must be between 1 and {MAX_PHRASE_LEN} (got {max_len})")
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


def tokenize_corpus(src: str, tgt: str, src_lang: str, tgt_lang: str, pretokenized: bool,
                    out_src: str, out_tgt: str, skips: SkipLog, normalised: SkipLog,
                    max_tokens: int | None = None, total: int | None = None,
                    forbidden: frozenset[str] = frozenset()) -> array.array:
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


def phrase_pairs(s_tok: list[str], t_tok: list[str], points: list[tuple[int, int]],
                 max_len: int, min_len: int, allow_whole_sentences: bool,
                 with_alignment: bool = True) -> tuple[list[tuple[str, ...]], int]:
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


def checked_alignments(aligned: Iterable[tuple[int, tuple[list, str]]],
                       tokenised: Iterable[tuple[list[str], list[str]]], n_lines: int,
                       f: TextIO, source_name: str, clock: list[float],
                       ) -> Iterator[tuple[int, list, list[str], list[str]]]:
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


def _remove_stale(out, keep_alignments, with_alignment, inputs):
    """Files an earlier run (--overwrite) may have left that this release must not have:
    an alignment it did not keep, or one at the top level (the old layout), and
    phrases.extract when this release has none (always under --dp: its within-pair
    alignments are not DP)."""
    stale = [os.path.join(out, ALIGNMENT_FILE)]
    if not with_alignment:
        stale.append(os.path.join(out, "phrases.extract"))
    if not keep_alignments:
        stale.append(os.path.join(out, OWNER_DIR, ALIGNMENT_FILE))
    inputs = {os.path.realpath(p) for p in inputs if p}
    for path in stale:
        if os.path.isfile(path) and os.path.realpath(path) not in inputs:
            os.unlink(path)


def _dp_units_check(dp, documents, n_lines):
    """Document ids (one per input line) for a document-level DP release, else None."""
    if dp is None:
        if documents is not None:
            raise InputError("--documents is used only with --dp --privacy-unit document")
        return None
    dp.check()
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
    return PUBLIC_ALIGNER if public else "given" if alignments else "eflomal"


def _public_alignments(aligner, method, line_numbers, tokenised):
    """(line_no, (points, canonical text)) of each pair, aligned on its own."""
    for line_no, (s_tok, t_tok) in zip(line_numbers, tokenised):
        points = aligner.align(s_tok, t_tok, method)
        yield line_no, (points, format_pharaoh(points))


_BOOL_FIELDS = ("tag", "pretokenized", "allow_whole_sentences", "keep_alignments",
                "keep_work", "overwrite", "verbose")
_PATH_FIELDS = ("alignments", "priors", "work_dir", "documents", "align_public",
                "align_model")


@dataclass(frozen=True)
class ExtractOptions:
    """How a release is made: the options of `nmtfrag extract` (see its --help).

    `seed=None` (default) pools and samples from the OS's cryptographic source, so
    the corpus order cannot be replayed; an int makes the release reproducible and marks
    it not private. With `dp` (a DPReleaseParams) the released pairs are chosen by the
    DP set union (nmtfrag.fragment.dp_release) instead of sampling at `sample_rate`;
    `documents` (one id per input line) makes documents the privacy unit.
    `align_public` (PREFIX of public parallel text) and/or `align_model` (a model dir)
    align each pair on its own under a model learned on public text only
    (nmtfrag.fragment.public_align); `dp` requires them. `alignments` is a given corpus
    alignment (instead of eflomal), `priors` eflomal priors learned on public data."""
    src_lang: str = "de"
    tgt_lang: str = "en"
    max_len: int = 4
    min_len: int = 1
    sample_rate: float = 0.5
    tag: bool = False
    seed: int | Seed | None = None
    symmetrize_method: str = "union"
    alignments: str | None = None
    priors: str | None = None
    pretokenized: bool = False
    allow_whole_sentences: bool = False
    keep_alignments: bool = False
    work_dir: str | None = None
    keep_work: bool = False
    overwrite: bool = False
    verbose: bool = False
    dp: DPReleaseParams | None = None
    documents: str | None = None
    align_public: str | None = None
    align_model: str | None = None

    def __post_init__(self) -> None:
        """Types checked when the options are made (TypeError naming the field), paths
        given as os.PathLike kept as str: nothing is written before a bad one is seen."""
        for name in _BOOL_FIELDS:
            check_bool(name, getattr(self, name))
        for name in ("max_len", "min_len"):
            check_int(name, getattr(self, name))
        check_number("sample_rate", self.sample_rate)
        for name in ("src_lang", "tgt_lang", "symmetrize_method"):
            check_str(name, getattr(self, name))
        for name in _PATH_FIELDS:
            object.__setattr__(self, name, as_optional_path(name, getattr(self, name)))
        if self.seed is not None and not isinstance(self.seed, Seed):
            check_int("seed", self.seed, 0)
        if self.dp is not None and not isinstance(self.dp, DPReleaseParams):
            raise TypeError(f"dp must be a DPReleaseParams or None, got {self.dp!r}")

    @property
    def public_aligner(self) -> bool:
        """Each pair aligned on its own by a model learned on public text."""
        return bool(self.align_public or self.align_model)


@dataclass
class _Extraction:
    """What the extraction pass counted (owner-only figures)."""
    pairs_used: int = 0
    without_pairs: int = 0
    within_max_len: int = 0
    whole_occurrences: int = 0
    with_whole: int = 0


class ExtractFields(TypedDict, total=False):
    """ExtractOptions' fields by keyword, as `extract_release(**fields)` takes them
    (tests/test_static_types.py checks the two name the same fields)."""

    src_lang: str
    tgt_lang: str
    max_len: int
    min_len: int
    sample_rate: float
    tag: bool
    seed: int | Seed | None
    symmetrize_method: str
    alignments: str | None
    priors: str | None
    pretokenized: bool
    allow_whole_sentences: bool
    keep_alignments: bool
    work_dir: str | None
    keep_work: bool
    overwrite: bool
    verbose: bool
    dp: DPReleaseParams | None
    documents: str | None
    align_public: str | None
    align_model: str | None


def extract_release(src: StrPath, tgt: StrPath, out: StrPath,
                    options: ExtractOptions | None = None,
                    **fields: Unpack[ExtractFields]) -> ExtractResult:
    """Build a release of phrase pairs from a confidential parallel corpus.

    Give the options as an ExtractOptions or as its fields by keyword (not both).
    Returns an ExtractResult whose manifests are also written to
    `out/owner/manifest.json` (first) and `out/manifest.json` (last: the completion mark).
    Raises InputError for anything the user must fix; nothing is written then. Paths may
    be str or os.PathLike; a wrong type is a TypeError naming the argument.
    """
    if options is not None and fields:
        raise TypeError("give an ExtractOptions or its fields by keyword, not both")
    if options is not None and not isinstance(options, ExtractOptions):
        raise TypeError(f"options must be an ExtractOptions, got {options!r}")
    src, tgt, out = as_path("src", src), as_path("tgt", tgt), as_path("out", out)
    opts = options if options is not None else ExtractOptions(**fields)
    _check_params(opts.max_len, opts.min_len, opts.sample_rate, opts.symmetrize_method,
                  opts.src_lang, opts.tgt_lang)
    seed = resolve_seed(opts.seed)
    n_lines, doc_ids = _check_inputs(src, tgt, opts)
    # a DP release selects (src, tgt) pairs: their within-pair alignments are not DP
    names = release_file_names(opts.src_lang, opts.tgt_lang,
                               opts.keep_alignments and opts.dp is None)
    out = _prepare_out(out, src, tgt, opts, names)
    timings: dict[str, float] = {}
    skips, normalised = SkipLog(), SkipLog()
    with private_workdir(opts.work_dir, opts.keep_work) as work:
        tok_src, tok_tgt = os.path.join(work, "corpus.src"), os.path.join(work, "corpus.tgt")
        line_numbers = _tokenise(src, tgt, tok_src, tok_tgt, opts, n_lines, skips,
                                 normalised, timings)
        aligned, source_name, public_record, symmetrise = _align(
            tok_src, tok_tgt, work, line_numbers, opts, timings, seed.reproducible)
        align_path = os.path.join(work, ALIGNMENT_FILE)
        t0, cpu0 = time.perf_counter(), time.process_time()
        before_pass = symmetrise[0]
        collector = _collector(opts, work, seed, n_lines, doc_ids)
        try:
            with open(align_path, "w", encoding="utf-8", newline="\n") as align_out:
                checked = checked_alignments(aligned, _tokenised(tok_src, tok_tgt), n_lines,
                                             align_out, source_name, symmetrise)
                found = collect_pairs(checked, collector, opts, "alignment" in names,
                                      len(line_numbers))
            # the shared pass less its alignment work (extract_cpu: all of the pass)
            timings["extract"] = time.perf_counter() - t0 - (symmetrise[0] - before_pass)
            timings["extract_cpu"] = time.process_time() - cpu0
            timings["symmetrise"] = symmetrise[0]
            writer = _write_release(out, names, opts, collector, timings)
        finally:
            collector.close()
        alignment_sha = sha256_file(align_path)
        if opts.keep_alignments:  # copied, not renamed: the work dir may be on another device
            with open(align_path, "rb") as f, \
                    atomic_writer(owner_path(out, ALIGNMENT_FILE), "wb", private=True) as g:
                shutil.copyfileobj(f, g)
    _remove_stale(out, opts.keep_alignments, "alignment" in names,
                  [src, tgt, opts.alignments, opts.priors])
    found.pairs_used = len(line_numbers)
    extra = collector.records(_aligner_name(opts.alignments, opts.public_aligner))
    manifest, owner = _manifests(
        src, tgt, opts, seed, names=names, collector=collector, extra=extra, writer=writer,
        found=found, n_lines=n_lines, skips=skips, normalised=normalised,
        alignment_sha=alignment_sha, public_record=public_record)
    write_owner_json(out, owner)
    for name, content in extra.files.items():  # e.g. the DP release's privacy.json
        if name == "privacy.json":  # bound to the phrase files (the manifest's copy too)
            from ..dp import cert_files

            cert_files.bind(content, out)
        write_json(os.path.join(out, name), content)
    write_json(os.path.join(out, MANIFEST), manifest)  # last: marks a finished release
    return ExtractResult(manifest, owner, timings)


def _check_inputs(src, tgt, opts):
    """(input lines, document ids or None): everything refused before any work."""
    n_lines = validate_parallel(src, tgt, "--src/--tgt")
    doc_ids = _dp_units_check(opts.dp, opts.documents, n_lines)
    _check_aligner(opts.dp, opts.alignments, opts.priors, opts.align_public,
                   opts.align_model, opts.src_lang, opts.tgt_lang, (src, tgt))
    if opts.priors is not None:
        check_priors(opts.priors)
    if opts.alignments is not None:
        n_align = scan_text_file(opts.alignments)
        if n_align != n_lines:
            raise InputError(f"{opts.alignments} has {n_align} lines but the corpus has "
                             f"{n_lines}: give one alignment line per input line")
    return n_lines, doc_ids


def _prepare_out(out, src, tgt, opts, names) -> str:
    """The release directory, made or reused (--overwrite); no output may be an input."""
    out = prepare_output_dir(out, opts.overwrite,
                             inputs=[src, tgt, opts.alignments, opts.priors, opts.documents],
                             kind="nmtfrag-release")
    inputs = [src, tgt, opts.alignments, opts.priors]
    for name in list(names.values()) + [MANIFEST, os.path.join(OWNER_DIR, MANIFEST),
                                        os.path.join(OWNER_DIR, ALIGNMENT_FILE)]:
        check_not_input(os.path.join(out, name), inputs)
    return out


def _tokenise(src, tgt, tok_src, tok_tgt, opts, n_lines, skips, normalised, timings):
    """The tokenise stage: the used pairs' input line numbers (InputError if none)."""
    t0 = time.perf_counter()
    line_numbers = tokenize_corpus(
        src, tgt, opts.src_lang, opts.tgt_lang, opts.pretokenized, tok_src, tok_tgt, skips,
        normalised, max_tokens=None if opts.alignments else ALIGNER_MAX_TOKENS,
        total=n_lines, forbidden=frozenset(TAGS) if opts.tag else frozenset())
    timings["tokenise"] = time.perf_counter() - t0
    if not line_numbers:
        raise InputError(f"{src}, {tgt}: no usable sentence pair "
                         f"({skips.total} skipped)")
    return line_numbers


def _align(tok_src, tok_tgt, work, line_numbers, opts, timings, reproducible=False):
    """The align stage: (lazy (line_no, (points, text)) per used pair, the source's name
    for messages, the public aligner's owner record or None, the symmetrise clock).
    A `reproducible` (seeded) run learns the public model once per public text into the
    user's cache (nmtfrag.fragment.public_align.cached_model): eflomal cannot be seeded.

    The alignments are parsed/symmetrised lazily, as extraction reads them: the clock
    (seconds, in a one-item list) keeps counting there."""
    t0 = time.perf_counter()
    public_record = None
    if opts.public_aligner:
        aligner, public_record = resolve_aligner(opts.align_public, opts.align_model,
                                                 opts.src_lang, opts.tgt_lang, work,
                                                 verbose=opts.verbose,
                                                 reproducible=reproducible)
        timings["align_model"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        aligned = _public_alignments(aligner, opts.symmetrize_method, line_numbers,
                                     _tokenised(tok_src, tok_tgt))
        source_name = "the public aligner"
    elif opts.alignments is None:
        fwd, rev = os.path.join(work, "align.fwd"), os.path.join(work, "align.rev")
        cpu0 = _cpu_seconds()
        align_files(tok_src, tok_tgt, fwd, rev, work, opts.priors, opts.verbose)
        timings["align"] = time.perf_counter() - t0
        timings["align_cpu"] = _cpu_seconds() - cpu0
        t0 = time.perf_counter()
        aligned = _eflomal_alignments(fwd, rev, opts.symmetrize_method, line_numbers,
                                      _tokenised(tok_src, tok_tgt))
        source_name = "eflomal output"
    else:
        aligned = _given_alignments(opts.alignments, line_numbers)
        source_name = opts.alignments
    return aligned, source_name, public_record, [time.perf_counter() - t0]


def _collector(opts, work, seed, n_lines, doc_ids) -> PairCollector:
    """The collect stage's collector: the DP set union under --dp, else the sample."""
    rng = seed.numpy_rng()
    if opts.dp is not None:
        return DPSetUnionRelease(opts.dp, rng, seed, doc_ids, opts.documents)
    return SampledRelease(work, rng, buckets_for(n_lines), opts.sample_rate)


def collect_pairs(checked: Iterable[tuple[int, list, list[str], list[str]]],
                  collector: PairCollector, opts: ExtractOptions, with_alignment: bool,
                  n_pairs: int) -> _Extraction:
    """The extract stage: each checked pair's phrase pairs (phrases.phrase_records) go
    to `collector` as one unit; returns the owner-only counts of the pass."""
    found = _Extraction()
    for line_no, points, s_tok, t_tok in progress(checked, total=n_pairs, desc="extract",
                                                  unit="sent"):
        records, whole = phrase_records(s_tok, t_tok, points, opts.max_len, opts.min_len,
                                        with_alignment, opts.allow_whole_sentences)
        collector.add_unit(line_no, records)
        found.without_pairs += not records
        found.within_max_len += max(len(s_tok), len(t_tok)) <= opts.max_len
        found.whole_occurrences += whole
        found.with_whole += whole > 0
    return found


def _write_release(out, names, opts, collector, timings):
    """The release stage: the collector writes the phrase files (atomically, checked)."""
    t0 = time.perf_counter()
    if opts.overwrite and os.path.exists(os.path.join(out, MANIFEST)):
        # the old release stops being "finished" before its files change
        os.unlink(os.path.join(out, MANIFEST))
    with ReleaseWriter(out, names, opts.max_len, opts.tag) as writer:
        writing = collector.write_release(writer)
    timings["sample+write"] = time.perf_counter() - t0
    timings["write"] = writing  # the rest of sample+write reads and shuffles
    return writer


def _public_params(opts, collector):
    """The parameters the shared manifest states (no path, no seed)."""
    return {
        "src_lang": opts.src_lang, "tgt_lang": opts.tgt_lang, "max_len": opts.max_len,
        "min_len": opts.min_len, "sample_rate": collector.sample_rate, "tag": opts.tag,
        "allow_whole_sentences": opts.allow_whole_sentences,
        "symmetrize": None if opts.alignments else opts.symmetrize_method,
        "aligner": _aligner_name(opts.alignments, opts.public_aligner),
        "pretokenized": opts.pretokenized,
        "tokenizer": None if opts.pretokenized else
        "sacremoses (fairseq hub: aggressive_dash_splits, escape)",
    }


def _manifests(src, tgt, opts, seed, *, names, collector, extra, writer, found, n_lines,
               skips, normalised, alignment_sha, public_record):
    """The manifests stage: (OUT/manifest.json, OUT/owner/manifest.json) contents."""
    owner_files = [f"{OWNER_DIR}/{MANIFEST}"] + \
        ([f"{OWNER_DIR}/{ALIGNMENT_FILE}"] if opts.keep_alignments else [])
    params = {**_public_params(opts, collector), **extra.params}
    if public_record is not None:  # the aligner's fixed settings are public
        params["aligner_params"] = public_record["params"]
    histogram = writer.length_histogram()
    # What may travel with the release: nothing that identifies or measures the input
    # beyond what the phrase files show anyway, and never the seed.
    manifest = {
        "kind": "nmtfrag-release",
        "nmtfrag_version": __version__,
        "files": names,
        "params": params,
        "randomness": seed.public_record(),
        "counts": {"occurrences_released": writer.count},
        "length_histogram": histogram,
        "owner_only_files": owner_files,
        **extra.shared,
    }
    owner = {
        "kind": "nmtfrag-release-owner",
        "note": "owner-only: never ship this folder (paths, input hashes, exact counts, "
                "line numbers, the seed)",
        "nmtfrag_version": __version__,
        "release_files": names,
        "owner_files": owner_files,
        "params": {**params, "priors": bool(opts.priors)},
        **({"public_aligner": public_record} if opts.public_aligner else {}),
        "randomness": seed.owner_record(),
        "counts": _owner_counts(opts, collector, writer, found, n_lines, skips),
        "length_histogram": histogram,
        "skipped": skips.to_json(),
        "normalised": normalised.to_json(),
        "inputs": _input_records(src, tgt, opts),
        "alignment_sha256": alignment_sha,
        **extra.owner,
        "tool_versions": tool_versions("nmtfrag", "eflomal", "sacremoses", "numpy"),
    }
    return manifest, owner


def _owner_counts(opts, collector, writer, found, n_lines, skips):
    return {
        "input_lines": n_lines,
        "skipped_lines": skips.total,
        "sentence_pairs_used": found.pairs_used,
        "sentence_pairs_without_phrase_pairs": found.without_pairs,
        "sentence_pairs_within_max_len": found.within_max_len,
        "sentence_pairs_with_whole_sentence_phrase_pairs": found.with_whole,
        "whole_sentence_occurrences": found.whole_occurrences,
        "whole_sentence_occurrences_dropped":
            0 if opts.allow_whole_sentences else found.whole_occurrences,
        "occurrences_extracted": collector.total,
        "occurrences_released": writer.count,
    }


def _input_records(src, tgt, opts):
    """Path and SHA-256 of each input (owner-only)."""
    return {
        "src": {"path": src, "sha256": sha256_file(src)},
        "tgt": {"path": tgt, "sha256": sha256_file(tgt)},
        **({"alignments": {"path": opts.alignments, "sha256": sha256_file(opts.alignments)}}
           if opts.alignments else {}),
        **({"priors": {"path": opts.priors, "sha256": sha256_file(opts.priors)}}
           if opts.priors else {}),
    }
