"""No path of the machine in a report or other shared file: the audit, evaluation and
stats commands name their inputs by basename (nmtfrag.fileio.public_name), never by the
absolute path of the release, model or corpus (a user name, a mount point, a project
name). Owner-only records (0600 files) may keep paths; this test reads every file the
commands write that anybody else may read."""
import json
import os
import stat

from nmtfrag.cli import main
from nmtfrag.fileio import public_name
from tinymodel import make_corpus, write_parallel


def test_public_name():
    assert public_name("/home/alice/runs/model/") == "model"
    assert public_name("demo-run/base") == "base"
    assert public_name("phrases.de") == "phrases.de"
    assert public_name(None) is None


def _shared_files(root):
    """Every file under `root` that is not owner-only (mode 0600), with its text."""
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = os.path.join(dirpath, n)
            if not os.stat(p).st_mode & (stat.S_IRGRP | stat.S_IROTH):
                continue
            with open(p, "rb") as f:
                yield p, f.read().decode("utf-8", errors="replace")


def test_reports_name_no_machine_path(tiny_model_dir, tmp_path, tmp_path_factory):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    train = write_parallel(make_corpus(60, seed=0), str(corpus / "train"))
    held = write_parallel(make_corpus(60, seed=99), str(corpus / "held"))
    out = tmp_path / "out"
    run = [
        ["extract", "--src", train[0], "--tgt", train[1], "--out", str(out / "release"),
         "--max-len", "3", "--pretokenized", "--seed", "1"],
        ["audit", "reconstruct", "--release", str(out / "release"), "--src", train[0],
         "--tgt", train[1], "--mode", "both", "--pretokenized", "--out",
         str(out / "audit-release")],
        ["audit", "membership", "--model", tiny_model_dir, "--members", *train,
         "--non-members", *held, "--reference-model", tiny_model_dir, "--pretokenized",
         "--seed", "1", "--out", str(out / "mi")],
        ["evaluate", "--model", tiny_model_dir, "--src", held[0], "--ref", held[1],
         "--tokenized", "--first", "10", "--out", str(out / "eval")],
        ["stats", "--src", train[0], "--tgt", train[1], "--out", str(out / "stats")],
    ]
    for argv in run:
        assert main(argv) == 0, argv
    (out / "runs.yaml").write_text(
        "title: t\nruns:\n  - {name: base, evaluate: eval, membership: mi, "
        "reconstruction: audit-release}\n")
    assert main(["audit", "compare", "--runs", str(out / "runs.yaml"), "--out",
                 str(out / "comparison")]) == 0
    # every directory the inputs lie in: the test's, and the tiny model's
    forbidden = {str(tmp_path), os.path.dirname(os.path.abspath(tiny_model_dir)),
                 str(tmp_path_factory.getbasetemp())}
    checked = 0
    for path, text in _shared_files(out):
        if path.endswith(".yaml"):
            continue  # the test's own input
        checked += 1
        for f in forbidden:
            assert f not in text, f"{os.path.relpath(path, out)} names {f}"
    assert checked >= 10
    # the names that remain say which input was meant
    mi = json.loads((out / "mi" / "report.json").read_text())
    assert mi["model"] == public_name(tiny_model_dir) == mi["reference_model"]
    assert f"Model: `{public_name(tiny_model_dir)}`" in (out / "mi" / "report.md").read_text()
    rec = json.loads((out / "audit-release" / "report.json").read_text())
    assert rec["release"]["dir"] == "release"
    assert "Release: `release`" in (out / "audit-release" / "report.md").read_text()
