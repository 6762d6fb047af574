"""Batch translation: one output per input line, same result as fairseq's hub."""
import os
import subprocess
import sys

import pytest
import torch

from nmtfrag.translate.fairseq_engine import Translator
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
        assert outs[i] == hub.translate(lines[i], beam=5)  # hub defaults: max_len_b 200


def test_tags_in_input_are_not_escaped_and_removed_from_output(tiny_model_dir):
    tr = Translator(tiny_model_dir)
    sub = tr.encode(["<P> haus katze </P>", "a < b & c"])
    assert sub[0].startswith("<P> ") and sub[0].endswith(" </P>")
    from nmtfrag.data.bpe import remove_bpe

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


@pytest.fixture(scope="module")
def untrained_model_dir(tmp_path_factory):
    """A model after one update: it rarely emits </s>, so its outputs run to the length
    limit and show which limit was applied."""
    from tinymodel import make_tiny_model_dir

    return make_tiny_model_dir(str(tmp_path_factory.mktemp("untrained")), updates=1)


LONG_LINES = ["haus", "katze katze", "haus katze hund .", "xyz xyz xyz"]


def test_default_length_limit_is_fairseqs(untrained_model_dir):
    """fairseq-generate and the hub allow 200 output tokens whatever the source length;
    the old cap (1.2 × source + 10) cut these outputs."""
    from fairseq.models.transformer import TransformerModel

    new = Translator(untrained_model_dir, batch_size=1)
    old = Translator(untrained_model_dir, batch_size=1, max_len_a=1.2, max_len_b=10)
    src = new.encode(LONG_LINES)
    sub_new = new.translate_subwords(src)
    sub_old = old.translate_subwords(src)
    for s, a, b in zip(src, sub_new, sub_old):
        n_src = len(s.split()) + 1  # with </s>, as fairseq counts it
        assert len(b.split()) == int(1.2 * n_src + 10)  # cut by the old cap
        assert len(a.split()) == 200  # fairseq's limit: max_len_b
    hub = TransformerModel.from_pretrained(untrained_model_dir, checkpoint_file="model.pt",
                                           data_name_or_path=".", tokenizer="moses",
                                           bpe="fastbpe", source_lang="de",
                                           target_lang="en")
    hub.eval()
    outs = new.translate(LONG_LINES)
    assert outs == [hub.translate(x, beam=5) for x in LONG_LINES]  # hub defaults
    assert new.settings["max_len_a"] == 0 and new.settings["max_len_b"] == 200


def test_default_length_limit_reaches_ctranslate2(untrained_model_dir, tmp_path):
    pytest.importorskip("ctranslate2")
    from nmtfrag.translate.fairseq_engine import load_translator

    fs = Translator(untrained_model_dir).translate(LONG_LINES)
    ct = load_translator(untrained_model_dir, "ctranslate2", ct2_cache=str(tmp_path))
    assert ct.settings["max_len_a"] == 0 and ct.settings["max_len_b"] == 200
    assert ct.translate(LONG_LINES) == fs
    short = load_translator(untrained_model_dir, "ctranslate2", ct2_cache=str(tmp_path),
                            max_len_a=1.2, max_len_b=10).translate(LONG_LINES)
    assert short == Translator(untrained_model_dir, max_len_a=1.2,
                               max_len_b=10).translate(LONG_LINES)
    assert all(len(a) < len(b) for a, b in zip(short, fs))


def test_cli_length_options_recorded_in_report(untrained_model_dir, tmp_path):
    import json

    from nmtfrag.cli import main

    src, ref = tmp_path / "t.de", tmp_path / "t.en"
    src.write_text("".join(x + "\n" for x in LONG_LINES))
    ref.write_text("".join("house .\n" for _ in LONG_LINES))
    args = ["evaluate", "--model", untrained_model_dir, "--src", str(src), "--ref",
            str(ref), "--threads", "1", "--device", "cpu"]
    assert main(args + ["--out", str(tmp_path / "d")]) == 0
    assert main(args + ["--out", str(tmp_path / "c"), "--max-len-a", "1.2",
                        "--max-len-b", "10"]) == 0
    gen_d = json.load(open(tmp_path / "d" / "report.json"))["params"]["generation"]
    gen_c = json.load(open(tmp_path / "c" / "report.json"))["params"]["generation"]
    assert (gen_d["max_len_a"], gen_d["max_len_b"]) == (0, 200)
    assert (gen_c["max_len_a"], gen_c["max_len_b"]) == (1.2, 10)
    hyp_d = (tmp_path / "d" / "hyp.txt").read_text().split("\n")
    hyp_c = (tmp_path / "c" / "hyp.txt").read_text().split("\n")
    assert all(len(c) < len(d) for c, d in zip(hyp_c[:-1], hyp_d[:-1]))
    assert "int(0 × source tokens + 200)" in (tmp_path / "d" / "report.md").read_text()
    assert main(args + ["--out", str(tmp_path / "e"), "--max-len-b", "0"]) == 2
