"""Released phrase text as whoever receives it reads it: the `<P> … </P>` markers and a
release directory read back as token pairs.

Why in data/: the tags are part of the text every later stage reads (BPE keeps them
whole, training and the audits strip them), and reading a release needs nothing of how
it was made (nmtfrag.fragment.release writes it).
"""
from __future__ import annotations

import os

from ..errors import InputError
from ..fileio import MANIFEST, read_json, sha256_file
from .corpus import validate_parallel

TAG_OPEN, TAG_CLOSE = "<P>", "</P>"  # the one definition
TAGS = (TAG_OPEN, TAG_CLOSE)

Tokens = tuple[str, ...]  # a segment as its tokens
TokenPair = tuple[Tokens, Tokens]  # (source tokens, target tokens)


def _strip(tokens: Tokens) -> Tokens:
    """`tokens` without their enclosing <P> … </P>, if they have them."""
    if len(tokens) >= 2 and tokens[0] == TAG_OPEN and tokens[-1] == TAG_CLOSE:
        return tokens[1:-1]
    return tokens


def read_release(release_dir: str, src_file: str | None = None,
                 tgt_file: str | None = None) -> tuple[list[TokenPair], dict]:
    """Phrase pairs of a release as (src_tokens, tgt_tokens) tuples, plus facts about it.

    File names come from `manifest.json` (`files.src`, `files.tgt`) when there is one,
    else `phrases.de` / `phrases.en` unless given. Tags are stripped when the manifest
    says `tag: true`, or, without a manifest, when every line of both sides is tagged.
    """
    manifest_path = os.path.join(release_dir, MANIFEST)
    manifest = read_json(manifest_path) if os.path.exists(manifest_path) else {}
    if manifest and manifest.get("kind") not in (None, "nmtfrag-release"):
        raise InputError(f"{manifest_path}: not a release manifest "
                         f"(kind={manifest.get('kind')!r})")
    files = manifest.get("files", {})
    params = manifest.get("params", {})
    src_path = os.path.join(release_dir, src_file or files.get("src", "phrases.de"))
    tgt_path = os.path.join(release_dir, tgt_file or files.get("tgt", "phrases.en"))
    validate_parallel(src_path, tgt_path, f"release {release_dir}")
    raw: list[TokenPair] = []
    with open(src_path, encoding="utf-8") as fs, open(tgt_path, encoding="utf-8") as ft:
        for line_no, (s_line, t_line) in enumerate(zip(fs, ft), 1):
            s_words, t_words = s_line.split(), t_line.split()
            if not s_words or not t_words:
                raise InputError(f"{src_path}/{tgt_path} line {line_no}: empty phrase; "
                                 f"not a release written by nmtfrag extract")
            raw.append((tuple(s_words), tuple(t_words)))
    if "tag" in params:
        tagged = bool(params["tag"])
    else:
        tagged = all(s[0] == TAG_OPEN and s[-1] == TAG_CLOSE and t[0] == TAG_OPEN
                     and t[-1] == TAG_CLOSE and len(s) > 2 and len(t) > 2 for s, t in raw)
    pairs: list[TokenPair] = []
    for line_no, (s, t) in enumerate(raw, 1):
        if tagged:
            s, t = _strip(s), _strip(t)
            if not s or not t:
                raise InputError(f"{src_path} line {line_no}: a tagged phrase with no words")
        pairs.append((s, t))
    info = {
        "src_file": src_path, "tgt_file": tgt_path, "lines": len(pairs), "tagged": tagged,
        "params": params, "sha256": {"src": sha256_file(src_path), "tgt": sha256_file(tgt_path)},
        "max_len_observed": max((max(len(s), len(t)) for s, t in pairs), default=0),
    }
    return pairs, info
