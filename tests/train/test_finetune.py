"""Fine-tuning through fairseq: tags as single symbols end to end, validation loss goes
down, a killed run resumes from its checkpoint, bad inputs exit 2."""
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from nmtfrag import resume_clock
from nmtfrag.errors import InputError
from nmtfrag.outlock import release_output_locks
from nmtfrag.train import fairseq_fixes
from nmtfrag.train import finetune as finetune_module
from nmtfrag.train.fairseq_fixes import atomic_copy
from nmtfrag.train.finetune import FineTuneConfig, finetune
from nmtfrag.train.job import FineTuneJob
from nmtfrag.model_dir import dict_symbols, load_state, validate_model_dir
from tinymodel import make_corpus, write_parallel

torch.set_num_threads(1)
FAST = dict(max_tokens=600, lr=0.003, dropout=0.1, quiet=True, log_interval=5)
JOB_FIELDS = {f.name for f in dataclasses.fields(FineTuneJob)}


def run_finetune(model, train, out, **kw):
    """finetune(job, config) with the keywords split between the two (on the CPU), then
    its OUT unlocked, as the command does when it ends."""
    kw.setdefault("device", "cpu")
    job = FineTuneJob(model=model, train=train, out=out,
                      **{k: v for k, v in kw.items() if k in JOB_FIELDS})
    try:
        return finetune(job, FineTuneConfig(**{k: v for k, v in kw.items()
                                               if k not in JOB_FIELDS}))
    finally:
        release_output_locks()


def _release(path, pairs, tag=True, pretokenized=False, n_words=3):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "phrases.de"), "w", encoding="utf-8") as f, \
            open(os.path.join(path, "phrases.en"), "w", encoding="utf-8") as g:
        for de, en in pairs:
            d, e = " ".join(de.split()[:n_words]), " ".join(en.split()[:n_words])
            f.write(f"<P> {d} </P>\n" if tag else d + "\n")
            g.write(f"<P> {e} </P>\n" if tag else e + "\n")
    with open(os.path.join(path, "manifest.json"), "w") as f:
        json.dump({"kind": "nmtfrag-release",
                   "files": {"src": "phrases.de", "tgt": "phrases.en"},
                   "params": {"src_lang": "de", "tgt_lang": "en", "tag": tag,
                              "pretokenized": pretokenized, "max_len": n_words}}, f)
    return str(path)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("ftdata")
    valid = write_parallel(make_corpus(30, seed=11), str(d / "valid"))
    train = write_parallel(make_corpus(300, seed=12), str(d / "train"))
    rel = _release(d / "release", make_corpus(300, seed=13), tag=True)
    return {"valid": valid, "train": train, "release": rel, "dir": d}


def test_tags_are_single_symbols_end_to_end(tiny_model_dir, data, tmp_path):
    out = str(tmp_path / "ft")
    m = run_finetune(tiny_model_dir, data["release"], out, valid_src=data["valid"][0],
                     valid_tgt=data["valid"][1], max_updates=3, keep_work=True,
                     measure_before=False, **FAST)
    base_n = len(dict_symbols(os.path.join(tiny_model_dir, "dict.en.txt")))
    for lang in ("de", "en"):
        syms = dict_symbols(os.path.join(out, f"dict.{lang}.txt"))
        assert syms[-2:] == ["<P>", "</P>"] and len(syms) == base_n + 2
        assert "&lt;" not in syms and "<@@" not in syms
    assert m["tags"]["added_to_tgt_dict"] == ["<P>", "</P>"]
    # the output is a valid model dir: embedding rows match the grown dictionaries
    md = validate_model_dir(out)
    state = load_state(md.checkpoints[0])
    assert state["model"]["encoder.embed_tokens.weight"].shape[0] == base_n + 4 + 2
    # the binarised training data starts with <P> and ends with </P> </s>, one id each
    from fairseq.data import Dictionary, data_utils

    for lang in ("de", "en"):
        dic = Dictionary.load(os.path.join(out, ".work", "bin", f"dict.{lang}.txt"))
        ds = data_utils.load_indexed_dataset(
            os.path.join(out, ".work", "bin", f"train.de-en.{lang}"), dic)
        assert len(ds) == 300
        p_open, p_close = dic.index("<P>"), dic.index("</P>")
        assert p_open != dic.unk() and p_close != dic.unk()
        for i in range(len(ds)):
            ids = ds[i].tolist()
            assert ids[0] == p_open and ids[-2:] == [p_close, dic.eos()]
            assert p_open not in ids[1:-2] and dic.unk() not in ids
    # the subword text never holds an escaped or split tag
    with open(os.path.join(out, ".work", "train.en"), encoding="utf-8") as f:
        text = f.read()
    assert "&lt;" not in text and "<@@" not in text and text.count("<P>") == 300
    assert os.stat(os.path.join(out, ".work")).st_mode & 0o777 == 0o700


