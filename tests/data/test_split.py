"""nmtfrag split: documents never cross splits, sizes are met or reported, seeds reproduce."""
import json
import random
from collections import Counter, defaultdict

import pytest

from nmtfrag.cli import main
from nmtfrag.errors import InputError
from nmtfrag.data.split import plan, split_corpus


def make_tsv(path, n_docs=40, seed=0, max_len=15, dup_every=0):
    """A TSV of documents with distinct, traceable pairs ('d<doc> s<i>')."""
    r = random.Random(seed)
    docs = {}
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for d in range(n_docs):
            n = r.randint(1, max_len)
            docs[f"doc{d:03d}"] = n
            for i in range(n):
                if dup_every and i % dup_every == 0:
                    f.write(f"doc{d:03d}\tgemeinsamer Satz {i}\tshared sentence {i}\n")
                else:
                    f.write(f"doc{d:03d}\tquelle d{d} s{i}\tziel d{d} s{i}\n")
    return docs


def read_split(out, split, lang):
    with open(out / f"{split}.{lang}", encoding="utf-8") as f:
        return f.read().splitlines()


def doc_of(line):
    # "quelle d12 s3" -> doc012; shared sentences carry no doc
    parts = line.split()
    if parts[0] != "quelle":
        return None
    return f"doc{int(parts[1][1:]):03d}"


def split_docs(out):
    """Independent reconstruction: which documents' lines ended up in each split."""
    return {s: {doc_of(line) for line in read_split(out, s, "de")} - {None}
            for s in ("train", "valid", "test")}


