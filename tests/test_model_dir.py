"""Model directories: validation, architecture from the checkpoint, growing embeddings."""
import os
import shutil
import subprocess
import sys

import pytest
import torch

from nmtfrag.errors import InputError
from nmtfrag.model_dir import (N_SPECIAL, dict_symbols, grow_state, load_state,
                               validate_model_dir, write_dict_with, write_model_dir)

torch.set_num_threads(1)


def _copy(src, tmp_path, name="m"):
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return str(dst)


def test_valid_dir_reads_architecture_from_checkpoint(tiny_model_dir):
    md = validate_model_dir(tiny_model_dir)
    assert [os.path.basename(c) for c in md.checkpoints] == ["model.pt"]
    assert md.arch["arch"] == "transformer"
    assert md.arch["encoder_embed_dim"] == 32 and md.arch["encoder_layers"] == 1
    assert md.shared_all
    assert md.checkpoint_file == "model.pt"


def test_numbered_checkpoints_are_an_ensemble(tiny_model_dir, tmp_path):
    d = _copy(tiny_model_dir, tmp_path)
    os.rename(os.path.join(d, "model.pt"), os.path.join(d, "model1.pt"))
    shutil.copy(os.path.join(d, "model1.pt"), os.path.join(d, "model2.pt"))
    md = validate_model_dir(d)
    assert md.checkpoint_file == "model1.pt:model2.pt"


@pytest.mark.parametrize("breakage, message", [
    ("rm bpecodes", "bpecodes: missing"),
    ("rm dict.en.txt", "dict.en.txt: missing"),
    ("rm model.pt", "no model.pt"),
    ("garbage model.pt", "not a readable fairseq checkpoint"),
    ("extra dict line", "do not match"),
    ("bad dict line", "expected '<symbol> <count>'"),
])
def test_broken_dirs_are_refused(tiny_model_dir, tmp_path, breakage, message):
    d = _copy(tiny_model_dir, tmp_path)
    action, name = breakage.split(" ", 1)
    path = os.path.join(d, name.replace("line", "").strip() if action != "extra" and
                        action != "bad" else "dict.en.txt")
    if action == "rm":
        os.unlink(path)
    elif action == "garbage":
        with open(path, "wb") as f:
            f.write(b"not a checkpoint at all")
    elif action == "extra":
        with open(path, "a", encoding="utf-8") as f:
            f.write("newword 5\n")
    elif action == "bad":
        with open(path, "a", encoding="utf-8") as f:
            f.write("no-count-here\n")
    with pytest.raises(InputError, match=message):
        validate_model_dir(d)


def test_cli_bad_model_dir_exits_2_with_one_error_line(tmp_path):
    (tmp_path / "src.de").write_text("a\n")
    (tmp_path / "ref.en").write_text("a\n")
    r = subprocess.run([sys.executable, "-m", "nmtfrag", "evaluate", "--model",
                        str(tmp_path / "nope"), "--src", str(tmp_path / "src.de"), "--ref",
                        str(tmp_path / "ref.en"), "--out", str(tmp_path / "o")],
                       capture_output=True, text=True)
    assert r.returncode == 2
    errs = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errs) == 1 and "model directory does not exist" in errs[0]
    assert "Traceback" not in r.stderr


def test_grow_keeps_pretrained_rows_and_ties(tiny_model_dir, tmp_path):
    md = validate_model_dir(tiny_model_dir)
    state = load_state(md.checkpoints[0])
    before = {k: v.clone() for k, v in state["model"].items() if "embed_tokens" in k
              or "output_projection" in k}
    grow_state(state, 2, 2, seed=3)
    for k, old in before.items():
        new = state["model"][k]
        assert new.shape == (old.shape[0] + 2, old.shape[1])
        assert torch.equal(new[:old.shape[0]], old)
        assert torch.isfinite(new).all()
        # new rows are near the mean of the ordinary rows, and differ from each other
        mean = old[N_SPECIAL:].float().mean(0)
        assert (new[-2:].float() - mean).abs().max() < old.float().std() * 0.2
        assert not torch.equal(new[-1], new[-2])
    # all embeddings shared: the tied matrices stay identical after growing
    assert torch.equal(state["model"]["encoder.embed_tokens.weight"],
                       state["model"]["decoder.embed_tokens.weight"])
    assert torch.equal(state["model"]["decoder.embed_tokens.weight"],
                       state["model"]["decoder.output_projection.weight"])

    out = str(tmp_path / "grown")
    os.makedirs(out)
    for lang in ("de", "en"):
        added = write_dict_with(getattr(md, f"{'src' if lang == 'de' else 'tgt'}_dict"),
                                os.path.join(out, f"dict.{lang}.txt"), ["<P>", "</P>"])
        assert added == ["<P>", "</P>"]
    write_model_dir(out, state, os.path.join(out, "dict.de.txt"),
                    os.path.join(out, "dict.en.txt"), md.bpecodes)
    md2 = validate_model_dir(out)  # dictionary and embedding sizes agree again
    assert dict_symbols(md2.tgt_dict)[-2:] == ["<P>", "</P>"]
    # loads through fairseq's hub exactly like the WMT19 release
    from fairseq.models.transformer import TransformerModel

    hub = TransformerModel.from_pretrained(out, checkpoint_file="model.pt",
                                           data_name_or_path=".", tokenizer="moses",
                                           bpe="fastbpe", source_lang="de", target_lang="en")
    assert hub.tgt_dict.index("<P>") == len(hub.tgt_dict) - 2
    assert hub.tgt_dict.index("</P>") == len(hub.tgt_dict) - 1
