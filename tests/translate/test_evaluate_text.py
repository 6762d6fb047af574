"""`evaluate` reads its text as `extract` does (issue 45): a UTF-8 byte-order mark and
CRLF endings in --src, --ref or --hyp are normalised away, so a hypothesis equal to the
reference scores 100 whether or not the reference carries a BOM (it scored 99.56, exit
0). And `pretokenized`, the keyword every other stage takes, with `tokenized` still
accepted as its deprecated alias."""
import json
import os

import pytest

from nmtfrag.cli import main
from nmtfrag.translate.evaluate import evaluate, read_lines
from test_output_guard import tree
from tinymodel import make_corpus, write_parallel

BOM = "\ufeff"


@pytest.fixture
def ws(tmp_path):
    """test.{de,en}; the reference again with a BOM (bom.en) and with CRLF (crlf.en)."""
    src, ref = write_parallel(make_corpus(12, seed=5), str(tmp_path / "test"))
    text = open(ref, encoding="utf-8").read()
    (tmp_path / "bom.en").write_text(BOM + text, encoding="utf-8")
    (tmp_path / "crlf.en").write_bytes((BOM + text).replace("\n", "\r\n").encode())
    return tmp_path


def test_bom_and_crlf_are_read_away(ws):
    plain = read_lines(str(ws / "test.en"))
    assert read_lines(str(ws / "bom.en")) == plain == read_lines(str(ws / "crlf.en"))
    assert not plain[0].startswith(BOM)


@pytest.mark.parametrize("ref,hyp", [("bom.en", "test.en"), ("crlf.en", "test.en"),
                                     ("test.en", "bom.en"), ("bom.en", "crlf.en")])
def test_a_bom_or_crlf_reference_scores_exactly_like_the_plain_one(ws, ref, hyp):
    before = tree(ws)
    plain = evaluate(str(ws / "plain"), src=str(ws / "test.de"), ref=str(ws / "test.en"),
                     hyp=str(ws / "test.en"))
    marked = evaluate(str(ws / "marked"), src=str(ws / "test.de"), ref=str(ws / ref),
                      hyp=str(ws / hyp))
    assert marked["scores"]["bleu"] == plain["scores"]["bleu"] == 100.0
    assert marked["scores"]["chrf"] == plain["scores"]["chrf"]
    with open(ws / "marked" / "hyp.txt", encoding="utf-8") as f:
        assert not f.read().startswith(BOM)
    after = tree(ws)
    assert {k: v for k, v in after.items() if k in before} == before  # inputs unchanged


def test_the_command_scores_a_bom_reference_100(ws, capsys):
    assert main(["evaluate", "--src", str(ws / "test.de"), "--ref", str(ws / "bom.en"),
                 "--hyp", str(ws / "test.en"), "--out", str(ws / "ev")]) == 0
    assert capsys.readouterr().out.startswith("BLEU 100.00")
    with open(ws / "ev" / "report.json", encoding="utf-8") as f:
        assert json.load(f)["scores"]["bleu"] == 100.0


def test_pretokenized_is_the_keyword_and_tokenized_its_deprecated_alias(ws):
    args = dict(src=str(ws / "test.de"), ref=str(ws / "test.en"), hyp=str(ws / "test.en"))
    new = evaluate(str(ws / "new"), pretokenized=True, **args)
    with pytest.warns(DeprecationWarning, match="use pretokenized"):
        old = evaluate(str(ws / "old"), tokenized=True, **args)
    assert new["params"]["tokenized"] is old["params"]["tokenized"] is True
    assert new["reference_handling"] == old["reference_handling"]
    with pytest.warns(DeprecationWarning), \
            pytest.raises(TypeError, match="pretokenized or its older name tokenized"):
        evaluate(str(ws / "both"), pretokenized=True, tokenized=False, **args)
    assert not os.path.exists(ws / "both")
