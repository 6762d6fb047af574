"""Batch translation with a WMT19-format model dir through fairseq's own generation.

Why not the hub's `translate()` in a loop, nor `fairseq-generate`: one sentence at a time
is slow, and fairseq's batching silently drops the last partial batch in the forks we
can install unless `required_batch_size_multiple` is 1 (fairseq-generate scored 96 of
100 sentences). Here: the model's own pipeline (`nmtfrag.bpe`: hub tokenisation →
fastBPE), `task.build_dataset_for_inference` + `task.get_batch_iterator(...,
required_batch_size_multiple=1)` + `task.inference_step` with fairseq's SequenceGenerator
(beam search), then `@@ ` removal, tag removal and Moses detokenisation as the hub's
`decode` does. Every input line gets exactly one output line: ids are checked, a
missing one is an internal error (exit 1), never a silently shorter file. Empty input
lines give empty output lines.

Engines: `Translator` decodes with fairseq (the default and the reference);
`nmtfrag.ct2_engine.CT2Translator` decodes with CTranslate2. Both inherit everything but
the decoding of one batch from `BaseTranslator`: BPE encoding, dictionary ids and
truncation, fairseq's batching (so both engines see the same batches, and the per-batch
maximum output length is the same), the one-line-per-input check and decoding back to
text. `load_translator` picks one.

Output length: at most int(max_len_a × source tokens + max_len_b) subword tokens, capped
by the decoder's positions; the defaults are fairseq-generate's and the hub's (a 0,
b 200), so an output is the one fairseq would give. Both engines apply the same limit
to the same batches.
"""
import os

from .errors import InputError

ENGINES = ("fairseq", "ctranslate2")
# fairseq-generate's and the hub's defaults: an output may have int(a × source length +
# b) tokens, i.e. 200 whatever the source length. A cap tied to the source (e.g. 1.2 ×
# length + 10) cuts long or copy-then-translate outputs and changes BLEU.
MAX_LEN_A, MAX_LEN_B = 0.0, 200


def load_translator(model_dir, engine="fairseq", *, compute_type=None, ct2_cache=None,
                    threads=None, **kwargs):
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


def check_max_len(a, b):
    """Refuse a length limit that would allow no output token (fairseq would fail later,
    in the middle of a batch, with an assertion)."""
    if a < 0 or b < 0 or int(a * 2 + b) < 1:
        raise InputError(f"--max-len-a {a} --max-len-b {b}: the output limit int(a × "
                         f"source length + b) must be at least 1 token (fairseq's "
                         f"defaults: a {MAX_LEN_A:g}, b {MAX_LEN_B})")


class BaseTranslator:
    """The engine-independent part of translation; subclasses set the attributes listed
    in `_init_pipeline` and implement `_generate(sample)`."""

    engine = None

    def _init_pipeline(self, md, task, max_positions, max_tokens, batch_size):
        from .bpe import BPE

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

    def encode(self, lines, mode="raw"):
        """Subword strings of source lines (see nmtfrag.bpe for `mode`)."""
        sub, _ = self.bpe.encode_lines(lines, self.src_lang, mode, keep_tags=True)
        return sub

    def batches(self, sub_lines):
        """(fairseq batches, line index of each dataset id, results with empty lines
        filled in): every engine translates exactly these batches."""
        import torch

        max_src = self.max_positions[0] if isinstance(self.max_positions, tuple) \
            else self.max_positions
        tokens, index = [], []
        results = [None] * len(sub_lines)
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

    def translate_subwords(self, sub_lines, progress=None):
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
        return results

    def decode(self, sub_line):
        """Subword output → detokenised text (tags removed), as the hub's decode."""
        from .bpe import moses_detokenize, remove_bpe, strip_tags

        text = strip_tags(remove_bpe(sub_line))
        return moses_detokenize(text, self.tgt_lang, unescape=True) if text else ""

    def translate(self, lines, mode="raw", show_progress=False):
        """Detokenised translations, one per input line (checked)."""
        from .fileio import progress

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


class Translator(BaseTranslator):
    """A loaded model dir (one checkpoint or an ensemble) ready to translate batches
    with fairseq's SequenceGenerator."""

    engine = "fairseq"

    def __init__(self, model_dir, src_lang="de", tgt_lang="en", checkpoint=None,
                 device="cpu", fp16=False, beam=5, lenpen=1.0, max_len_a=MAX_LEN_A,
                 max_len_b=MAX_LEN_B, max_tokens=4000, batch_size=None):
        os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
        import torch
        from fairseq import checkpoint_utils, utils
        from fairseq.dataclass.configs import GenerationConfig

        from .binarize import fairseq_log_level
        from .model_dir import validate_model_dir

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
