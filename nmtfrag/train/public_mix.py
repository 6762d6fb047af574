"""Public sentence pairs beside the private training material (mixed fine-tuning).

Why: fine-tuned on phrase pairs alone, a model learns the domain's n-grams and forgets
how long a sentence is (the study measured output length ratios of 0.53–0.79 against the
baseline's 0.89); a DP release of short pairs collapses it. Training on public sentence
pairs beside the private material (Chu, Dabre & Kurohashi 2017, "mixed fine-tuning")
keeps the sentence behaviour. Public text reads nothing private, so no guarantee and no
audit of the private material changes: the draw below depends on the public corpus,
the run's seed, the asked share and the size of the training material it joins (for a
release: the mechanism's own output, post-processing).

The share is of target subword tokens, what the model is trained to produce:
public / (public + private) after BPE. Public pairs are drawn without replacement in a
seeded random order, each whole, until the share is reached (the pair that brings it
nearest ends the draw), and stay untagged, so a <P> … </P> tag keeps meaning "a fragment".
"""
from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ..data.bpe import BPE, TAGS
from ..data.corpus import SkipLog, read_parallel, validate_parallel
from ..errors import InputError
from ..fileio import public_name, sha256_file

SubwordPair = tuple[str, str]   # (source subword line, target subword line)
CHUNK = 2000                    # public pairs tokenised and BPE'd at a time


@dataclass(frozen=True)
class PublicMix:
    """Which public parallel text joins training, and how much of it.

    `src`/`tgt`: the public files, raw text unless `mode` says otherwise ("moses",
    "hub"); `share`: the public share of target subword tokens in the training split,
    in (0, 1) (None: no pairs are mixed in, the corpus only gives packing its sentence
    lengths, nmtfrag.train.reshape); `min_words`: only public pairs whose target has at least this many words
    (a choice of public text, e.g. to leave out short everyday sentences); `only`: train
    on the drawn public pairs alone (the control of a mixed run: the same public pairs,
    sized the same way, without the private material)."""
    src: str
    tgt: str
    share: float | None
    mode: str = "raw"
    min_words: int = 0
    only: bool = False

    def __post_init__(self) -> None:
        if self.share is not None and (
                not isinstance(self.share, (int, float)) or isinstance(self.share, bool)
                or not 0 < self.share < 1):
            raise InputError(f"--public-share must be in (0, 1), got {self.share!r}")
        if self.only and self.share is None:
            raise InputError("--public-only needs --public-share (how many public pairs)")
        if not isinstance(self.min_words, int) or isinstance(self.min_words, bool) or \
                self.min_words < 0:
            raise InputError(f"--public-min-words must be an integer ≥ 0, got "
                             f"{self.min_words!r}")
        if self.mode not in ("raw", "moses", "hub"):
            raise InputError(f"public text mode must be raw, moses or hub, got {self.mode!r}")

    @property
    def share_given(self) -> bool:
        return self.share is not None

    @classmethod
    def of_prefix(cls, prefix: str, src_lang: str, tgt_lang: str, share: float | None,
                  **kw: object) -> PublicMix:
        """The public pair PREFIX.SRC / PREFIX.TGT (InputError if either is missing)."""
        return cls(f"{prefix}.{src_lang}", f"{prefix}.{tgt_lang}", share, **kw)  # type: ignore[arg-type]

    def check_files(self) -> None:
        validate_parallel(self.src, self.tgt, "--public-train")

    def hashes(self) -> dict[str, str]:
        """SHA-256 of the public files, recorded like the model's."""
        return {"public_src": sha256_file(self.src), "public_tgt": sha256_file(self.tgt)}


@dataclass
class PublicDraw:
    """The public pairs a run trains on, with the figures its manifest records."""
    pairs: list[SubwordPair]
    private_tgt_tokens: int
    public_tgt_tokens: int
    candidates: int              # public pairs eligible (after min_words)
    overlap_with_private: int    # drawn public sources equal to a private source

    @property
    def share(self) -> float:
        total = self.private_tgt_tokens + self.public_tgt_tokens
        return self.public_tgt_tokens / total if total else 0.0

    def record(self, mix: PublicMix) -> dict:
        return {"src": public_name(mix.src), "tgt": public_name(mix.tgt),
                "text_mode": mix.mode, "min_words": mix.min_words,
                "share_asked": mix.share, "share": round(self.share, 6),
                "only": mix.only, "pairs": len(self.pairs),
                "public_tgt_tokens": self.public_tgt_tokens,
                "private_tgt_tokens": self.private_tgt_tokens,
                "eligible_pairs": self.candidates,
                "sources_also_in_training": self.overlap_with_private,
                "tagged": False,
                "note": "public pairs drawn without replacement in a seeded order, "
                        "untagged; they read nothing private, so a release's guarantee "
                        "and audit are unchanged"}


def subword_tokens(line: str) -> int:
    """Tokens the model is trained to produce for a subword line (tags count too)."""
    return len(line.split())


