"""What `finetune --dp` ships must keep its guarantee: secret noise, no non-DP side
outputs, no corpus left in OUT after a kill, a data-independent model shape, composed
certificates, refusals of wrong units and of δ ≥ 1/n."""
import json
import os
import re
import signal
import shutil
import stat
import subprocess
import sys
import time

import pytest
import torch

from nmtfrag.cli import main
from nmtfrag.fileio import sha256_file

torch.set_num_threads(1)
SHIPPED = {"model.pt", "dict.de.txt", "dict.en.txt", "bpecodes", "privacy.json",
           "manifest.json", "owner"}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from tinymodel import make_corpus, make_tiny_model_dir, write_parallel

    root = tmp_path_factory.mktemp("dpguard")
    base = make_tiny_model_dir(str(root / "base"), updates=2)
    pairs = make_corpus(60, seed=21)
    write_parallel(pairs, str(root / "train"))
    write_parallel(make_corpus(8, seed=22), str(root / "valid"))
    write_parallel(pairs[:-1] + [("<P> haus </P>", "<P> house </P>")], str(root / "tagged"))
    return root, base, pairs


def dp_argv(root, model, out, *extra, train="train", steps="2"):
    return ["finetune", "--model", str(model), "--train", str(root / f"{train}.de"),
            str(root / f"{train}.en"), "--valid-src", str(root / "valid.de"),
            "--valid-tgt", str(root / "valid.en"), "--out", str(root / out),
            "--pretokenized", "--threads", "1", "-q", "--dp", "--delta", "1e-3",
            "--noise-multiplier", "2.0", "--sample-rate", "0.33", "--physical-batch", "20",
            "--dp-steps", steps, "--dp-freeze-embeddings", "--overwrite", *extra]


def weights(out):
    return torch.load(os.path.join(out, "model.pt"), map_location="cpu",
                      weights_only=False)["model"]


def test_unseeded_runs_draw_secret_noise_and_seeded_runs_repeat(setup, capsys):
    root, base, _ = setup
    for name, extra in (("a", ()), ("b", ()), ("s1", ("--seed", "3")), ("s2", ("--seed", "3"))):
        assert main(dp_argv(root, base, name, *extra)) == 0
    key = "decoder.layers.0.fc1.weight"
    assert not torch.equal(weights(root / "a")[key], weights(root / "b")[key])
    assert torch.equal(weights(root / "s1")[key], weights(root / "s2")[key])
    shipped = json.loads((root / "a" / "manifest.json").read_text())
    assert shipped["randomness"]["private"] is True
    seeded = json.loads((root / "s1" / "manifest.json").read_text())
    assert seeded["randomness"]["private"] is False
    assert json.loads((root / "s1" / "privacy.json").read_text())[
        "training"]["randomness"]["private"] is False
    owner = json.loads((root / "s1" / "owner" / "manifest.json").read_text())
    assert owner["randomness"]["seed"] == 3


def test_shipped_files_hold_nothing_non_private(setup):
    root, base, pairs = setup
    out = root / "a"
    if not (out / "manifest.json").exists():
        assert main(dp_argv(root, base, "a")) == 0
    assert set(os.listdir(out)) == SHIPPED
    owner = out / "owner"
    assert set(os.listdir(owner)) == {"manifest.json", "train.log"}
    assert stat.S_IMODE(os.stat(owner).st_mode) == 0o700
    for f in os.listdir(owner):
        assert stat.S_IMODE(os.stat(owner / f).st_mode) == 0o600
    for name in ("manifest.json", "privacy.json"):
        text = (out / name).read_text()
        # no SHA-256 of an input: the only hashes are the shared files' own (they bind
        # the certificate to them)
        own = {sha256_file(str(out / f)) for f in SHIPPED
               if f not in ("manifest.json", "privacy.json") and (out / f).is_file()}
        assert set(re.findall(r"\b[0-9a-f]{64}\b", text)) <= own, name
        for p in ("train.de", "train.en", "valid.de", "valid.en", str(root)):
            assert p not in text, (name, p)
        for key in ("skipped", "seed", "valid_loss", "snr", "mean_examples"):
            assert f'"{key}' not in text, (name, key)
    owner_man = json.loads((owner / "manifest.json").read_text())
    assert re.fullmatch(r"[0-9a-f]{64}", owner_man["inputs_sha256"]["train_src"])
    log = [json.loads(ln) for ln in (owner / "train.log").read_text().splitlines()]
    assert len(log) == 2 and "snr" in log[0]


