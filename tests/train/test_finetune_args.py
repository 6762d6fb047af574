"""Fine-tuning's inputs checked before anything runs (issue 45): a release directory
without its manifest.json (a half-written or killed extract) is refused instead of
trained on as "release" with no parameters; FineTuneConfig and FineTuneJob refuse a
wrong type (TypeError) or an out-of-range value (ValueError) naming the field when they
are made; FineTuneJob's paths may be os.PathLike."""
import os
from pathlib import Path

import pytest

from nmtfrag.cli import main
from nmtfrag.errors import InputError
from nmtfrag.train.data import resolve_train
from nmtfrag.train.finetune import FineTuneConfig
from nmtfrag.train.job import FineTuneJob
from test_output_guard import tree
from tinymodel import make_corpus, write_parallel


@pytest.fixture
def ws(tmp_path):
    """valid.{de,en}, a model dir (never loaded) and half/: phrase files, no manifest."""
    write_parallel(make_corpus(5, seed=1), str(tmp_path / "valid"))
    os.makedirs(tmp_path / "model")
    os.makedirs(tmp_path / "half")
    write_parallel(make_corpus(20, seed=2), str(tmp_path / "half" / "phrases"))
    return tmp_path


def test_a_release_directory_without_its_manifest_is_refused(ws):
    with pytest.raises(InputError, match=r"--train .*half: a directory without "
                                         r"manifest\.json"):
        resolve_train(str(ws / "half"))


def test_finetune_on_a_half_written_release_is_exit_2_and_writes_nothing(ws, capsys):
    before = tree(ws)
    code = main(["finetune", "--model", str(ws / "model"), "--train", str(ws / "half"),
                 "--valid-src", str(ws / "valid.de"), "--valid-tgt", str(ws / "valid.en"),
                 "--out", str(ws / "out"), "--max-updates", "1", "--device", "cpu"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2
    assert len(err) == 1 and err[0].startswith(f"error: --train {ws / 'half'}: "), err
    assert "without manifest.json" in err[0]
    assert tree(ws) == before and not (ws / "out").exists()


@pytest.mark.parametrize("kw,error,named", [
    (dict(lr=-1), ValueError, "lr must be > 0, got -1"),
    (dict(lr=float("nan")), ValueError, "lr must be a finite number"),
    (dict(lr="0.1"), TypeError, "lr must be a number"),
    (dict(max_updates="10"), TypeError, "max_updates must be an integer, got '10'"),
    (dict(max_epochs=0), ValueError, "max_epochs must be ≥ 1"),
    (dict(validate_every=2.5), TypeError, "validate_every must be an integer"),
    (dict(weight_decay=-0.1), ValueError, "weight_decay must be ≥ 0"),
    (dict(patience=-2), ValueError, "patience must be ≥ -1"),
    (dict(max_tokens=0), ValueError, "max_tokens must be ≥ 1"),
    (dict(seed=True), TypeError, "seed must be an integer"),
    (dict(fp16="no"), TypeError, "fp16 must be True or False"),
    (dict(params="lora"), TypeError, "params must be a TrainableSet"),
])
def test_finetune_config_refuses_a_bad_field_when_made(kw, error, named):
    with pytest.raises(error, match=named):
        FineTuneConfig(**kw)


def test_finetune_config_defaults_and_a_valid_budget_are_accepted():
    assert FineTuneConfig().max_updates is None  # the budget is checked when it runs
    assert FineTuneConfig(max_updates=10, max_epochs=2, patience=-1, lr=1).lr == 1


def test_finetune_job_takes_path_objects_as_strings(tmp_path):
    job = FineTuneJob(model=tmp_path / "m", train=[tmp_path / "a.de", "a.en"],
                      out=tmp_path / "o", valid_src=tmp_path / "v.de",
                      valid_tgt=tmp_path / "v.en")
    assert job.model == str(tmp_path / "m") and job.out == str(tmp_path / "o")
    assert job.train == [str(tmp_path / "a.de"), "a.en"]
    assert job.valid_src == str(tmp_path / "v.de") and job.valid_tgt == str(tmp_path / "v.en")
    assert FineTuneJob(model="m", train=Path("rel"), out="o").train == "rel"


@pytest.mark.parametrize("kw,error,named", [
    (dict(train=None), TypeError, "train must be a path or a sequence of paths"),
    (dict(out=""), ValueError, "out must not be an empty path"),
    (dict(model=None), TypeError, "model must be a path"),
    (dict(valid_src=1), TypeError, "valid_src must be a path"),
    (dict(tags="yes"), TypeError, "tags must be True or False"),
    (dict(threads=0), ValueError, "threads must be ≥ 1"),
    (dict(world_size="2"), TypeError, "world_size must be an integer"),
    (dict(dropout=1.0), ValueError, r"dropout must be in \[0, 1\)"),
    (dict(train_fraction=0), ValueError, r"train_fraction must be in \(0, 1\]"),
])
def test_finetune_job_refuses_a_bad_field_when_made(kw, error, named):
    with pytest.raises(error, match=named):
        FineTuneJob(**{"model": "m", "train": "t", "out": "o", **kw})
