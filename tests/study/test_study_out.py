"""`nmtfrag study run --out` is refused, exit 2 and one `error:` line, before anything is
written, where another command's output or the study's own inputs are (issue 45: `study
run --out RELEASE` wrote study.json, machines.jsonl and cells/ into a finished release,
then exited 1). A study directory itself is continued."""
import os

import pytest

from nmtfrag.cli import main
from nmtfrag.errors import InputError
from nmtfrag.outlock import release_output_locks
from nmtfrag.fragment.extract import extract_release
from nmtfrag.study.config import read_config
from nmtfrag.study.runner import check_study_out
from test_output_guard import tree
from tinymodel import make_corpus, write_parallel

CONFIG = """
title = "t"
[model]
dir = "{d}/model"
[data]
train = "{d}/data/train"
valid = "{d}/data/valid"
test = "{d}/data/test"
[[cell]]
name = "sent"
approach = "sentences"
"""


@pytest.fixture
def ws(tmp_path):
    """A config, its data and model dir, and a finished release made by extract."""
    os.makedirs(tmp_path / "model")
    os.makedirs(tmp_path / "data")
    for split, n in (("train", 20), ("valid", 5), ("test", 5)):
        write_parallel(make_corpus(n, seed=len(split)), str(tmp_path / "data" / split))
    src, tgt = str(tmp_path / "data" / "train.de"), str(tmp_path / "data" / "train.en")
    ali = tmp_path / "train.align"  # the toy corpus is word for word
    with open(src, encoding="utf-8") as f:
        ali.write_text("".join(" ".join(f"{i}-{i}" for i in range(len(ln.split()))) + "\n"
                               for ln in f))
    extract_release(src, tgt, str(tmp_path / "release"), alignments=str(ali),
                    pretokenized=True, seed=1)
    release_output_locks()  # the extract "command" ended
    (tmp_path / "study.toml").write_text(CONFIG.replace("{d}", str(tmp_path)),
                                         encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("out,named", [
    ("release", "holds an output of kind 'nmtfrag-release'"),
    ("release/study", "lies inside"),        # inside a finished output
    ("model/study", "lies inside the input directory"),
    ("data", "contains the input file"),
])
def test_study_run_refuses_an_out_of_another_kind_or_holding_its_inputs(ws, out, named,
                                                                        capsys):
    before = tree(ws)
    code = main(["study", "run", str(ws / "study.toml"), "--out", str(ws / out)])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2
    assert len(err) == 1 and err[0].startswith(f"error: --out {ws / out} "), err
    assert named in err[0], err[0]
    assert tree(ws) == before  # no study.json, machines.jsonl or cells/, inputs unchanged
    assert not os.path.exists(ws / "release" / "study")


def test_a_study_directory_is_continued(ws):
    config = read_config(str(ws / "study.toml"))
    os.makedirs(ws / "runs" / "study" / "cells")
    (ws / "runs" / "study" / "study.json").write_text('{"kind": "nmtfrag-study"}')
    check_study_out(config, str(ws / "runs" / "study"))  # no error
    check_study_out(config, str(ws / "runs" / "new"))  # nor for a new one
    with pytest.raises(InputError, match="nmtfrag-release"):
        check_study_out(config, str(ws / "release"))
