"""TMX in: nmtfrag.data.tmx reads translation memories as TMX 1.4b defines them, streaming;
`extract`, `vocab`, `split` and `finetune` take `--tmx` and give what the same corpus as
plain files gives; a malformed TMX is one `error:` line naming its line."""
import gzip
import json
import os
from xml.sax.saxutils import escape

import pytest

from nmtfrag.cli import main
from nmtfrag.errors import InputError
from nmtfrag.data.tmx import primary_subtag, read_tmx, seg_text, tmx_to_files
from tinymodel import make_corpus

DE_TAGS = ["de-DE", "DE", "de_AT", "de", "DE-de"]
EN_TAGS = ["en-GB", "EN", "en_us", "en", "EN-us"]


def _marked_up(sentence, k):
    """The sentence with TMX inline markup that must not change its text: native codes
    (bpt/ept around a word, a ph with a sub-flow inside, an isolated it) and a highlight."""
    words = escape(sentence).split(" ")
    if k % 3 == 0:
        words[0] = f'<bpt i="1">&lt;b&gt;</bpt>{words[0]}<ept i="1">&lt;/b&gt;</ept>'
    if k % 3 == 1:
        words[0] = f"<hi type=\"term\">{words[0]}</hi>"
        words[-1] = (f'<ph x="1">&lt;img alt="<sub>Bild</sub>"&gt;</ph>{words[-1]}'
                     f'<it pos="begin">&lt;i&gt;</it>')
    return " ".join(words)


def write_tmx(pairs, path, docs, *, old_lang_attr_every=4):
    """A TMX of `pairs` (unit k in document docs[k]) with language variants, inline
    markup, an en-first unit, a unit with only German, and TMX 1.1's `lang`."""
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<tmx version="1.4"><header srclang="de-DE" segtype="sentence" o-tmf="x" '
           'adminlang="en" datatype="plaintext" creationtool="t" creationtoolversion="1"/>',
           "<body>"]
    for k, (de, en) in enumerate(pairs):
        attr = "lang" if k % old_lang_attr_every == 3 else "xml:lang"
        tuv_de = (f'<tuv {attr}="{DE_TAGS[k % 5]}"><seg>{_marked_up(de, k)}</seg></tuv>')
        tuv_en = f'<tuv {attr}="{EN_TAGS[k % 5]}">\n <seg>{escape(en)}</seg></tuv>'
        tuvs = tuv_en + tuv_de if k % 2 else tuv_de + tuv_en
        out.append(f'<tu tuid="{k}"><prop type="x-doc">{docs[k]}</prop>'
                   f'<prop type="x-other">o</prop>{tuvs}</tu>')
        if k == 2:
            out.append('<tu><prop type="x-doc">d</prop><tuv xml:lang="de"><seg>nur '
                       'deutsch</seg></tuv><tuv xml:lang="fr"><seg>x</seg></tuv></tu>')
    out.append("</body></tmx>")
    data = "\n".join(out) + "\n"
    if str(path).endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(data)
    else:
        with open(path, "w", encoding="utf-8") as f:
            f.write(data)
    return str(path)


@pytest.fixture
def corpus(tmp_path):
    pairs = make_corpus(60, seed=12)
    docs = [f"doc-{k // 7}" for k in range(len(pairs))]
    for side, lang in enumerate(("de", "en")):
        (tmp_path / f"c.{lang}").write_text("".join(p[side] + "\n" for p in pairs))
    (tmp_path / "c.docs").write_text("".join(d + "\n" for d in docs))
    # a diagonal alignment (make_corpus translates word for word): no aligner needed
    (tmp_path / "c.align").write_text("".join(
        " ".join(f"{i}-{i}" for i in range(len(p[0].split()))) + "\n" for p in pairs))
    return pairs, docs, write_tmx(pairs, tmp_path / "c.tmx.gz", docs)


def test_reader_keeps_text_drops_native_code_matches_language_variants(corpus):
    pairs, docs, tmx = corpus
    got = list(read_tmx(tmx, "de", "en", doc_prop="x-doc"))
    assert [(d, s, t) for d, s, t in got] == [(d, s, t) for d, (s, t) in zip(docs, pairs)]
    # the same with region-tagged language options, and the other direction
    assert [(s, t) for _, s, t in read_tmx(tmx, "DE-ch", "en_GB")] == pairs
    assert [(s, t) for _, s, t in read_tmx(tmx, "en", "de")] == [(t, s) for s, t in pairs]


def test_inline_rules_of_tmx_14b():
    import xml.etree.ElementTree as ET

    seg = ET.fromstring('<seg>Die <bpt i="1">{\\b </bpt>Dosis<ept i="1">}</ept> war '
                        '<hi>zu <ph>&lt;br/&gt;</ph>hoch</hi><ph>&lt;a title="'
                        '<sub>Fußnote</sub>"&gt;</ph>.<it pos="end">&lt;/a&gt;</it>\n'
                        ' <ut>x</ut>Ja</seg>')
    assert seg_text(seg) == "Die Dosis war zu hoch. Ja"
    assert primary_subtag("DE-de") == primary_subtag("de_AT") == "de"


