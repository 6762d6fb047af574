"""Document-level train/valid/test split (Kim, Bisazza & Turkmen 2021, Section 4.1).

Why: the reference paper simulates a translation company's situation — the client's
documents it trains on are never the documents it is tested on — by splitting OPUS
corpora by document. A sentence-level random split would put sentences of the same
document (same product, same boilerplate, same names) on both sides and overstate what
adaptation achieves. This module works on a plain TSV, `doc_id<TAB>src<TAB>tgt`, so any
domain can use it; `nmtfrag.data.opus` only converts OPUS downloads to that TSV.

Procedure (all decisions are recorded in the manifest):
1. Read the TSV. Refused (InputError, exit 2, naming the line): missing or empty file,
   invalid UTF-8, a line without exactly three tab-separated fields, an empty doc_id.
   Skipped and counted: a pair empty (or blank) on one or both sides. Normalised and
   counted: CR/LF endings. Lines of one document need not be contiguous.
2. Order documents by first appearance, then shuffle them with `random.Random(seed)`.
3. Fill the splits in the order valid, test, train, each with whole documents taken in
   shuffled order, until it holds its target number of pairs. A document that would
   overflow the split is handled by `overflow`:
   - "cut" (default): its first pairs (in file order) fill the split exactly and the rest
     of that document is discarded — used by no split, so no document crosses splits;
   - "whole": it is taken whole, so the split exceeds its target;
   - "skip": it is left for the next split (offered there first), so the split may end
     below its target if no remaining document fits.
   `train=None` ("all") gives every remaining document to train.
4. Remove from test (and from valid with dedup="valid-test") every pair that also
   occurs, exactly (same src and same tgt), in train; count the removals. If documents
   are left over, the held-out split is topped up from them (same rules, same filter).
5. Report requested vs. obtained sizes, documents, cut documents and discarded pairs, and
   any shortfall when the corpus is too small.

Only the selected lines are held in memory: the first pass indexes byte offsets per
document, the writer seeks to them.
"""
from __future__ import annotations

import hashlib
import os
import random
import sys
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .corpus import SkipLog, check_input_file
from ..errors import InputError
from ..fileio import (MANIFEST, atomic_writer, public_name, sha256_file, tool_versions,
                      write_json, write_parallel)
from ..outdir import check_not_input, prepare_output_dir

SPLIT_ORDER = ("valid", "test", "train")
OVERFLOW_POLICIES = ("cut", "whole", "skip")
DEDUP_CHOICES = ("test", "valid-test", "none")


@dataclass
class DocIndex:
    """Byte offsets and line numbers of the usable lines of each document."""

    path: str
    order: list[str] = field(default_factory=list)           # doc ids by first appearance
    offsets: dict[str, array] = field(default_factory=dict)  # doc id -> byte offsets
    line_nos: dict[str, array] = field(default_factory=dict)  # doc id -> 1-based lines
    skips: SkipLog = field(default_factory=SkipLog)
    normalised: SkipLog = field(default_factory=SkipLog)
    n_lines: int = 0

    def size(self, doc: str) -> int:
        return len(self.offsets[doc])

    @property
    def n_pairs(self) -> int:
        return sum(len(a) for a in self.offsets.values())


