"""Resumable DP runs: a run killed after step k and resumed ends with exactly the
parameters, privacy history and step log of an uninterrupted run with the same seed;
its saved state is owner-only and gone once the run finishes; a resume with other
settings, or of a finished run, is refused."""
import json
import os
import signal
import stat

import pytest
import torch

from nmtfrag.dp import resume
from nmtfrag.dp.engine import DPConfig, FineTuneJob, dp_finetune
from nmtfrag.errors import InputError
from test_dp_sgd import tiny_dir  # noqa: F401 (fixture)

torch.set_num_threads(1)


def _job(root, base, out, **kw):
    return FineTuneJob(model=base, train=(str(root / "train.de"), str(root / "train.en")),
                       valid_src=str(root / "valid.de"), valid_tgt=str(root / "valid.en"),
                       out=str(out), pretokenized=True, threads=1, quiet=True, **kw)


def _config(**kw):
    # dropout stays on (FineTuneJob's 0.2): the global torch generator must resume too
    return DPConfig(**dict(dict(delta=1e-3, noise_multiplier=1.0, sample_rate=0.25,
                                physical_batch=16, steps=5, seed=3, lr=1e-3), **kw))


def _log(out):
    recs = [json.loads(ln) for ln in (out / "owner" / "train.log").read_text().splitlines()]
    for r in recs:
        r.pop("seconds")  # wall time: the only field allowed to differ
    return recs


def _state(out):
    from nmtfrag.model_dir import load_state

    return load_state(str(out / "model.pt"))["model"]


def test_killed_and_resumed_run_equals_an_uninterrupted_one(tiny_dir, tmp_path,
                                                            monkeypatch):
    root, base = tiny_dir
    dp_finetune(_job(root, base, tmp_path / "whole", save_every=2), _config())
    assert not os.path.exists(resume.state_path(str(tmp_path / "whole")))  # finished

    cut = tmp_path / "cut"
    monkeypatch.setattr(resume.Checkpointer, "stop_after", 3)  # killed after step 3
    with pytest.raises(resume.Interrupted):
        dp_finetune(_job(root, base, cut, save_every=2), _config())
    state = resume.state_path(str(cut))
    assert os.path.isfile(state) and not (cut / "manifest.json").exists()
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o600
    assert torch.load(state, weights_only=False)["step"] == 2  # step 3 must be redone
    assert len(_log(cut)) == 3

    monkeypatch.setattr(resume.Checkpointer, "stop_after", None)
    with pytest.raises(InputError, match="interrupted DP run: pass --resume"):
        dp_finetune(_job(root, base, cut), _config())
    with pytest.raises(InputError, match=r"config\.lr: was 0\.001, now 0\.002"):
        dp_finetune(_job(root, base, cut, resume=True), _config(lr=2e-3))
    with pytest.raises(InputError, match=r"config\.seed: was 3, now 4"):
        dp_finetune(_job(root, base, cut, resume=True), _config(seed=4))
    from nmtfrag.dp import unit_count

    def drawn_again(*a, **k):
        raise AssertionError("a resumed run must reuse the DP unit count it drew")

    monkeypatch.setattr(unit_count, "noisy_count", drawn_again)
    summary = dp_finetune(_job(root, base, cut, resume=True, save_every=2), _config())

    whole, again = _state(tmp_path / "whole"), _state(cut)
    assert whole.keys() == again.keys()
    assert all(torch.equal(whole[k], again[k]) for k in whole)
    assert _log(cut) == _log(tmp_path / "whole")
    cert = [json.loads((d / "privacy.json").read_text())["training"]
            for d in (tmp_path / "whole", cut)]
    n_hat = [json.loads((d / "owner" / "manifest.json").read_text())["units"]["noisy_count"]
             for d in (tmp_path / "whole", cut)]
    assert cert[1]["unit_count"]["planning_count"] == unit_count.planning_count(n_hat[1], 1)
    assert cert[0]["history"] == cert[1]["history"] == [
        [unit_count.COUNT_NOISE, 1.0, 1], [1.0, 0.25, 5]]  # --sample-rate 0.25
    assert cert[0]["epsilon"] == cert[1]["epsilon"] == summary["epsilon"]
    assert not os.path.exists(state)  # the generator states do not outlive the run
    assert "dp-state.pt" not in json.loads((cut / "manifest.json").read_text())[
        "owner_only"]
    with pytest.raises(InputError, match="finished"):
        dp_finetune(_job(root, base, cut, resume=True), _config())


