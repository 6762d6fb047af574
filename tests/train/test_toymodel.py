"""The demo's toy model builder on raw text: a WMT19-layout dir that nmtfrag validates
and translates with, its vocabulary learned from hub-tokenised text."""
import os
import subprocess
import sys

from nmtfrag.train import toymodel

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DEMO = os.path.join(ROOT, "corpora", "demo")


def test_toy_model_from_raw_demo_text(tmp_path):
    from nmtfrag.translate.fairseq_engine import Translator
    from nmtfrag.model_dir import validate_model_dir

    out = str(tmp_path / "toy")
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "toy_model.py"),
                    "--train", os.path.join(DEMO, "valid"), "--valid",
                    os.path.join(DEMO, "valid"), "--out", out, "--updates", "2",
                    "--merges", "100"], check=True, capture_output=True, cwd=ROOT)
    md = validate_model_dir(out, "de", "en", None)
    assert sorted(os.listdir(out)) == ["bpecodes", "dict.de.txt", "dict.en.txt", "model.pt"]
    # hub tokenisation escaped the raw text before BPE: "(" split off, "&" escaped
    pairs = toymodel.read_raw(os.path.join(DEMO, "valid"))
    assert any(" ( " in s for s, _ in pairs) and len(pairs) == 50
    out_lines = Translator(md.path, beam=1).translate(["Der Patient ."])
    assert len(out_lines) == 1
