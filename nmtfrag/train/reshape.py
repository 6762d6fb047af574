"""The training split reshaped by public inputs: packed to sentence length, public pairs
mixed in.

Why one place: both are steps on the subword pairs of the training split, made after
BPE and before binarising, both read only the split and public text, and the manifest
records them together. Packing comes first (it reshapes the released material), then
the public draw sized against what packing made, then one seeded shuffle of the whole.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from ..data.bpe import BPE, TAGS
from ..data.corpus import SkipLog, read_parallel
from ..errors import InputError
from .packing import PACK_PUBLIC, PackSpec, pack
from .packing import record as pack_record
from .public_mix import PublicMix, SubwordPair, draw_public, overlap_note, words

LENGTH_SAMPLE = 5000   # public target sentences whose lengths packing draws from


@dataclass(frozen=True)
class Reshape:
    """`public`: public pairs to mix in (or, with `pack` "public" alone, the corpus whose
    sentence lengths packing follows); `pack`: how to pack the released fragments. With
    `public.only` (a public-only control) packing only sizes the public draw as the
    packed cell's was sized: no packed example is trained on."""
    public: PublicMix | None = None
    pack: PackSpec | None = None

    def __post_init__(self) -> None:
        if self.pack is not None and self.pack.length == PACK_PUBLIC and self.public is None:
            raise InputError("--pack public takes its lengths from --public-train: give it "
                             "(or --pack N, a number of target words)")

    @property
    def active(self) -> bool:
        return self.public is not None or self.pack is not None

    def check(self, train_kind: str) -> None:
        """Refuse packing of anything but a release (sentences are sentences already)."""
        if self.pack is not None and train_kind != "release":
            raise InputError("--pack packs the fragments of a release: --train must be a "
                             "release directory")
        if self.public is not None:
            self.public.check_files()

    def hashes(self) -> dict[str, str]:
        return self.public.hashes() if self.public is not None else {}


def public_lengths(mix: PublicMix, bpe: BPE, seed: int, tgt_lang: str) -> list[int]:
    """Target lengths in words of a seeded sample of the public corpus' sentences, with the
    model's own tokenisation (what packing fills examples to)."""
    targets = [t for _, _, t in read_parallel(mix.src, mix.tgt, SkipLog())]
    rng = random.Random(seed)
    sample = rng.sample(targets, min(LENGTH_SAMPLE, len(targets)))
    sub, _ = bpe.encode_lines(sample, tgt_lang, mix.mode, keep_tags=False)
    lengths = [words(t) for t in sub if t.strip()]
    if not lengths:
        raise InputError("--public-train holds no sentence to take lengths from")
    return lengths


def reshape(pairs: list[SubwordPair], spec: Reshape, bpe: BPE, seed: int,
            src_lang: str, tgt_lang: str) -> tuple[list[SubwordPair], dict]:
    """The training split's subword pairs packed and/or mixed, shuffled; and the record.

    Notes (a public corpus overlapping the training data) go to stderr."""
    import sys

    record: dict = {}
    if spec.pack is not None:
        if spec.pack.length == PACK_PUBLIC:
            assert spec.public is not None
            lengths, source = public_lengths(spec.public, bpe, seed, tgt_lang), "public"
        else:
            lengths, source = [int(spec.pack.length)], "stated"
        fragments = len(pairs)
        pairs = pack(pairs, lengths, spec.pack, seed)
        record["pack"] = pack_record(spec.pack, fragments, pairs, source)
        if spec.public is not None and spec.public.only:
            record["pack"]["note"] = ("sizes the public draw only, as the packed cell's: "
                                      "a public-only control trains on no release pair")
    if spec.public is not None and spec.public.share_given:
        draw = draw_public(spec.public, bpe, pairs, seed, src_lang, tgt_lang)
        note = overlap_note(draw)
        if note:
            print(note, file=sys.stderr)
        record["public"] = draw.record(spec.public)
        pairs = draw.pairs if spec.public.only else pairs + draw.pairs
    random.Random(seed).shuffle(pairs)
    return pairs, record


def tagged_lines(pairs: list[SubwordPair]) -> int:
    """Sides of pairs holding a tag token (what decides whether tags join the dictionary)."""
    return sum(any(t in TAGS for t in side.split()) for p in pairs for side in p)
