"""A tiny fairseq de→en Transformer in the WMT19 release layout, built in seconds on CPU.

Tests import `make_tiny_model_dir` (and `make_corpus`) to get a model directory that loads
exactly like the real WMT19 release or ../shared/models/generic-deen-small:

    TransformerModel.from_pretrained(dir, checkpoint_file="model.pt", data_name_or_path=".",
                                     tokenizer="moses", bpe="fastbpe",
                                     source_lang="de", target_lang="en")

How it is made (all with the real tools, nothing hand-rolled):
- a synthetic parallel corpus: German-looking words mapped one-to-one to English-looking
  words (so a model can learn it), random sentence lengths, fixed seed;
- Moses tokenisation is a no-op on it (plain lowercase words, one final `.`);
- joined BPE codes learned with subword-nmt (the format fastBPE applies, with counts);
- fairseq-preprocess (Python API) with a joined dictionary, as in the small shared model;
- fairseq-train (Python API) for `updates` updates from random weights (0 would not save
  a checkpoint, so the minimum is 1), `-s de -t en`, arch `transformer` with tiny sizes
  and all embeddings shared; the last checkpoint is copied to `model.pt` without its
  optimizer state, exactly as fairseq wrote it otherwise (cfg with the architecture args).
"""
import contextlib
import io
import os
import random
import shutil
import tempfile

DE_WORDS = ["haus", "katze", "hund", "baum", "wasser", "sonne", "mond", "stadt", "auto",
            "buch", "tisch", "stuhl", "fenster", "garten", "blume", "vogel", "fisch",
            "brot", "milch", "apfel", "schule", "lehrer", "kind", "mutter", "vater",
            "arzt", "tablette", "dosis", "patient", "datei", "fenster", "menue"]
EN_WORDS = ["house", "cat", "dog", "tree", "water", "sun", "moon", "city", "car",
            "book", "table", "chair", "window", "garden", "flower", "bird", "fish",
            "bread", "milk", "apple", "school", "teacher", "child", "mother", "father",
            "doctor", "tablet", "dose", "patient", "file", "window", "menu"]
LEXICON = dict(zip(DE_WORDS, EN_WORDS))

TINY_ARCH_ARGS = [
    "--arch", "transformer", "--share-all-embeddings",
    "--encoder-layers", "1", "--decoder-layers", "1",
    "--encoder-embed-dim", "32", "--decoder-embed-dim", "32",
    "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64",
    "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
]


def make_corpus(n, seed=0, min_len=3, max_len=8):
    """`n` (de, en) sentence pairs: word-for-word translations ending in ` .`."""
    rng = random.Random(seed)
    vocab = sorted(LEXICON)
    pairs = []
    for _ in range(n):
        words = [rng.choice(vocab) for _ in range(rng.randint(min_len, max_len))]
        pairs.append((" ".join(words) + " .", " ".join(LEXICON[w] for w in words) + " ."))
    return pairs


def write_parallel(pairs, prefix, src_lang="de", tgt_lang="en"):
    """Write pairs to `prefix.de` / `prefix.en`; return the two paths."""
    paths = (f"{prefix}.{src_lang}", f"{prefix}.{tgt_lang}")
    for side, path in enumerate(paths):
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(p[side] + "\n" for p in pairs)
    return paths


def _learn_bpe(texts, codes_path, merges):
    from subword_nmt.learn_bpe import learn_bpe

    with open(codes_path, "w", encoding="utf-8") as out:
        learn_bpe(io.StringIO("\n".join(texts) + "\n"), out, merges, min_frequency=2,
                  total_symbols=False, is_dict=False)
    # subword-nmt writes a '#version' header and "a b" pairs; fastBPE wants "a b count".
    with open(codes_path, encoding="utf-8") as f:
        lines = [ln.rstrip("\n") for ln in f if not ln.startswith("#version")]
    with open(codes_path, "w", encoding="utf-8") as f:
        for i, ln in enumerate(lines):
            f.write(f"{ln} {len(lines) - i}\n")


def _apply_bpe(codes_path, in_path, out_path):
    import fastBPE

    bpe = fastBPE.fastBPE(codes_path)
    with open(in_path, encoding="utf-8") as f:
        lines = [ln.rstrip("\n") for ln in f]
    with open(out_path, "w", encoding="utf-8") as f:
        f.writelines(ln + "\n" for ln in bpe.apply(lines))


