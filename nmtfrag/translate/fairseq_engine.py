"""Batch translation with a WMT19-format model dir through fairseq's own generation.

Why not the hub's `translate()` in a loop, nor `fairseq-generate`: one sentence at a time
is slow, and fairseq's batching silently drops the last partial batch in the forks we
can install unless `required_batch_size_multiple` is 1 (fairseq-generate scored 96 of
100 sentences). Here: the model's own pipeline (`nmtfrag.data.bpe`: hub tokenisation →
fastBPE), `task.build_dataset_for_inference` + `task.get_batch_iterator(...,
required_batch_size_multiple=1)` + `task.inference_step` with fairseq's SequenceGenerator
(beam search), then `@@ ` removal, tag removal and Moses detokenisation as the hub's
`decode` does. Every input line gets exactly one output line: ids are checked, a
missing one is an internal error (exit 1), never a silently shorter file. Empty input
lines give empty output lines.

Engines: `Translator` decodes with fairseq (the default and the reference);
`nmtfrag.translate.ct2_engine.CT2Translator` decodes with CTranslate2. Both inherit everything but
the decoding of one batch from `nmtfrag.translate.translator.BaseTranslator`: BPE encoding,
dictionary ids and truncation, fairseq's batching (so both engines see the same
batches, and the per-batch maximum output length is the same), the one-line-per-input
check and decoding back to text. `load_translator` picks one (it lives here, beside the
fairseq engine, and imports the CTranslate2 one only when asked for it).

Output length: at most int(max_len_a × source tokens + max_len_b) subword tokens, capped
by the decoder's positions; the defaults are fairseq-generate's and the hub's (a 0,
b 200), so an output is the one fairseq would give. Both engines apply the same limit
to the same batches.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, TypedDict

from ..errors import InputError
from ..model_dir import allow_full_checkpoint_load
from .translator import MAX_LEN_A, MAX_LEN_B, BaseTranslator, check_max_len

if TYPE_CHECKING:
    from typing_extensions import Unpack

ENGINES = ("fairseq", "ctranslate2")


class TranslatorOptions(TypedDict, total=False):
    """The settings both engines' constructors take by keyword (Translator's and
    CT2Translator's, beyond the model dir): what `load_translator` passes on."""

    src_lang: str
    tgt_lang: str
    checkpoint: str | None
    device: str
    fp16: bool
    beam: int
    lenpen: float
    max_len_a: float
    max_len_b: int
    max_tokens: int
    batch_size: int | None


def load_translator(model_dir: str, engine: str = "fairseq", *,
                    compute_type: str | None = None, ct2_cache: str | None = None,
                    threads: int | None = None,
                    **kwargs: Unpack[TranslatorOptions]) -> BaseTranslator:
    """A Translator for `engine`; `kwargs` are Translator's (beam, max_tokens, …).

    `compute_type`, `ct2_cache` and `threads` are CTranslate2 settings (threads: its
    intra-op threads; default torch's thread count); giving the first two to the fairseq
    engine is a usage error.
    """
    check_max_len(kwargs.get("max_len_a", MAX_LEN_A), kwargs.get("max_len_b", MAX_LEN_B))
    if engine == "fairseq":
        if compute_type is not None:
            raise InputError("--compute-type applies to --engine ctranslate2 only "
                             "(fairseq: --fp16 on cuda)")
        if ct2_cache is not None:
            raise InputError("--ct2-cache applies to --engine ctranslate2 only")
        return Translator(model_dir, **kwargs)
    if engine == "ctranslate2":
        from .ct2_engine import CT2Translator

        return CT2Translator(model_dir, compute_type=compute_type or "float32",
                             cache_dir=ct2_cache, threads=threads, **kwargs)
    raise InputError(f"unknown engine {engine!r} (choose from {', '.join(ENGINES)})")


class Translator(BaseTranslator):
    """A loaded model dir (one checkpoint or an ensemble) ready to translate batches
    with fairseq's SequenceGenerator."""

    engine = "fairseq"

    def __init__(self, model_dir: str, src_lang: str = "de", tgt_lang: str = "en",
                 checkpoint: str | None = None, device: str = "cpu", fp16: bool = False,
                 beam: int = 5, lenpen: float = 1.0, max_len_a: float = MAX_LEN_A,
                 max_len_b: int = MAX_LEN_B, max_tokens: int = 4000,
                 batch_size: int | None = None) -> None:
        allow_full_checkpoint_load()
        import torch
        from fairseq import checkpoint_utils, utils
        from fairseq.dataclass.configs import GenerationConfig

        from ..train.binarize import fairseq_log_level
        from ..model_dir import validate_model_dir

        if device == "cuda" and not torch.cuda.is_available():
            raise InputError("--device cuda but torch sees no CUDA device")
        md = validate_model_dir(model_dir, src_lang, tgt_lang, checkpoint)
        with fairseq_log_level():
            models, _cfg, task = checkpoint_utils.load_model_ensemble_and_task(
                md.checkpoints,
                arg_overrides={"data": md.path, "source_lang": src_lang,
                               "target_lang": tgt_lang})
        self.device = torch.device("cuda" if device == "cuda" else "cpu")
        for m in models:
            m.eval()
            if fp16 and device == "cuda":
                m.half()
            m.to(self.device)
        self.models = models
        self._init_pipeline(md, task, utils.resolve_max_positions(
            task.max_positions(), *[m.max_positions() for m in models]),
            max_tokens, batch_size)
        gen_cfg = GenerationConfig(beam=beam, lenpen=lenpen, max_len_a=max_len_a,
                                   max_len_b=max_len_b)
        self.generator = task.build_generator(models, gen_cfg)
        self.settings = {"engine": self.engine,
                         "compute_type": "float16" if fp16 and device == "cuda"
                         else "float32",
                         "beam": beam, "lenpen": lenpen, "max_len_a": max_len_a,
                         "max_len_b": max_len_b, "max_tokens": max_tokens,
                         "batch_size": batch_size, "device": device, "fp16": fp16,
                         "checkpoints": [os.path.basename(c) for c in md.checkpoints]}

    def _generate(self, sample):
        import torch

        sample = _to_device(sample, self.device)
        with torch.no_grad():
            hypos = self.task.inference_step(self.generator, self.models, sample)
        return [self.tgt_dict.string(h[0]["tokens"].int().cpu()) for h in hypos]


def _to_device(sample, device):
    if device.type == "cpu":
        return sample
    from fairseq import utils

    return utils.move_to_cuda(sample, device=device)
