"""A toy fairseq de→en Transformer in the WMT19 release layout, trained in seconds on CPU.

Why: the demo (scripts/demo.sh) and the tests need a model directory that loads exactly
like the real WMT19 release (model.pt, dict.de.txt, dict.en.txt, bpecodes) without any
download. It is built with the real tools only:
- joined BPE codes learned with subword-nmt on the (hub-tokenised) training text, in the
  `a b count` format fastBPE applies;
- fairseq-preprocess (Python API) with a joined dictionary, as in the shared models;
- fairseq-train (Python API) for `updates` updates from random weights (0 would save no
  checkpoint, so the minimum is 1), `-s de -t en`, arch `transformer` with tiny sizes and
  all embeddings shared; the last checkpoint becomes `model.pt` without optimizer state.

    python3 scripts/toy_model.py --train corpora/demo/train --valid corpora/demo/valid \
        --out toy-model/ --updates 300
"""
from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence

def arch_args(layers: int, dim: int, ffn: int, heads: int) -> list[str]:
    """fairseq options of a small `transformer` with all embeddings shared."""
    return ["--arch", "transformer", "--share-all-embeddings",
            "--encoder-layers", str(layers), "--decoder-layers", str(layers),
            "--encoder-embed-dim", str(dim), "--decoder-embed-dim", str(dim),
            "--encoder-ffn-embed-dim", str(ffn), "--decoder-ffn-embed-dim", str(ffn),
            "--encoder-attention-heads", str(heads), "--decoder-attention-heads", str(heads)]


TINY_ARCH_ARGS = arch_args(1, 32, 64, 2)  # the tests' model: seconds to train
# the demo's model: small enough for 2 CPU cores, big enough to learn the demo corpus
DEMO_ARCH_ARGS = arch_args(2, 128, 256, 4)


def _learn_bpe(texts, codes_path, merges):
    from subword_nmt.learn_bpe import learn_bpe

    # its progress bar and "no pair has frequency >= 2" are noise for a toy vocabulary
    with open(codes_path, "w", encoding="utf-8") as out, \
            contextlib.redirect_stderr(io.StringIO()):
        learn_bpe(io.StringIO("\n".join(texts) + "\n"), out, merges, min_frequency=2,
                  total_symbols=False, is_dict=False)
    # subword-nmt writes a '#version' header and "a b" pairs; fastBPE wants "a b count".
    with open(codes_path, encoding="utf-8") as f:
        lines = [ln.rstrip("\n") for ln in f if not ln.startswith("#version")]
    with open(codes_path, "w", encoding="utf-8") as f:
        for i, ln in enumerate(lines):
            f.write(f"{ln} {len(lines) - i}\n")


def _write_bpe(codes_path, lines, out_path):
    from ..data.bpe import load_fastbpe

    bpe = load_fastbpe(codes_path)
    with open(out_path, "w", encoding="utf-8") as f:
        f.writelines(ln + "\n" for ln in bpe.apply(list(lines)))


@contextlib.contextmanager
def quiet_fairseq() -> Iterator[None]:
    import logging

    saved = logging.getLogger().level
    logging.getLogger().setLevel(logging.WARNING)
    for name in ("fairseq", "fairseq_cli"):
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        yield
    finally:
        logging.getLogger().setLevel(saved)


def train_toy_model(out_dir: str, train: Sequence[tuple[str, str]],
                    valid: Sequence[tuple[str, str]], *, updates: int = 1, seed: int = 0,
                    merges: int = 40, max_tokens: int = 1000, lr: float = 0.005,
                    arch_args: Sequence[str] = TINY_ARCH_ARGS) -> str:
    """Train a toy model on `train`/`valid` ([(de, en)] of tokenised text); return out_dir."""
    os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    import torch
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.distributed import utils as distributed_utils
    from fairseq_cli import preprocess as fs_preprocess
    from fairseq_cli import train as fs_train

    if updates < 1:
        raise ValueError("updates must be >= 1 (fairseq saves no checkpoint otherwise)")
    os.makedirs(out_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="toymodel-work-")
    threads = torch.get_num_threads()
    try:
        codes = os.path.join(out_dir, "bpecodes")
        _learn_bpe([p[0] for p in train] + [p[1] for p in train], codes, merges)
        for split, pairs in (("train", train), ("valid", valid)):
            for side, lang in ((0, "de"), (1, "en")):
                _write_bpe(codes, (p[side] for p in pairs),
                           os.path.join(work, f"{split}.{lang}"))

        bin_dir = os.path.join(work, "bin")
        pargs = options.get_preprocessing_parser().parse_args([
            "--source-lang", "de", "--target-lang", "en", "--joined-dictionary",
            "--trainpref", os.path.join(work, "train"),
            "--validpref", os.path.join(work, "valid"),
            "--destdir", bin_dir, "--workers", "1",
        ])
        with quiet_fairseq():
            fs_preprocess.main(pargs)

        save_dir = os.path.join(work, "ckpt")
        targs = options.parse_args_and_arch(options.get_training_parser(), [
            bin_dir, "-s", "de", "-t", "en", "--task", "translation", "--cpu",
            *arch_args, "--dropout", "0.1",
            "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--lr", str(lr),
            "--lr-scheduler", "fixed", "--criterion", "label_smoothed_cross_entropy",
            "--label-smoothing", "0.1", "--max-tokens", str(max_tokens),
            "--max-update", str(updates), "--seed", str(seed),
            "--save-dir", save_dir, "--no-epoch-checkpoints", "--disable-validation",
            "--log-format", "none", "--num-workers", "0",
        ])
        cfg = convert_namespace_to_omegaconf(targs)
        torch.set_num_threads(1)
        with quiet_fairseq():
            distributed_utils.call_main(cfg, fs_train.main)

        state = torch.load(os.path.join(save_dir, "checkpoint_last.pt"),
                           map_location="cpu", weights_only=False)
        state.pop("last_optimizer_state", None)
        torch.save(state, os.path.join(out_dir, "model.pt"))
        for lang in ("de", "en"):
            shutil.copy(os.path.join(bin_dir, f"dict.{lang}.txt"),
                        os.path.join(out_dir, f"dict.{lang}.txt"))
    finally:
        torch.set_num_threads(threads)
        shutil.rmtree(work, ignore_errors=True)
    return out_dir


def read_raw(prefix):
    """Hub-tokenised (de, en) pairs of PREFIX.de / PREFIX.en (raw text)."""
    from ..data.bpe import hub_tokens

    with open(f"{prefix}.de", encoding="utf-8") as fs, \
            open(f"{prefix}.en", encoding="utf-8") as ft:
        return [(hub_tokens(s.strip(), "de", "raw"), hub_tokens(t.strip(), "en", "raw"))
                for s, t in zip(fs, ft) if s.strip() and t.strip()]
