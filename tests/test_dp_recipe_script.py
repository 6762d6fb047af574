"""scripts/dp_recipe.sh end to end on a tiny model: every cell trains for the same number
of passes, the table carries BLEU, the share of the reference's gain, ε of both
accountants and the DP statistics of each cell, a DP set-union release cell carries the
release's ε, and a cell's options cannot change under its name."""
import json
import math
import os
import subprocess

import pytest

from tinymodel import make_corpus, write_domain, write_parallel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CELLS = """# name, then nmtfrag finetune options
nonprivate-all  --lr 0.001
dp-lora   --dp --noise-multiplier 0.8 --dp-params lora --lora-rank 2 --dp-lr 0.01 --sample-rate 0.33 --dp-clipping ghost
dp-lora-sim --dp --noise-multiplier 0.8 --dp-params lora --lora-rank 2 --dp-lr 0.01 --logical-batch 60 --dp-simulate-batch 20
release8  --release-epsilon 8 --lr 0.001
"""


def _run(env, domain="toy"):
    return subprocess.run(["bash", os.path.join(ROOT, "scripts", "dp_recipe.sh"), domain],
                          env=env, capture_output=True, text=True)


@pytest.fixture(scope="module")
def study(tiny_model_dir, tmp_path_factory):
    data = write_domain(tmp_path_factory.mktemp("data"), "toy", (180, 20, 30), seed=20)
    runs = tmp_path_factory.mktemp("runs")
    cells = runs / "cells.txt"
    cells.write_text(CELLS)
    public = tmp_path_factory.mktemp("public") / "generic"
    write_parallel(make_corpus(300, seed=99), str(public))  # the release cell's aligner
    env = dict(os.environ, ALIGN_PUBLIC=str(public), OMP_NUM_THREADS="1", THREADS="1", DEVICE="cpu", MAX_TOKENS="600",
               DELTA="1e-3", TEST_LINES="20", MODEL=tiny_model_dir, DATA_ROOT=str(data),
               RUNS=str(runs), CELLS=str(cells), PASSES="2", ENGINE="fairseq")
    proc = _run(env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return runs / "toy", env, proc


def test_cells_train_the_same_passes_and_the_table_has_their_figures(study):
    out, _, proc = study
    # DP: 2 expected passes at the public rate 0.33: ceil(2 / 0.33) steps, no n needed
    cert = json.loads((out / "ft-dp-lora" / "privacy.json").read_text())["training"]
    assert cert["steps"] == math.ceil(2 / 0.33) and cert["history"][1][1] == 0.33
    assert "n_units" not in cert
    owner = json.loads((out / "ft-dp-lora" / "owner" / "manifest.json").read_text())
    assert owner["units"]["n"] == 180
    assert cert["clipping"].startswith("opacus ghost clipping")
    np_manifest = json.loads((out / "ft-nonprivate-all" / "manifest.json").read_text())
    assert np_manifest["params"]["max_epochs"] == 2
    assert np_manifest["result"]["epochs_completed"] == 2  # fairseq's iterator, at the end
    from nmtfrag.dp.study_table import table

    rows, md = table(str(out), "nonprivate-all")
    by = {r["name"]: r for r in rows}
    assert list(by) == ["baseline", "nonprivate-all", "dp-lora", "dp-lora-sim", "release8"]
    assert by["nonprivate-all"]["share_of_gain"] == pytest.approx(1.0)
    assert by["nonprivate-all"]["epochs"] == 2
    # a run made before the manifest recorded it: the last epoch fairseq's log validated
    from nmtfrag.dp import study_table

    assert study_table._epochs_in_log(str(out / "ft-nonprivate-all")) == 2
    base, ref = by["baseline"]["bleu"], by["nonprivate-all"]["bleu"]
    if ref != base:
        assert by["dp-lora"]["share_of_gain"] == pytest.approx(
            (by["dp-lora"]["bleu"] - base) / (ref - base))
    dp = by["dp-lora"]
    assert dp["epsilon_rdp"] == pytest.approx(cert["epsilon_all_accountants"]["rdp"])
    assert dp["epsilon_prv"] > 0 and dp["sigma"] == pytest.approx(0.8)
    assert 0 <= dp["clipped_share"] <= 1 and dp["snr_mean"] > 0
    assert dp["p_value"] is not None and not by["nonprivate-all"]["dp"]
    assert "| dp-lora | lora |" in proc.stdout and (out / "table.md").read_text() == md
    assert dp["steps"] == 7 and dp["epochs"] == pytest.approx(7 * 0.33)  # q = 0.33 each
    assert dp["cpu_hours"] > 0 and dp["mode"] == "private"
    assert "| dp-lora | lora | 0.01 |" in md and "| 7 × q 0.33 |" in md
    # the simulated cell: the planned steps (2 passes of batches of 60 over the DP count
    # ñ) on batches of 20 with σ·20/60, marked
    from nmtfrag.dp import unit_count

    sim = by["dp-lora-sim"]
    owner = json.loads((out / "ft-dp-lora-sim" / "owner" / "manifest.json").read_text())
    n_plan = unit_count.planning_count(owner["units"]["noisy_count"], 60)
    steps = math.ceil(2 * n_plan / 60)
    assert sim["mode"] == "simulation" and not sim["dp"] and sim["steps"] == steps
    assert sim["sigma"] == pytest.approx(0.8 * 20 / 60) and sim["logical_batch"] == 20
    assert sim["epochs"] == pytest.approx(steps * 20 / n_plan)
    assert f"| dp-lora-sim | lora | 0.01 | sim | 0.267 | {steps} × 20 |" in md
    assert not (out / "ft-dp-lora-sim" / "privacy.json").exists()


def test_rerun_skips_and_a_changed_cell_is_refused(study):
    out, env, _ = study
    before = (out / "ft-dp-lora" / "model.pt").stat().st_mtime_ns
    proc = _run(env)
    assert proc.returncode == 0 and "fine-tune" not in proc.stderr
    assert (out / "ft-dp-lora" / "model.pt").stat().st_mtime_ns == before
    changed = out.parent / "changed.txt"
    changed.write_text(CELLS.replace("--dp-lr 0.01", "--dp-lr 0.02"))
    proc = _run(dict(env, CELLS=str(changed)))
    assert proc.returncode == 2 and "cell dp-lora was run with" in proc.stderr


def test_a_cell_another_run_holds_is_refused_and_a_killed_runs_lock_is_not(study):
    out, env, _ = study
    import fcntl

    lock = out / ".lock-dp-lora"
    assert lock.exists()  # left by the finished runs above, and they did not refuse
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        proc = _run(env)
    assert proc.returncode == 2 and "cell dp-lora is being run by another" in proc.stderr
    (out / ".lock-dp-lora-sim").unlink()
    (out / ".lock-dp-lora-sim").mkdir()  # an older version's lock, its run killed
    proc = _run(env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (out / ".lock-dp-lora-sim").is_file()


def test_missing_settings_are_a_usage_error(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("MODEL", "DATA_ROOT")}
    proc = _run(env)
    assert proc.returncode != 0 and "set MODEL" in proc.stderr
    proc = _run(env, "--help")
    assert proc.returncode == 2 and "usage: scripts/dp_recipe.sh DOMAIN" in proc.stdout


def test_a_release_cell_trains_on_a_dp_release_and_shows_its_epsilon(study):
    out, env, _ = study
    cert = json.loads((out / "rel-release8" / "privacy.json").read_text())["total"]
    assert cert["epsilon"] == pytest.approx(8, rel=1e-3) and cert["delta"] == 1e-3
    owner = json.loads((out / "rel-release8" / "owner" / "manifest.json").read_text())
    assert owner["params"]["aligner"].startswith("public model")  # never the private corpus
    assert owner["public_aligner"]["align_model"] == os.path.join(env["RUNS"], "align-model")
    ft = json.loads((out / "ft-release8" / "manifest.json").read_text())
    assert ft["params"]["train_kind"] == "release" and ft["params"]["lr"] == 0.001
    assert ft["params"]["max_epochs"] == 2 and "--release-epsilon" not in json.dumps(ft)
    released = (out / "rel-release8" / "phrases.de").read_text().splitlines()
    assert all(line.startswith("<P> ") for line in released)
    from nmtfrag.dp.study_table import table

    rows, md = table(str(out), "nonprivate-all")
    row = {r["name"]: r for r in rows}["release8"]
    assert row["mode"] == "release" and row["epsilon_release"] == cert["epsilon"]
    assert row["release_pairs"] == ft["counts"]["train"]["pairs"] == len(released)
    assert f"| release8 | all on {len(released):,} released pairs | 0.001 | 8.00 (release) |" in md


def test_a_release_cell_needs_public_text_and_no_dp_sgd(study, tmp_path):
    out, env, _ = study
    cells = tmp_path / "cells.txt"
    cells.write_text("release1  --release-epsilon 1 --lr 0.001\n")
    proc = _run(dict(env, CELLS=str(cells), ALIGN_PUBLIC=""))
    assert proc.returncode == 2 and "needs ALIGN_PUBLIC" in proc.stderr
    cells.write_text("release1  --release-epsilon 1 --dp --noise-multiplier 1\n")
    proc = _run(dict(env, CELLS=str(cells)))
    assert proc.returncode == 2 and "drop --dp" in proc.stderr
    cells.write_text("release1  --release-epsilon 1 --lr 0.001\n")
    proc = _run(dict(env, CELLS=str(cells), FT_ARGS="--dp"))  # DP-SGD from FT_ARGS too
    assert proc.returncode == 2 and "drop --dp" in proc.stderr
    cells.write_text("release1  --release-epsilon=1 --lr 0.001\n")
    proc = _run(dict(env, CELLS=str(cells)))
    assert proc.returncode == 2 and "'--release-epsilon E'" in proc.stderr
    assert not (out / "rel-release1").exists()
