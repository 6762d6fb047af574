"""A seeded sample of N sentence pairs, in corpus order: a smaller owner corpus.

Why: a comparison needs the same update budget for every cell and at least one pass over
the smallest training set; on a CPU that fits only a few thousand pairs of a
22M-parameter model. A uniform sample keeps the domain's mix of documents, which the
first N lines would not (corpora are ordered by document). A `train.docs` file beside
the source is sampled with it, so document-level privacy still works on the sample.

    python3 scripts/sample_corpus.py --src train.de --tgt train.en --lines 2500 --out DIR
"""
from __future__ import annotations

import os
import random
from typing import Any

from .corpus import validate_parallel
from ..errors import InputError
from ..fileio import MANIFEST, atomic_writer, sha256_file, write_json
from ..outdir import prepare_output_dir


def sample_lines(n_total: int, n: int, seed: int) -> list[int]:
    """Sorted indices of a uniform sample of n of range(n_total)."""
    if not 0 < n <= n_total:
        raise InputError(f"cannot sample {n} pairs from a corpus of {n_total}")
    return sorted(random.Random(seed).sample(range(n_total), n))


def sample_corpus(src: str, tgt: str, n: int, out: str, seed: int = 1,
                  overwrite: bool = False) -> dict[str, Any]:
    """Write OUT/train.{de,en} (and train.docs when SRC's directory has one); return
    the manifest. Files are named after the inputs' suffixes."""
    total = validate_parallel(src, tgt, "--src/--tgt")
    keep = set(sample_lines(total, n, seed))
    out = prepare_output_dir(out, overwrite, inputs=[src, tgt], kind="nmtfrag-corpus-sample")
    inputs = [src, tgt]
    docs = os.path.join(os.path.dirname(os.path.abspath(src)),
                        os.path.basename(src).rsplit(".", 1)[0] + ".docs")
    if os.path.exists(docs):
        inputs.append(docs)
    files = []
    for path in inputs:
        name = "train." + path.rsplit(".", 1)[-1]
        with open(path, encoding="utf-8", newline="\n") as f, \
                atomic_writer(os.path.join(out, name), private=True) as w:
            written = 0
            for i, line in enumerate(f):
                if i in keep:
                    w.write(line if line.endswith("\n") else line + "\n")
                    written += 1
        if written != n:
            raise InputError(f"{path} has fewer lines than {src}")
        files.append(name)
    manifest: dict[str, Any] = {"kind": "nmtfrag-corpus-sample",
                "params": {"lines": n, "seed": seed, "of": total},
                "inputs": {os.path.basename(p): sha256_file(p) for p in inputs},
                "files": files}
    write_json(os.path.join(out, MANIFEST), manifest)
    return manifest