def test_a_dp_run_into_a_finished_model_leaves_none_of_its_outputs(tiny_dir, tmp_path,
                                                                   monkeypatch):
    """--overwrite into a finished model (here one trained without DP): a DP run killed
    before it wrote its own model leaves no file of the model it replaces beside its
    resume state (a model.pt there would pass for this run's); a refused run, none
    removed."""
    from nmtfrag.train.data import MODEL_KIND

    root, base = tiny_dir
    out = tmp_path / "ft"
    (out / "owner").mkdir(parents=True)
    (out / "manifest.json").write_text(json.dumps({"kind": MODEL_KIND}))
    for name in ("model.pt", "train.log", "owner/trained-lines.txt"):
        (out / name).write_text("stale")
    with pytest.raises(InputError, match="nothing to resume"):  # refused: kept whole
        dp_finetune(_job(root, base, out, resume=True, overwrite=True), _config())
    assert (out / "model.pt").read_text() == "stale" and (out / "manifest.json").exists()
    monkeypatch.setattr(resume.Checkpointer, "stop_after", 1)
    with pytest.raises(resume.Interrupted):
        dp_finetune(_job(root, base, out, overwrite=True, save_every=1), _config())
    left = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert not left & {"manifest.json", "model.pt", "train.log", "owner/trained-lines.txt"}
    assert os.path.isfile(resume.state_path(str(out)))  # the interrupted run's own state


def test_resume_needs_an_interrupted_run(tiny_dir, tmp_path):
    root, base = tiny_dir
    with pytest.raises(InputError, match="no interrupted DP run"):
        dp_finetune(_job(root, base, tmp_path / "none", resume=True), _config())


def test_identity_differences_name_each_setting():
    a = {"config": {"lr": 1, "params": {"kind": "all"}}, "inputs_sha256": {"train": "x"}}
    b = {"config": {"lr": 2, "params": {"kind": "lora"}}, "inputs_sha256": {"train": "x"}}
    assert resume.identity_differences(a, b) == [
        "config.lr: was 1, now 2", "config.params.kind: was 'all', now 'lora'"]
    assert resume.identity_differences(a, a) == []
    # a setting added to the code since the run was saved: the same at its default only
    c = {**a, "config": {**a["config"], "public_only": False}}
    assert resume.identity_differences(a, c, {"config.public_only": False}) == []
    assert resume.identity_differences(a, c) == [
        "config.public_only: was None, now False"]
    d = {**a, "config": {**a["config"], "public_only": True}}
    assert resume.identity_differences(a, d, {"config.public_only": False}) == [
        "config.public_only: was None, now True"]
    assert resume.identity_differences(c, a, {"config.public_only": False}) == [
        "config.public_only: was False, now None"]


def test_setting_defaults_are_the_configs_plain_defaults():
    from nmtfrag.dp.config import DPConfig

    defaults = resume.setting_defaults(DPConfig(delta=1e-5, target_epsilon=8.0))
    assert defaults["config.public_only"] is False and defaults["config.public_batch"] == 0
    assert "config.delta" not in defaults  # no default: always named


# --- a run stopped by SIGINT/SIGTERM saves its last whole step (issue 31, item 6) --------

