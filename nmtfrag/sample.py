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
import os

import numpy as np

BUCKET_BLOCK = 1 << 16  # bucket ids drawn per numpy call


def buckets_for(n_sentences, sentences_per_bucket=250, most=512):
    """Enough buckets that each holds the phrase pairs of ~250 sentences (flat memory)."""
    return max(8, min(most, -(-n_sentences // sentences_per_bucket)))


class ExternalShuffle:
    """Collect records (strings without newlines), then yield a shuffled sample."""

    def __init__(self, work_dir, seed, n_buckets=64):
        # `seed`: a numpy Generator (used as is) or an int (a reproducible, public stream)
        self.rng = np.random.default_rng(seed)
        self.paths = [os.path.join(work_dir, f"bucket{b:04d}") for b in range(n_buckets)]
        self.files = [open(p, "w", encoding="utf-8", newline="\n") for p in self.paths]
        self.sizes = np.zeros(n_buckets, dtype=np.int64)
        self._ids = np.empty(0, dtype=np.int64)
        self._next = 0

    def add(self, record):
        if self._next == len(self._ids):
            self._ids = self.rng.integers(0, len(self.files), BUCKET_BLOCK)
            self._next = 0
        b = self._ids[self._next]
        self._next += 1
        self.files[b].write(record)
        self.files[b].write("\n")
        self.sizes[b] += 1

    @property
    def total(self):
        return int(self.sizes.sum())

    def sample(self, rate):
        """Yield exactly round(rate · total) records, in a uniformly random order."""
        for f in self.files:
            f.close()
        keep = int(np.floor(rate * self.total + 0.5))
        per_bucket = (self.rng.multivariate_hypergeometric(self.sizes, keep)
                      if self.total else self.sizes)
        for path, k in zip(self.paths, per_bucket):
            with open(path, encoding="utf-8") as f:
                records = f.read().split("\n")[:-1]
            os.unlink(path)
            for index in self.rng.permutation(len(records))[:k]:
                yield records[index]

    def close(self):
        for f in self.files:
            f.close()
        for path in self.paths:
            if os.path.exists(path):
                os.unlink(path)
