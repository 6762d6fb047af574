"""`--out` can never destroy or contaminate: an OUT may not be, contain or lie inside an
input, may not lie inside a finished output or a model dir, and --overwrite replaces only
an output of the same kind. Each refusal is one `error:` line, exit 2, before anything is
written."""
import hashlib
import json
import os
import shutil

import pytest

from nmtfrag.cli import main
from nmtfrag.errors import InputError
from nmtfrag.outdir import MODEL_DIR, check_output_dir, dir_kind, prepare_output_dir
from tinymodel import make_corpus, write_parallel


def tree(path):
    """Every file under `path` with the SHA-256 of its bytes (the state to preserve)."""
    out = {}
    for d, _, files in os.walk(path):
        for f in files:
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, path)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def refused(capsys, argv, *words):
    """Run the CLI; assert exit 2 and a single `error:` line naming `words`."""
    assert main([str(a) for a in argv]) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("guard")
    (root / "data").mkdir()
    write_parallel(make_corpus(40, seed=5), str(root / "data" / "train"))
    write_parallel(make_corpus(8, seed=6), str(root / "data" / "valid"))
    rel = root / "release"
    assert main(["extract", "--src", str(root / "data" / "train.de"), "--tgt",
                 str(root / "data" / "train.en"), "--pretokenized", "--out", str(rel),
                 "--seed", "1"]) == 0
    return root


@pytest.fixture
def model(tiny_model_dir, tmp_path):
    """A private copy of the tiny model dir (the session one must never be at risk)."""
    return shutil.copytree(tiny_model_dir, tmp_path / "model")


def _ft_argv(corpus, model, out, *extra):
    d = corpus / "data"
    return ["finetune", "--model", model, "--train", d / "train.de", d / "train.en",
            "--valid-src", d / "valid.de", "--valid-tgt", d / "valid.en", "--out", out,
            "--pretokenized", "--threads", "1", "-q", "--max-updates", "1", *extra]


def test_finetune_out_is_model_keeps_model(corpus, model, capsys):
    before = tree(model)
    assert "model.pt" in before
    refused(capsys, _ft_argv(corpus, model, model, "--overwrite"), "is the input directory")
    refused(capsys, _ft_argv(corpus, model, model), "is the input directory")
    assert tree(model) == before  # model.pt byte-identical, nothing added or removed


def test_finetune_out_inside_model_dir(corpus, model, capsys):
    before = tree(model)
    refused(capsys, _ft_argv(corpus, model, model / "ft"), "lies inside")
    assert tree(model) == before and not (model / "ft").exists()


def test_dp_finetune_out_is_model_keeps_model(corpus, model, capsys):
    before = tree(model)
    refused(capsys, _ft_argv(corpus, model, model, "--overwrite", "--dp", "--delta", "1e-3",
                             "--noise-multiplier", "2.0", "--sample-rate", "0.2",
                             "--physical-batch", "20", "--dp-steps", "1"),
            "is the input directory")
    assert tree(model) == before


def test_audit_reconstruct_out_is_release(corpus, capsys):
    rel = corpus / "release"
    before = tree(rel)
    manifest = json.loads((rel / "manifest.json").read_text())
    assert manifest["kind"] == "nmtfrag-release"
    for extra in ([], ["--overwrite"]):
        refused(capsys, ["audit", "reconstruct", "--release", rel, "--src",
                         corpus / "data" / "train.de", "--tgt", corpus / "data" / "train.en",
                         "--out", rel, *extra], "is the input directory")
    assert tree(rel) == before  # the shareable manifest still has no corpus hash


def test_extract_out_is_corpus_dir_or_inside_release(corpus, capsys):
    d = corpus / "data"
    args = ["extract", "--src", d / "train.de", "--tgt", d / "train.en", "--pretokenized"]
    before_data, before_rel = tree(d), tree(corpus / "release")
    refused(capsys, args + ["--out", d, "--overwrite"], "contains the input file")
    refused(capsys, args + ["--out", corpus, "--overwrite"], "contains the input file")
    refused(capsys, args + ["--out", corpus / "release" / "again"], "lies inside",
            "nmtfrag-release")
    assert tree(d) == before_data and tree(corpus / "release") == before_rel
    assert not (corpus / "release" / "again").exists()


def test_overwrite_only_same_kind(corpus, tmp_path, capsys):
    d = corpus / "data"
    audit = tmp_path / "audit"
    rec = ["audit", "reconstruct", "--release", corpus / "release", "--src", d / "train.de",
           "--tgt", d / "train.en", "--out", audit]
    assert main([str(a) for a in rec]) == 0
    assert main([str(a) for a in rec + ["--overwrite"]]) == 0  # same kind: replaced
    capsys.readouterr()
    before = tree(audit)
    ext = ["extract", "--src", d / "train.de", "--tgt", d / "train.en", "--pretokenized",
           "--out", audit, "--overwrite"]
    refused(capsys, ext, "nmtfrag-reconstruction-audit", "same kind")
    assert tree(audit) == before
    out = tmp_path / "rel"  # a legit --overwrite of a release with a release
    assert main([str(a) for a in ext[:-3] + ["--out", out, "--seed", "1"]]) == 0
    assert main([str(a) for a in ext[:-3] + ["--out", out, "--seed", "2", "--overwrite"]]) == 0
    assert json.loads((out / "manifest.json").read_text())["kind"] == "nmtfrag-release"


def test_check_output_dir_rules(tmp_path, model):
    """The helper itself, on hand-made layouts (an independent statement of the rule)."""
    (tmp_path / "c").mkdir()
    f = tmp_path / "c" / "train.de"
    f.write_text("x\n")
    check_output_dir(str(tmp_path / "c" / "out"), [str(f)])  # beside a file: fine
    for out, inputs in ((tmp_path / "c", [f]), (tmp_path, [[f, None]]),
                        (model, [model]), (model / "x" / "y", [model]),
                        (tmp_path, [model])):
        with pytest.raises(InputError):
            check_output_dir(str(out), inputs)
    assert dir_kind(str(model)) is not False  # a model dir counts as a finished output
    bare = tmp_path / "bare-model"  # a model dir with no manifest, not an input
    bare.mkdir()
    (bare / "model.pt").write_bytes(b"weights")
    assert dir_kind(str(bare)) == MODEL_DIR
    with pytest.raises(InputError, match="a model directory"):
        prepare_output_dir(str(bare), overwrite=True, kind="nmtfrag-evaluation")
    with pytest.raises(InputError, match="lies inside"):
        prepare_output_dir(str(bare / "eval"), kind="nmtfrag-evaluation")
    assert (bare / "model.pt").read_bytes() == b"weights" and not (bare / "eval").exists()
    assert prepare_output_dir(str(tmp_path / "new"), kind="nmtfrag-evaluation")