def _stop_during_step(monkeypatch, step, stop):
    """Call `stop()` in the first physical batch of noisy step `step` (1-based): after
    that step's Poisson sample is drawn and before its update, as a signal would."""
    from nmtfrag.dp import sgd

    drawn, plain_draw, plain_accumulate = [0], sgd.poisson_indices, sgd.DPSGD.accumulate

    def draw(*a, **k):
        drawn[0] += 1
        return plain_draw(*a, **k)

    def accumulate(self, *a, **k):
        if drawn[0] == step:
            drawn[0] = -1  # once
            stop()
        return plain_accumulate(self, *a, **k)

    monkeypatch.setattr(sgd, "poisson_indices", draw)
    monkeypatch.setattr(sgd.DPSGD, "accumulate", accumulate)


def _same_run(a, b):
    sa, sb = _state(a), _state(b)
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    assert _log(a) == _log(b)
    ca, cb = (json.loads((d / "privacy.json").read_text())["training"] for d in (a, b))
    assert ca["history"] == cb["history"] and ca["epsilon"] == cb["epsilon"]


@pytest.fixture(scope="module")
def whole_run(tiny_dir, tmp_path_factory):
    """The uninterrupted run the stopped ones must end as (dropout on, seed 3)."""
    root, base = tiny_dir
    out = tmp_path_factory.mktemp("whole") / "out"
    dp_finetune(_job(root, base, out), _config())
    return out


@pytest.mark.parametrize("stopped_in", [1, 3])
def test_ctrl_c_before_the_first_save_keeps_the_last_whole_step(tiny_dir, whole_run,
                                                                tmp_path, monkeypatch,
                                                                stopped_in):
    root, base = tiny_dir
    cut = tmp_path / "cut"

    def ctrl_c():
        raise KeyboardInterrupt  # what Python's SIGINT handler raises

    _stop_during_step(monkeypatch, stopped_in, ctrl_c)
    with pytest.raises(KeyboardInterrupt) as stopped:  # saving every 10 steps: none yet
        dp_finetune(_job(root, base, cut, save_every=10), _config())
    monkeypatch.undo()
    done = stopped_in - 1
    state = torch.load(resume.state_path(str(cut)), weights_only=False)
    assert state["step"] == done and len(state["records"]) == len(_log(cut)) == done
    assert state["history"] == ([[1.0, 0.25, done]] if done else [])  # the steps taken
    assert stat.S_IMODE(os.stat(resume.state_path(str(cut))).st_mode) == 0o600
    note = stopped.value.nmtfrag_note
    assert note == (f"{cut} keeps the DP run's state at step {done} of 5; continue with "
                    f"--resume (the same command and options)")
    dp_finetune(_job(root, base, cut, resume=True), _config())
    _same_run(cut, whole_run)  # the stopped step's sample, dropout and noise drawn again


def test_sigterm_waits_for_the_update_and_the_cli_says_what_out_keeps(
        tiny_dir, whole_run, tmp_path, monkeypatch, capsys):
    """SIGTERM during a step's update (noise, optimizer step) takes effect once the step
    is whole: the run saves that step and `finetune --dp` says so; --resume finishes it
    as the uninterrupted run."""
    import signal

    from nmtfrag.cli import main
    from nmtfrag.dp import sgd

    root, base = tiny_dir
    argv = ["finetune", "--model", base, "--train", str(root / "train.de"),
            str(root / "train.en"), "--valid-src", str(root / "valid.de"), "--valid-tgt",
            str(root / "valid.en"), "--pretokenized", "--threads", "1", "-q", "--dp",
            "--delta", "1e-3", "--noise-multiplier", "1", "--sample-rate", "0.25",
            "--physical-batch", "16", "--dp-steps", "5", "--seed", "3"]
    assert main(argv + ["--out", str(tmp_path / "whole")]) == 0
    plain_step, steps = sgd.DPSGD.step, [0]

    def step_killed_in_its_update(self):
        steps[0] += 1
        if steps[0] == 3:
            os.kill(os.getpid(), signal.SIGTERM)  # nmtfrag.cli: SystemExit(143)
        return plain_step(self)

    monkeypatch.setattr(sgd.DPSGD, "step", step_killed_in_its_update)
    capsys.readouterr()
    cut = tmp_path / "cut"
    with pytest.raises(SystemExit) as stopped:
        main(argv + ["--out", str(cut)])
    monkeypatch.undo()
    assert stopped.value.code == 128 + signal.SIGTERM
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"error: interrupted: {cut} keeps the DP run's state at step 3 of 5; "
                       f"continue with --resume (the same command and options)")
    assert torch.load(resume.state_path(str(cut)), weights_only=False)["step"] == 3
    assert main(argv + ["--out", str(cut), "--resume"]) == 0
    _same_run(cut, tmp_path / "whole")


