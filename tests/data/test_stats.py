"""nmtfrag stats: figures checked against independent computations (wc, sort -u, numpy)."""
import json
import random
import shutil
import subprocess

import numpy as np
import pytest

from nmtfrag.cli import main
from nmtfrag.errors import InputError
from nmtfrag.data.stats import LENGTH_BUCKETS, bucket_name, corpus_stats

WORDS = ["der", "die", "das", "Haus", "haus", "Patient", "mg", ",", ".", "(", ")", "x1",
         "Tablette", "und", "oder", "nicht", "ist", "2,5", "%", "-"]


def make_side(path, n, seed, max_len=130):
    r = random.Random(seed)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for _ in range(n):
            length = r.choice([r.randint(1, 12), r.randint(1, max_len)])
            f.write(" ".join(r.choice(WORDS) + r.choice(["", "", "s", "en"])
                             for _ in range(length)) + "\n")


@pytest.fixture
def corpus(tmp_path):
    src, tgt = tmp_path / "c.de", tmp_path / "c.en"
    make_side(src, 500, seed=1)
    make_side(tgt, 500, seed=2)
    return src, tgt


def _wc_words(path):
    return int(subprocess.run(["wc", "-w", str(path)], capture_output=True, text=True,
                              check=True, env={"LC_ALL": "C"}).stdout.split()[0])


def _sort_u_types(path):
    """Types by coreutils: one token per line, byte-wise unique (LC_ALL=C)."""
    words = subprocess.run(["tr", "-s", " ", "\\n"], stdin=open(path, "rb"),
                           capture_output=True, check=True).stdout
    uniq = subprocess.run(["sort", "-u"], input=words, capture_output=True, check=True,
                          env={"LC_ALL": "C"}).stdout
    return len([w for w in uniq.split(b"\n") if w])


@pytest.mark.skipif(not (shutil.which("wc") and shutil.which("sort")),
                    reason="coreutils not available")
def test_tokens_and_types_match_coreutils(corpus):
    src, tgt = corpus
    r = corpus_stats(str(src), str(tgt))
    assert r["sentences"] == 500
    for lang, path in (("de", src), ("en", tgt)):
        assert r["sides"][lang]["tokens"] == _wc_words(path)
        assert r["sides"][lang]["types"] == _sort_u_types(path)


def test_length_distribution_matches_numpy(corpus):
    src, tgt = corpus
    r = corpus_stats(str(src), str(tgt))
    for lang, path in (("de", src), ("en", tgt)):
        lengths = np.array([len(line.split()) for line in
                            path.read_text(encoding="utf-8").splitlines()])
        s = r["sides"][lang]
        assert s["length"]["mean"] == pytest.approx(lengths.mean(), abs=0.005)
        assert s["length"]["std"] == pytest.approx(lengths.std(), abs=0.005)
        assert s["length"]["min"] == lengths.min()
        assert s["length"]["max"] == lengths.max()
        for key, q in (("median", 50), ("p90", 90), ("p99", 99)):
            assert s["length"][key] == np.percentile(lengths, q, method="inverted_cdf")
        for lo, hi in LENGTH_BUCKETS:
            mask = (lengths >= lo) & (lengths <= (hi if hi is not None else 10**9))
            assert s["length_histogram"][bucket_name(lo, hi)] == int(mask.sum())
        assert sum(s["length_histogram"].values()) == 500
        tokens = [t for line in path.read_text(encoding="utf-8").splitlines()
                  for t in line.split()]
        assert s["type_token_ratio"] == pytest.approx(len(set(tokens)) / len(tokens),
                                                      abs=5e-5)


def test_hand_counted_example(tmp_path):
    (tmp_path / "a.de").write_text("ein Haus .\nein\n\nHaus Haus Haus\n", encoding="utf-8")
    (tmp_path / "a.en").write_text("a house .\none\nx\nhouse house , house\n",
                                   encoding="utf-8")
    r = corpus_stats(str(tmp_path / "a.de"), str(tmp_path / "a.en"), name="toy")
    de, en = r["sides"]["de"], r["sides"]["en"]
    assert (r["name"], r["sentences"]) == ("toy", 4)
    assert (de["tokens"], de["types"], de["empty_lines"]) == (7, 3, 1)
    assert (en["tokens"], en["types"], en["singletons"]) == (9, 6, 5)
    assert de["length"] | {} == {"mean": 1.75, "std": round(np.std([3, 1, 0, 3]), 2),
                                 "min": 0, "median": 1, "p90": 3, "p99": 3, "max": 3}
    assert de["length_histogram"]["0"] == 1 and de["length_histogram"]["1-5"] == 3


def test_tokenize_option_uses_moses(tmp_path):
    (tmp_path / "r.de").write_text("Er nahm 2,5 mg (täglich).\n", encoding="utf-8")
    (tmp_path / "r.en").write_text("He took 2.5 mg (daily).\n", encoding="utf-8")
    raw = corpus_stats(str(tmp_path / "r.de"), str(tmp_path / "r.en"))
    tok = corpus_stats(str(tmp_path / "r.de"), str(tmp_path / "r.en"), tokenize=True)
    assert raw["sides"]["en"]["tokens"] == 5
    assert tok["sides"]["en"]["tokens"] == 8  # He took 2.5 mg ( daily ) .
    assert tok["tokenized_here"]


