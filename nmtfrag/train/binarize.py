"""Binarise subword text with a model's own dictionaries (fairseq-preprocess, Python API).

Why fairseq-preprocess and not our own writer: the binary format (mmap indexed datasets,
`dict.*.txt` copied into the data dir) is exactly what fairseq-train and
fairseq-generate expect, and `--srcdict/--tgtdict` guarantee the indices of the
pretrained embedding rows. Unknown subwords become `<unk>` and are counted; the count
goes into the manifest (a high share means the BPE codes or dictionaries do not match
the text).
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
import re
from typing import Iterator, Mapping

from ..errors import InputError, ToolFailed


@contextlib.contextmanager
def fairseq_log_level(level: int = logging.WARNING) -> Iterator[None]:
    """Silence fairseq's INFO chatter for the duration of a call."""
    loggers = [logging.getLogger(n) for n in ("fairseq", "fairseq_cli")]
    saved = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(level)
    try:
        yield
    finally:
        for lg, lv in zip(loggers, saved):
            lg.setLevel(lv)


def binarize(prefixes: Mapping[str, str], dest_dir: str, src_dict: str, tgt_dict: str,
             src_lang: str = "de", tgt_lang: str = "en",
             workers: int = 1) -> dict[str, dict[str, float]]:
    """Binarise `{prefix}.{src_lang}`/`{prefix}.{tgt_lang}` for each split.

    `prefixes` maps split names ("train", "valid", "test") to file prefixes of subword
    text. Writes `dest_dir/{split}.{src}-{tgt}.{lang}.{bin,idx}` and the two dicts.
    Returns {split: {"lines": n, "src_unk": n, "tgt_unk": n}}.
    """
    from fairseq import options
    from fairseq_cli import preprocess

    unknown = set(prefixes) - {"train", "valid", "test"}
    if unknown:
        raise ValueError(f"unknown splits {unknown}")
    os.makedirs(dest_dir, exist_ok=True)
    argv = ["--source-lang", src_lang, "--target-lang", tgt_lang,
            "--srcdict", src_dict, "--tgtdict", tgt_dict,
            "--destdir", dest_dir, "--workers", str(workers)]
    for split, prefix in prefixes.items():
        argv += [f"--{split}pref", prefix]
    args = options.get_preprocessing_parser().parse_args(argv)
    # fairseq reports per-split counts (and unk replacements) through its logger: capture.
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    lg = logging.getLogger("fairseq_cli.preprocess")
    lg.addHandler(handler)
    saved = lg.level
    lg.setLevel(logging.INFO)
    lg.propagate = False
    try:
        preprocess.main(args)
    finally:
        lg.removeHandler(handler)
        lg.setLevel(saved)
        lg.propagate = True
    stats: dict[str, dict[str, float]] = {}
    pat = re.compile(r"\[(\w+)\] (\S+): (\d+) sents, (\d+) tokens, ([0-9.eE+-]+)% replaced")
    names = {os.path.basename(p): s for s, p in prefixes.items()}
    for m in pat.finditer(buf.getvalue()):
        lang, path, sents, toks, pct = m.groups()
        found = names.get(os.path.basename(path).rsplit(".", 1)[0])
        if found is None:
            continue
        side = "src" if lang == src_lang else "tgt"
        s = stats.setdefault(found, {})
        s["lines"] = int(sents)
        s[f"{side}_tokens"] = int(toks)
        s[f"{side}_unk_pct"] = float(pct)
    for split in prefixes:
        if split not in stats:
            raise InputError(f"binarising {split} produced no data (empty input?)")
    check_binarized(prefixes, dest_dir, src_lang, tgt_lang, stats)
    return stats


def check_binarized(prefixes: Mapping[str, str], dest_dir: str, src_lang: str,
                    tgt_lang: str, stats: Mapping[str, Mapping[str, float]]) -> None:
    """Refuse fairseq-preprocess output that does not hold one sentence per input line
    on both sides (errors.ToolFailed naming the file): a failed dependency is an error,
    never a result (issue 31, item 1)."""
    from fairseq.data import indexed_dataset

    from ..data.corpus import count_lines

    for split, prefix in prefixes.items():
        for lang in (src_lang, tgt_lang):
            want = count_lines(f"{prefix}.{lang}")
            path = os.path.join(dest_dir, f"{split}.{src_lang}-{tgt_lang}.{lang}")
            try:
                got = len(indexed_dataset.make_dataset(path, impl="mmap"))
            except Exception:  # missing or unreadable: fairseq's own errors vary
                got = None
            if got != want or stats[split].get("lines") != want:
                has = "no readable data" if got is None else f"{got:,} sentences"
                raise ToolFailed(f"{path}.bin: fairseq-preprocess wrote {has} for "
                                 f"{want:,} lines of {prefix}.{lang}")
