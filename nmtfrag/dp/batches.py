"""Which rows of the training data form each DP-SGD step, and in which physical batches.

Why a module of its own: the guarantee rests on how a logical batch is drawn (Poisson
sampling, each pair or unit kept with probability q, never any other way; nmtfrag.dp.sgd
explains the whole method), and this is that draw and its split into physical batches
bounded in pairs and padded tokens, apart from the clipping and noise that act on them.
Public pairs (PublicBatches) are a fixed function of the step and a public seed: they
read nothing private.
"""
from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError

if TYPE_CHECKING:  # fairseq is imported where it runs
    from fairseq.data import LanguagePairDataset


def poisson_indices(n: int, q: float, rng: np.random.Generator) -> np.ndarray:
    """Indices of one Poisson-sampled logical batch (each of n kept with prob. q)."""
    return np.flatnonzero(rng.random(n) < q)


def _bounded_chunks(rows, physical_batch, sizes, max_tokens):
    """Consecutive chunks of `rows`, each with at most `physical_batch` rows and, when
    `max_tokens` is set, at most `max_tokens` padded tokens (rows × longest row); a row
    longer than that alone is a chunk of its own."""
    chunk, longest = [], 0
    for i in rows:
        size = int(sizes[i]) if sizes is not None else 0
        if chunk and (len(chunk) == physical_batch or (
                max_tokens and (len(chunk) + 1) * max(longest, size) > max_tokens)):
            yield chunk
            chunk, longest = [], 0
        chunk.append(i)
        longest = max(longest, size)
    if chunk:
        yield chunk


def physical_batches(indices: Sequence[int] | np.ndarray, physical_batch: int,
                     sizes: Sequence[int] | np.ndarray | None = None,
                     max_tokens: int | None = None) -> list[list[int]]:
    """Split one logical batch into physical batches (by length, to limit padding), each
    of at most `physical_batch` pairs and `max_tokens` padded tokens: a few long pairs
    must not make one forward/backward pass hold 32 × 500 tokens of attention."""
    idx = list(indices)
    if sizes is not None:
        idx.sort(key=lambda i: (sizes[i], i))
    return list(_bounded_chunks(idx, physical_batch, sizes, max_tokens))


def unit_batches(picked: Iterable[int], units: Sequence[Sequence[int]],
                 physical_batch: int,
                 sizes: Sequence[int] | np.ndarray, max_tokens: int | None = None
                 ) -> Iterator[tuple[list[int], dict[int, int]]]:
    """Physical batches over the rows of the picked units, each unit's rows contiguous
    (so a unit is complete once a later unit starts), bounded as `physical_batches`:
    yields (rows, {row: unit})."""
    rows, unit_of = [], {}
    for u in picked:
        for i in sorted(units[u], key=lambda i: (sizes[i], i)):
            rows.append(i)
            unit_of[i] = int(u)
    for chunk in _bounded_chunks(rows, physical_batch, sizes, max_tokens):
        yield chunk, unit_of


@functools.lru_cache(maxsize=4)
def _permutation(n: int, seed: int) -> np.ndarray:
    """The fixed order a run's public pairs are cycled in (made once per run)."""
    return np.random.default_rng(seed).permutation(n)


@dataclass(frozen=True)
class PublicBatches:
    """Public pairs for every logical batch of a DP-SGD run: `batch` rows of `dataset` per
    step, each weighted `weight` against a private pair. Step t's rows are a function of
    t and `seed` alone (a fixed permutation, cycled), so a resumed run takes the same ones
    and nothing about them needs saving; the seed is public (public text only)."""
    dataset: LanguagePairDataset
    batch: int
    weight: float
    seed: int = 1

    def __post_init__(self) -> None:
        if self.batch < 1 or not self.weight > 0:
            raise InputError(f"public pairs per step must be ≥ 1 and their weight > 0, got "
                             f"{self.batch} and {self.weight}")

    @property
    def sizes(self) -> np.ndarray:
        ds = self.dataset
        return ds.src_sizes + (ds.tgt_sizes if ds.tgt_sizes is not None else 0)

    def rows_of_step(self, t: int) -> list[int]:
        n = len(self.dataset)
        order = _permutation(n, self.seed)
        start = (t * self.batch) % n
        return [int(order[(start + k) % n]) for k in range(min(self.batch, n))]