def test_finetuning_lowers_validation_loss(tiny_model_dir, data, tmp_path):
    out = str(tmp_path / "ft")
    m = run_finetune(tiny_model_dir, data["train"][0].rsplit(".", 1)[0], out,
                     valid_src=data["valid"][0], valid_tgt=data["valid"][1],
                     max_updates=40, validate_every=20, **FAST)
    r = m["result"]
    assert r["num_updates"] == 40
    assert r["valid_loss_before"] is not None and r["valid_loss_best"] is not None
    assert r["valid_loss_best"] < r["valid_loss_before"] - 0.05
    assert r["worse_than_before"] is False
    # the reported best loss is the one fairseq measured for the kept checkpoint
    assert min(v["loss"] for v in r["validations_this_run"]) == pytest.approx(
        r["valid_loss_best"], abs=1e-3)
    assert sorted(os.listdir(out)) == ["bpecodes", "dict.de.txt", "dict.en.txt",
                                       "manifest.json", "model.pt", "train.log"]
    argv = m["fairseq_train_argv"]
    assert argv.count("--reset-optimizer") == 1
    # --validate-every 20 means at updates 20 and 40 only: no extra validation at an
    # epoch end (300 pairs at 600 tokens a batch end an epoch every few updates), which
    # early stopping would count as well
    assert [v["num_updates"] for v in r["validations_this_run"]] == [20, 40]
    assert int(argv[argv.index("--validate-interval") + 1]) > 40
    # never the forks' default of 8, which drops the last partial (validation) batch
    assert argv[argv.index("--required-batch-size-multiple") + 1] == "1"
    # and the result can be fine-tuned again (same layout)
    validate_model_dir(out)


def test_validating_every_n_updates_a_run_ends_at_its_epoch_cap_validated_and_saved(
        tiny_model_dir, data, tmp_path):
    """--validate-every N with --max-epochs: the last update (not a multiple of N) is
    validated and saved like fairseq's --max-update end, so the kept model and the
    counts include the last epoch's tail."""
    out = str(tmp_path / "ft")
    m = run_finetune(tiny_model_dir, data["train"], out, valid_src=data["valid"][0],
                     valid_tgt=data["valid"][1], max_epochs=2, validate_every=5,
                     patience=-1, measure_before=False, keep_checkpoints=True, **FAST)
    r = m["result"]
    total = r["num_updates"]
    assert total % 5 and total > 5  # the tail since the last validation is not empty
    assert [v["num_updates"] for v in r["validations_this_run"]] == \
        list(range(5, total, 5)) + [total]
    assert r["epochs_completed"] == 2 and r["stopped_early"] is False
    last = load_state(os.path.join(out, "checkpoints", "checkpoint_last.pt"))
    assert last["optimizer_history"][-1]["num_updates"] == total


def _cli(*args):
    return [sys.executable, "-m", "nmtfrag", "finetune", *args]


def _copy_dies_half_way(copy, monkeypatch, tmp_path):
    """Run `copy` over an existing checkpoint_last.pt with a write that dies after the
    first chunk (a kill during the copy); return what checkpoint_last.pt then holds."""
    import shutil

    src, dst = tmp_path / "checkpoint_3_30.pt", tmp_path / "checkpoint_last.pt"
    src.write_bytes(b"N" * (3 << 20))
    dst.write_bytes(b"old complete checkpoint")
    real = shutil.copyfileobj

    def dying(fsrc, fdst, length=0):
        fdst.write(fsrc.read(1 << 20))
        fdst.flush()
        raise KeyboardInterrupt("killed during the copy")

    monkeypatch.setattr(shutil, "copyfileobj", dying)
    monkeypatch.setattr(shutil, "copyfile", lambda s, d: dying(open(s, "rb"), open(d, "wb")))
    with pytest.raises(KeyboardInterrupt):
        copy(str(src), str(dst), True)
    monkeypatch.setattr(shutil, "copyfileobj", real)
    return dst.read_bytes(), sorted(p.name for p in tmp_path.iterdir())


