"""Ensemble decoding: a model dir with model1.pt … model4.pt decodes with all members,
line for line as fairseq's own `fairseq-generate --path m1:m2:m3:m4` does; fine-tuning
says which member it adapts; CTranslate2 refuses an ensemble (tests/translate/test_ct2_engine.py)."""
import json
import os
import shutil
import subprocess

import pytest
import torch

from nmtfrag.cli import main
from nmtfrag.translate.fairseq_engine import Translator
from tinymodel import make_corpus

torch.set_num_threads(1)
MEMBERS = 4


@pytest.fixture(scope="module")
def ensemble_dir(tiny_model_dir, tmp_path_factory):
    """model1.pt … model4.pt: the tiny model with Gaussian noise (seeds 1…4) added to every
    weight, so the members share the dictionaries and BPE codes (as WMT19's do) but
    disagree."""
    from nmtfrag.model_dir import load_state, save_state

    out = str(tmp_path_factory.mktemp("ensemble"))
    for f in ("dict.de.txt", "dict.en.txt", "bpecodes"):
        shutil.copy(os.path.join(tiny_model_dir, f), out)
    base = load_state(os.path.join(tiny_model_dir, "model.pt"))
    for k in range(1, MEMBERS + 1):
        g = torch.Generator().manual_seed(k)
        state = dict(base, model={
            n: w + 0.3 * w.float().std() * torch.randn(w.shape, generator=g)
            if w.is_floating_point() and w.numel() > 1 else w
            for n, w in base["model"].items()})
        save_state(state, os.path.join(out, f"model{k}.pt"))
    return out


def _lines():
    return [p[0] for p in make_corpus(37, seed=41, max_len=14)] + \
        ["haus xyz katze katze katze", "tisch ."]