@contextlib.contextmanager
def _quiet_fairseq():
    import logging

    saved = logging.getLogger().level
    logging.getLogger().setLevel(logging.WARNING)
    for name in ("fairseq", "fairseq_cli"):
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        yield
    finally:
        logging.getLogger().setLevel(saved)


def make_tiny_model_dir(out_dir=None, n_train=300, n_valid=30, updates=1, seed=0,
                        merges=40, max_tokens=1000, lr=0.005):
    """Build a tiny WMT19-layout model directory and return its path.

    Files: model.pt, dict.de.txt, dict.en.txt (identical: joined dictionary, shared
    embeddings), bpecodes. `updates` fairseq-train updates from random weights (≥ 1);
    about 2 s for 1 update, ~10 s for 100 on one CPU thread.
    """
    os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    import torch
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.distributed import utils as distributed_utils
    from fairseq_cli import preprocess as fs_preprocess
    from fairseq_cli import train as fs_train

    if updates < 1:
        raise ValueError("updates must be >= 1 (fairseq saves no checkpoint otherwise)")
    out_dir = out_dir or tempfile.mkdtemp(prefix="tinymodel-")
    os.makedirs(out_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="tinymodel-work-")
    threads = torch.get_num_threads()
    try:
        train = make_corpus(n_train, seed=seed)
        valid = make_corpus(n_valid, seed=seed + 1)
        tr = write_parallel(train, os.path.join(work, "train"))
        va = write_parallel(valid, os.path.join(work, "valid"))
        codes = os.path.join(out_dir, "bpecodes")
        _learn_bpe([p[0] for p in train] + [p[1] for p in train], codes, merges)
        for path in tr + va:
            _apply_bpe(codes, path, path + ".bpe")
            os.replace(path + ".bpe", path)

        bin_dir = os.path.join(work, "bin")
        pp = options.get_preprocessing_parser()
        pargs = pp.parse_args([
            "--source-lang", "de", "--target-lang", "en", "--joined-dictionary",
            "--trainpref", os.path.join(work, "train"),
            "--validpref", os.path.join(work, "valid"),
            "--destdir", bin_dir, "--workers", "1",
        ])
        with _quiet_fairseq():
            fs_preprocess.main(pargs)

        save_dir = os.path.join(work, "ckpt")
        tp = options.get_training_parser()
        targs = options.parse_args_and_arch(tp, [
            bin_dir, "-s", "de", "-t", "en", "--task", "translation", "--cpu",
            *TINY_ARCH_ARGS, "--dropout", "0.1",
            "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--lr", str(lr),
            "--lr-scheduler", "fixed", "--criterion", "label_smoothed_cross_entropy",
            "--label-smoothing", "0.1", "--max-tokens", str(max_tokens),
            "--max-update", str(updates), "--seed", str(seed),
            "--save-dir", save_dir, "--no-epoch-checkpoints", "--disable-validation",
            "--log-format", "none", "--num-workers", "0",
        ])
        cfg = convert_namespace_to_omegaconf(targs)
        torch.set_num_threads(1)
        with _quiet_fairseq():
            distributed_utils.call_main(cfg, fs_train.main)

        state = torch.load(os.path.join(save_dir, "checkpoint_last.pt"),
                           map_location="cpu", weights_only=False)
        state.pop("last_optimizer_state", None)
        torch.save(state, os.path.join(out_dir, "model.pt"))
        shutil.copy(os.path.join(bin_dir, "dict.de.txt"), os.path.join(out_dir, "dict.de.txt"))
        shutil.copy(os.path.join(bin_dir, "dict.en.txt"), os.path.join(out_dir, "dict.en.txt"))
    finally:
        torch.set_num_threads(threads)
        shutil.rmtree(work, ignore_errors=True)
    return out_dir


if __name__ == "__main__":  # quick manual check: build one and translate a sentence
    import sys
    import time

    t = time.time()
    d = make_tiny_model_dir(sys.argv[1] if len(sys.argv) > 1 else None,
                            updates=int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    print(d, f"{time.time() - t:.1f}s", sorted(os.listdir(d)))
    from fairseq.models.transformer import TransformerModel

    hub = TransformerModel.from_pretrained(d, checkpoint_file="model.pt", data_name_or_path=".",
                                           tokenizer="moses", bpe="fastbpe",
                                           source_lang="de", target_lang="en")
    print(hub.translate("haus katze hund ."))
