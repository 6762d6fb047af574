"""Moses tokenisation exactly as the fairseq WMT19 hub interface applies it.

fairseq's `moses` tokenizer calls sacremoses with `aggressive_dash_splits=True` and
`escape=True` (so `<` becomes `&lt;`): the released phrases must be cut from the same
token sequence the model will see, or phrase boundaries and the model's vocabulary
would disagree.
"""
from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=None)
def _moses(lang):
    from sacremoses import MosesTokenizer

    return MosesTokenizer(lang=lang)


def tokenize(text: str, lang: str) -> str:
    """Tokenise one segment as fairseq's hub `encode` does before BPE."""
    return _moses(lang).tokenize(text, aggressive_dash_splits=True, return_str=True,
                                 escape=True)


def to_tokens(text: str, lang: str, pretokenized: bool = False) -> list[str]:
    """Tokens of one segment: whitespace split if already Moses-tokenised."""
    return text.split() if pretokenized else tokenize(text, lang).split()
