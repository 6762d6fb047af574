"""A checkpoint saved as 2019's fairseq saved the WMT19 release (an argparse `args`
Namespace, no `cfg`) works on every path: validate, translate with both engines,
fine-tune (benchmarks/wmt19_shape.py runs the same at full size)."""
import json
import os
import shutil

import pytest
import torch

from nmtfrag.cli import main
from nmtfrag.translate.fairseq_engine import Translator, load_translator
from nmtfrag.model_dir import validate_model_dir
from tinymodel import make_corpus, save_as_2019_checkpoint, write_parallel

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def old_dir(tiny_model_dir, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("wmt19layout"))
    for f in ("dict.de.txt", "dict.en.txt", "bpecodes"):
        shutil.copy(os.path.join(tiny_model_dir, f), out)
    save_as_2019_checkpoint(os.path.join(tiny_model_dir, "model.pt"),
                            os.path.join(out, "model1.pt"))
    return out


def test_args_only_checkpoint_is_2019s(old_dir):
    state = torch.load(os.path.join(old_dir, "model1.pt"), weights_only=False)
    assert "cfg" not in state and state["args"].arch == "transformer"
    md = validate_model_dir(old_dir)
    assert md.arch["share_all_embeddings"] and md.arch["encoder_embed_dim"] == 32


def test_translates_as_the_new_checkpoint_with_both_engines(old_dir, tiny_model_dir,
                                                             tmp_path):
    lines = [p[0] for p in make_corpus(12, seed=9)]
    want = Translator(tiny_model_dir).translate(lines)
    assert Translator(old_dir).translate(lines) == want
    pytest.importorskip("ctranslate2")
    ct = load_translator(old_dir, "ctranslate2", ct2_cache=str(tmp_path))
    assert ct.translate(lines) == want


def test_finetunes(old_dir, tmp_path):
    pairs = make_corpus(40, seed=4)
    write_parallel(pairs[:32], str(tmp_path / "tr"))
    write_parallel(pairs[32:], str(tmp_path / "va"))
    assert main(["finetune", "--model", old_dir, "--train", str(tmp_path / "tr"),
                 "--valid-src", str(tmp_path / "va.de"), "--valid-tgt",
                 str(tmp_path / "va.en"), "--max-updates", "1", "--threads", "1",
                 "--device", "cpu", "--quiet", "--out", str(tmp_path / "ft")]) == 0
    man = json.load(open(tmp_path / "ft" / "manifest.json"))
    assert man["result"]["num_updates"] == 1 and man["params"]["checkpoint"] == "model1.pt"
    assert Translator(str(tmp_path / "ft")).translate(["haus ."])[0]
