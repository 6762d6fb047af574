"""`--tmx FILE` for the commands that read a corpus: the TMX converted into a private work
dir for the duration of the command, the parsed options pointed at its files.

Why in cli/: it rewrites an argparse Namespace (which options name the two sides and the
documents is the command's business); the conversion itself is nmtfrag.data.tmx.
"""
from __future__ import annotations

import argparse
import contextlib
import os
from typing import Iterator, Optional

from ..data.tmx import TmxLog, tmx_to_files
from ..errors import InputError
from ..workdir import private_workdir


@contextlib.contextmanager
def tmx_corpus(args: argparse.Namespace, src: Optional[str] = "src", tgt: Optional[str] = "tgt",
               documents: Optional[str] = "documents", work_dir: Optional[str] = None,
               ) -> Iterator[Optional[tuple[dict[str, str], TmxLog]]]:
    """With `args.tmx`: convert it into a private work dir (the text is confidential),
    point `args.<src>`/`args.<tgt>` (and `args.<documents>` with --tmx-doc-prop) at the
    files for the duration of the block, then remove them. Without: nothing."""
    tmx = getattr(args, "tmx", None)
    doc_prop = getattr(args, "tmx_doc_prop", None)
    if not tmx:
        if doc_prop:
            raise InputError("--tmx-doc-prop needs --tmx")
        missing = [f"--{n}" for n in (src, tgt) if n and not getattr(args, n, None)]
        if missing:
            raise InputError(f"give {' and '.join(missing)} (or --tmx FILE)")
        yield None
        return
    given = [f"--{n}" for n in (src, tgt) if n and getattr(args, n, None)]
    if given:
        raise InputError(f"give --tmx or {'/'.join(given)}, not both")
    if doc_prop and documents and getattr(args, documents, None):
        raise InputError(f"give --tmx-doc-prop or --{documents}, not both")
    with private_workdir(base=work_dir, prefix="nmtfrag-tmx-") as work:
        paths, log = tmx_to_files(tmx, args.src_lang, args.tgt_lang,
                                  os.path.join(work, "tmx"), doc_prop)
        if src:
            setattr(args, src, paths["src"])
        if tgt:
            setattr(args, tgt, paths["tgt"])
        if doc_prop and documents:
            setattr(args, documents, paths["documents"])
        yield paths, log
