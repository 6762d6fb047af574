"""`evaluate` scores exactly as sacrebleu run directly on the same files."""
import json
import os
import subprocess
import sys

import pytest
import torch
from sacremoses import MosesDetokenizer

from nmtfrag.translate.evaluate import Decoding, evaluate
from tinymodel import make_corpus, write_parallel

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def testset(tmp_path_factory):
    d = tmp_path_factory.mktemp("evaldata")
    pairs = make_corpus(23, seed=21)  # 23: not a multiple of any batch size
    # Moses-tokenised reference with things the detokeniser must undo
    pairs[0] = (pairs[0][0], "the patient 's dose ( tablet ) , daily .")
    src, ref = write_parallel(pairs, str(d / "test"))
    return src, ref


def _sacrebleu_cli(ref, hyp, metric):
    r = subprocess.run([sys.executable, "-m", "sacrebleu", ref, "-i", hyp, "-m", metric,
                        "-b", "-w", "2"], capture_output=True, text=True, check=True)
    return float(r.stdout.strip())


def test_scores_match_sacrebleu_directly(tiny_model_dir, testset, tmp_path):
    src, ref = testset
    out = str(tmp_path / "eval")
    rep = evaluate(out, src=src, ref=ref, model=tiny_model_dir, plot=True)
    hyp = os.path.join(out, "hyp.txt")
    with open(hyp, encoding="utf-8") as f:
        hyps = f.read().split("\n")[:-1]
    assert len(hyps) == 23
    s = rep["scores"]
    assert s["bleu"] == pytest.approx(_sacrebleu_cli(ref, hyp, "bleu"), abs=0.006)
    assert s["chrf"] == pytest.approx(_sacrebleu_cli(ref, hyp, "chrf"), abs=0.006)
    assert s["bleu"] > 0  # the tiny model has learned something
    assert s["bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert 0 < s["brevity_penalty"] <= 1
    assert s["length_ratio"] == pytest.approx(s["sys_len"] / s["ref_len"], abs=1e-4)
    assert s["avg_output_tokens"] == pytest.approx(s["sys_len"] / 23, abs=0.01)
    assert os.path.getsize(os.path.join(out, "lengths.png")) > 1000
    md = open(os.path.join(out, "report.md"), encoding="utf-8").read()
    assert f"{s['bleu']:.2f}" in md and "signature" in md
    on_disk = json.load(open(os.path.join(out, "report.json")))
    assert on_disk["scores"]["bleu"] == s["bleu"]
    gen = on_disk["params"]["generation"]
    assert gen["engine"] == "fairseq" and gen["compute_type"] == "float32"
    assert "Translated with fairseq (float32), beam 5" in md


def test_engine_options_need_a_model(testset, tmp_path):
    from nmtfrag.errors import InputError

    src, ref = testset
    with pytest.raises(InputError, match="need --model"):
        evaluate(str(tmp_path / "e"), src=src, ref=ref, hyp=ref,
                 decoding=Decoding(engine="ctranslate2"))
    assert not os.path.exists(tmp_path / "e")


def test_tokenized_reference_is_detokenised_first(tiny_model_dir, testset, tmp_path):
    src, ref = testset
    out = str(tmp_path / "eval")
    rep = evaluate(out, src=src, ref=ref, model=tiny_model_dir, pretokenized=True)
    detok = tmp_path / "ref.detok"
    md = MosesDetokenizer(lang="en")
    with open(ref, encoding="utf-8") as f:
        detok.write_text("".join(md.detokenize(ln.split()) + "\n" for ln in f))
    assert detok.read_text().splitlines()[0] == "the patient's dose (tablet), daily."
    hyp = os.path.join(out, "hyp.txt")
    assert rep["scores"]["bleu"] == pytest.approx(
        _sacrebleu_cli(str(detok), hyp, "bleu"), abs=0.006)
    assert "detokenised" in rep["reference_handling"]
    assert "detokenised" in open(os.path.join(out, "report.md")).read()


def test_baseline_paired_bootstrap(tiny_model_dir, testset, tmp_path):
    src, ref = testset
    base = str(tmp_path / "base")
    evaluate(base, src=src, ref=ref, model=tiny_model_dir)
    # a "system" that is the reference itself must beat the baseline significantly
    rep = evaluate(str(tmp_path / "sys"), src=src, ref=ref, hyp=ref, baseline=base,
                   bootstrap_samples=200)
    sig = rep["scores"]["significance"]
    assert sig["BLEU"]["system"] == pytest.approx(100.0)
    assert sig["BLEU"]["baseline"] < 100 and sig["BLEU"]["p_value"] < 0.05
    assert sig["BLEU"]["significant_at_0.05"]


def test_mismatched_files_exit_2(tmp_path, testset):
    src, ref = testset
    short = tmp_path / "short.en"
    short.write_text("x\n")
    r = subprocess.run([sys.executable, "-m", "nmtfrag", "evaluate", "--hyp", str(short),
                        "--src", src, "--ref", str(short), "--out", str(tmp_path / "o")],
                       capture_output=True, text=True)
    assert r.returncode == 2
    errs = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errs) == 1 and "line-aligned" in errs[0]
