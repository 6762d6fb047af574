"""OPUS -> TSV conversion (Moses+ids, XCES, TMX) and scripts/prepare_corpus.sh end to end."""
import gzip
import json
import os
import random
import shutil
import subprocess
import zipfile

import pytest

from nmtfrag.cli import main
from nmtfrag.errors import InputError
from nmtfrag.data.opus import (FileRef, MissingDownload, find_moses_download,
                          moses_ids_pairs, read_recipe, tmx_pairs, xces_pairs)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "prepare_corpus.sh")


def fake_opus_moses(directory, corpus="EMEA", n_docs=40, seed=0, zipped=True):
    """OPUS-like Moses files + .ids: doc k has sentences 'de k i' / 'en k i'."""
    r = random.Random(seed)
    de, en, ids, truth = [], [], [], []
    for k in range(n_docs):
        doc = f"de/{corpus}/sub{k % 3}/doc{k:03d}.xml.gz"
        for i in range(r.randint(1, 12)):
            de.append(f"Satz {k} {i} .")
            en.append(f"sentence {k} {i} .")
            ids.append(f"{doc}\t{doc.replace('de/', 'en/', 1)}\t{i + 1}\t{i + 1}")
            truth.append((doc, de[-1], en[-1]))
    names = {f"{corpus}.de-en.de": de, f"{corpus}.de-en.en": en,
             f"{corpus}.de-en.ids": ids}
    os.makedirs(directory, exist_ok=True)
    if zipped:
        with zipfile.ZipFile(os.path.join(directory, "de-en.txt.zip"), "w") as z:
            for name, lines in names.items():
                z.writestr(name, "".join(line + "\n" for line in lines))
            z.writestr("README", "fake\n")
    else:
        for name, lines in names.items():
            with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
                f.writelines(line + "\n" for line in lines)
    return truth


def read_tsv(path):
    with open(path, encoding="utf-8") as f:
        return [tuple(line.rstrip("\n").split("\t")) for line in f]


# --- Moses + ids ----------------------------------------------------------------------

@pytest.mark.parametrize("zipped", [True, False])
def test_find_and_convert_moses_download(tmp_path, zipped):
    truth = fake_opus_moses(tmp_path / "opus", zipped=zipped)
    refs = find_moses_download(str(tmp_path / "opus"), "EMEA", "de", "en")
    assert [bool(r.archive) for r in refs] == [zipped] * 3
    assert list(moses_ids_pairs(*refs)) == truth
    out = tmp_path / "docs.tsv"
    assert main(["opus2tsv", "--recipe", os.path.join(ROOT, "corpora", "EMEA", "recipe"),
                 "--opus-dir", str(tmp_path / "opus"), "--out", str(out)]) == 0
    assert read_tsv(out) == truth


def test_doc_key_and_regex(tmp_path):
    fake_opus_moses(tmp_path, zipped=False)
    refs = [FileRef(str(tmp_path / f"EMEA.de-en.{x}")) for x in ("de", "en", "ids")]
    tgt_docs = {d for d, _, _ in moses_ids_pairs(*refs, doc_key="tgt")}
    assert all(d.startswith("en/EMEA/") for d in tgt_docs)
    # group documents by sub-directory
    grouped = {d for d, _, _ in moses_ids_pairs(*refs, doc_regex=r"/(sub\d)/")}
    assert grouped == {"sub0", "sub1", "sub2"}


def test_misaligned_moses_files_are_refused(tmp_path):
    fake_opus_moses(tmp_path, zipped=False)
    with open(tmp_path / "EMEA.de-en.ids", "a", encoding="utf-8") as f:
        f.write("de/x\ten/x\t1\t1\n")
    refs = [FileRef(str(tmp_path / f"EMEA.de-en.{x}")) for x in ("de", "en", "ids")]
    with pytest.raises(InputError, match="line-aligned"):
        list(moses_ids_pairs(*refs))
    (tmp_path / "bad.ids").write_text("only-one-column\n", encoding="utf-8")
    (tmp_path / "one.de").write_text("a\n", encoding="utf-8")
    (tmp_path / "one.en").write_text("b\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.ids line 1: expected"):
        list(moses_ids_pairs(FileRef(str(tmp_path / "one.de")),
                             FileRef(str(tmp_path / "one.en")),
                             FileRef(str(tmp_path / "bad.ids"))))


def test_tabs_inside_segments_become_spaces(tmp_path):
    (tmp_path / "a.de").write_text("ein\tTab\n", encoding="utf-8")
    (tmp_path / "a.en").write_text("a tab\n", encoding="utf-8")
    (tmp_path / "a.ids").write_text("de/d1\ten/d1\t1\t1\n", encoding="utf-8")
    out = tmp_path / "docs.tsv"
    assert main(["opus2tsv", "--moses", str(tmp_path / "a.de"), str(tmp_path / "a.en"),
                 "--ids", str(tmp_path / "a.ids"), "--out", str(out)]) == 0
    assert read_tsv(out) == [("de/d1", "ein Tab", "a tab")]


