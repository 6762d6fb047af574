"""Text → the model's subword tokens, exactly as the fairseq WMT19 hub pipeline does it,
with `<P>`/`</P>` tags kept as single symbols.

The hub pipeline is: sacremoses with fairseq's settings (`nmtfrag.data.tokenize.tokenize`:
aggressive dash splits, XML escaping) → fastBPE with the model's `bpecodes`. Text
reaches us in one of three states (`mode`):

- ``raw``: plain text (a client's sentences, a test set) → the hub pipeline as is;
- ``hub``: already tokenised by that same pipeline (a release built without
  `--pretokenized`: escaped, dash-split) → BPE only;
- ``moses``: Moses-tokenised but *not* escaped and not dash-split (EMEA/GNOME in
  ../shared/data, releases built with `--pretokenized`). We Moses-*detokenise* it (without
  unescaping, since it is not escaped) and run the hub pipeline on the result, i.e. we
  rebuild the text the model's own pipeline would have produced from the raw sentence:
  `&lt;` instead of a raw `<`, `&apos;s` as in the model's training data rather than
  `&apos; s`, `anti @-@ viral` rather than `anti-viral`. Re-tokenising the tokens
  directly would also escape them, but keeps Moses' own splits (`patient &apos; s`)
  that the hub pipeline never produces; on 3,000 EMEA lines the two differ on 76 (de)
  and 50 (en) lines.

Tags: fastBPE would cut `<P>` into `<@@ P@@ >` and sacremoses would escape it to
`&lt; P &gt;`, so a line `<P> … </P>` has its tags removed first, the inside is
processed, and the tags are put back as whole tokens (which `nmtfrag.train.finetune` adds
to the dictionaries).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Iterable

from .release_text import TAG_CLOSE, TAG_OPEN, TAGS
from .tokenize import tokenize

MODES = ("raw", "hub", "moses")


def split_tags(line: str) -> tuple[str, bool]:
    """(inner text, tagged?) of a line `<P> … </P>` (tags as separate tokens)."""
    toks = line.split()
    if len(toks) >= 2 and toks[0] == TAG_OPEN and toks[-1] == TAG_CLOSE:
        return " ".join(toks[1:-1]), True
    return line.strip(), False


def strip_tags(line: str) -> str:
    """Remove every tag token from a (model output) line."""
    return " ".join(t for t in line.split() if t not in TAGS)


@lru_cache(maxsize=None)
def _detok(lang):
    from sacremoses import MosesDetokenizer

    return MosesDetokenizer(lang=lang)


def moses_detokenize(text: str, lang: str, unescape: bool = False) -> str:
    """Undo Moses tokenisation (not escaping, unless asked)."""
    return _detok(lang).detokenize(text.split(), unescape=unescape)


def hub_tokens(text: str, lang: str, mode: str) -> str:
    """Moses tokens of `text` as the hub pipeline sees them (see module doc)."""
    if mode == "hub":
        return " ".join(text.split())
    if mode == "moses":
        text = moses_detokenize(text, lang)
    elif mode != "raw":
        raise ValueError(f"unknown text mode {mode!r}")
    return tokenize(text, lang)


def load_fastbpe(codes_path: str) -> Any:
    """fastBPE.fastBPE(codes_path) without its "Loading codes from PATH" lines on the
    terminal (unless `nmtfrag -v`): they are noise, and they print a path of the machine."""
    import fastBPE

    from ..quiet import silence_stderr

    with silence_stderr():
        return fastBPE.fastBPE(codes_path)


class BPE:
    """fastBPE with a model's `bpecodes` (the library fairseq's `fastbpe` option wraps)."""

    def __init__(self, codes_path: str) -> None:
        self.codes_path = codes_path
        self._bpe = load_fastbpe(codes_path)

    def apply(self, lines: Iterable[str]) -> list[str]:
        """fastBPE on `lines`: one subword line per line (else errors.ToolFailed)."""
        given = list(lines)
        out = self._bpe.apply(given)
        if len(out) != len(given):
            from ..errors import ToolFailed

            raise ToolFailed(f"{self.codes_path}: fastBPE returned {len(out):,} lines "
                             f"for {len(given):,}")
        return out

    def encode_lines(self, lines: Iterable[str], lang: str, mode: str = "raw",
                     keep_tags: bool = True) -> tuple[list[str], int]:
        """Subword lines for `lines`; tagged lines keep `<P>`/`</P>` as whole tokens.

        Returns (subword lines, number of tagged lines).
        """
        inner, tagged = [], []
        for line in lines:
            text, t = split_tags(line) if keep_tags else (line, False)
            inner.append(hub_tokens(text, lang, mode))
            tagged.append(t)
        out = []
        for sub, t in zip(self.apply(inner), tagged):
            out.append(f"{TAG_OPEN} {sub} {TAG_CLOSE}" if t else sub)
        return out, sum(tagged)


def remove_bpe(line: str) -> str:
    """fairseq's `--remove-bpe` for fastBPE's `@@ ` continuation marker."""
    return (line + " ").replace("@@ ", "").rstrip()
