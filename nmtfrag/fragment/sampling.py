"""Shuffle a stream of phrase-pair occurrences and keep an exact share of them.

The release must not keep the corpus order (neighbouring phrases would rebuild their
sentence), and discarding a random share of the occurrences makes reconstruction harder
(Kim, Bisazza & Turkmen 2021, §3). Memory stays flat as the corpus grows: occurrences
go to `n_buckets` files in a private work dir, each to a uniformly random bucket; then
the number kept per bucket is drawn from the multivariate hypergeometric distribution
(so exactly round(rate·N) are kept, a uniformly random subset), and each bucket is
permuted in memory. Concatenating independently permuted random buckets is a uniformly
random order. One numpy generator drives everything: pass a secret one
(`randomness.resolve_seed(None).numpy_rng()`), since whoever can replay the stream (a
known seed) can undo the shuffle and put every occurrence back at its corpus position.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

import numpy as np

BUCKET_BLOCK = 1 << 16  # bucket ids drawn per numpy call


def _take(items, indices):
    """[items[i] for i in indices], with numpy's indexing instead of a Python loop."""
    objects = np.empty(len(items), dtype=object)
    objects[:] = items
    return objects[indices].tolist()


def buckets_for(n_sentences: int, sentences_per_bucket: int = 250, most: int = 512) -> int:
    """Enough buckets that each holds the phrase pairs of ~250 sentences (flat memory)."""
    return max(8, min(most, -(-n_sentences // sentences_per_bucket)))


class ExternalShuffle:
    """Collect records (strings without newlines), then yield a shuffled sample."""

    def __init__(self, work_dir: str, seed: int | np.random.Generator, n_buckets: int = 64,
                 ) -> None:
        # `seed`: a numpy Generator (used as is) or an int (a reproducible, public stream)
        self.rng = np.random.default_rng(seed)
        self.paths = [os.path.join(work_dir, f"bucket{b:04d}") for b in range(n_buckets)]
        self.files = [open(p, "w", encoding="utf-8", newline="\n") for p in self.paths]
        self.sizes = np.zeros(n_buckets, dtype=np.int64)
        self._pending: list[str] = []  # records not yet in a bucket (fewer than BUCKET_BLOCK)

    def add(self, record: str) -> None:
        self.add_many((record,))

    def add_many(self, records: Iterable[str]) -> None:
        """Queue records; they go to their buckets a block of BUCKET_BLOCK at a time.

        Same bucket ids as one draw per record (blocks are drawn in the same order, the
        last one only when a record needs it), but written with one call per bucket."""
        self._pending.extend(records)
        while len(self._pending) >= BUCKET_BLOCK:
            block = self._pending[:BUCKET_BLOCK]
            del self._pending[:BUCKET_BLOCK]
            self._distribute(block)

    def _distribute(self, block):
        ids = self.rng.integers(0, len(self.files), BUCKET_BLOCK)[:len(block)]
        by_bucket = _take(block, np.argsort(ids, kind="stable"))
        counts = np.bincount(ids, minlength=len(self.files))
        self.sizes += counts
        start = 0
        for f, n in zip(self.files, counts.tolist()):
            if n:
                f.write("\n".join(by_bucket[start:start + n]) + "\n")
                start += n

    @property
    def total(self) -> int:
        return int(self.sizes.sum()) + len(self._pending)

    def sample(self, rate: float) -> Iterator[str]:
        """Yield exactly round(rate · total) records, in a uniformly random order."""
        for chunk in self.sample_chunks(rate):
            yield from chunk

    def sample_chunks(self, rate: float) -> Iterator[list[str]]:
        """`sample` as lists of records (one per bucket), for writing in big blocks."""
        if self._pending:
            self._distribute(self._pending)
            self._pending = []
        for f in self.files:
            f.close()
        keep = int(np.floor(rate * self.total + 0.5))
        per_bucket = (self.rng.multivariate_hypergeometric(self.sizes, keep)
                      if self.total else self.sizes)
        for path, k in zip(self.paths, per_bucket):
            with open(path, encoding="utf-8") as f:
                records = f.read().split("\n")[:-1]
            os.unlink(path)
            yield _take(records, self.rng.permutation(len(records))[:k])

    def close(self) -> None:
        for f in self.files:
            f.close()
        for path in self.paths:
            if os.path.exists(path):
                os.unlink(path)