def test_a_second_signal_stops_at_once_keeping_the_last_saved_state(tiny_dir, tmp_path,
                                                                     monkeypatch):
    from nmtfrag.dp import sgd

    root, base = tiny_dir
    cut = tmp_path / "cut"
    plain_step, steps = sgd.DPSGD.step, [0]

    def step_asked_twice(self):
        steps[0] += 1
        if steps[0] == 3:
            signal.raise_signal(signal.SIGINT)  # held until the update is whole ...
            signal.raise_signal(signal.SIGINT)  # ... unless asked again: stop now
        return plain_step(self)

    monkeypatch.setattr(sgd.DPSGD, "step", step_asked_twice)
    # Python's Ctrl-C handler, whatever this process inherited: a shell without job
    # control starts a background command (`pytest … &`) with SIGINT ignored
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt) as stopped:
            dp_finetune(_job(root, base, cut, save_every=2), _config())
    finally:
        signal.signal(signal.SIGINT, inherited)
    # step 3 was left half-done: nothing of it is saved, the state is step 2's
    assert torch.load(resume.state_path(str(cut)), weights_only=False)["step"] == 2
    assert "state at step 2 of 5" in stopped.value.nmtfrag_note


def test_a_run_stopped_before_training_says_there_is_nothing_to_resume(tiny_dir, tmp_path,
                                                                      monkeypatch):
    from nmtfrag.dp import engine

    root, base = tiny_dir

    def ctrl_c(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "set_up_model", ctrl_c)
    with pytest.raises(KeyboardInterrupt) as stopped:
        dp_finetune(_job(root, base, tmp_path / "cut"), _config())
    assert stopped.value.nmtfrag_note == (
        f"{tmp_path / 'cut'} holds no saved state of the DP run (it stopped before its "
        f"first noisy step, or --dp-save-every is 0): run the same command again, "
        f"without --resume, to start over")
    monkeypatch.undo()
    with pytest.raises(InputError, match="no interrupted DP run"):
        dp_finetune(_job(root, base, tmp_path / "cut", resume=True), _config(steps=1))
    dp_finetune(_job(root, base, tmp_path / "cut"), _config(steps=1))  # starts over
    assert (tmp_path / "cut" / "manifest.json").is_file()