def test_missing_download_names_files_and_url(tmp_path):
    (tmp_path / "opus").mkdir()
    # an .ids-less download is not enough: the message names exactly what is missing
    with zipfile.ZipFile(tmp_path / "opus" / "de-en.txt.zip", "w") as z:
        z.writestr("GNOME.de-en.de", "a\n")
        z.writestr("GNOME.de-en.en", "b\n")
    with pytest.raises(MissingDownload) as exc:
        find_moses_download(str(tmp_path / "opus"), "GNOME", "de", "en",
                            url="https://example.org/GNOME.zip", release="v1")
    msg = str(exc.value)
    assert "missing GNOME.de-en.ids" in msg and "GNOME.de-en.de," not in msg
    assert "https://example.org/GNOME.zip" in msg


# --- XCES -----------------------------------------------------------------------------

def _doc_xml(sentences, tokenised=False):
    body = []
    for sid, text in sentences:
        if tokenised:
            words = "".join(f'<w id="w{sid}.{i}">{w}</w>' for i, w in
                            enumerate(text.split(), 1))
            body.append(f'<s id="{sid}">{words}</s>')
        else:
            body.append(f'<s id="{sid}">{text}</s>')
    return ('<?xml version="1.0" encoding="utf-8"?>\n<document><p>' + "\n".join(body)
            + "</p></document>\n")


def test_xces_alignment_with_document_zips(tmp_path):
    de_docs = {"de/a.xml.gz": [("1", "Erster Satz ."), ("2", "Zweiter"), ("3", "Satz .")],
               "de/b.xml.gz": [("1", "Nur & eins .")]}
    en_docs = {"en/a.xml.gz": [("1", "First sentence ."), ("2", "Second sentence .")],
               "en/b.xml.gz": [("1", "Only one ."), ("2", "Extra .")]}
    for lang, docs in (("de", de_docs), ("en", en_docs)):
        with zipfile.ZipFile(tmp_path / f"{lang}.zip", "w") as z:
            for name, sents in docs.items():
                xml = _doc_xml([(s, t.replace("&", "&amp;")) for s, t in sents],
                               tokenised=(lang == "en"))
                z.writestr(f"EMEA/raw/{name}", gzip.compress(xml.encode("utf-8")))
    align = ('<?xml version="1.0" encoding="utf-8"?>\n<cesAlign version="1.0">\n'
             '<linkGrp targType="s" fromDoc="de/a.xml.gz" toDoc="en/a.xml.gz">\n'
             '<link xtargets="1;1"/>\n<link xtargets="2 3;2"/>\n</linkGrp>\n'
             '<linkGrp targType="s" fromDoc="de/b.xml.gz" toDoc="en/b.xml.gz">\n'
             '<link xtargets="1;1"/>\n<link xtargets=";2"/>\n</linkGrp>\n</cesAlign>\n')
    (tmp_path / "de-en.xml.gz").write_bytes(gzip.compress(align.encode("utf-8")))
    pairs = list(xces_pairs(str(tmp_path / "de-en.xml.gz"), str(tmp_path / "de.zip"),
                            str(tmp_path / "en.zip")))
    assert pairs == [("de/a.xml.gz", "Erster Satz .", "First sentence ."),
                     ("de/a.xml.gz", "Zweiter Satz .", "Second sentence ."),
                     ("de/b.xml.gz", "Nur & eins .", "Only one .")]
    out = tmp_path / "docs.tsv"
    assert main(["opus2tsv", "--xces", str(tmp_path / "de-en.xml.gz"), "--src-docs",
                 str(tmp_path / "de.zip"), "--tgt-docs", str(tmp_path / "en.zip"),
                 "--out", str(out)]) == 0
    assert read_tsv(out) == pairs


# --- TMX ------------------------------------------------------------------------------

TMX = """<?xml version="1.0" encoding="UTF-8"?>
<tmx version="1.4"><header srclang="de" segtype="sentence" datatype="plaintext"
 adminlang="en" o-tmf="x" creationtool="t" creationtoolversion="1"/><body>
<tu><prop type="x-document">bericht-1.docx</prop>
 <tuv xml:lang="de-DE"><seg>Die Dosis war <bpt i="1">&lt;b&gt;</bpt>zu hoch<ept i="1">&lt;/b&gt;</ept>.</seg></tuv>
 <tuv xml:lang="en-GB"><seg>The dose was too high.</seg></tuv></tu>
<tu><prop type="x-document">bericht-2.docx</prop>
 <tuv xml:lang="DE"><seg>Zwei\tTabs</seg></tuv>
 <tuv xml:lang="EN"><seg>Two tabs</seg></tuv></tu>
<tu><prop type="x-document">bericht-2.docx</prop>
 <tuv xml:lang="de"><seg>Nur Deutsch</seg></tuv></tu>
</body></tmx>
"""