@pytest.mark.parametrize("caps, updates, epochs, expect", [
    ({"max_epochs": 10}, 2680, 4, True),          # a study's phrase cell: 4 of 10 epochs
    ({"max_epochs": 10}, 2160, 10, False),        # the sentence cell, at its cap
    ({"max_updates": 100}, 75, 0, True),
    ({"max_updates": 100}, 100, 3, False),
    ({"max_updates": 100, "max_epochs": 2}, 60, 2, False),   # the epoch cap came first
    ({"max_updates": 100, "max_epochs": 5}, 60, 2, True),
])
def test_the_manifest_says_early_stopping_ended_a_run_only_short_of_every_cap(
        caps, updates, epochs, expect):
    outcome = finetune_module.TrainingOutcome(argv=[], validations=[], train_seconds=0.0,
                                              num_updates=updates, epochs_completed=epochs)
    assert finetune_module.stopped_early(outcome, FineTuneConfig(**caps)) is expect


def test_checkpoint_copy_killed_half_way_keeps_the_last_complete_file(monkeypatch, tmp_path):
    # fairseq's own copy (shutil.copyfile) leaves a truncated checkpoint_last.pt ...
    from fairseq.file_io import PathManager

    (tmp_path / "fairseq").mkdir()
    torn, _ = _copy_dies_half_way(PathManager.copy, monkeypatch, tmp_path / "fairseq")
    assert torn == b"N" * (1 << 20)
    # ... ours leaves the previous complete one, and no temp file
    (tmp_path / "ours").mkdir()
    kept, names = _copy_dies_half_way(atomic_copy, monkeypatch, tmp_path / "ours")
    assert kept == b"old complete checkpoint"
    assert names == ["checkpoint_3_30.pt", "checkpoint_last.pt"]


def test_a_resumed_run_keeps_fairseqs_early_stopping_count(tmp_path):
    """fairseq counts validations without improvement in memory only: a resumed run
    continues the count its checkpoint saved, so it stops where the uninterrupted run
    would (the CPU study's len4-tag trained on past its early stop after a resume)."""
    import types

    import torch
    from fairseq_cli import train as fs_train

    cfg = types.SimpleNamespace(checkpoint=types.SimpleNamespace(
        patience=2, maximize_best_checkpoint_metric=False))
    last = str(tmp_path / "checkpoint_last.pt")
    saved = {"best": 5.098, "num_runs": 1}
    torch.save({"model": {}, "extra_state": {"best": 5.098, fairseq_fixes.STOP_EARLY: saved}},
               last)
    fairseq_fixes.restore_stop_early(fs_train, finetune_module.ResumedFrom.read(last)
                                     .stop_early)
    assert fs_train.should_stop_early(cfg, 5.416)  # the second worse validation: stop
    torch.save({"model": {}, "extra_state": {"best": 5.098, "val_loss": 5.098}}, last)
    fairseq_fixes.restore_stop_early(  # an older checkpoint, saved at its best
        fs_train, finetune_module.ResumedFrom.read(last).stop_early)
    assert not fs_train.should_stop_early(cfg, 5.244)  # its best kept, the count from 0
    assert fs_train.should_stop_early(cfg, 5.416)
    torch.save({"model": {}, "extra_state": {"best": 5.098, "val_loss": 5.503}}, last)
    fairseq_fixes.restore_stop_early(  # an older one saved after a worse validation
        fs_train, finetune_module.ResumedFrom.read(last).stop_early)
    assert fs_train.should_stop_early(cfg, 5.6)  # that validation counted: stop
    fresh = finetune_module.ResumedFrom.read(str(tmp_path / "fresh" / "checkpoint_last.pt"))
    fairseq_fixes.restore_stop_early(fs_train, fresh.stop_early)  # a new run
    assert not fs_train.should_stop_early(cfg, 9.0)  # its first validation is its best
    assert fairseq_fixes.stop_early_state(fs_train) == {"best": 9.0, "num_runs": 0}


def test_training_uses_the_atomic_copy_and_restores_fairseqs(monkeypatch):
    from fairseq.file_io import PathManager
    from fairseq_cli import train as fs_train

    seen = []
    monkeypatch.setattr(fs_train, "main", lambda cfg, **kw: seen.append(PathManager.copy))
    before = PathManager.copy
    fairseq_fixes.train_main_with_fixes(object())
    assert seen == [atomic_copy] and PathManager.copy is before


