"""Word alignments in Pharaoh format and their symmetrisation.

Two directional alignments (source→target and target→source, both written as
source-target `i-j` pairs) are combined into one. grow-diag-final-and follows the
pseudo-code of Koehn (2010), *Statistical Machine Translation*, §4.5.3 (also in Koehn,
Och & Marcu 2003), with e = target and f = source: start from the intersection, grow
over the 8 neighbours of every point, visiting points target-major (e outer, f inner,
points added during a scan are visited in that same scan when they come later), until
nothing changes; then FINAL-AND over the forward, then the reverse alignment. This order
is our reference; Moses `symal` and fast_align `atools` differ from it and from each
other on some sentences (see docs/guide/fragmentation.md).
"""
from __future__ import annotations

import itertools
import re
from typing import Callable, Iterable, Optional

Point = tuple[int, int]

NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def parse_pharaoh(line: str) -> set[Point]:
    """`"0-0 1-2"` → {(0, 0), (1, 2)}; raises ValueError on anything else."""
    points: set[Point] = set()
    for item in line.split():
        i, sep, j = item.partition("-")
        if not sep or not i.isdigit() or not j.isdigit():
            raise ValueError(f"not a Pharaoh alignment point: {item!r}")
        points.add((int(i), int(j)))
    return points


_POINTS = re.compile(r"\s*(?:\d+-\d+(?:\s+|$))*")


def parse_points(line: str) -> list[Point]:
    """`"0-0 1-2"` → [(0, 0), (1, 2)], file order, repeats kept; ValueError as
    `parse_pharaoh` (whose rules it keeps), but per line instead of per point in Python:
    extraction parses every line of the corpus alignment."""
    if not _POINTS.fullmatch(line):
        return list(parse_pharaoh(line))  # raises, naming the bad item
    numbers = list(map(int, line.replace("-", " ").split()))
    return list(zip(numbers[0::2], numbers[1::2]))


def canonical_points_python(line: str) -> tuple[list[Point], str]:
    """(points sorted by (i, j) without repeats, their canonical text) of one line."""
    points = sorted(set(parse_points(line)))
    return points, format_pharaoh(points)


def canonical_points(line: str) -> tuple[list[Point], str]:
    """`canonical_points_python`, compiled where nmtfrag.fragment._phrases_fast was built: the
    given alignment of a whole corpus is parsed, sorted and rewritten line by line."""
    found = _canonical_alignment(line) if _canonical_alignment else None
    return found if found is not None else canonical_points_python(line)


try:
    from ._phrases_fast import canonical_alignment as _canonical_alignment
except ImportError:
    _canonical_alignment = None


def format_pharaoh(points: Iterable[Point]) -> str:
    """Canonical text: points sorted by source then target index (one format call per
    line: the corpus alignment is written once per sentence pair)."""
    ordered = sorted(points)
    return " ".join(["%d-%d"] * len(ordered)) % tuple(itertools.chain.from_iterable(ordered))


def union(fwd: Iterable[Point], rev: Iterable[Point], n_src: Optional[int] = None,
          n_tgt: Optional[int] = None) -> set[Point]:
    return set(fwd) | set(rev)


def intersection(fwd: Iterable[Point], rev: Iterable[Point], n_src: Optional[int] = None,
                 n_tgt: Optional[int] = None) -> set[Point]:
    return set(fwd) & set(rev)


def grow_diag_final_and(fwd: Iterable[Point], rev: Iterable[Point], n_src: int,
                        n_tgt: int) -> set[Point]:
    fwd_set, rev_set = set(fwd), set(rev)
    both = fwd_set | rev_set
    alignment = fwd_set & rev_set
    src_aligned = {i for i, _ in alignment}
    tgt_aligned = {j for _, j in alignment}
    rows: dict[int, set[int]] = {}  # target index -> source indices aligned to it
    for i, j in alignment:
        rows.setdefault(j, set()).add(i)

    def add(i: int, j: int) -> None:
        alignment.add((i, j))
        src_aligned.add(i)
        tgt_aligned.add(j)
        rows.setdefault(j, set()).add(i)

    grew = True
    while grew:
        grew = False
        for j in range(n_tgt):
            current = -1
            while True:  # next point of row j after `current`, seeing new additions
                later = [i for i in rows.get(j, ()) if i > current]
                if not later:
                    break
                current = i = min(later)
                for di, dj in NEIGHBOURS:
                    ni, nj = i + di, j + dj
                    if (ni, nj) in both and (ni, nj) not in alignment and \
                            (ni not in src_aligned or nj not in tgt_aligned):
                        add(ni, nj)
                        grew = True
    for directional in (fwd_set, rev_set):  # FINAL-AND
        for j in range(n_tgt):
            for i in range(n_src):
                if (i, j) in directional and i not in src_aligned and j not in tgt_aligned:
                    add(i, j)
    return alignment


SYMMETRIZERS: dict[str, Callable[[Iterable[Point], Iterable[Point], int, int], set[Point]]] = {
    "union": union,
    "intersection": intersection,
    "grow-diag-final-and": grow_diag_final_and,
}


def symmetrize(fwd: Iterable[Point], rev: Iterable[Point], method: str, n_src: int,
               n_tgt: int) -> set[Point]:
    """Combine two directional alignments with one of SYMMETRIZERS."""
    try:
        combine = SYMMETRIZERS[method]
    except KeyError:
        raise ValueError(f"unknown symmetrisation {method!r}; "
                         f"choose one of {', '.join(SYMMETRIZERS)}") from None
    return combine(fwd, rev, n_src, n_tgt)