def test_resume_with_nothing_saved_starts_the_run_and_says_so(tiny_dir, tmp_path,
                                                               monkeypatch, capsys):
    """`finetune --dp --resume` into an OUT whose run stopped before its first save (or
    never began) starts it and says so (issue 31, item 6), reaching the planned ε; a
    finished run, or an OUT holding something else, is still refused."""
    from nmtfrag.cli import main
    from nmtfrag.dp import engine
    from test_dp_sgd import _argv

    root, base = tiny_dir

    def ctrl_c(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(engine, "set_up_model", ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        dp_finetune(_job(root, base, tmp_path / "cut"), _config())
    monkeypatch.undo()
    assert not os.path.exists(resume.state_path(str(tmp_path / "cut")))  # nothing saved
    argv = _argv(root, base, tmp_path / "cut", "--target-epsilon", "2", "--delta", "1e-3",
                 "--sample-rate", "0.25", "--physical-batch", "8", "--dp-steps", "2",
                 "--resume")
    capsys.readouterr()
    assert main(argv) == 0
    assert "holds no saved state" in capsys.readouterr().err
    priv = json.loads((tmp_path / "cut" / "privacy.json").read_text())
    assert priv["training"]["epsilon"] <= 2.0 and priv["training"]["epsilon"] > 1.9
    assert main(argv) == 2  # finished: nothing to resume
    assert "finished" in capsys.readouterr().err
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine\n")
    assert main(_argv(root, base, other, "--dp-steps", "2", "--resume")) == 2
    assert (other / "notes.txt").read_text() == "mine\n"  # never removed


# --- a resumed run keeps the σ it planned and the accountant that set it (item 8) ------

def _calibrated(**kw):
    return _config(**dict(dict(noise_multiplier=None, target_epsilon=8.0), **kw))


def _cut(root, base, out, monkeypatch, config):
    monkeypatch.setattr(resume.Checkpointer, "stop_after", 3)
    with pytest.raises(resume.Interrupted):
        dp_finetune(_job(root, base, out, save_every=2), config)
    monkeypatch.setattr(resume.Checkpointer, "stop_after", None)


def test_resume_keeps_the_recorded_accountant_and_sigma(tiny_dir, tmp_path, monkeypatch):
    """A run recorded with RDP calibration (the default before issue 31, item 8; its
    dp-count.json without σ) resumes with RDP and its σ when --accountant is left out,
    and is refused when another accountant is asked for; a run whose σ is saved resumes
    with that σ even if calibration would now give another."""
    from nmtfrag.dp import accounting

    root, base = tiny_dir
    old = tmp_path / "old"
    _cut(root, base, old, monkeypatch, _calibrated(accountant="rdp"))
    count = old / "owner" / "dp-count.json"
    saved = json.loads(count.read_text())
    assert saved["accountant"] == "rdp"
    sigma_rdp = saved.pop("noise_multiplier")
    count.write_text(json.dumps(saved))  # as an interrupted run of the earlier code left it
    with pytest.raises(InputError, match=r"config\.accountant: was 'rdp', now 'prv'"):
        dp_finetune(_job(root, base, old, resume=True), _calibrated())
    dp_finetune(_job(root, base, old, resume=True, save_every=2),
                _calibrated(accountant_given=False))  # --accountant left out
    cert = json.loads((old / "privacy.json").read_text())["training"]
    assert cert["accountant"] == "rdp" and cert["calibration"]["accountant"] == "rdp"
    assert cert["history"][1:] == [[sigma_rdp, 0.25, 5]]  # one σ throughout
    assert cert["epsilon"] == pytest.approx(cert["epsilon_all_accountants"]["rdp"])
    assert cert["epsilon"] <= 8.0

    new = tmp_path / "new"
    _cut(root, base, new, monkeypatch, _calibrated(accountant_given=False))
    sigma = json.loads((new / "owner" / "dp-count.json").read_text())["noise_multiplier"]
    assert sigma < sigma_rdp  # PRV: less noise for the same ε
    real = accounting.noise_multiplier_for
    monkeypatch.setattr(accounting, "noise_multiplier_for",
                        lambda *a, **k: real(*a, **k) * 1.5)  # calibration changed since
    summary = dp_finetune(_job(root, base, new, resume=True, save_every=2),
                          _calibrated(accountant_given=False))
    cert = json.loads((new / "privacy.json").read_text())["training"]
    assert cert["history"][1:] == [[sigma, 0.25, 5]] and summary["noise_multiplier"] == sigma
    assert cert["accountant"] == summary["accountant"] == "prv"
    assert cert["calibration"] == {"by": "calibrated to ε ≤ 8 with PRV, the upper end of "
                                         "its ε estimate", "accountant": "prv"}
    assert cert["epsilon"] == pytest.approx(cert["epsilon_all_accountants"]["prv"])
