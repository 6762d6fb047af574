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
"""
import os

from .errors import InputError


class Translator:
    """A loaded model dir (one checkpoint or an ensemble) ready to translate batches."""

    def __init__(self, model_dir, src_lang="de", tgt_lang="en", checkpoint=None,
                 device="cpu", fp16=False, beam=5, lenpen=1.0, max_len_a=1.2,
                 max_len_b=10, max_tokens=4000, batch_size=None):
        os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
        import torch
        from fairseq import checkpoint_utils, utils
        from fairseq.dataclass.configs import GenerationConfig

        from .binarize import fairseq_log_level
        from .bpe import BPE
        from .model_dir import validate_model_dir

        if device == "cuda" and not torch.cuda.is_available():
            raise InputError("--device cuda but torch sees no CUDA device")
        self.md = validate_model_dir(model_dir, src_lang, tgt_lang, checkpoint)
        self.src_lang, self.tgt_lang = src_lang, tgt_lang
        with fairseq_log_level():
            models, _cfg, task = checkpoint_utils.load_model_ensemble_and_task(
                self.md.checkpoints,
                arg_overrides={"data": self.md.path, "source_lang": src_lang,
                               "target_lang": tgt_lang})
        self.device = torch.device("cuda" if device == "cuda" else "cpu")
        for m in models:
            m.eval()
            if fp16 and device == "cuda":
                m.half()
            m.to(self.device)
        self.models, self.task = models, task
        self.src_dict, self.tgt_dict = task.source_dictionary, task.target_dictionary
        self.max_positions = utils.resolve_max_positions(
            task.max_positions(), *[m.max_positions() for m in models])
        gen_cfg = GenerationConfig(beam=beam, lenpen=lenpen, max_len_a=max_len_a,
                                   max_len_b=max_len_b)
        self.generator = task.build_generator(models, gen_cfg)
        self.bpe = BPE(self.md.bpecodes)
        self.max_tokens, self.batch_size = max_tokens, batch_size
        self.settings = {"beam": beam, "lenpen": lenpen, "max_len_a": max_len_a,
                         "max_len_b": max_len_b, "max_tokens": max_tokens,
                         "batch_size": batch_size, "device": device, "fp16": fp16,
                         "checkpoints": [os.path.basename(c) for c in self.md.checkpoints]}
        self.truncated = 0

    def encode(self, lines, mode="raw"):
        """Subword strings of source lines (see nmtfrag.bpe for `mode`)."""
        sub, _ = self.bpe.encode_lines(lines, self.src_lang, mode, keep_tags=True)
        return sub

    def translate_subwords(self, sub_lines, progress=None):
        """Best hypothesis (subword string, tags kept) for each subword source line."""
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
        if tokens:
            dataset = self.task.build_dataset_for_inference(tokens,
                                                            [t.numel() for t in tokens])
            itr = self.task.get_batch_iterator(
                dataset=dataset, max_tokens=self.max_tokens, max_sentences=self.batch_size,
                max_positions=self.max_positions, ignore_invalid_inputs=False,
                required_batch_size_multiple=1, disable_iterator_cache=True,
            ).next_epoch_itr(shuffle=False)
            done = 0
            for sample in itr:
                sample = _to_device(sample, self.device)
                with torch.no_grad():
                    hypos = self.task.inference_step(self.generator, self.models, sample)
                for j, sid in enumerate(sample["id"].tolist()):
                    out = self.tgt_dict.string(hypos[j][0]["tokens"].int().cpu())
                    results[index[sid]] = out
                done += len(sample["id"])
                if progress is not None:
                    progress.update(len(sample["id"]))
        missing = [i + 1 for i, r in enumerate(results) if r is None]
        if missing:
            raise RuntimeError(f"fairseq generation returned no output for {len(missing)} "
                               f"of {len(results)} lines (first: line {missing[0]})")
        return results

    def decode(self, sub_line):
        """Subword output → detokenised text (tags removed), as the hub's decode."""
        from .bpe import moses_detokenize, remove_bpe, strip_tags

        text = strip_tags(remove_bpe(sub_line))
        return moses_detokenize(text, self.tgt_lang, unescape=True) if text else ""

    def translate(self, lines, mode="raw", show_progress=False):
        """Detokenised translations, one per input line (checked)."""
        from .fileio import progress

        bar = progress(total=len(lines), desc="translate") if show_progress else None
        try:
            subs = self.translate_subwords(self.encode(lines, mode), bar)
        finally:
            if bar is not None:
                bar.close()
        outs = [self.decode(s) for s in subs]
        if len(outs) != len(lines):
            raise RuntimeError(f"{len(lines)} input lines but {len(outs)} translations")
        return outs


def _to_device(sample, device):
    if device.type == "cpu":
        return sample
    from fairseq import utils

    return utils.move_to_cuda(sample, device=device)
