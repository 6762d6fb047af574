"""The engine-independent half of batch translation, and fairseq's output length limit.

Why a module of its own: both decoders (`nmtfrag.translate.fairseq_engine.Translator`, fairseq, and
`nmtfrag.translate.ct2_engine.CT2Translator`, CTranslate2) inherit `BaseTranslator`, and the engine
factory (`nmtfrag.translate.fairseq_engine.load_translator`) needs both decoders; with the base here,
neither engine module imports the other's.

`BaseTranslator` does everything but the decoding of one batch: BPE encoding, dictionary
ids and truncation, fairseq's batching (so both engines see the same batches, and the
per-batch maximum output length is the same), the one-line-per-input check and decoding
back to text.

Output length: at most int(max_len_a × source tokens + max_len_b) subword tokens, capped
by the decoder's positions; the defaults are fairseq-generate's and the hub's (a 0,
b 200), so an output is the one fairseq would give.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, cast

from ..errors import InputError

if TYPE_CHECKING:
    from tqdm import tqdm

# fairseq-generate's and the hub's defaults: an output may have int(a × source length +
# b) tokens, i.e. 200 whatever the source length. A cap tied to the source (e.g. 1.2 ×
# length + 10) cuts long or copy-then-translate outputs and changes BLEU.
MAX_LEN_A, MAX_LEN_B = 0.0, 200


def check_max_len(a: float, b: int) -> None:
    """Refuse a length limit that would allow no output token (fairseq would fail later,
    in the middle of a batch, with an assertion)."""
    if a < 0 or b < 0 or int(a * 2 + b) < 1:
        raise InputError(f"--max-len-a {a} --max-len-b {b}: the output limit int(a × "
                         f"source length + b) must be at least 1 token (fairseq's "
                         f"defaults: a {MAX_LEN_A:g}, b {MAX_LEN_B})")


class BaseTranslator:
    """The engine-independent part of translation; subclasses set the attributes listed
    in `_init_pipeline` and implement `_generate(sample)`."""

    engine: str | None = None

    def _init_pipeline(self, md, task, max_positions, max_tokens, batch_size):
        from ..data.bpe import BPE

        self.md, self.task = md, task
        self.src_lang, self.tgt_lang = md.src_lang, md.tgt_lang
        self.src_dict, self.tgt_dict = task.source_dictionary, task.target_dictionary
        self.max_positions = max_positions
        self.bpe = BPE(md.bpecodes)
        self.max_tokens, self.batch_size = max_tokens, batch_size
        self.truncated = 0

    def _generate(self, sample):
        """Best hypothesis (target subword string, tags kept) for each row of a fairseq
        batch (`sample["id"]` order)."""
        raise NotImplementedError

    def encode(self, lines: Sequence[str], mode: str = "raw") -> list[str]:
        """Subword strings of source lines (see nmtfrag.data.bpe for `mode`)."""
        sub, _ = self.bpe.encode_lines(lines, self.src_lang, mode, keep_tags=True)
        return sub

    def batches(self, sub_lines: Sequence[str]) -> tuple[Iterable[dict], list[int],
                                                          list[str | None]]:
        """(fairseq batches, line index of each dataset id, results with empty lines
        filled in): every engine translates exactly these batches."""
        import torch

        max_src = self.max_positions[0] if isinstance(self.max_positions, tuple) \
            else self.max_positions
        tokens, index = [], []
        results: list[str | None] = [None] * len(sub_lines)
        for i, line in enumerate(sub_lines):
            if not line.strip():
                results[i] = ""
                continue
            t = self.src_dict.encode_line(line, add_if_not_exist=False,
                                          append_eos=True).long()
            if max_src and t.numel() > max_src:
                t = torch.cat([t[:max_src - 1], t[-1:]])
                self.truncated += 1
            tokens.append(t)
            index.append(i)
        if not tokens:
            return [], index, results
        dataset = self.task.build_dataset_for_inference(tokens, [t.numel() for t in tokens])
        itr = self.task.get_batch_iterator(
            dataset=dataset, max_tokens=self.max_tokens, max_sentences=self.batch_size,
            max_positions=self.max_positions, ignore_invalid_inputs=False,
            required_batch_size_multiple=1, disable_iterator_cache=True,
        ).next_epoch_itr(shuffle=False)
        return itr, index, results

    def translate_subwords(self, sub_lines: Sequence[str],
                           progress: tqdm | None = None) -> list[str]:
        """Best hypothesis (subword string, tags kept) for each subword source line."""
        itr, index, results = self.batches(sub_lines)
        for sample in itr:
            ids = sample["id"].tolist()
            outs = self._generate(sample)
            if len(outs) != len(ids):
                raise RuntimeError(f"{self.engine} returned {len(outs)} hypotheses for a "
                                   f"batch of {len(ids)} sentences")
            for sid, out in zip(ids, outs):
                results[index[sid]] = out
            if progress is not None:
                progress.update(len(ids))
        missing = [i + 1 for i, r in enumerate(results) if r is None]
        if missing:
            raise RuntimeError(f"{self.engine} generation returned no output for "
                               f"{len(missing)} of {len(results)} lines "
                               f"(first: line {missing[0]})")
        return cast("list[str]", results)  # no None left: `missing` is empty

    def decode(self, sub_line: str) -> str:
        """Subword output → detokenised text (tags removed), as the hub's decode."""
        from ..data.bpe import moses_detokenize, remove_bpe, strip_tags

        text = strip_tags(remove_bpe(sub_line))
        return moses_detokenize(text, self.tgt_lang, unescape=True) if text else ""

    def translate(self, lines: Sequence[str], mode: str = "raw",
                  show_progress: bool = False) -> list[str]:
        """Detokenised translations, one per input line (checked)."""
        from ..fileio import progress

        bar = progress(total=len(lines), desc=f"translate ({self.engine})") \
            if show_progress else None
        try:
            subs = self.translate_subwords(self.encode(lines, mode), bar)
        finally:
            if bar is not None:
                bar.close()
        outs = [self.decode(s) for s in subs]
        if len(outs) != len(lines):
            raise RuntimeError(f"{len(lines)} input lines but {len(outs)} translations")
        return outs