def _fairseq_generate(model_dir, sub_lines, tmp_path):
    """BPE-level best hypotheses of fairseq-generate over every member, by line."""
    raw = tmp_path / "raw"
    raw.mkdir()
    for lang in ("de", "en"):  # the target side is only a placeholder reference
        (raw / f"test.{lang}").write_text("".join(s + "\n" for s in sub_lines))
    env = dict(os.environ, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1", OMP_NUM_THREADS="1")
    bin_dir = tmp_path / "bin"
    subprocess.run(["fairseq-preprocess", "-s", "de", "-t", "en", "--testpref",
                    str(raw / "test"), "--destdir", str(bin_dir), "--srcdict",
                    os.path.join(model_dir, "dict.de.txt"), "--tgtdict",
                    os.path.join(model_dir, "dict.en.txt"), "--workers", "1"],
                   check=True, capture_output=True, env=env)
    paths = ":".join(os.path.join(model_dir, f"model{k}.pt")
                     for k in range(1, MEMBERS + 1))
    r = subprocess.run(["fairseq-generate", str(bin_dir), "--path", paths, "-s", "de",
                        "-t", "en", "--gen-subset", "test", "--beam", "5",
                        "--batch-size", "16", "--required-batch-size-multiple", "1",
                        "--cpu"], check=True, capture_output=True, text=True, env=env)
    hyps = {}
    for line in r.stdout.splitlines():
        if line.startswith("H-"):
            tag, _score, hyp = (line.split("\t") + [""])[:3]
            hyps[int(tag[2:])] = hyp
    assert sorted(hyps) == list(range(len(sub_lines)))  # every line, none dropped
    return [hyps[i] for i in range(len(sub_lines))]


def test_ensemble_equals_fairseq_generate(ensemble_dir, tmp_path):
    tr = Translator(ensemble_dir, batch_size=8)
    assert tr.settings["checkpoints"] == [f"model{k}.pt" for k in range(1, MEMBERS + 1)]
    assert len(tr.models) == MEMBERS
    lines = _lines()
    src = tr.encode(lines)
    ours = tr.translate_subwords(src)
    assert ours == _fairseq_generate(ensemble_dir, src, tmp_path)
    # the members matter: one member alone translates some lines differently
    alone = Translator(ensemble_dir, checkpoint="model1.pt", batch_size=8)
    assert alone.translate_subwords(src) != ours


def test_cli_evaluate_uses_every_member(ensemble_dir, tmp_path):
    pairs = make_corpus(9, seed=3)
    src, ref = tmp_path / "t.de", tmp_path / "t.en"
    src.write_text("".join(p[0] + "\n" for p in pairs))
    ref.write_text("".join(p[1] + "\n" for p in pairs))
    base = ["evaluate", "--model", ensemble_dir, "--src", str(src), "--ref", str(ref),
            "--threads", "1", "--device", "cpu"]
    assert main(base + ["--out", str(tmp_path / "all")]) == 0
    assert main(base + ["--out", str(tmp_path / "two"), "--checkpoint",
                        "model2.pt:model4.pt"]) == 0
    gen = json.load(open(tmp_path / "all" / "report.json"))["params"]["generation"]
    assert gen["checkpoints"] == [f"model{k}.pt" for k in range(1, MEMBERS + 1)]
    gen = json.load(open(tmp_path / "two" / "report.json"))["params"]["generation"]
    assert gen["checkpoints"] == ["model2.pt", "model4.pt"]
    hyps = (tmp_path / "all" / "hyp.txt").read_text().split("\n")[:-1]
    assert hyps == Translator(ensemble_dir).translate([p[0] for p in pairs])


def test_finetune_names_the_member_it_adapts(ensemble_dir, tmp_path, capsys):
    from nmtfrag.errors import InputError
    from nmtfrag.model_dir import member_to_adapt, validate_model_dir

    md, note = member_to_adapt(validate_model_dir(ensemble_dir))
    assert [os.path.basename(c) for c in md.checkpoints] == ["model1.pt"]
    assert "adapting model1.pt only" in note and "--checkpoint model2.pt" in note
    md, note = member_to_adapt(validate_model_dir(ensemble_dir, checkpoint="model3.pt"),
                               "model3.pt")
    assert [os.path.basename(c) for c in md.checkpoints] == ["model3.pt"] and note is None
    with pytest.raises(InputError, match="one checkpoint"):
        member_to_adapt(validate_model_dir(ensemble_dir, checkpoint="model1.pt:model2.pt"),
                        "model1.pt:model2.pt")

    pairs = make_corpus(40, seed=7)
    tr, va = tmp_path / "tr", tmp_path / "va"
    for prefix, ps in ((tr, pairs[:32]), (va, pairs[32:])):
        for side, lang in enumerate(("de", "en")):
            (tmp_path / f"{prefix.name}.{lang}").write_text(
                "".join(p[side] + "\n" for p in ps))
    args = ["finetune", "--model", ensemble_dir, "--train", str(tr), "--valid-src",
            str(va) + ".de", "--valid-tgt", str(va) + ".en", "--max-updates", "1",
            "--threads", "1", "--device", "cpu", "--quiet"]
    assert main(args + ["--out", str(tmp_path / "ft1")]) == 0
    cap = capsys.readouterr()
    assert "adapting model1.pt only" in cap.err
    assert json.loads(cap.out.strip().splitlines()[-1])["checkpoint"] == "model1.pt"
    assert main(args + ["--out", str(tmp_path / "ft2"), "--checkpoint", "model2.pt"]) == 0
    man = json.load(open(tmp_path / "ft2" / "manifest.json"))
    assert man["params"]["checkpoint"] == "model2.pt"
    assert man["params"]["base_ensemble_members"] == [f"model{k}.pt"
                                                      for k in range(1, MEMBERS + 1)]
    assert man["inputs_sha256"]["model"] == _sha(os.path.join(ensemble_dir, "model2.pt"))


def _sha(path):
    from nmtfrag.fileio import sha256_file

    return sha256_file(path)