def test_cli_several_corpora_markdown_and_json(tmp_path, corpus, capsys):
    src, tgt = corpus
    d = tmp_path / "EMEA"
    d.mkdir()
    for split, n in (("train", 50), ("test", 20)):
        make_side(d / f"{split}.de", n, seed=n)
        make_side(d / f"{split}.en", n, seed=n + 1)
    out = tmp_path / "report"
    assert main(["stats", "--src", str(src), "--tgt", str(tgt), "--name", "toy",
                 "--dir", str(d), "--out", str(out)]) == 0
    md = capsys.readouterr().out
    assert "| toy | 500 |" in md and "| EMEA train | 50 |" in md and "| EMEA test | 20 |" \
        in md and "EMEA valid" not in md
    assert (out / "report.md").read_text(encoding="utf-8").strip() == md.strip()
    rep = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert [c["name"] for c in rep["corpora"]] == ["toy", "EMEA train", "EMEA test"]
    man = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert len(man["inputs"]) == 6
    assert "Haus" not in (out / "report.json").read_text(encoding="utf-8")


def test_bad_inputs_exit_2(tmp_path, capsys):
    (tmp_path / "a.de").write_text("a\nb\n", encoding="utf-8")
    (tmp_path / "a.en").write_text("a\n", encoding="utf-8")
    assert main(["stats", "--src", str(tmp_path / "a.de"), "--tgt",
                 str(tmp_path / "a.en")]) == 2
    assert main(["stats", "--src", str(tmp_path / "a.de")]) == 2
    assert main(["stats"]) == 2
    assert main(["stats", "--dir", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert "line-aligned" in err and "Traceback" not in err
    with pytest.raises(InputError):
        corpus_stats(str(tmp_path / "missing.de"), str(tmp_path / "a.en"))


def _lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def test_data_checks_count_each_layout(tmp_path):
    """Each check against lines built to trip it (or, as near misses, not to)."""
    from nmtfrag.data.stats import data_checks, overlap_with_train

    pairs = [("Das ist gut .", "das ist gut . That is good ."),   # copy (case-insensitive)
             ("( 1 )", "( 1 ) one"),                               # punctuation: no copy
             ("ist gut", "ist gut"),                               # 2 words: too short
             ("Haus ist", "Haushalt ist gross"),                   # not on token boundaries
             ("ANHANG III KENNZEICHNUNG", "ANNEX III LABELLING"),   # all caps, both sides
             ("ABC 12", "abc"),                                    # 3 letters: not counted
             ("Das ist gut .", "das ist gut . That is good ."),   # a duplicate line
             ("Das ist gut .", "das ist gut . That is good ."),   # and another
             ("a b", "x y")]
    _lines(tmp_path / "t.de", [s for s, _ in pairs])
    _lines(tmp_path / "t.en", [t for _, t in pairs])
    c = data_checks(str(tmp_path / "t.de"), str(tmp_path / "t.en"))
    assert c == {"lines": 9, "target_contains_source": 3, "all_caps_src": 1,
                 "all_caps_tgt": 1, "duplicate_lines": 2, "duplicated_pairs_distinct": 1}
    _lines(tmp_path / "x.de", ["a b", "a b", "Haus", "neu"])
    _lines(tmp_path / "x.en", ["x y", "x z", "house", "new"])
    o = overlap_with_train(str(tmp_path / "t.de"), str(tmp_path / "t.en"),
                           str(tmp_path / "x.de"), str(tmp_path / "x.en"))
    assert o == {"test_lines": 4, "test_pairs_in_train": 1, "test_sources_in_train": 2}


def test_release_contents_against_a_hand_count(tmp_path):
    from nmtfrag.data.stats import release_contents

    pairs = [((",",), (",",)), ((",",), (",",)), (("2,5", "mg"), ("2.5", "mg")),
             (("(", "1", ")"), ("(", "1", ")")), (("&quot;",), ("&quot;",)),
             (("Haus",), ("house",)), (tuple("abcde"), tuple("vwxyz"))]
    r = release_contents(pairs)
    assert r["pairs"] == 7 and r["distinct_pairs"] == 6
    assert r["punct_or_number_only_share"] == round(3 / 6, 4)  # , / ( 1 ) / &quot;
    assert r["identical_sides_share"] == round(3 / 6, 4)
    assert r["length_histogram"] == {"1": 3, "2": 1, "3": 1, "4": 0, "5-7": 1, "8-15": 0,
                                     ">15": 0}


def test_stats_cli_checks_and_release(tmp_path, capsys):
    import os

    _lines(tmp_path / "tr.de", ["Das ist gut .", "a b", "a b"])
    _lines(tmp_path / "tr.en", ["das ist gut . fine", "x y", "x y"])
    _lines(tmp_path / "te.de", ["a b", "c"])
    _lines(tmp_path / "te.en", ["x y", "z"])
    rel = tmp_path / "rel"
    rel.mkdir()
    _lines(rel / "phrases.de", [",", "2", "Haus"])
    _lines(rel / "phrases.en", [",", "2", "house"])
    args = ["stats", "--train", str(tmp_path / "tr.de"), str(tmp_path / "tr.en"), "--test",
            str(tmp_path / "te.de"), str(tmp_path / "te.en"), "--release", str(rel)]
    assert main(args + ["--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "| train | 3 | 1 (33.3%) | 0 (0.0%) | 0 (0.0%) | 1 (33.3%) |" in out
    assert "| test | train | 1 (50.0%) | 1 (50.0%) |" in out
    assert "| rel | 3 | 3 | 66.7% | 66.7% | 3 | 0 |" in out
    rep = json.load(open(os.path.join(tmp_path, "o", "report.json")))
    assert rep["test_in_train"][0]["test_pairs_in_train"] == 1
    assert rep["releases"][0]["distinct_pairs"] == 3
    assert main(args[:-2] + ["--warn"]) == 0
    err = capsys.readouterr()
    assert err.out == ""
    assert "warning: train: 1 of 3 lines (33.3%): target contains its source" in err.err
    assert "warning: test: 1 of 2 test pairs (and 1 sources) are also in train" in err.err