def _parse_line(raw, path, line_no, normalised=None):
    """(doc_id, src, tgt) of one TSV line (bytes without '\\n'); raises on bad format."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path} line {line_no}: invalid UTF-8 (byte {exc.start + 1}); "
                         f"convert the file to UTF-8 first") from None
    if text.endswith("\r"):
        text = text[:-1]
        if normalised is not None:
            normalised.add("crlf", line_no)
    if line_no == 1 and text.startswith("\ufeff"):
        text = text[1:]
        if normalised is not None:
            normalised.add("bom", line_no)
    fields = text.split("\t")
    if len(fields) != 3:
        raise InputError(f"{path} line {line_no}: expected 3 tab-separated fields "
                         f"(doc_id, src, tgt), found {len(fields)}")
    doc, src, tgt = fields
    if not doc.strip():
        raise InputError(f"{path} line {line_no}: empty document id")
    return doc, src, tgt


def index_tsv(path: str) -> DocIndex:
    """First pass over the TSV: validate every line, index usable pairs per document."""
    check_input_file(path)
    index = DocIndex(path=path)
    offset = 0
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, 1):
            start, offset = offset, offset + len(raw)
            index.n_lines = line_no
            body = raw[:-1] if raw.endswith(b"\n") else raw
            doc, src, tgt = _parse_line(body, path, line_no, index.normalised)
            empty_src, empty_tgt = not src.strip(), not tgt.strip()
            if empty_src and empty_tgt:
                index.skips.add("empty_both_sides", line_no)
                continue
            if empty_src or empty_tgt:
                index.skips.add("empty_one_side", line_no)
                continue
            if doc not in index.offsets:
                index.order.append(doc)
                index.offsets[doc] = array("q")
                index.line_nos[doc] = array("q")
            index.offsets[doc].append(start)
            index.line_nos[doc].append(line_no)
    if not index.order:
        raise InputError(f"{path}: no usable sentence pair (all {index.n_lines} lines "
                         f"are empty on at least one side)")
    return index


@dataclass
class Take:
    """`take` pairs of document `doc` (its first ones in file order) go to one split."""

    doc: str
    size: int   # usable pairs in the document
    take: int   # pairs used (< size only when the document was cut)

    @property
    def cut(self) -> bool:
        return self.take < self.size


def fill(queue: list[str], target: int | None, overflow: str,
         size_of: Callable[[str], int],
         filled: int = 0) -> tuple[list[Take], list[str]]:
    """Take documents from `queue` (in order) until `filled` reaches `target`.

    Returns (takes, rest_of_queue). `size_of(doc)` gives a document's usable size (for
    held-out top-ups, its size after removing pairs that occur in train).
    """
    takes, rest = [], []
    for i, doc in enumerate(queue):
        if target is not None and filled >= target:
            rest.extend(queue[i:])
            break
        n = size_of(doc)
        if n == 0:
            rest.append(doc)  # nothing usable here (all duplicates of train): leave it
            continue
        if target is None or filled + n <= target:
            takes.append(Take(doc, n, n))
            filled += n
        elif overflow == "cut":
            takes.append(Take(doc, n, target - filled))
            filled = target
        elif overflow == "whole":
            takes.append(Take(doc, n, n))
            filled += n
        elif overflow == "skip":
            rest.append(doc)
        else:
            raise ValueError(f"unknown overflow policy {overflow!r}")
    return takes, rest


def plan(doc_sizes: list[tuple[str, int]], targets: dict[str, int | None], seed: int,
         overflow: str = "cut") -> tuple[dict[str, list[Take]], list[str], list[str]]:
    """Assign documents to splits; pure function of its arguments (used by tests).

    doc_sizes: list of (doc_id, n_pairs) in first-appearance order; targets: dict split
    -> target (None = all remaining). Returns ({split: [Take]}, shuffled order, unused).
    """
    sizes = dict(doc_sizes)
    order = [doc for doc, _ in doc_sizes]
    random.Random(seed).shuffle(order)
    queue = list(order)
    plan_ = {}
    for split in SPLIT_ORDER:
        plan_[split], queue = fill(queue, targets[split], overflow, sizes.__getitem__)
    return plan_, order, queue


def _pair_key(src, tgt):
    return hashlib.blake2b(f"{src}\t{tgt}".encode("utf-8"), digest_size=16).digest()


class _Reader:
    """Random access to indexed TSV lines."""

    def __init__(self, index):
        self.index = index
        self.f = open(index.path, "rb")

    def pairs(self, doc: str, take: int | None = None) -> Iterator[tuple[str, str]]:
        offs = self.index.offsets[doc]
        lines = self.index.line_nos[doc]
        n = len(offs) if take is None else take
        for off, line_no in zip(offs[:n], lines[:n]):
            self.f.seek(off)
            raw = self.f.readline()
            body = raw[:-1] if raw.endswith(b"\n") else raw
            _, src, tgt = _parse_line(body, self.index.path, line_no)
            yield src, tgt

    def close(self) -> None:
        self.f.close()


def split_corpus(docs: str, out: str, train: int | None = 10000, valid: int = 150,
                 test: int = 2000, seed: int = 1, overflow: str = "cut",
                 dedup: str = "test", src_lang: str = "de", tgt_lang: str = "en",
                 overwrite: bool = False,
                 log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Split `docs` (TSV doc_id, src, tgt) by document into OUT/{train,valid,test}.*.

    Returns the manifest (also written to OUT/manifest.json). `train=None` means every
    document left after valid and test. See the module docstring for the procedure.
    """
    log = log or (lambda msg: print(msg, file=sys.stderr))
    _check_options(train, valid, test, overflow, dedup, src_lang, tgt_lang)
    index = index_tsv(docs)
    targets = {"train": train, "valid": valid, "test": test}
    doc_sizes = [(doc, index.size(doc)) for doc in index.order]
    assignment, _, unused = plan(doc_sizes, targets, seed, overflow)
    check_possible(docs, index, targets, assignment)  # before OUT is made
    out = prepare_output_dir(out, overwrite=overwrite, inputs=[docs])
    files = _output_files(out, docs, src_lang, tgt_lang)

    reader = _Reader(index)
    try:
        # train first: its pairs define what is removed from the held-out splits
        train_keys = _write_train(reader, assignment["train"], files["train"])
        held_out, removed, topped_up = {}, {}, {}
        for split in ("valid", "test"):
            filt = split in _DEDUP_SPLITS[dedup]
            held, unused = _select_held_out(reader, assignment[split], train_keys, filt,
                                            unused, targets[split], overflow)
            assignment[split] = held.takes
            held_out[split] = held.pairs
            removed[split] = held.removed if filt else None
            topped_up[split] = held.topped_up
            _write_pairs(files[split], held.pairs)
    finally:
        reader.close()

    sizes = {"train": sum(t.take for t in assignment["train"]),
             "valid": len(held_out["valid"]), "test": len(held_out["test"])}
    _write_documents_tsv(os.path.join(out, "documents.tsv"), assignment, index)
    splits, warnings = _split_reports(assignment, targets, sizes, removed, topped_up,
                                      unused, overflow)
    manifest = {
        "stage": "split",
        "params": {"docs": public_name(docs), "train": train if train is not None
                   else "all", "valid": valid, "test": test, "seed": seed,
                   "overflow": overflow, "dedup": dedup, "src_lang": src_lang,
                   "tgt_lang": tgt_lang, "fill_order": list(SPLIT_ORDER)},
        "seed": seed,
        "input": {"lines": index.n_lines, "usable_pairs": index.n_pairs,
                  "documents": len(index.order), "sha256": {docs: sha256_file(docs)},
                  "skipped": index.skips.to_json(),
                  "normalised": index.normalised.to_json()},
        "splits": splits,
        "unused": {"documents": len(unused),
                   "pairs": sum(index.size(d) for d in unused)},
        "warnings": warnings,
        "files": {split: {lang: os.path.basename(p) for lang, p in f.items()}
                  for split, f in files.items()} | {"documents": "documents.tsv"},
        "tool_versions": tool_versions("nmtfrag"),
    }
    for w in warnings:
        log(f"warning: {w}")
    write_json(os.path.join(out, MANIFEST), manifest)
    return manifest


