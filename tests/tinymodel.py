"""A tiny fairseq de→en Transformer in the WMT19 release layout, built in seconds on CPU.

Tests import `make_tiny_model_dir` (and `make_corpus`) to get a model directory that loads
exactly like the real WMT19 release or ../shared/models/generic-deen-small:

    TransformerModel.from_pretrained(dir, checkpoint_file="model.pt", data_name_or_path=".",
                                     tokenizer="moses", bpe="fastbpe",
                                     source_lang="de", target_lang="en")

The corpus is synthetic: German-looking words mapped one-to-one to English-looking words
(so a model can learn it), random sentence lengths, fixed seed; Moses tokenisation is a
no-op on it. The model is built by `nmtfrag.train.toymodel.train_toy_model` (subword-nmt BPE,
fairseq-preprocess, fairseq-train, all through their own APIs).
"""
import os
import random
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


def write_domain(data_root, domain, sizes, seed=0):
    """DATA_ROOT/DOMAIN/{train,valid,test}.{de,en} of `sizes` = (train, valid, test)
    toy pairs, as the study scripts read them; returns DATA_ROOT as a string."""
    os.makedirs(os.path.join(str(data_root), domain), exist_ok=True)
    for k, (name, n) in enumerate(zip(("train", "valid", "test"), sizes)):
        write_parallel(make_corpus(n, seed=seed + k), os.path.join(str(data_root), domain, name))
    return str(data_root)


def make_tiny_model_dir(out_dir=None, n_train=300, n_valid=30, updates=1, seed=0,
                        merges=40, max_tokens=1000, lr=0.005):
    """Build a tiny WMT19-layout model directory on make_corpus data; return its path.

    Files: model.pt, dict.de.txt, dict.en.txt (identical: joined dictionary, shared
    embeddings), bpecodes. `updates` fairseq-train updates from random weights (≥ 1);
    about 2 s for 1 update, ~10 s for 100 on one CPU thread.
    """
    from nmtfrag.train.toymodel import train_toy_model

    out_dir = out_dir or tempfile.mkdtemp(prefix="tinymodel-")
    return train_toy_model(out_dir, make_corpus(n_train, seed=seed),
                           make_corpus(n_valid, seed=seed + 1), updates=updates, seed=seed,
                           merges=merges, max_tokens=max_tokens, lr=lr)


def save_as_2019_checkpoint(src_ckpt, dst_ckpt):
    """Re-save a checkpoint the way 2019's fairseq (the WMT19 release) saved it: the
    options as an argparse Namespace under 'args', no 'cfg', no task or criterion state."""
    import torch

    state = torch.load(src_ckpt, map_location="cpu", weights_only=False)
    args = state.get("args") or state["cfg"]["model"]  # a Namespace with every option
    old = {"args": args, "model": state["model"],
           "optimizer_history": state.get("optimizer_history", []),
           "extra_state": state.get("extra_state") or {}}
    torch.save(old, dst_ckpt)
    return dst_ckpt


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