def test_document_from_tu_attribute_and_missing_document_refused(tmp_path):
    path = tmp_path / "a.tmx"
    path.write_text('<tmx version="1.4"><body><tu creationid="alice"><tuv xml:lang="de">'
                    '<seg>a</seg></tuv><tuv xml:lang="en"><seg>b</seg></tuv></tu>'
                    '<tu><tuv xml:lang="de"><seg>c</seg></tuv><tuv xml:lang="en"><seg>d'
                    '</seg></tuv></tu></body></tmx>')
    it = read_tmx(str(path), "de", "en", doc_prop="creationid")
    assert next(it) == ("alice", "a", "b")
    with pytest.raises(InputError, match="number 2 .*document is unknown"):
        next(it)


def test_malformed_tmx_is_one_error_line_naming_the_line(tmp_path, capsys):
    bad = tmp_path / "bad.tmx"
    bad.write_text('<tmx version="1.4"><body>\n<tu><tuv xml:lang="de"><seg>a</seg></tuv>\n'
                   '<tuv xml:lang="en"><seg>b</tuv></tu>\n</body></tmx>\n')
    code = main(["extract", "--tmx", str(bad), "--out", str(tmp_path / "r"),
                 "--pretokenized", "--seed", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("error:") and "bad.tmx line 3 column" in err[0]
    assert not (tmp_path / "r" / "manifest.json").exists()
    assert main(["extract", "--tmx", str(bad), "--src", "x", "--out",
                 str(tmp_path / "r")]) == 2  # both inputs: refused
    assert main(["extract", "--out", str(tmp_path / "r")]) == 2  # no input


def test_extract_from_tmx_gives_the_same_seeded_release(corpus, tmp_path):
    _, _, tmx = corpus
    common = ["--pretokenized", "--seed", "5", "--tag", "--alignments",
              str(tmp_path / "c.align"), "--max-len", "3"]
    assert main(["extract", "--src", str(tmp_path / "c.de"), "--tgt",
                 str(tmp_path / "c.en"), "--out", str(tmp_path / "plain")] + common) == 0
    assert main(["extract", "--tmx", tmx, "--out", str(tmp_path / "tmx")] + common) == 0
    for name in ("phrases.de", "phrases.en", "manifest.json"):
        assert (tmp_path / "plain" / name).read_bytes() == \
            (tmp_path / "tmx" / name).read_bytes(), name
    assert (tmp_path / "tmx" / "phrases.de").read_text().strip()


def test_documents_file_matches_the_prop(corpus, tmp_path):
    pairs, docs, tmx = corpus
    paths, log = tmx_to_files(tmx, "de", "en", str(tmp_path / "out"), doc_prop="x-doc")
    assert open(paths["documents"]).read().split("\n")[:-1] == docs
    assert open(paths["src"]).read() == (tmp_path / "c.de").read_text()
    assert log.to_json() == {"units": 61, "pairs": 60, "documents": 9,
                             "skipped": {"tu_without_both_languages": 1}}


def test_split_from_tmx_equals_split_from_the_tsv(corpus, tmp_path):
    pairs, docs, tmx = corpus
    tsv = tmp_path / "c.tsv"
    tsv.write_text("".join(f"{d}\t{s}\t{t}\n" for d, (s, t) in zip(docs, pairs)))
    sizes = ["--train", "30", "--valid", "7", "--test", "14", "--seed", "3"]
    assert main(["split", "--docs", str(tsv), "--out", str(tmp_path / "a")] + sizes) == 0
    assert main(["split", "--tmx", tmx, "--tmx-doc-prop", "x-doc", "--out",
                 str(tmp_path / "b")] + sizes) == 0
    names = sorted(os.listdir(tmp_path / "a"))
    assert any(n.startswith("train") for n in names)
    for n in names:
        if n.endswith((".de", ".en", ".docs")):
            assert (tmp_path / "a" / n).read_bytes() == (tmp_path / "b" / n).read_bytes()
    assert main(["split", "--tmx", tmx, "--out", str(tmp_path / "c")] + sizes) == 2


def test_vocab_from_tmx_equals_plain_files(corpus, tmp_path):
    _, _, tmx = corpus
    common = ["--dp", "--sigma", "2", "--delta", "1e-3", "--merges", "20", "--seed", "1",
              "--pretokenized"]
    assert main(["vocab", "--src", str(tmp_path / "c.de"), "--tgt", str(tmp_path / "c.en"),
                 "--out", str(tmp_path / "v1")] + common) == 0
    assert main(["vocab", "--tmx", tmx, "--out", str(tmp_path / "v2")] + common) == 0
    for name in ("noisy_counts.txt", "bpecodes", "manifest.json"):
        assert (tmp_path / "v1" / name).read_bytes() == (tmp_path / "v2" / name).read_bytes()


def test_finetune_train_tmx(corpus, tiny_model_dir, tmp_path, capsys):
    _, _, tmx = corpus
    base = ["finetune", "--model", tiny_model_dir, "--valid-src", str(tmp_path / "c.de"),
            "--valid-tgt", str(tmp_path / "c.en"), "--max-updates", "1", "--threads", "1",
            "--device", "cpu", "--quiet", "--seed", "1"]
    assert main(base + ["--train", str(tmp_path / "c.de"), str(tmp_path / "c.en"),
                        "--out", str(tmp_path / "f1")]) == 0
    assert main(base + ["--train", tmx, "--out", str(tmp_path / "f2")]) == 0
    m1 = json.load(open(tmp_path / "f1" / "manifest.json"))
    m2 = json.load(open(tmp_path / "f2" / "manifest.json"))
    assert m1["counts"] == m2["counts"]
    assert m1["inputs_sha256"]["train_src"] == m2["inputs_sha256"]["train_src"]
    assert m1["result"]["valid_loss_best"] == m2["result"]["valid_loss_best"]