# held-out splits from which pairs that occur in train are removed, per --dedup
_DEDUP_SPLITS = {"test": ("test",), "valid-test": ("valid", "test"), "none": ()}


def check_possible(docs: str, index: DocIndex, targets: dict[str, int | None],
                   assignment: dict[str, list[Take]]) -> None:
    """Refuse an impossible split (InputError naming the option and the file): a split
    asked for pairs (or --train all) that the plan leaves without any document, because
    the file holds fewer documents or pairs than the splits filled before it take. A
    split that only falls short of its target is a warning, not this."""
    for split in SPLIT_ORDER:
        target = targets[split]
        if assignment[split] or target == 0:
            continue
        earlier = SPLIT_ORDER[:SPLIT_ORDER.index(split)]
        if len({t.doc for s in earlier for t in assignment[s]}) < len(index.order):
            continue  # documents are left (--overflow skip): a shortfall, warned about
        before = [f"--{s} {targets[s]}" for s in earlier if targets[s]]
        after = f" after {' and '.join(before)}" if before else ""
        asked = "all" if target is None else f"{target:,}"
        raise InputError(
            f"--{split} {asked}: {docs} holds {index.n_pairs:,} usable pairs in "
            f"{len(index.order):,} documents, none left for {split}{after} (splits take "
            f"whole documents; ask for fewer pairs or give a larger file)")


def _check_options(train, valid, test, overflow, dedup, src_lang, tgt_lang):
    """Refuse option values the procedure has no meaning for (InputError, exit 2)."""
    for name, value in (("train", train), ("valid", valid), ("test", test)):
        if value is not None and value < 0:
            raise InputError(f"--{name} must be >= 0, got {value}")
    if valid is None or test is None:
        raise InputError("only --train may be 'all'")
    if overflow not in OVERFLOW_POLICIES:
        raise InputError(f"--overflow must be one of {', '.join(OVERFLOW_POLICIES)}")
    if dedup not in DEDUP_CHOICES:
        raise InputError(f"--dedup must be one of {', '.join(DEDUP_CHOICES)}")
    if src_lang == tgt_lang:
        raise InputError("--src-lang and --tgt-lang must differ (they name the files)")


def _output_files(out, docs, src_lang, tgt_lang):
    """{split: {lang: path}} of the split files; refused if one of them is the input."""
    files = {split: {lang: os.path.join(out, f"{split}.{lang}")
                     for lang in (src_lang, tgt_lang)} for split in SPLIT_ORDER}
    for split in files.values():
        for path in split.values():
            check_not_input(path, [docs])
    check_not_input(os.path.join(out, "documents.tsv"), [docs])
    return files


def _write_pairs(paths, pairs):
    """Write (src, tgt) pairs to the two files of `paths` ({lang: path}, src first)."""
    write_parallel(*paths.values(), pairs)