def test_kill_9_leaves_no_corpus_in_out(setup, tmp_path):
    root, base, pairs = setup
    out = root / "killed"
    env = dict(os.environ, TMPDIR=str(tmp_path), OMP_NUM_THREADS="1")
    argv = dp_argv(root, base, "killed", steps="100000")
    proc = subprocess.Popen([sys.executable, "-m", "nmtfrag", *argv], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = out / "owner" / "train.log"
    deadline = time.time() + 120
    while time.time() < deadline and not (log.exists() and log.read_text().count("\n") >= 1):
        assert proc.poll() is None, "the DP run ended before it could be killed"
        time.sleep(0.2)
    work = [d for d in os.listdir(tmp_path) if d.startswith("nmtfrag-dp-")]
    assert work, "the private work dir should be in TMPDIR while training"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # nothing of the corpus in OUT: no work dir, no text, no binaries
    found = []
    for dirpath, dirs, files in os.walk(out):
        found += [os.path.relpath(os.path.join(dirpath, f), out) for f in dirs + files]
    # owner-only: the step log, and the resumable state (nmtfrag.dp.resume) if saved:
    # the run's identity, its DP unit count ñ, the training state, and the temp file of
    # a save the kill interrupted (fileio.atomic_writer; removed by the next run); the
    # killed run's OUT lock (its pid only: outlock.lock_output_dir)
    partial = {f for f in found if f.startswith(os.path.join("owner", ".tmp-"))}
    if ".nmtfrag.lock" in found:
        assert (out / ".nmtfrag.lock").read_text().strip().isdigit()
    assert set(found) - partial <= {"owner", ".nmtfrag.lock", os.path.join("owner", "train.log"),
                          os.path.join("owner", "dp-run.json"),
                          os.path.join("owner", "dp-count.json"),
                          os.path.join("owner", "dp-state.pt")}
    sentence = pairs[0][0]
    for dirpath, _, files in os.walk(out):
        for f in files:
            assert sentence not in open(os.path.join(dirpath, f), errors="ignore").read()
    # a rerun into the same OUT finishes with only the shipped files
    assert main(dp_argv(root, base, "killed")) == 0
    assert set(os.listdir(out)) == SHIPPED
    assert not [f for f in os.listdir(out / "owner") if f.startswith(".tmp-")]
    shutil.rmtree(os.path.join(tmp_path, work[0]), ignore_errors=True)


def test_model_shape_depends_on_flags_not_data(setup, capsys):
    root, base, _ = setup
    rows = {}
    assert main(dp_argv(root, base, "plain")) == 0
    rows["plain"] = weights(root / "plain")["encoder.embed_tokens.weight"].shape[0]
    # one tagged pair without --tags: refused, no model whose shape reveals it
    assert main(dp_argv(root, base, "tagged-refused", train="tagged")) == 2
    assert "--tags" in capsys.readouterr().err
    assert not (root / "tagged-refused" / "model.pt").exists()
    for name, train in (("tags-plain", "train"), ("tags-tagged", "tagged")):
        assert main(dp_argv(root, base, name, "--tags", train=train)) == 0
        rows[name] = weights(root / name)["encoder.embed_tokens.weight"].shape[0]
    assert rows["tags-plain"] == rows["tags-tagged"] == rows["plain"] + 2


def test_sequential_dp_runs_compose_and_non_dp_base_warns(setup, capsys):
    root, base, _ = setup
    assert main(dp_argv(root, base, "dp1")) == 0
    assert main(dp_argv(root, root / "dp1", "dp2")) == 0
    p1 = json.loads((root / "dp1" / "privacy.json").read_text())
    p2 = json.loads((root / "dp2" / "privacy.json").read_text())
    e1, e2 = p1["training"]["epsilon"], p2["training"]["epsilon"]
    assert len(p2["earlier_training"]) == 1
    assert p2["total"]["epsilon"] == pytest.approx(e1 + e2, rel=1e-6)
    assert p2["total"]["delta"] == pytest.approx(2e-3)
    capsys.readouterr()
    assert main(["privacy", str(root / "dp2"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"]["epsilon"] == pytest.approx(e1 + e2)
    # a base fine-tuned without DP: certified with a warning, said twice
    nondp = root / "nondp"
    shutil.copytree(base, nondp, dirs_exist_ok=True)
    (nondp / "manifest.json").write_text(json.dumps({"kind": "nmtfrag-finetuned-model",
                                                     "dp": False}))
    assert main(dp_argv(root, nondp, "dp3")) == 0
    assert "WITHOUT differential privacy" in capsys.readouterr().err
    assert "WITHOUT" in json.loads((root / "dp3" / "privacy.json").read_text())[
        "base_model"]["warning"]
    assert main(["privacy", str(root / "dp3")]) == 0
    assert "warning" in capsys.readouterr().out


def test_dp_on_a_release_is_refused(setup, capsys):
    root, base, _ = setup
    rel = root / "release"
    rel.mkdir(exist_ok=True)
    shutil.copy(root / "train.de", rel / "phrases.de")
    shutil.copy(root / "train.en", rel / "phrases.en")
    (rel / "manifest.json").write_text(json.dumps({"kind": "nmtfrag-release",
                                                   "params": {"pretokenized": True}}))
    argv = dp_argv(root, base, "fromrelease")
    i = argv.index("--train")
    argv[i + 1:i + 3] = [str(rel)]
    assert main(argv) == 2
    assert "release" in capsys.readouterr().err


def test_dedup_changes_the_unit(setup):
    root, base, _ = setup
    assert main(dp_argv(root, base, "dedup", "--dedup")) == 0
    t = json.loads((root / "dedup" / "privacy.json").read_text())["training"]
    assert "distinct" in t["unit"]
    if not (root / "plain" / "privacy.json").exists():
        assert main(dp_argv(root, base, "plain")) == 0
    plain = json.loads((root / "plain" / "privacy.json").read_text())["training"]
    assert "group" in plain["unit"]


@pytest.mark.parametrize("extra,msg", [
    (["--delta", "0.5", "--n-examples", "100"], "1/n"),
    (["--delta", "1e-5"], "--n-examples"),
    (["--delta", "0", "--n-examples", "100"], "(0, 1)"),
])
def test_plan_mode_refuses_delta_outside_0_1_over_n(capsys, extra, msg):
    assert main(["privacy", "--noise-multiplier", "1", "--sample-rate", "0.01",
                 "--steps", "10", *extra]) == 2
    err = capsys.readouterr().err
    assert msg in err and "ε = -" not in err


def test_epsilon_is_never_negative():
    from nmtfrag.dp import accounting

    # before the clamp, RDP conversion gave ε < 0 here (δ large, little composition)
    assert accounting.epsilon([(50.0, 0.01, 10)], 0.4, "rdp") >= 0.0


def test_a_dp_run_without_validation_reads_none_and_trains_the_same_model(setup):
    """--no-validation under --dp: no validation loss is measured and no validation file
    is named, and the model is the one a validating run with the same seed trains (a DP
    run never chooses by its validation set: the study's DP cells read none)."""
    root, base, _ = setup
    assert main(dp_argv(root, base, "validating", "--seed", "4")) == 0
    argv = dp_argv(root, base, "blind", "--seed", "4", "--no-validation")
    k = argv.index("--valid-src")
    del argv[k:k + 4]
    assert main(argv) == 0
    a, b = weights(root / "validating"), weights(root / "blind")
    assert a.keys() == b.keys() and all(torch.equal(a[n], b[n]) for n in a)
    owner = json.loads((root / "blind" / "owner" / "manifest.json").read_text())
    assert owner["params"]["valid_src"] is None and owner["params"]["valid_tgt"] is None
    assert owner["result"]["valid_loss_before"] is None
    assert owner["result"]["valid_loss_after"] is None
    cert = json.loads((root / "blind" / "privacy.json").read_text())
    assert cert["training"]["epsilon"] == json.loads(
        (root / "validating" / "privacy.json").read_text())["training"]["epsilon"]