def test_tmx_with_document_property(tmp_path):
    (tmp_path / "tm.tmx").write_text(TMX, encoding="utf-8")
    pairs = list(tmx_pairs(str(tmp_path / "tm.tmx"), "de", "en", doc_prop="x-document"))
    assert pairs == [("bericht-1.docx", "Die Dosis war zu hoch.", "The dose was too high."),
                     ("bericht-2.docx", "Zwei Tabs", "Two tabs")]


def test_tmx_without_document_ids_is_refused(tmp_path, capsys):
    (tmp_path / "tm.tmx.gz").write_bytes(gzip.compress(TMX.encode("utf-8")))
    assert main(["opus2tsv", "--tmx", str(tmp_path / "tm.tmx.gz"),
                 "--out", str(tmp_path / "o.tsv")]) == 2
    err = capsys.readouterr().err
    assert "--doc-prop" in err and "x-document" in err
    assert not (tmp_path / "o.tsv").exists()


def test_malformed_xml_exit_2(tmp_path, capsys):
    (tmp_path / "bad.tmx").write_text("<tmx><body><tu>", encoding="utf-8")
    assert main(["opus2tsv", "--tmx", str(tmp_path / "bad.tmx"), "--doc-prop", "x",
                 "--out", str(tmp_path / "o.tsv")]) == 2
    assert "malformed XML" in capsys.readouterr().err


# --- recipes and the script -------------------------------------------------------------

@pytest.mark.parametrize("domain", ["EMEA", "GNOME", "JRC-Acquis"])
def test_recipes_are_complete(domain):
    r = read_recipe(os.path.join(ROOT, "corpora", domain, "recipe"))
    assert r["CORPUS"] == domain and (r["SRC_LANG"], r["TGT_LANG"]) == ("de", "en")
    assert (r["TRAIN"], r["VALID"], r["TEST"]) == ("10000", "150", "2000")
    assert r["URL"].startswith("https://") and r["URL"].endswith("de-en.txt.zip")
    assert r["LICENCE"] and r["RELEASE"]
    readme = open(os.path.join(ROOT, "corpora", domain, "README.md"),
                  encoding="utf-8").read()
    assert f"scripts/prepare_corpus.sh {domain} " in readme and r["URL"] in readme


def _run_script(*args):
    return subprocess.run(["bash", SCRIPT, *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT)


needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


@needs_bash
@pytest.mark.parametrize("domain", ["EMEA", "GNOME", "JRC-Acquis"])
def test_script_missing_download_exits_2_with_message(tmp_path, domain):
    (tmp_path / "opus").mkdir()
    res = _run_script(domain, tmp_path / "opus", tmp_path / "out")
    assert res.returncode == 2
    url = read_recipe(os.path.join(ROOT, "corpora", domain, "recipe"))["URL"]
    assert "error: " in res.stderr and url in res.stderr
    assert f"{domain}.de-en.ids" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "out").exists()


@needs_bash
def test_script_bad_usage_exits_2(tmp_path):
    assert _run_script().returncode == 2
    res = _run_script("NOPE", tmp_path, tmp_path / "out")
    assert res.returncode == 2 and "EMEA" in res.stderr


@needs_bash
def test_script_end_to_end_on_fake_download(tmp_path):
    truth = fake_opus_moses(tmp_path / "opus", corpus="GNOME", n_docs=60, seed=3)
    out = tmp_path / "GNOME"
    res = _run_script("GNOME", tmp_path / "opus", out, "--train", 120, "--valid", 10,
                      "--test", 30)
    assert res.returncode == 0, res.stderr
    assert read_tsv(out / "docs.tsv") == truth
    m = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert {s: m["splits"][s]["pairs"] for s in ("train", "valid", "test")} == \
        {"train": 120, "valid": 10, "test": 30}
    assert m["seed"] == 1 and m["params"]["overflow"] == "cut"
    doc_of = {(s, t): d for d, s, t in truth}
    seen = {}
    for split in ("train", "valid", "test"):
        de = (out / f"{split}.de").read_text(encoding="utf-8").splitlines()
        en = (out / f"{split}.en").read_text(encoding="utf-8").splitlines()
        for s, t in zip(de, en):
            assert seen.setdefault(doc_of[(s, t)], split) == split  # no doc crosses
    rep = json.loads((out / "stats" / "report.json").read_text(encoding="utf-8"))
    assert [c["sentences"] for c in rep["corpora"]] == [120, 10, 30]
    # a second run refuses to overwrite the finished split
    again = _run_script("GNOME", tmp_path / "opus", out)
    assert again.returncode == 2 and "--overwrite" in again.stderr
