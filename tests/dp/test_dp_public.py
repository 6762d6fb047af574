"""DP-SGD with public pairs in every logical batch: the same ε as without them (their
gradient reads nothing private), the certificate names them by hash, the model moves
differently, and the public pairs of a step depend on the step alone (a resumed run takes
the same ones)."""
import glob
import json
import os

import numpy as np
import pytest
import torch

from nmtfrag.cli import main
from nmtfrag.dp.batches import PublicBatches
from nmtfrag.errors import InputError
from nmtfrag.fileio import sha256_file
from nmtfrag.model_dir import load_state
from test_dp_sgd import _argv, tiny, tiny_dir  # noqa: F401 (fixtures)
from tinymodel import make_corpus, write_parallel

torch.set_num_threads(1)
DP = ("--target-epsilon", "3", "--delta", "1e-3", "--logical-batch", "20",
      "--physical-batch", "8", "--dp-steps", "3", "--seed", "4")


def test_public_pairs_leave_epsilon_unchanged_and_are_named_in_the_certificate(
        tiny_dir, tmp_path):
    root, base = tiny_dir
    public = write_parallel(make_corpus(200, seed=33, min_len=5, max_len=12),
                            str(tmp_path / "public"))
    assert main(_argv(root, base, "plain", *DP)) == 0
    assert main(_argv(root, base, "mixed", *DP, "--dp-public-train", str(tmp_path / "public"),
                      "--dp-public-batch", "10", "--dp-public-weight", "0.5")) == 0
    plain = json.loads((root / "plain" / "privacy.json").read_text())
    mixed = json.loads((root / "mixed" / "privacy.json").read_text())
    assert mixed["total"]["epsilon"] == plain["total"]["epsilon"]
    assert mixed["training"]["history"] == plain["training"]["history"]
    pub = mixed["training"]["public_data"]
    assert pub["pairs_per_step"] == 10 and pub["weight"] == 0.5
    assert pub["sha256"] == {"de": sha256_file(public[0]), "en": sha256_file(public[1])}
    assert "public_data" not in plain["training"]
    # the same seed, the same private sample and noise: only the public pairs differ
    a = load_state(str(root / "plain" / "model.pt"))["model"]
    b = load_state(str(root / "mixed" / "model.pt"))["model"]
    assert any(not torch.equal(a[k], b[k]) for k in a)
    steps = [json.loads(ln) for ln in
             (root / "mixed" / "owner" / "train.log").read_text().splitlines() if ln.strip()]
    assert all(s["public_weight"] == pytest.approx(5.0) for s in steps)


def test_a_public_only_control_trains_on_its_public_pairs_and_no_owner_pair(
        tiny_dir, tmp_path, capsys):
    """--dp-public-only: the planned steps with the public pairs alone (σ = 0, no private
    signal), so other owner pairs of the same count give the same weights; no
    certificate, and the manifest says why."""
    root, base = tiny_dir
    write_parallel(make_corpus(200, seed=33, min_len=5, max_len=12), str(tmp_path / "public"))
    other = write_parallel(make_corpus(120, seed=77), str(tmp_path / "other"))
    pub = ("--dp-public-train", str(tmp_path / "public"), "--dp-public-batch", "10")
    assert main(_argv(root, base, "ctl-a", *DP, *pub, "--dp-public-only")) == 0
    assert "public-only control: not private" in capsys.readouterr().err
    argv = _argv(root, base, "ctl-b", *DP, *pub, "--dp-public-only")
    at = argv.index("--train")
    argv[at + 1:at + 3] = list(other)
    assert main(argv) == 0
    assert main(_argv(root, base, "mixed-pub", *DP, *pub)) == 0
    steps = [json.loads(ln) for ln in
             (root / "ctl-a" / "owner" / "train.log").read_text().splitlines() if ln.strip()]
    assert len(steps) == 3
    assert all(s["signal_norm"] == 0 and s["noise_norm"] == 0 and s["public_norm"] > 0
               for s in steps)
    a = load_state(str(root / "ctl-a" / "model.pt"))["model"]
    b = load_state(str(root / "ctl-b" / "model.pt"))["model"]
    m = load_state(str(root / "mixed-pub" / "model.pt"))["model"]
    start = load_state(sorted(glob.glob(os.path.join(base, "model*.pt")))[0])
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], m[k]) for k in a)
    assert any(not torch.equal(a[k], start["model"][k]) for k in a)  # the public pairs moved it
    assert not (root / "ctl-a" / "privacy.json").exists()
    man = json.loads((root / "ctl-a" / "manifest.json").read_text())
    assert man["not_private"]["not_private"] == "public-only control: not private"
    assert "public pairs alone" in man["not_private"]["why"]
    assert man["not_private"]["trained"]["logical_batch"] == 0
    assert man["shareable"].startswith("nothing: public-only control: not private (planned on")
    assert main(_argv(root, base, "bad", *DP, "--dp-public-only")) == 2
    assert "--dp-public-only needs --dp-public-train" in capsys.readouterr().err


