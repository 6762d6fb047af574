"""The demo's toy model builder on raw text: a WMT19-layout dir that nmtfrag validates
and translates with, its vocabulary learned from hub-tokenised text."""
import os

from nmtfrag import toymodel

DEMO = os.path.join(os.path.dirname(__file__), "..", "corpora", "demo")


def test_toy_model_from_raw_demo_text(tmp_path):
    from nmtfrag.generate import Translator
    from nmtfrag.model_dir import validate_model_dir

    out = str(tmp_path / "toy")
    toymodel.main(["--train", os.path.join(DEMO, "valid"), "--valid",
                   os.path.join(DEMO, "valid"), "--out", out, "--updates", "2",
                   "--merges", "100"])
    md = validate_model_dir(out, "de", "en", None)
    assert sorted(os.listdir(out)) == ["bpecodes", "dict.de.txt", "dict.en.txt", "model.pt"]
    # hub tokenisation escaped the raw text before BPE: "(" split off, "&" escaped
    pairs = toymodel._read_raw(os.path.join(DEMO, "valid"))
    assert any(" ( " in s for s, _ in pairs) and len(pairs) == 50
    out_lines = Translator(md.path, beam=1).translate(["Der Patient ."])
    assert len(out_lines) == 1
