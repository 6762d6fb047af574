"""Writing a release: optional `<P> … </P>` tags, a length check, atomic files.

The length check is the last line of defence for confidentiality: whatever happened
upstream, no segment longer than `max_len` words (tags not counted) is written, and a
violation aborts the whole release before any file appears.
"""
import contextlib
import itertools
import os
from collections import Counter

from .fileio import atomic_writer

TAG_OPEN, TAG_CLOSE = "<P>", "</P>"  # the one definition; bpe and audit import it
TAGS = (TAG_OPEN, TAG_CLOSE)


def add_tags(segment):
    """`a b` → `<P> a b </P>`: tags are separate tokens (kept whole through BPE later)."""
    return f"{TAG_OPEN} {segment} {TAG_CLOSE}"


def word_counts(segments):
    """{words: segments} as len(segment.split()) counts them, for many segments.

    Counting spaces is exact when every segment is non-empty words separated by single
    spaces and no other whitespace: checked on the whole block at once (every
    whitespace character but the space is non-printable), else each is split. Counted
    with numpy: a Counter's per-item hashing costs more than the counting."""
    import numpy as np

    joined = " ".join(segments)
    if joined.isprintable() and "  " not in joined and joined[:1] != " " and \
            joined[-1:] != " " and "" not in segments:
        words = np.fromiter(map(str.count, segments, itertools.repeat(" ")), np.int64,
                            len(segments)) + 1
    else:
        words = np.fromiter(map(len, map(str.split, segments)), np.int64, len(segments))
    per_length = np.bincount(words)
    return Counter({n: k for n, k in enumerate(per_length.tolist()) if k})


class ReleaseTooLong(RuntimeError):
    """A segment over max_len words reached the writer: a bug, never written."""


def release_file_names(src_lang, tgt_lang, with_alignment):
    names = {"src": f"phrases.{src_lang}", "tgt": f"phrases.{tgt_lang}"}
    if with_alignment:
        names["alignment"] = "phrases.extract"
    return names


class ReleaseWriter:
    """Writes the phrase files of a release atomically, checking every segment.

    Use as a context manager: the files appear (renamed into place) only when the
    block ends without error.
    """

    def __init__(self, out_dir, names, max_len, tag):
        self.out_dir, self.names = out_dir, names
        self.max_len, self.tag = max_len, tag
        self.count = 0
        self.src_lengths, self.tgt_lengths = Counter(), Counter()

    def __enter__(self):
        self._stack = contextlib.ExitStack()
        self._files = {role: self._stack.enter_context(
            atomic_writer(os.path.join(self.out_dir, name)))
            for role, name in self.names.items()}
        return self

    def __exit__(self, *exc):
        return self._stack.__exit__(*exc)

    def write(self, src, tgt, alignment=None):
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

    def write_records(self, records):
        """Write many `src\ttgt\talignment` records (extraction's format) at once.

        The same bytes and checks as `write` on each, with per-block string operations
        instead of per-record ones (a release has millions of records)."""
        if not records:
            return
        fields = "\t".join(records).split("\t")
        if len(fields) != 3 * len(records):
            raise ValueError("a record is not 'src<TAB>tgt<TAB>alignment'")
        srcs, tgts = fields[0::3], fields[1::3]
        src_lengths, tgt_lengths = word_counts(srcs), word_counts(tgts)
        longest = max(max(src_lengths), max(tgt_lengths))
        if not (min(min(src_lengths), min(tgt_lengths)) > 0 and longest <= self.max_len):
            raise ReleaseTooLong(f"a segment of {longest} words exceeds "
                                 f"max-len {self.max_len}; nothing was released")
        self.src_lengths.update(src_lengths)
        self.tgt_lengths.update(tgt_lengths)
        self.count += len(records)
        if "alignment" in self._files:
            self._files["alignment"].write("\n".join(records).replace("\t", " ||| ") + "\n")
        for role, segments in (("src", srcs), ("tgt", tgts)):
            block = "\n".join(segments)
            if self.tag:
                block = add_tags(block.replace("\n", f" {TAG_CLOSE}\n{TAG_OPEN} "))
            self._files[role].write(block + "\n")

    def length_histogram(self):
        return {"src": {str(k): v for k, v in sorted(self.src_lengths.items())},
                "tgt": {str(k): v for k, v in sorted(self.tgt_lengths.items())}}