def words(line: str) -> int:
    """Words of a subword line: tokens that end no `@@` continuation, tags left out."""
    return sum(1 for t in line.split() if not t.endswith("@@") and t not in TAGS)


def source_key(line: str) -> str:
    """A source line compared across tokenisations: spaces, BPE marks and case removed."""
    return "".join(line.replace("@@ ", "").split()).lower()


def draw_public(mix: PublicMix, bpe: BPE, private: Sequence[SubwordPair], seed: int,
                src_lang: str, tgt_lang: str) -> PublicDraw:
    """Public subword pairs whose target tokens make `mix.share` of the training split.

    `private`: the training split's subword pairs (a release's, sentences', packed or
    not). Raises InputError when the eligible public text is too small for the share."""
    if mix.share is None:
        raise ValueError("draw_public needs a share")
    private_tokens = sum(subword_tokens(t) for _, t in private)
    wanted = mix.share / (1 - mix.share) * private_tokens
    rows = [(s, t) for _, s, t in read_parallel(mix.src, mix.tgt, SkipLog())]
    if mix.min_words:
        rows = [(s, t) for s, t in rows if len(t.split()) >= mix.min_words]
    if not rows:
        raise InputError(f"--public-train {public_name(mix.src)}: no pair with a target "
                         f"of ≥ {mix.min_words} words")
    private_sources = {source_key(s) for s, _ in private}
    drawn: list[SubwordPair] = []
    have, overlap = 0, 0
    for s, t in _in_seeded_order(rows, bpe, seed, src_lang, tgt_lang, mix.mode):
        n = subword_tokens(t)
        if have >= wanted or (have and abs(have + n - wanted) > abs(have - wanted)):
            return PublicDraw(drawn, private_tokens, have, len(rows), overlap)
        drawn.append((s, t))
        have += n
        overlap += source_key(s) in private_sources
    if have < wanted * 0.99:
        most = have / (have + private_tokens) if have + private_tokens else 0
        raise InputError(f"--public-train {public_name(mix.src)}: its eligible pairs hold "
                         f"{have:,} target tokens, short of the {wanted:,.0f} a share of "
                         f"{mix.share:g} needs (at most {most:.3f} here)")
    return PublicDraw(drawn, private_tokens, have, len(rows), overlap)


def _in_seeded_order(rows: Sequence[tuple[str, str]], bpe: BPE, seed: int, src_lang: str,
                     tgt_lang: str, mode: str) -> Iterator[SubwordPair]:
    """The public pairs as subword pairs, in a seeded random order (BPE'd a chunk at a
    time, so a small draw from a large corpus encodes only what it takes)."""
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    for start in range(0, len(order), CHUNK):
        chunk = [rows[i] for i in order[start:start + CHUNK]]
        src_sub, _ = bpe.encode_lines((s for s, _ in chunk), src_lang, mode, keep_tags=False)
        tgt_sub, _ = bpe.encode_lines((t for _, t in chunk), tgt_lang, mode, keep_tags=False)
        yield from ((s, t) for s, t in zip(src_sub, tgt_sub) if s.strip() and t.strip())


def public_pool(src: str, tgt: str, bpe: BPE, count: int, seed: int, src_lang: str,
                tgt_lang: str, mode: str = "raw") -> list[SubwordPair]:
    """`count` public subword pairs (all of them if fewer) in a seeded random order: the
    pool DP-SGD's logical batches draw their public pairs from."""
    validate_parallel(src, tgt, "--dp-public-train")
    rows = [(s, t) for _, s, t in read_parallel(src, tgt, SkipLog())]
    return list(itertools.islice(_in_seeded_order(rows, bpe, seed, src_lang, tgt_lang, mode),
                                 count))


def overlap_note(draw: PublicDraw, what: str = "the training data") -> str | None:
    """A warning line when drawn public pairs repeat private sources (None if none)."""
    if not draw.overlap_with_private:
        return None
    return (f"warning: {draw.overlap_with_private:,} of the {len(draw.pairs):,} public pairs "
            f"drawn have a source that is also in {what}: the public corpus overlaps the "
            f"owner's (its gain is then not all public)")


SHARED_MIN_CHARS = 20  # shorter lines ("2.", "Yes.") are shared by any two corpora


def lines_also_public(public_src: str, path: str) -> tuple[int, int]:
    """(lines of `path` of ≥ SHARED_MIN_CHARS characters whose text is also a line of
    `public_src`, lines of `path`), compared as `source_key`s, so tokenisation does not
    hide a shared sentence."""
    with open(public_src, encoding="utf-8-sig") as f:
        public = {source_key(line) for line in f if line.strip()}
    with open(path, encoding="utf-8-sig") as f:
        keys = [source_key(line) for line in f if line.strip()]
    return sum(len(k) >= SHARED_MIN_CHARS and k in public for k in keys), len(keys)
