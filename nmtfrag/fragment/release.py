"""Writing a release: optional `<P> … </P>` tags, a length check, atomic files; and the
collectors that decide which extracted phrase pairs a release holds.

The length check is the last line of defence for confidentiality: whatever happened
upstream, no segment longer than `max_len` words (tags not counted) is written, and a
violation aborts the whole release before any file appears.

A `PairCollector` receives each sentence pair's phrase pairs as extraction finds them and
later writes the release through a `ReleaseWriter`. Two implementations: `SampledRelease`
(shuffle every occurrence, keep a random share: Kim et al. 2021) here, and
`nmtfrag.fragment.dp_release.DPSetUnionRelease` (the pairs that clear a DP set union). The
orchestrator (nmtfrag.fragment.extract) treats both alike.
"""
from __future__ import annotations

import contextlib
import os
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Protocol

from ..data.release_text import TAG_CLOSE, TAG_OPEN
from ..fileio import atomic_writer

if TYPE_CHECKING:  # numpy is imported only where it is used
    import numpy as np



def add_tags(segment: str) -> str:
    """`a b` → `<P> a b </P>`: tags are separate tokens (kept whole through BPE later)."""
    return f"{TAG_OPEN} {segment} {TAG_CLOSE}"


def word_counts(block: str, n_segments: int) -> Counter:
    """{words: segments} of the `n_segments` lines of `block` ("\\n"-joined), as
    len(segment.split()) counts them.

    Counting spaces is exact when every segment is non-empty words separated by single
    spaces and no other whitespace: checked on the whole block at once (every
    whitespace character but the space is non-printable); then the spaces are counted
    per line with numpy on the UTF-8 bytes, else each segment is split."""
    import numpy as np

    if block.count("\n") != n_segments - 1:
        raise ValueError("a segment holds a line break")
    flat = block.replace("\n", " ")
    if flat and flat.isprintable() and "  " not in flat and flat[0] != " " and \
            flat[-1] != " ":
        data = np.frombuffer(block.encode("utf-8"), np.uint8)
        spaces = np.flatnonzero(data == 32)
        ends = np.append(np.flatnonzero(data == 10), len(data))
        words = np.diff(np.searchsorted(spaces, ends), prepend=0) + 1
    else:
        words = np.fromiter(map(len, map(str.split, block.split("\n"))), np.int64,
                            n_segments)
    per_length = np.bincount(words)
    return Counter({n: k for n, k in enumerate(per_length.tolist()) if k})


class ReleaseTooLong(RuntimeError):
    """A segment over max_len words reached the writer: a bug, never written."""


def release_file_names(src_lang: str, tgt_lang: str, with_alignment: bool) -> dict[str, str]:
    """{role: file name} of a release: `src`, `tgt` and, `with_alignment`, `alignment`."""
    names = {"src": f"phrases.{src_lang}", "tgt": f"phrases.{tgt_lang}"}
    if with_alignment:
        names["alignment"] = "phrases.extract"
    return names


