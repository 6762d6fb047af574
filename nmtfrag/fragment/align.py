"""Word alignment with eflomal (Östling & Tiedemann 2016), forward and reverse.

Thin wrapper over `eflomal.Aligner`: it fixes two gaps that matter for confidential
data. eflomal writes its converted corpus to the system temp dir; we point Python's
tempfile at our private work dir for the call. And it silently gives no links to a
sentence of 1024 tokens or more; callers skip such pairs and count them
(`ALIGNER_MAX_TOKENS`). eflomal 2.0.0 cannot be seeded, so its output varies between
runs: keep and reuse the alignment (`--keep-alignments`, `--alignments`) to reproduce.
"""
from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from typing import Iterator, Optional

from ..data.corpus import count_lines
from ..errors import InputError, ToolFailed

ALIGNER_MAX_TOKENS = 1023  # eflomal gives no links to a sentence of >= 1024 tokens


@contextlib.contextmanager
def _temp_files_in(directory: str) -> Iterator[None]:
    saved = tempfile.tempdir
    tempfile.tempdir = directory
    try:
        yield
    finally:
        tempfile.tempdir = saved


PRIOR_FIELDS = {"LEX": 4, "HMMF": 3, "HMMR": 3, "FERF": 4, "FERR": 4}


def check_priors(path: str) -> None:
    """Refuse a priors file eflomal would choke on (its own reader raises TypeError)."""
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such priors file")
    with open(path, encoding="utf-8", errors="strict") as f:
        try:
            for line_no, line in enumerate(f, 1):
                fields = line.rstrip("\n").split("\t")
                try:
                    ok = PRIOR_FIELDS.get(fields[0]) == len(fields)
                    float(fields[-1])
                except ValueError:
                    ok = False
                if not ok:
                    raise InputError(f"{path} line {line_no}: not an eflomal priors line "
                                     f"(LEX/HMMF/HMMR/FERF/FERR, tab-separated)")
        except UnicodeDecodeError:
            raise InputError(f"{path}: invalid UTF-8") from None


def align_files(src_path: str, tgt_path: str, fwd_path: str, rev_path: str, work_dir: str,
                priors_path: Optional[str] = None, verbose: bool = False) -> None:
    """Align tokenised, line-aligned files; write forward and reverse Pharaoh links.

    Both outputs are source-target `i-j` pairs, one line per input line.
    """
    import eflomal

    if priors_path is not None:
        check_priors(priors_path)
    aligner = eflomal.Aligner()
    with contextlib.ExitStack() as stack:
        src = stack.enter_context(open(src_path, encoding="utf-8"))
        tgt = stack.enter_context(open(tgt_path, encoding="utf-8"))
        priors = (stack.enter_context(open(priors_path, encoding="utf-8"))
                  if priors_path else None)
        stack.enter_context(_temp_files_in(work_dir))
        aligner.align(src, tgt, links_filename_fwd=fwd_path, links_filename_rev=rev_path,
                      priors_input=priors, quiet=not verbose)
    n_pairs = count_lines(src_path) or 0  # (it was just read)
    for path in (fwd_path, rev_path):
        check_links_file(path, n_pairs)


def check_links_file(path: str, n_pairs: int, tool: str = "eflomal") -> None:
    """Refuse an aligner's output that lacks a line for a pair. Why: eflomal's failed
    write on a full disk was read as "no alignment links" and made a finished, empty
    release. On a file system with no room left this is that OSError (ENOSPC, naming
    the file, exit 2); otherwise the tool failed (ToolFailed, exit 1)."""
    n = count_lines(path)
    if n == n_pairs:
        return
    try:
        st = os.statvfs(os.path.dirname(os.path.abspath(path)))
        full = st.f_bavail == 0 or st.f_favail == 0
    except OSError:
        full = False
    if full:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
    got = "no file" if n is None else f"{n:,} of {n_pairs:,} lines"
    raise ToolFailed(f"{path}: {tool} wrote {got} (one alignment line per sentence "
                     f"pair expected): a full disk, a quota or a failed aligner; nothing "
                     f"was released")