def _write_train(reader, takes, paths):
    """Write the train split; returns the keys of its pairs (dropped from held-out)."""
    train_keys = set()

    def pairs():
        for t in takes:
            for src, tgt in reader.pairs(t.doc, t.take):
                train_keys.add(_pair_key(src, tgt))
                yield src, tgt

    _write_pairs(paths, pairs())
    return train_keys


@dataclass
class _HeldOut:
    """One held-out split after removing pairs that occur in train (and topping up)."""

    pairs: list = field(default_factory=list)
    takes: list = field(default_factory=list)
    removed: int = 0
    topped_up: list = field(default_factory=list)   # doc ids of the top-up documents


def _select_held_out(reader, takes, train_keys, filt, unused, target, overflow):
    """The pairs of a held-out split: its planned documents, minus (when `filt`) the
    pairs that occur in train, topped up from `unused` documents with the same rules.
    Returns (_HeldOut, documents still unused)."""
    held = _HeldOut()
    for t in takes:
        got = list(reader.pairs(t.doc, t.take))
        kept = [p for p in got if not (filt and _pair_key(*p) in train_keys)]
        held.removed += len(got) - len(kept)
        held.pairs.extend(kept)
        held.takes.append(t)
    if filt and held.removed and unused:
        # refill from documents no split uses, with the same rules and filter
        cache = {}

        def usable(doc):
            if doc not in cache:
                cache[doc] = [p for p in reader.pairs(doc)
                              if _pair_key(*p) not in train_keys]
            return len(cache[doc])

        more, unused = fill(unused, target, overflow, usable, filled=len(held.pairs))
        for t in more:
            held.pairs.extend(cache[t.doc][:t.take])
            held.takes.append(t)
            held.topped_up.append(t.doc)
            # duplicates removed from a top-up document are counted as removed
            held.removed += reader.index.size(t.doc) - t.size
    return held, unused


def _write_documents_tsv(path, assignment, index):
    """documents.tsv: which document went to which split, and how much of it."""
    with atomic_writer(path) as f:
        f.write("split\tdoc_id\tpairs_in_doc\tpairs_used\tcut\n")
        for split in SPLIT_ORDER:
            for t in assignment[split]:
                f.write(f"{split}\t{t.doc}\t{index.size(t.doc)}\t{t.take}\t"
                        f"{'yes' if t.cut else 'no'}\n")


def _split_reports(assignment, targets, sizes, removed, topped_up, unused, overflow):
    """The manifest's entry of each split, and a warning for each split whose size is
    not the one requested (with the reason). Returns ({split: info}, warnings)."""
    splits = {}
    warnings = []
    for split in SPLIT_ORDER:
        takes = assignment[split]
        cuts = [t for t in takes if t.cut]
        target = targets[split]
        info = {
            "requested": target if target is not None else "all",
            "pairs": sizes[split],
            "documents": len(takes),
            "cut_documents": len(cuts),
            "pairs_discarded_by_cut": sum(t.size - t.take for t in cuts),
            "removed_as_in_train": removed.get(split),
            "topped_up_documents": len(topped_up.get(split, [])),
        }
        if target is not None and sizes[split] != target:
            info["shortfall" if sizes[split] < target else "excess"] = \
                abs(target - sizes[split])
            why = ("overflow=whole took a document whole" if sizes[split] > target else
                   "not enough documents left" if not unused else
                   "overflow=skip left no document that fits" if overflow == "skip" else
                   "pairs removed as duplicates of train and no document left to refill")
            warnings.append(f"{split}: {sizes[split]} pairs instead of the requested "
                            f"{target} ({why})")
        splits[split] = info
    return splits, warnings


def summary_markdown(manifest: dict[str, Any]) -> str:
    """A short Markdown table of a split manifest (printed by the CLI)."""
    rows = ["| split | requested | pairs | documents | cut docs | discarded by cut | "
            "removed (in train) |", "|---|---:|---:|---:|---:|---:|---:|"]
    for split in SPLIT_ORDER:
        s = manifest["splits"][split]
        rem = "—" if s["removed_as_in_train"] is None else s["removed_as_in_train"]
        rows.append(f"| {split} | {s['requested']} | {s['pairs']} | {s['documents']} | "
                    f"{s['cut_documents']} | {s['pairs_discarded_by_cut']} | {rem} |")
    inp = manifest["input"]
    skipped = sum(v["count"] for v in inp["skipped"].values())
    rows.append("")
    rows.append(f"input: {inp['lines']} lines, {inp['usable_pairs']} usable pairs in "
                f"{inp['documents']} documents ({skipped} lines skipped); unused: "
                f"{manifest['unused']['documents']} documents, "
                f"{manifest['unused']['pairs']} pairs")
    return "\n".join(rows)
