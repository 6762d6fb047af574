"""Batch translation: one output per input line, same result as fairseq's hub."""
import os
import subprocess
import sys

import torch

from nmtfrag.generate import Translator
from tinymodel import make_corpus

torch.set_num_threads(1)


def test_every_line_translated_like_the_hub(tiny_model_dir):
    lines = [p[0] for p in make_corpus(21, seed=31)]
    lines[5] = ""  # an empty line stays an empty line
    tr = Translator(tiny_model_dir, batch_size=8)  # 21 = 2×8 + a partial batch of 5
    outs = tr.translate(lines)
    assert len(outs) == 21 and outs[5] == ""
    assert all(o for i, o in enumerate(outs) if i != 5)

    from fairseq.models.transformer import TransformerModel

    hub = TransformerModel.from_pretrained(tiny_model_dir, checkpoint_file="model.pt",
                                           data_name_or_path=".", tokenizer="moses",
                                           bpe="fastbpe", source_lang="de",
                                           target_lang="en")
    hub.eval()
    for i in (0, 1, 20):
        assert outs[i] == hub.translate(lines[i], beam=5, max_len_a=1.2, max_len_b=10)


def test_tags_in_input_are_not_escaped_and_removed_from_output(tiny_model_dir):
    tr = Translator(tiny_model_dir)
    sub = tr.encode(["<P> haus katze </P>", "a < b & c"])
    assert sub[0].startswith("<P> ") and sub[0].endswith(" </P>")
    from nmtfrag.bpe import remove_bpe

    assert remove_bpe(sub[1]) == "a &lt; b &amp; c"  # escaped as the hub pipeline does
    assert "<P>" not in tr.decode("<P> house </P>")
    assert tr.decode("ho@@ use &amp; cat .") == "house & cat."


def test_cli_stdin_to_stdout(tiny_model_dir):
    text = "haus katze .\n\nbaum wasser sonne .\n"
    r = subprocess.run([sys.executable, "-m", "nmtfrag", "translate", "--model",
                        tiny_model_dir, "--threads", "1", "--device", "cpu"],
                       input=text, capture_output=True, text=True,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert r.returncode == 0, r.stderr[-1500:]
    out = r.stdout.split("\n")
    assert len(out) == 4 and out[-1] == "" and out[1] == ""
    assert out[0] and out[2]