def test_public_options_go_together_and_only_with_dp(tiny_dir, tmp_path, capsys):
    root, base = tiny_dir
    assert main(_argv(root, base, "x", *DP, "--dp-public-batch", "4")) == 2
    assert "--dp-public-train" in capsys.readouterr().err
    argv = [a for a in _argv(root, base, "y") if a != "--dp"]
    assert main(argv + ["--max-updates", "1", "--dp-public-train", str(root / "train")]) == 2
    assert "--public-train" in capsys.readouterr().err
    assert main(argv + ["--max-updates", "1", "--dp-public-only"]) == 2
    assert "--dp-public-only are DP-SGD's (with --dp)" in capsys.readouterr().err


def test_a_steps_public_rows_depend_on_the_step_alone(tiny):
    ds = tiny[1]
    a = PublicBatches(ds, batch=4, weight=1.0)
    b = PublicBatches(ds, batch=4, weight=1.0)
    assert [a.rows_of_step(t) for t in range(6)] == [b.rows_of_step(t) for t in range(6)]
    first = np.concatenate([a.rows_of_step(t) for t in range(len(ds) // 4)])
    assert len(set(first.tolist())) == len(first)  # a cycle uses each row once
    with pytest.raises(InputError):
        PublicBatches(ds, batch=0, weight=1.0)


def test_a_share_of_the_corpus_keeps_the_plan_and_trains_on_about_that_share(
        tiny_dir, tmp_path):
    """The DP-SGD data-size curve: --train-fraction keeps each pair with that probability
    (seeded); the plan (rate, steps) does not change, the units do."""
    from nmtfrag.train.data import keep_fraction

    root, base = tiny_dir
    plan = ("--target-epsilon", "3", "--delta", "1e-3", "--sample-rate", "0.2",
            "--physical-batch", "8", "--dp-steps", "2", "--allow-few-units")
    assert main(_argv(root, base, "all", *plan)) == 0
    assert main(_argv(root, base, "half", *plan, "--train-fraction", "0.5")) == 0
    full = json.loads((root / "all" / "owner" / "manifest.json").read_text())
    half = json.loads((root / "half" / "owner" / "manifest.json").read_text())
    assert 0.3 < half["units"]["n"] / full["units"]["n"] < 0.7
    a = json.loads((root / "all" / "privacy.json").read_text())["training"]["history"]
    b = json.loads((root / "half" / "privacy.json").read_text())["training"]["history"]
    assert [h[1:] for h in a] == [h[1:] for h in b]
    # which lines it trained on, for a membership audit's members: the owner's folder only
    trained = [int(x) for x in (root / "half" / "owner" / "trained-lines.txt").read_text()
               .split()]
    assert len(trained) == half["units"]["n"] and trained == sorted(set(trained))
    corpus = (root / "train.de").read_text().splitlines()
    expected = keep_fraction([(x, x) for x in corpus], list(range(len(corpus))), 0.5,
                             seed=1)[1]  # unseeded DP run: the subset's public seed 1
    assert trained == expected
    assert "owner/trained-lines.txt" in json.loads(
        (root / "half" / "manifest.json").read_text())["owner_only"]
    assert not (root / "all" / "owner" / "trained-lines.txt").exists()
    # the same OUT trained again on the whole corpus keeps no stale line list
    assert main(_argv(root, base, "half", *plan, "--overwrite")) == 0
    assert not (root / "half" / "owner" / "trained-lines.txt").exists()
    pairs = [(str(i), str(i)) for i in range(1000)]
    kept, lines = keep_fraction(pairs, list(range(1000)), 0.25, seed=1)
    assert kept == keep_fraction(pairs, list(range(1000)), 0.25, seed=1)[0]
    assert 200 < len(kept) < 300 and lines == [int(p[0]) for p in kept]
    with pytest.raises(InputError):
        keep_fraction(pairs, list(range(1000)), 1.5, seed=1)
