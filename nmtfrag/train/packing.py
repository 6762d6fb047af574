"""Released phrase pairs packed into training examples of sentence length.

Why: trained on short fragments, a model learns to stop early (its output gets shorter
than the baseline's). Packing concatenates randomly drawn fragments of the release into
examples whose target length follows a public length distribution (the public corpus'
sentence lengths, or a number the owner states, never one measured on the owner's
corpus), so the model sees sentence-length examples made of released material only.
Each side of an example is the concatenation of the same fragments in the same order;
every release occurrence is used exactly once, so one pass over the packed data is one
pass over the release.

It reads the release (a mechanism's output) and public text only: post-processing, so a
DP release's guarantee and the reconstruction audit of the release are unchanged.
"""
from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from ..data.bpe import TAGS
from ..errors import InputError
from .public_mix import SubwordPair, words

PACK_PUBLIC = "public"


@dataclass(frozen=True)
class PackSpec:
    """How to pack: `length` "public" (target lengths drawn from the public corpus'
    sentences, `--public-train`) or a number of target words; `tags` "keep" (each
    fragment keeps its <P> … </P>) or "drop"."""
    length: str | int = PACK_PUBLIC
    tags: str = "keep"

    def __post_init__(self) -> None:
        if isinstance(self.length, bool) or not (
                self.length == PACK_PUBLIC or (isinstance(self.length, int)
                                               and 1 <= self.length <= 500)):
            raise InputError(f"--pack must be 'public' or a number of target words in "
                             f"1..500, got {self.length!r}")
        if self.tags not in ("keep", "drop"):
            raise InputError(f"--pack-tags must be keep or drop, got {self.tags!r}")

    @classmethod
    def of_text(cls, text: str, tags: str = "keep") -> PackSpec:
        """`--pack` as given on a command line."""
        if text == PACK_PUBLIC:
            return cls(PACK_PUBLIC, tags)
        try:
            return cls(int(text), tags)
        except ValueError:
            raise InputError(f"--pack must be 'public' or a number of target words, "
                             f"got {text!r}") from None


def _untag(line: str) -> str:
    return " ".join(t for t in line.split() if t not in TAGS)


def pack(fragments: Sequence[SubwordPair], lengths: Sequence[int], spec: PackSpec,
         seed: int) -> list[SubwordPair]:
    """Packed examples: the fragments in a seeded random order, each example filled until
    its target holds at least a length drawn from `lengths` (in words; at least one
    fragment each). Every fragment is used once."""
    if not lengths or min(lengths) < 1:
        raise InputError("packing needs target lengths of at least one word")
    rng = random.Random(seed)
    order = list(range(len(fragments)))
    rng.shuffle(order)
    examples: list[SubwordPair] = []
    src_parts: list[str] = []
    tgt_parts: list[str] = []
    have, goal = 0, rng.choice(lengths)
    for i in order:
        s, t = fragments[i]
        if spec.tags == "drop":
            s, t = _untag(s), _untag(t)
        src_parts.append(s)
        tgt_parts.append(t)
        have += words(t)
        if have >= goal:
            examples.append((" ".join(src_parts), " ".join(tgt_parts)))
            src_parts, tgt_parts, have, goal = [], [], 0, rng.choice(lengths)
    if src_parts:
        examples.append((" ".join(src_parts), " ".join(tgt_parts)))
    return examples


def record(spec: PackSpec, fragments: int, examples: Sequence[SubwordPair],
           lengths_from: str | None) -> dict:
    """What a manifest says of the packing."""
    tgt_words = [words(t) for _, t in examples]
    return {"length": spec.length, "lengths_from": lengths_from, "tags": spec.tags,
            "fragments": fragments, "examples": len(examples),
            "mean_target_words": round(sum(tgt_words) / len(tgt_words), 2) if tgt_words else 0,
            "note": "post-processing of the release with public lengths only: the "
                    "release's guarantee and its reconstruction audit are unchanged"}