class ReleaseWriter:
    """Writes the phrase files of a release atomically, checking every segment.

    Use as a context manager: the files appear (renamed into place) only when the
    block ends without error.
    """

    def __init__(self, out_dir: str, names: dict[str, str], max_len: int,
                 tag: bool) -> None:
        self.out_dir, self.names = out_dir, names
        self.max_len, self.tag = max_len, tag
        self.count = 0
        self.src_lengths: Counter[int] = Counter()  # {words: segments}
        self.tgt_lengths: Counter[int] = Counter()

    def __enter__(self) -> ReleaseWriter:
        self._stack = contextlib.ExitStack()
        self._files = {role: self._stack.enter_context(
            atomic_writer(os.path.join(self.out_dir, name)))
            for role, name in self.names.items()}
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool | None:
        return self._stack.__exit__(exc_type, exc, tb)

    def write(self, src: str, tgt: str, alignment: str | None = None) -> None:
        n_src, n_tgt = len(src.split()), len(tgt.split())
        if not (0 < n_src <= self.max_len and 0 < n_tgt <= self.max_len):
            raise ReleaseTooLong(f"a segment of {max(n_src, n_tgt)} words exceeds "
                                 f"max-len {self.max_len}; nothing was released")
        self.src_lengths[n_src] += 1
        self.tgt_lengths[n_tgt] += 1
        self.count += 1
        if "alignment" in self._files:  # untagged: the indices refer to these words
            self._files["alignment"].write(f"{src} ||| {tgt} ||| {alignment}\n")
        if self.tag:
            src, tgt = add_tags(src), add_tags(tgt)
        self._files["src"].write(src + "\n")
        self._files["tgt"].write(tgt + "\n")

    def write_records(self, records: Sequence[str]) -> None:
        """Write many `src\ttgt\talignment` records (extraction's format) at once.

        The same bytes and checks as `write` on each, with per-block string operations
        instead of per-record ones (a release has millions of records)."""
        if not records:
            return
        fields = "\t".join(records).split("\t")
        if len(fields) != 3 * len(records):
            raise ValueError("a record is not 'src<TAB>tgt<TAB>alignment'")
        src_block, tgt_block = "\n".join(fields[0::3]), "\n".join(fields[1::3])
        src_lengths = word_counts(src_block, len(records))
        tgt_lengths = word_counts(tgt_block, len(records))
        longest = max(max(src_lengths), max(tgt_lengths))
        if not (min(min(src_lengths), min(tgt_lengths)) > 0 and longest <= self.max_len):
            raise ReleaseTooLong(f"a segment of {longest} words exceeds "
                                 f"max-len {self.max_len}; nothing was released")
        self.src_lengths.update(src_lengths)
        self.tgt_lengths.update(tgt_lengths)
        self.count += len(records)
        if "alignment" in self._files:
            self._files["alignment"].write("\n".join(records).replace("\t", " ||| ") + "\n")
        for role, block in (("src", src_block), ("tgt", tgt_block)):
            if self.tag:
                block = add_tags(block.replace("\n", f" {TAG_CLOSE}\n{TAG_OPEN} "))
            self._files[role].write(block + "\n")

    def length_histogram(self) -> dict[str, dict[str, int]]:
        return {"src": {str(k): v for k, v in sorted(self.src_lengths.items())},
                "tgt": {str(k): v for k, v in sorted(self.tgt_lengths.items())}}


@dataclass
class CollectorRecords:
    """What a collector adds to a release's records, beside what every release states."""
    params: dict = field(default_factory=dict)  # added to the shared manifest's params
    shared: dict = field(default_factory=dict)  # added to OUT/manifest.json
    owner: dict = field(default_factory=dict)  # added to OUT/owner/manifest.json
    files: dict = field(default_factory=dict)  # {name: JSON content} written into OUT


class PairCollector(Protocol):
    """Collects the phrase pairs extraction finds, then writes the release.

    `add_unit` gets one sentence pair's records (`src\ttgt\talignment`, the alignment ""
    unless the release keeps it) in corpus order; `write_release` writes the chosen
    pairs through a ReleaseWriter once every unit is in; `close` frees what the
    collector holds (always called, also after an error)."""

    # read-only to the caller: SampledRelease computes `total`
    @property
    def sample_rate(self) -> float | None:
        """The share kept (the manifest states it); None: not sampled."""

    @property
    def total(self) -> int:
        """Phrase-pair occurrences collected."""

    def add_unit(self, line_no: int, records: Sequence[str]) -> None: ...

    def write_release(self, writer: ReleaseWriter) -> float: ...

    def records(self, aligner: str) -> CollectorRecords: ...

    def close(self) -> None: ...


class SampledRelease:
    """Every occurrence shuffled on disk (nmtfrag.fragment.sampling.ExternalShuffle), then a
    uniformly random `sample_rate` share of them released: fragmentation without a
    formal guarantee (Kim et al. 2021)."""

    def __init__(self, work_dir: str, rng: np.random.Generator, n_buckets: int,
                 sample_rate: float) -> None:
        from .sampling import ExternalShuffle

        self.pool = ExternalShuffle(work_dir, rng, n_buckets)
        self.sample_rate = sample_rate

    @property
    def total(self) -> int:
        return self.pool.total

    def add_unit(self, line_no: int, records: Iterable[str]) -> None:
        self.pool.add_many(records)

    def write_release(self, writer: ReleaseWriter) -> float:
        """Write the sample; returns the seconds spent in the writer (the rest of the
        time reads and shuffles the buckets)."""
        writing = 0.0
        for records in self.pool.sample_chunks(self.sample_rate):
            t1 = time.perf_counter()
            writer.write_records(records)
            writing += time.perf_counter() - t1
        return writing

    def records(self, aligner: str) -> CollectorRecords:
        return CollectorRecords()

    def close(self) -> None:
        self.pool.close()


# Reading a release (the audit and `nmtfrag stats --release` read what extract wrote)