@pytest.mark.parametrize("overflow", ["cut", "whole", "skip"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_no_document_crosses_splits(tmp_path, overflow, seed):
    tsv = tmp_path / "docs.tsv"
    make_tsv(tsv, n_docs=60, seed=seed)
    out = tmp_path / "out"
    m = split_corpus(str(tsv), str(out), train=200, valid=15, test=40, seed=seed,
                     overflow=overflow, log=lambda msg: None)
    docs = split_docs(out)
    assert not docs["train"] & docs["test"]
    assert not docs["train"] & docs["valid"]
    assert not docs["valid"] & docs["test"]
    # documents.tsv agrees with the text files
    listed = defaultdict(set)
    with open(out / "documents.tsv", encoding="utf-8") as f:
        next(f)
        for line in f:
            split, doc, *_ = line.rstrip("\n").split("\t")
            listed[split].add(doc)
    assert {s: listed[s] for s in docs} == docs
    for split in ("train", "valid", "test"):
        de, en = read_split(out, split, "de"), read_split(out, split, "en")
        assert len(de) == len(en) == m["splits"][split]["pairs"]
        assert [d.replace("quelle", "ziel") for d in de] == en  # still aligned
        assert m["splits"][split]["documents"] == len(docs[split])


def test_cut_gives_exact_sizes_and_reports_the_cut(tmp_path):
    tsv = tmp_path / "docs.tsv"
    sizes = make_tsv(tsv, n_docs=60, seed=5)
    out = tmp_path / "out"
    m = split_corpus(str(tsv), str(out), train=200, valid=15, test=40, seed=1,
                     log=lambda msg: None)
    for split, target in (("train", 200), ("valid", 15), ("test", 40)):
        assert m["splits"][split]["pairs"] == target
        assert len(read_split(out, split, "en")) == target
        assert "shortfall" not in m["splits"][split]
    # every cut document contributes a prefix; the discarded count is its remainder
    with open(out / "documents.tsv", encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    for split, doc, in_doc, used, cut in rows:
        assert int(in_doc) == sizes[doc]
        assert (cut == "yes") == (int(used) < int(in_doc))
    for split in ("train", "valid", "test"):
        cut_rows = [r for r in rows if r[0] == split and r[4] == "yes"]
        assert m["splits"][split]["cut_documents"] == len(cut_rows) <= 1
        assert m["splits"][split]["pairs_discarded_by_cut"] == \
            sum(int(r[2]) - int(r[3]) for r in cut_rows)
        # the cut document's kept lines are its first ones in file order
        for _, doc, _, used, _ in cut_rows:
            d = int(doc[3:])
            lines = [x for x in read_split(out, split, "de") if doc_of(x) == doc]
            assert lines == [f"quelle d{d} s{i}" for i in range(int(used))]


def test_whole_and_skip_never_cut(tmp_path):
    tsv = tmp_path / "docs.tsv"
    make_tsv(tsv, n_docs=60, seed=5)
    for overflow in ("whole", "skip"):
        out = tmp_path / overflow
        m = split_corpus(str(tsv), str(out), train=200, valid=15, test=40, seed=1,
                         overflow=overflow, log=lambda msg: None)
        for split, target in (("train", 200), ("valid", 15), ("test", 40)):
            s = m["splits"][split]
            assert s["cut_documents"] == 0
            if overflow == "whole":
                assert s["pairs"] >= target
            else:
                assert s["pairs"] <= target
            if s["pairs"] != target:
                assert s.get("excess", s.get("shortfall")) == abs(s["pairs"] - target)


def test_same_seed_same_split_other_seed_differs(tmp_path):
    tsv = tmp_path / "docs.tsv"
    make_tsv(tsv, n_docs=60, seed=7)
    outs = []
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        out = tmp_path / name
        split_corpus(str(tsv), str(out), train=200, valid=15, test=40, seed=seed,
                     log=lambda msg: None)
        outs.append({f: (out / f).read_bytes() for f in
                     ("train.de", "train.en", "valid.de", "test.en", "documents.tsv")})
    assert outs[0] == outs[1]
    assert outs[0] != outs[2]


def test_too_small_corpus_is_reported(tmp_path, capsys):
    tsv = tmp_path / "docs.tsv"
    sizes = make_tsv(tsv, n_docs=8, seed=1)
    total = sum(sizes.values())
    code = main(["split", "--docs", str(tsv), "--out", str(tmp_path / "o"),
                 "--train", "1000", "--valid", "5", "--test", "10"])
    assert code == 0
    err = capsys.readouterr().err
    assert "warning: train:" in err and "instead of the requested 1000" in err
    m = json.loads((tmp_path / "o" / "manifest.json").read_text())
    got = m["splits"]["train"]["pairs"]
    assert m["splits"]["train"]["shortfall"] == 1000 - got
    assert got + m["splits"]["valid"]["pairs"] + m["splits"]["test"]["pairs"] + \
        sum(s["pairs_discarded_by_cut"] for s in m["splits"].values()) == total
    assert m["warnings"]


def test_train_all_takes_every_remaining_document(tmp_path):
    tsv = tmp_path / "docs.tsv"
    sizes = make_tsv(tsv, n_docs=30, seed=2)
    m = split_corpus(str(tsv), str(tmp_path / "o"), train=None, valid=10, test=20,
                     seed=1, log=lambda msg: None)
    s = m["splits"]
    assert s["train"]["pairs"] == sum(sizes.values()) - 30 - \
        s["valid"]["pairs_discarded_by_cut"] - s["test"]["pairs_discarded_by_cut"]
    assert m["unused"]["documents"] == 0


def test_test_pairs_found_in_train_are_removed_and_counted(tmp_path):
    tsv = tmp_path / "docs.tsv"
    make_tsv(tsv, n_docs=80, seed=3, dup_every=3)  # 'shared sentence i' in many docs
    out = tmp_path / "o"
    m = split_corpus(str(tsv), str(out), train=150, valid=10, test=40, seed=1,
                     log=lambda msg: None)
    train = set(zip(read_split(out, "train", "de"), read_split(out, "train", "en")))
    test = list(zip(read_split(out, "test", "de"), read_split(out, "test", "en")))
    assert not train & set(test)
    assert m["splits"]["test"]["removed_as_in_train"] > 0
    # unused documents were left, so the test set was refilled to its target
    assert m["splits"]["test"]["pairs"] == 40
    assert m["splits"]["test"]["topped_up_documents"] >= 1
    # valid is not deduplicated by default; with valid-test it is
    valid = set(zip(read_split(out, "valid", "de"), read_split(out, "valid", "en")))
    m2 = split_corpus(str(tsv), str(tmp_path / "o2"), train=150, valid=10, test=40,
                      seed=1, dedup="valid-test", log=lambda msg: None)
    valid2 = set(zip(read_split(tmp_path / "o2", "valid", "de"),
                     read_split(tmp_path / "o2", "valid", "en")))
    assert not valid2 & train
    assert (m2["splits"]["valid"]["removed_as_in_train"] > 0) == bool(valid & train)


def test_dedup_count_matches_independent_count(tmp_path):
    tsv = tmp_path / "docs.tsv"
    make_tsv(tsv, n_docs=30, seed=4, dup_every=2)
    out = tmp_path / "o"
    # no unused documents (train takes all): removed pairs are not replaced
    m = split_corpus(str(tsv), str(out), train=None, valid=10, test=30, seed=2,
                     log=lambda msg: None)
    train = Counter(zip(read_split(out, "train", "de"), read_split(out, "train", "en")))
    # rebuild the test documents' pairs from documents.tsv and the TSV itself
    pairs_by_doc = defaultdict(list)
    with open(tsv, encoding="utf-8") as f:
        for line in f:
            d, s, t = line.rstrip("\n").split("\t")
            pairs_by_doc[d].append((s, t))
    with open(out / "documents.tsv", encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    before = [p for split, d, _, used, _ in rows if split == "test"
              for p in pairs_by_doc[d][:int(used)]]
    expected_removed = sum(1 for p in before if p in train)
    assert expected_removed > 0
    assert m["splits"]["test"]["removed_as_in_train"] == expected_removed
    assert m["splits"]["test"]["pairs"] == len(before) - expected_removed
    assert m["splits"]["test"]["shortfall"] == expected_removed


def test_plan_fills_valid_then_test_then_train():
    sizes = [(f"d{i}", 5) for i in range(20)]
    assignment, order, unused = plan(sizes, {"valid": 10, "test": 10, "train": 50},
                                     seed=1)
    assert [t.doc for t in assignment["valid"]] == order[:2]
    assert [t.doc for t in assignment["test"]] == order[2:4]
    assert [t.doc for t in assignment["train"]] == order[4:14]
    assert unused == order[14:]


def test_skip_offers_the_skipped_document_to_the_next_split():
    sizes = [("big", 30)] + [(f"d{i}", 2) for i in range(20)]
    for seed in range(10):
        assignment, order, _ = plan(sizes, {"valid": 4, "test": 4, "train": 100},
                                    seed=seed, overflow="skip")
        assert "big" in {t.doc for t in assignment["train"]}
        assert all(t.take == t.size for ts in assignment.values() for t in ts)


@pytest.mark.parametrize("content, message", [
    ("d1\tsrc\ttgt\nd1\tonly two fields\n", "line 2: expected 3 tab-separated fields"),
    ("d1\ta\tb\textra\n", "line 1: expected 3 tab-separated fields (doc_id, src, tgt), "
                          "found 4"),
    ("d1\ta\tb\n\td\te\n", "line 2: empty document id"),
    ("d1\ta\tb\n\n", "line 2: expected 3"),
    ("", "file is empty"),
])
def test_bad_tsv_lines_exit_2_naming_the_line(tmp_path, capsys, content, message):
    tsv = tmp_path / "bad.tsv"
    tsv.write_text(content, encoding="utf-8")
    code = main(["split", "--docs", str(tsv), "--out", str(tmp_path / "o")])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err
    assert not (tmp_path / "o" / "manifest.json").exists()


def test_invalid_utf8_is_refused(tmp_path):
    tsv = tmp_path / "bad.tsv"
    tsv.write_bytes(b"d1\ta\tb\nd2\t\xff\tc\n")
    with pytest.raises(InputError, match="line 2: invalid UTF-8"):
        split_corpus(str(tsv), str(tmp_path / "o"))


def test_empty_sides_are_skipped_and_counted_crlf_normalised(tmp_path):
    tsv = tmp_path / "docs.tsv"
    tsv.write_bytes(b"d1\ta\tb\r\nd1\t \tc\nd2\t\t\nd2\tx\ty\nd3\tp\tq\n")
    m = split_corpus(str(tsv), str(tmp_path / "o"), train=1, valid=1, test=1, seed=1,
                     log=lambda msg: None)
    assert m["input"]["skipped"]["empty_one_side"]["lines"] == [2]
    assert m["input"]["skipped"]["empty_both_sides"]["lines"] == [3]
    assert m["input"]["normalised"]["crlf"]["count"] == 1
    all_en = sum((read_split(tmp_path / "o", s, "en") for s in ("train", "valid",
                                                                "test")), [])
    assert sorted(all_en) == ["b", "q", "y"]  # no '\r' left


def test_refuses_to_overwrite_a_finished_split_and_keeps_input(tmp_path):
    tsv = tmp_path / "docs.tsv"
    make_tsv(tsv, n_docs=10, seed=1)
    before = tsv.read_bytes()
    out = tmp_path / "o"
    assert main(["split", "--docs", str(tsv), "--out", str(out), "--train", "20",
                 "--valid", "3", "--test", "5"]) == 0
    assert main(["split", "--docs", str(tsv), "--out", str(out)]) == 2
    assert main(["split", "--docs", str(tsv), "--out", str(out), "--train", "20",
                 "--valid", "3", "--test", "5", "--overwrite"]) == 0
    assert tsv.read_bytes() == before
    m = json.loads((out / "manifest.json").read_text())
    assert m["seed"] == 1 and len(m["input"]["sha256"]) == 1
    assert "quelle" not in (out / "manifest.json").read_text()  # no text in manifest
    assert not [p for p in out.iterdir() if p.name.startswith(".tmp-")]


def test_language_codes_name_the_files(tmp_path):
    tsv = tmp_path / "docs.tsv"
    make_tsv(tsv, n_docs=10, seed=1)
    out = tmp_path / "o"
    assert main(["split", "--docs", str(tsv), "--out", str(out), "--train", "20",
                 "--valid", "3", "--test", "5", "--src-lang", "fr",
                 "--tgt-lang", "nl"]) == 0
    assert {p.name for p in out.iterdir()} == {
        f"{s}.{lang}" for s in ("train", "valid", "test") for lang in ("fr", "nl")} | {
        "manifest.json", "documents.tsv"}


def test_split_does_not_depend_on_hash_order(tmp_path):
    import os
    import subprocess
    import sys

    tsv = tmp_path / "docs.tsv"
    make_tsv(tsv, n_docs=50, seed=9)
    outputs = []
    for hashseed in ("1", "2"):
        out = tmp_path / f"h{hashseed}"
        env = dict(os.environ, PYTHONHASHSEED=hashseed)
        subprocess.run([sys.executable, "-m", "nmtfrag", "split", "--docs", str(tsv),
                        "--out", str(out), "--train", "100", "--valid", "10", "--test",
                        "30"], check=True, env=env, capture_output=True)
        outputs.append([(out / f).read_bytes() for f in
                        ("train.de", "valid.en", "test.de", "documents.tsv")])
    assert outputs[0] == outputs[1]


def test_a_split_left_without_any_document_is_refused_before_out_is_made(tmp_path):
    """Issue 31, item 4: asking for more than the file holds gave exit 0 with empty
    train and test; a split that only falls short stays a warning."""
    tsv = str(tmp_path / "docs.tsv")
    make_tsv(tsv, n_docs=4)
    out = tmp_path / "out"
    with pytest.raises(InputError, match=r"--train all: .* none left for train after "
                                         r"--valid 1 and --test 100000"):
        split_corpus(tsv, str(out), train=None, valid=1, test=100000)
    assert not out.exists()
    with pytest.raises(InputError, match="--test 5: .* none left for test after --valid"):
        split_corpus(tsv, str(out), valid=100000, test=5)
    assert not out.exists()
    split_corpus(tsv, str(out), train=0, valid=100000, test=0)  # asked for nothing else
    # --overflow skip leaves documents: a shortfall, not a refusal
    m = split_corpus(tsv, str(tmp_path / "skip"), train=None, valid=1, test=1,
                     overflow="skip")
    assert m["splits"]["train"]["pairs"] > 0
