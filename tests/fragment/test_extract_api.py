"""`extract_release` from Python (issue 45): paths may be os.PathLike (a PosixPath broke
the owner manifest after phrases.* and owner/ were written); a wrong type is a TypeError
naming the argument (tag="no" made a tagged release, max_len="4" and src=None gave bare
TypeErrors); an empty path is a ValueError. Nothing is written before the refusal, and
the inputs are unchanged."""
import json
import os
from pathlib import Path

import pytest

from nmtfrag.outlock import release_output_locks
from nmtfrag.fragment.extract import ExtractOptions, extract_release
from test_output_guard import tree
from tinymodel import make_corpus, write_parallel


@pytest.fixture
def corpus(tmp_path):
    """(src, tgt, alignment) Paths of a word-for-word toy corpus."""
    os.makedirs(tmp_path / "data")
    src, tgt = write_parallel(make_corpus(30, seed=4), str(tmp_path / "data" / "train"))
    ali = tmp_path / "data" / "train.align"
    with open(src, encoding="utf-8") as f:
        ali.write_text("".join(" ".join(f"{i}-{i}" for i in range(len(ln.split()))) + "\n"
                               for ln in f))
    yield Path(src), Path(tgt), ali
    release_output_locks()


def test_path_objects_make_the_same_release_as_strings(corpus, tmp_path):
    src, tgt, ali = corpus
    a = extract_release(src, tgt, tmp_path / "a", alignments=ali, pretokenized=True,
                        seed=2, work_dir=tmp_path / "work")
    b = extract_release(str(src), str(tgt), str(tmp_path / "b"), alignments=str(ali),
                        pretokenized=True, seed=2)
    assert a.manifest == b.manifest
    owner = json.loads((tmp_path / "a" / "owner" / "manifest.json").read_text())
    assert owner["inputs"]["src"]["path"] == str(src)
    for name in ("phrases.de", "phrases.en"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


@pytest.mark.parametrize("kw,error,named", [
    (dict(tag="no"), TypeError, "tag must be True or False, got 'no'"),
    (dict(pretokenized=1), TypeError, "pretokenized must be True or False"),
    (dict(max_len="4"), TypeError, "max_len must be an integer, got '4'"),
    (dict(min_len=1.0), TypeError, "min_len must be an integer"),
    (dict(sample_rate="0.5"), TypeError, "sample_rate must be a number"),
    (dict(seed="3"), TypeError, "seed must be an integer"),
    (dict(seed=-1), ValueError, "seed must be ≥ 0"),
    (dict(src_lang=None), TypeError, "src_lang must be a string"),
    (dict(alignments=3), TypeError, "alignments must be a path"),
    (dict(work_dir=""), ValueError, "work_dir must not be an empty path"),
    (dict(dp={"epsilon": 1}), TypeError, "dp must be a DPReleaseParams"),
])
def test_a_wrong_option_names_itself_and_nothing_is_written(corpus, tmp_path, kw, error,
                                                           named):
    src, tgt, ali = corpus
    before = tree(tmp_path)
    with pytest.raises(error, match=named):
        extract_release(src, tgt, tmp_path / "out", **dict(dict(alignments=ali,
                                                                pretokenized=True), **kw))
    with pytest.raises(error, match=named):
        ExtractOptions(**kw)
    assert tree(tmp_path) == before and not (tmp_path / "out").exists()


@pytest.mark.parametrize("which,value,error,named", [
    ("src", None, TypeError, "src must be a path"),
    ("tgt", 7, TypeError, "tgt must be a path"),
    ("out", None, TypeError, "out must be a path"),
    ("out", "", ValueError, "out must not be an empty path"),
])
def test_a_wrong_path_names_its_argument_and_nothing_is_written(corpus, tmp_path,
                                                               monkeypatch, which, value,
                                                               error, named):
    src, tgt, ali = corpus
    paths = {"src": src, "tgt": tgt, "out": tmp_path / "out", which: value}
    monkeypatch.chdir(tmp_path)
    before = tree(tmp_path)
    with pytest.raises(error, match=named):
        extract_release(paths["src"], paths["tgt"], paths["out"], alignments=ali,
                        pretokenized=True)
    assert tree(tmp_path) == before and not (tmp_path / "out").exists()


def test_options_and_fields_together_or_a_wrong_options_object_are_refused(corpus,
                                                                          tmp_path):
    src, tgt, _ = corpus
    with pytest.raises(TypeError, match="options must be an ExtractOptions"):
        extract_release(src, tgt, tmp_path / "out", {"max_len": 4})
    with pytest.raises(TypeError, match="not both"):
        extract_release(src, tgt, tmp_path / "out", ExtractOptions(), max_len=4)
    assert not (tmp_path / "out").exists()
