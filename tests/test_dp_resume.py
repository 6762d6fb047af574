"""Resumable DP runs: a run killed after step k and resumed ends with exactly the
parameters, privacy history and step log of an uninterrupted run with the same seed;
its saved state is owner-only and gone once the run finishes; a resume with other
settings, or of a finished run, is refused."""
import json
import os
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