def test_resume_after_kill_continues_from_checkpoint(tiny_model_dir, data, tmp_path):
    out = str(tmp_path / "ft")
    common = ["--model", tiny_model_dir, "--train", *data["train"], "--valid-src",
              data["valid"][0], "--valid-tgt", data["valid"][1], "--out", out,
              "--max-tokens", "600", "--lr", "0.003", "--validate-every", "10",
              "--threads", "1", "--device", "cpu", "-q", "--patience", "-1"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen(_cli(*common, "--max-updates", "100000"), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    last = os.path.join(out, "checkpoints", "checkpoint_last.pt")
    try:
        deadline = time.time() + 240
        while not os.path.exists(last) and time.time() < deadline and proc.poll() is None:
            time.sleep(0.2)
        time.sleep(1.0)  # let the rename of the checkpoint finish
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert os.path.exists(last), "no checkpoint was written before the kill"
    assert not os.path.exists(os.path.join(out, "manifest.json"))
    k = load_state(last)["optimizer_history"][-1]["num_updates"]
    assert k >= 10
    earlier = load_state(last)["extra_state"]["previous_training_time"]
    assert earlier > 0
    assert "num_runs" in load_state(last)["extra_state"][fairseq_fixes.STOP_EARLY]

    # without --resume the interrupted run is protected
    kw = dict(valid_src=data["valid"][0], valid_tgt=data["valid"][1], max_tokens=600,
              lr=0.003, validate_every=10, patience=-1, quiet=True, max_updates=k + 10)
    with pytest.raises(InputError, match="--resume"):
        run_finetune(tiny_model_dir, list(data["train"]), out, **kw)
    run_finetune(tiny_model_dir, list(data["train"]), out, resume=True, **kw)
    m = json.load(open(os.path.join(out, "manifest.json")))
    assert m["result"]["resumed"] and m["result"]["num_updates"] == k + 10
    # the cost of the whole run: the killed part up to its checkpoint, then this one
    r = m["result"]
    assert r["train_seconds"] == pytest.approx(earlier + r["train_seconds_this_run"], abs=0.1)
    with open(os.path.join(out, "train.log"), encoding="utf-8") as f:
        log = f.read()
    assert "checkpoint_last.pt (epoch" in log and f"@ {k} updates)" in log
    assert "--reset-optimizer" not in m["fairseq_train_argv"]


def test_a_run_killed_mid_epoch_resumes_from_its_resume_point_to_the_same_model(
        tiny_model_dir, data, tmp_path, monkeypatch):
    """fairseq saves at an epoch's end only; a resume point (every MIN_SECONDS,
    here every update) lets a run killed mid-epoch continue there, without validating or
    touching early stopping, and end with the model of the run never killed."""
    from fairseq.trainer import Trainer

    kw = dict(valid_src=data["valid"][0], valid_tgt=data["valid"][1], max_epochs=2,
              patience=1, measure_before=False, **FAST)
    whole = run_finetune(tiny_model_dir, data["train"], str(tmp_path / "whole"), **kw)
    per_epoch = whole["result"]["num_updates"] // 2
    assert per_epoch >= 6 and whole["result"]["epochs_completed"] == 2

    out = str(tmp_path / "killed")
    monkeypatch.setattr(resume_clock, "MIN_SECONDS", 0)  # a point after every update
    monkeypatch.setattr(resume_clock, "COST_FACTOR", 0)
    plain_step, steps = Trainer.train_step, []

    def killed_at(self, samples, *a, **k):  # the kill, half-way through epoch 2
        if len(steps) == per_epoch + per_epoch // 2:
            raise KeyboardInterrupt
        steps.append(1)
        return plain_step(self, samples, *a, **k)

    monkeypatch.setattr(Trainer, "train_step", killed_at)
    with pytest.raises(KeyboardInterrupt):
        run_finetune(tiny_model_dir, data["train"], out, **kw)
    monkeypatch.setattr(Trainer, "train_step", plain_step)
    last = load_state(os.path.join(out, "checkpoints", "checkpoint_last.pt"))
    extra = last["extra_state"]
    assert last["optimizer_history"][-1]["num_updates"] == len(steps)  # the last update's
    assert extra["train_iterator"]["epoch"] == 2 and extra["val_loss"] is None
    assert extra["train_iterator"]["iterations_in_epoch"] == per_epoch // 2
    # the one validation so far (epoch 1's) is the count the point carries
    assert extra[fairseq_fixes.STOP_EARLY]["num_runs"] == 0
    with open(os.path.join(out, "train.log"), encoding="utf-8") as f:
        assert f.read().count("| valid on") == 1

    resumed = run_finetune(tiny_model_dir, data["train"], out, resume=True, **kw)
    assert resumed["result"]["num_updates"] == whole["result"]["num_updates"]
    assert [v["loss"] for v in resumed["result"]["validations_this_run"]] == \
        [v["loss"] for v in whole["result"]["validations_this_run"]][1:]
    a = load_state(os.path.join(str(tmp_path / "whole"), "model.pt"))["model"]
    b = load_state(os.path.join(out, "model.pt"))["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[n], b[n]) for n in a)


def test_no_validation_trains_the_whole_budget_and_keeps_the_last_checkpoint(
        tiny_model_dir, data, tmp_path):
    """--no-validation: no validation set is read, fairseq validates nothing, the run
    is its budget and OUT/model.pt is the last checkpoint (for a DP release, nothing
    outside its ε chooses the model)."""
    out = str(tmp_path / "ft")
    k = 6
    m = run_finetune(tiny_model_dir, data["release"], out, max_updates=k, validate=False,
                     keep_checkpoints=True, **FAST)
    r, params = m["result"], m["params"]
    assert r["num_updates"] == k and r["best_checkpoint_updates"] == k
    assert r["valid_loss_before"] is None and r["valid_loss_best"] is None
    assert r["validations_this_run"] == [] and r["worse_than_before"] is None
    assert params["validate"] is False and params["patience"] is None
    assert params["valid_src"] is None and params["valid_tgt"] is None
    # the binarised valid split was the training data: not reported as a validation set
    assert "valid" not in m["counts"] and "valid_src" not in m["inputs_sha256"]
    argv = m["fairseq_train_argv"]
    assert "--disable-validation" in argv and argv[argv.index("--patience") + 1] == "-1"
    ckpts = os.path.join(out, "checkpoints")
    assert not os.path.exists(os.path.join(ckpts, "checkpoint_best.pt"))
    last = load_state(os.path.join(ckpts, "checkpoint_last.pt"))["model"]
    kept = load_state(os.path.join(out, "model.pt"))["model"]
    assert last.keys() == kept.keys()
    assert all(torch.equal(last[n], kept[n]) for n in last)
    base = load_state(validate_model_dir(tiny_model_dir).checkpoints[0])["model"]
    assert any(not torch.equal(base[n], kept[n]) for n in base  # it did train
               if n in kept and base[n].shape == kept[n].shape)
    with open(os.path.join(out, "train.log"), encoding="utf-8") as f:
        log = f.read()
    assert "| train |" in log and "valid on" not in log
    validate_model_dir(out)


def test_no_validation_without_validation_files_is_what_the_cli_asks_for():
    import argparse

    from nmtfrag.cli import finetune as command

    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    args = parser.parse_args(["--model", "m", "--train", "a", "b", "--out", "o",
                              "--no-validation", "--max-epochs", "2"])
    command.check_validation_options(args)
    cfg = command.config_from_args(args)
    assert cfg.validate is False and cfg.measure_before is False and cfg.max_epochs == 2
    job = command.job_from_args(args, world_size=1)
    assert job.valid_src is None and job.valid_tgt is None
    with_valid = command.config_from_args(parser.parse_args(
        ["--model", "m", "--train", "a", "b", "--out", "o", "--valid-src", "v",
         "--valid-tgt", "w"]))
    assert with_valid.validate is True and with_valid.measure_before is True


NO_VALID_REFUSALS = [
    # (id, options after the model, train and out; what the one error line must say)
    ("with-valid-files", "--no-validation --valid-src {v}.de --valid-tgt {v}.en",
     "--no-validation reads no validation set: leave out --valid-src/--valid-tgt"),
    ("with-valid-src-only", "--no-validation --valid-src {v}.de",
     "leave out --valid-src/--valid-tgt"),
    ("with-patience", "--no-validation --patience 3", "--patience"),
    ("with-patience-off", "--no-validation --patience -1", "--patience"),
    ("with-validate-every", "--no-validation --validate-every 5", "--validate-every"),
    ("with-dp-valid-every", "--no-validation --dp --sample-rate 0.5 --noise-multiplier 1 "
     "--delta 1e-5 --dp-valid-every 2", "--dp-valid-every with --no-validation"),
    ("no-valid-files", "", "required: --valid-src, --valid-tgt"),
    ("valid-src-only", "--valid-src {v}.de", "required: --valid-tgt"),
    ("dp-no-valid-files", "--dp --sample-rate 0.5 --noise-multiplier 1 --delta 1e-5",
     "(or --no-validation: no validation loss measured)"),
]


@pytest.mark.parametrize("extra,expect", [c[1:] for c in NO_VALID_REFUSALS],
                         ids=[c[0] for c in NO_VALID_REFUSALS])
def test_validation_options_are_refused_with_one_error_line(data, tmp_path, extra, expect):
    # refused before the model is read: a missing model dir would be another error
    v = data["valid"][0].rsplit(".", 1)[0]
    out = tmp_path / "o"
    r = subprocess.run(_cli("--model", str(tmp_path / "nomodel"), "--train", *data["train"],
                            "--out", str(out), "--max-updates", "1",
                            *extra.format(v=v).split()),
                       capture_output=True, text=True,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    errs = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errs) == 1 and expect in errs[0], r.stderr
    assert not out.exists()


def test_the_dp_track_needs_both_validation_files_or_none(data, tmp_path):
    from nmtfrag.dp.engine import dp_sources

    job = FineTuneJob(model=str(tmp_path / "m"), train=list(data["train"]),
                      out=str(tmp_path / "o"), valid_src=data["valid"][0])
    with pytest.raises(InputError, match="give both --valid-src and --valid-tgt, or "
                                         "--no-validation"):
        dp_sources(job)


def test_mismatched_valid_files_exit_2(tiny_model_dir, data, tmp_path):
    short = tmp_path / "short.en"
    short.write_text("one line\n")
    r = subprocess.run(_cli("--model", tiny_model_dir, "--train", *data["train"],
                            "--valid-src", data["valid"][0], "--valid-tgt", str(short),
                            "--out", str(tmp_path / "o"), "--max-updates", "1"),
                       capture_output=True, text=True)
    assert r.returncode == 2
    errs = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errs) == 1 and "line-aligned" in errs[0]


def test_budget_and_release_language_checks(tiny_model_dir, data, tmp_path):
    with pytest.raises(InputError, match="budget"):
        run_finetune(tiny_model_dir, data["release"], str(tmp_path / "a"),
                     valid_src=data["valid"][0], valid_tgt=data["valid"][1])
    rel = tmp_path / "rel_fr"
    _release(rel, make_corpus(5, seed=1))
    man = json.load(open(rel / "manifest.json"))
    man["params"]["tgt_lang"] = "fr"
    json.dump(man, open(rel / "manifest.json", "w"))
    with pytest.raises(InputError, match="release is de→fr"):
        run_finetune(tiny_model_dir, str(rel), str(tmp_path / "b"),
                     valid_src=data["valid"][0], valid_tgt=data["valid"][1], max_updates=1)


def test_text_modes_follow_the_release_manifest(tmp_path):
    from nmtfrag.train.data import resolve_train

    pairs = make_corpus(3, seed=2)
    hub = _release(tmp_path / "hub", pairs, pretokenized=False)
    pre = _release(tmp_path / "pre", pairs, pretokenized=True)
    assert resolve_train(hub)[2] == "hub"
    assert resolve_train(pre)[2] == "moses"
    files = write_parallel(pairs, str(tmp_path / "plain"))
    assert resolve_train(list(files))[2] == "raw"
    assert resolve_train(list(files), pretokenized=True)[2] == "moses"
    assert resolve_train(str(tmp_path / "plain"))[:2] == files
    with pytest.raises(InputError, match="not a release directory"):
        resolve_train(str(tmp_path / "nothing"))


def test_moses_tokenised_text_is_made_consistent_with_the_hub_pipeline():
    from nmtfrag.data.bpe import hub_tokens
    from nmtfrag.data.tokenize import tokenize

    raw = "The patient's anti-viral dose: 5 < 10 & \"safe\"."
    moses = "The patient 's anti-viral dose : 5 < 10 & \" safe \" ."  # EMEA style
    # what the model's own pipeline makes of the raw sentence …
    assert hub_tokens(raw, "en", "raw") == tokenize(raw, "en")
    # … is what we feed it for the Moses-tokenised, unescaped version
    assert hub_tokens(moses, "en", "moses") == tokenize(raw, "en")
    assert "&lt;" in hub_tokens(moses, "en", "moses")
    assert "@-@" in hub_tokens(moses, "en", "moses")
    # hub-tokenised text (a release without --pretokenized) passes unchanged
    done = tokenize(raw, "en")
    assert hub_tokens(done, "en", "hub") == done


def test_a_run_that_ends_worse_than_it_started_says_so():
    from nmtfrag.train.finetune import loss_note, worse_than_before

    assert worse_than_before(3.725, 4.194) is True  # the demo's phrases run, measured
    assert worse_than_before(4.0, 3.1) is False
    assert worse_than_before(None, 3.1) is None and worse_than_before(4.0, None) is None
    worse = {"valid_loss_before": 3.725, "valid_loss_best": 4.194, "worse_than_before": True}
    note = loss_note(worse)
    assert "did not lower the validation loss" in note and "4.194" in note and "3.725" in note
    assert loss_note(dict(worse, valid_loss_best=3.1, worse_than_before=False)) is None
    assert loss_note({"valid_loss_before": None, "valid_loss_best": 3.1,
                      "worse_than_before": None}) is None



def test_a_restarted_run_leaves_no_certificate_of_the_run_it_replaces(tmp_path):
    """--overwrite into a finished DP model: the new run (without DP) starts without the
    old privacy.json (else a model trained without the release's guarantee would ship the
    old one's), nor its owner-only manifest, member lines, resume state or step log."""
    import types

    from nmtfrag.train.data import MODEL_KIND

    out = tmp_path / "ft"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps({"kind": MODEL_KIND, "dp": True}))
    (out / "privacy.json").write_text("{}")
    (out / "model.pt").write_bytes(b"x")
    (out / "owner").mkdir()
    for name in ("manifest.json", "trained-lines.txt", "train.log", "dp-run.json",
                 "dp-count.json"):
        (out / "owner" / name).write_text("{}")
    job = FineTuneJob(model=str(tmp_path / "model"), train=str(tmp_path / "c"),
                      out=str(out), overwrite=True)
    sources = types.SimpleNamespace(
        train=types.SimpleNamespace(src=None, tgt=None), valid_src=None, valid_tgt=None)
    try:
        finetune_module.open_run_dirs(job, types.SimpleNamespace(path=None), sources)
    finally:
        release_output_locks()
    assert sorted(p.name for p in out.iterdir()) == []


def test_a_run_without_dp_keeps_an_interrupted_dp_run_unless_told(tmp_path):
    """An OUT holding an interrupted DP run (its state in owner/, no manifest): a run
    without DP and without --overwrite is refused and removes nothing; with --overwrite
    it starts afresh without that state."""
    import types

    out = tmp_path / "ft"
    (out / "owner").mkdir(parents=True)
    for name in ("dp-state.pt", "dp-run.json", "dp-count.json", "train.log"):
        (out / "owner" / name).write_text("{}")
    sources = types.SimpleNamespace(
        train=types.SimpleNamespace(src=None, tgt=None), valid_src=None, valid_tgt=None)

    def open_dirs(**kw):
        job = FineTuneJob(model=str(tmp_path / "model"), train=str(tmp_path / "c"),
                          out=str(out), **kw)
        try:
            finetune_module.open_run_dirs(job, types.SimpleNamespace(path=None), sources)
        finally:
            release_output_locks()

    with pytest.raises(InputError, match="interrupted DP run .*--dp … --resume"):
        open_dirs()
    assert len(os.listdir(out / "owner")) == 4
    open_dirs(overwrite=True)
    assert not (out / "owner").exists()


def _keep_without_training(monkeypatch, tmp_path, certifier, release_cert):
    """_prepare_train_keep with preparing and training stubbed out, on a release dir that
    holds a privacy.json or not; (its manifest, what it printed to stderr)."""
    import types

    for name, value in {"setup_console_logging": lambda quiet: None,
                        "prepared_data": lambda *a: None, "loss_before": lambda *a: None,
                        "train": lambda *a: None, "keep_best": lambda *a: None,
                        "run_manifest": lambda *a: {"result": {}},
                        "tool_versions": lambda *a: {}}.items():
        monkeypatch.setattr(finetune_module, name, value)
    monkeypatch.setattr(finetune_module.training_data, "input_hashes", lambda md, s: {})
    rel, out = tmp_path / "release", tmp_path / "out"
    rel.mkdir(parents=True)
    out.mkdir(parents=True)
    (rel / "manifest.json").write_text("{}")
    if release_cert:
        (rel / "privacy.json").write_text("{}")
    job = types.SimpleNamespace(threads=None, quiet=True, reshape=None)
    sources = types.SimpleNamespace(
        train=types.SimpleNamespace(manifest=str(rel / "manifest.json")))
    return finetune_module._prepare_train_keep(
        job, types.SimpleNamespace(validate=False), "cpu", sources, None,
        finetune_module.RunDirs(str(out)), certifier)


def test_a_model_trained_on_a_dp_release_without_a_certifier_says_it_has_no_certificate(
        monkeypatch, tmp_path, capsys):
    man = _keep_without_training(monkeypatch, tmp_path, None, release_cert=True)
    assert man["dp"] is False and "no certifier" in man["no_certificate"]
    assert "no certifier" in capsys.readouterr().err
    assert json.loads((tmp_path / "out" / "manifest.json").read_text()) == man
    assert not (tmp_path / "out" / "privacy.json").exists()
    # a release without a certificate: nothing to say
    man = _keep_without_training(monkeypatch, tmp_path / "plain", None, release_cert=False)
    assert man["dp"] is False and "no_certificate" not in man


def test_the_manifest_says_dp_exactly_when_a_certificate_was_written(monkeypatch, tmp_path):
    """manifest["dp"] is whether OUT holds privacy.json once the certifier is done, not
    what the certifier claims."""
    class Writes:
        def write(self, out, manifest):
            with open(os.path.join(out, "privacy.json"), "w") as f:
                f.write("{}")

    class Claims:
        def write(self, out, manifest):
            manifest["dp"] = True
            return "claims a certificate it did not write"

    assert _keep_without_training(monkeypatch, tmp_path / "a", Writes(), True)["dp"] is True
    assert _keep_without_training(monkeypatch, tmp_path / "b", Claims(), True)["dp"] is False


def _ctrl_c_argv(tiny_model_dir, data, out):
    return ["finetune", "--model", tiny_model_dir, "--train", *data["train"], "--valid-src",
            data["valid"][0], "--valid-tgt", data["valid"][1], "--out", out,
            "--max-tokens", "600", "--lr", "0.003", "--validate-every", "4", "--threads",
            "1", "--device", "cpu", "-q", "--patience", "-1", "--max-updates", "8"]


def test_ctrl_c_says_which_checkpoint_out_keeps(tiny_model_dir, data, tmp_path, monkeypatch,
                                               capsys):
    """Ctrl-C on finetune: one line saying what OUT keeps (fairseq's last checkpoint, its
    epoch and updates) and how to continue (issue 31, item 6)."""
    from nmtfrag.cli import main

    out = str(tmp_path / "ft")
    plain_emit = finetune_module.LogCapture.emit

    def ctrl_c_after_the_first_save(self, record):
        plain_emit(self, record)
        if self.saved:
            raise KeyboardInterrupt

    monkeypatch.setattr(finetune_module.LogCapture, "emit", ctrl_c_after_the_first_save)
    capsys.readouterr()
    assert main(_ctrl_c_argv(tiny_model_dir, data, out)) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"error: interrupted: {out} keeps the run's last checkpoint (epoch 1, "
                       f"4 updates), checkpoints/checkpoint_last.pt; continue with --resume "
                       f"(the same command and options)")
    monkeypatch.undo()
    assert main(_ctrl_c_argv(tiny_model_dir, data, out) + ["--resume"]) == 0
    assert json.load(open(os.path.join(out, "manifest.json")))["result"]["num_updates"] == 8


def test_ctrl_c_before_the_first_checkpoint_says_nothing_is_kept(tiny_model_dir, data,
                                                                 tmp_path, monkeypatch,
                                                                 capsys):
    from nmtfrag.cli import main

    out = str(tmp_path / "ft")

    def ctrl_c(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(finetune_module, "run_fairseq_train", ctrl_c)
    capsys.readouterr()
    assert main(_ctrl_c_argv(tiny_model_dir, data, out)) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: interrupted: {out} holds no checkpoint of the run yet (one is saved every "
        f"2 minutes of training (longer where saving is slow), at the end of each epoch, "
        f"or every --validate-every "
        f"updates): run the same command again, without --resume, to start over")
    monkeypatch.undo()
    assert main(_ctrl_c_argv(tiny_model_dir, data, out)) == 0  # as the line says
