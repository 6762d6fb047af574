"""argparse `type=` checks for numeric and path options, in one place.

Why: a NaN learning rate, a beam of 0 or an ε of 1e308 used to reach fairseq, the
accountants or numpy and came back as a traceback, a 100-line usage text or a silently
wrong result (`evaluate --first -3` scored 97 lines). Checked while parsing, a bad
number is one `error: argument --OPTION: ...` line, exit 2, before anything is read
or written. Each checker's name says the accepted range; NaN and ±inf are refused by
every float checker. An empty path (`--out ""`) is refused too: os.path takes it for
the current directory, and `extract --out ""` wrote its release there.
"""
from __future__ import annotations

import argparse
import math
from typing import Callable

# ε beyond this is no guarantee at all (e^ε overflows a double near 709); refusing it
# early avoids overflow deep inside an accountant.
MAX_EPSILON = 100.0


def _number(text, kind):
    try:
        return kind(text)
    except (TypeError, ValueError):
        name = "an integer" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"expected {name}, got {text!r}") from None


def finite_float(text: str) -> float:
    """Any finite number (NaN and ±inf refused)."""
    value = _number(text, float)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0."""
    value = finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def nonnegative_float(text: str) -> float:
    """A finite number ≥ 0."""
    value = finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be ≥ 0, got {text}")
    return value


def probability(text: str) -> float:
    """A number strictly between 0 and 1 (a δ: 0 is no guarantee, 1 allows anything)."""
    value = finite_float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1), got {text}")
    return value


def rate(text: str) -> float:
    """A share or sampling rate in (0, 1]."""
    value = finite_float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return value


def fraction(text: str) -> float:
    """A share in [0, 1) (dropout, label smoothing: 1 would discard everything)."""
    value = finite_float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {text}")
    return value


def epsilon(text: str) -> float:
    """A privacy ε: finite, > 0 and at most MAX_EPSILON."""
    value = positive_float(text)
    if value > MAX_EPSILON:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_EPSILON:g} (an ε this "
                                         f"large guarantees nothing), got {text}")
    return value


def positive_int(text: str) -> int:
    """An integer ≥ 1."""
    value = _number(text, int)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be ≥ 1, got {text}")
    return value


def nonnegative_int(text: str) -> int:
    """An integer ≥ 0."""
    value = _number(text, int)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be ≥ 0, got {text}")
    return value


def seed(text: str) -> int:
    """A random seed: an integer in [0, 2**63) (numpy and torch refuse the others)."""
    value = _number(text, int)
    if not 0 <= value < 2 ** 63:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2^63), got {text}")
    return value


def int_between(low: int, high: int, why: str) -> Callable[[str], int]:
    """An integer in [low, high]; `why` says what the upper bound protects (nmtfrag.limits
    holds the bounds of the size options and their measurements)."""
    def check(text: str) -> int:
        value = _number(text, int)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be ≥ {low}, got {text}")
        if value > high:
            raise argparse.ArgumentTypeError(f"must be at most {high:,} ({why}), got {text}")
        return value

    check.__name__ = f"int_between_{low}_{high}"
    return check


def int_at_least(low: int) -> Callable[[str], int]:
    """An integer ≥ `low` (e.g. --patience, where -1 disables)."""
    def check(text: str) -> int:
        value = _number(text, int)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be ≥ {low}, got {text}")
        return value

    check.__name__ = f"int_at_least_{low}"
    return check


# The metavars that name a file or directory: an option declared with one of them and no
# `type` gets `path` (nmtfrag.cli.build_parser), so no path option takes "".
PATH_METAVARS = frozenset({"FILE", "DIR", "PREFIX", "PATH", "TSV", "YAML", "CONFIG",
                           "OTHER", "BASE_MODEL", "DIR|ZIP", "SRC", "TGT"})


def path(text: str) -> str:
    """A file or directory path: any string but the empty one."""
    if not text:
        raise argparse.ArgumentTypeError("must be a path, got an empty string")
    return text
