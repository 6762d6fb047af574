"""scripts/compare.sh and scripts/table2.sh end to end on a tiny model: every cell gets the
same update budget (one pass of the full-sentence cell), the report carries each cell's
figures, a rerun skips finished steps, and missing settings are a usage error."""
import json
import os
import re
import subprocess
import sys

import pytest

from tinymodel import make_corpus, write_domain, write_parallel

from nmtfrag.audit.runs_yaml import runs_spec

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CELLS = "len4 len4-tag sent dp-release dp-sgd"


def _env(**extra):
    env = dict(os.environ, OMP_NUM_THREADS="1", THREADS="1", DEVICE="cpu",
               MAX_TOKENS="600", DELTA="1e-4", SAMPLES="30", MI_PAIRS="40", CANARY_COUNT="1",
               CANARY_REPEATS="1,5", TEST_LINES="20", DP_ARGS="--dp-steps 3", BEAM="2",
               FT_ARGS="--allow-few-units")
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def compared(tiny_model_dir, tmp_path_factory):
    data = write_domain(tmp_path_factory.mktemp("data"), "toy", (260, 20, 30), seed=10)
    public = tmp_path_factory.mktemp("public") / "generic"
    write_parallel(make_corpus(300, seed=99), str(public))  # the dp-release aligner's
    runs = tmp_path_factory.mktemp("runs")
    env = _env(MODEL=tiny_model_dir, DATA_ROOT=str(data), RUNS=str(runs),
               APPROACHES=CELLS, TRAIN_LINES="200", ALIGN_PUBLIC=str(public))
    proc = subprocess.run(["bash", os.path.join(ROOT, "scripts", "compare.sh"), "toy"],
                          env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return runs / "toy", env, proc


def _manifest(path):
    return json.loads((path / "manifest.json").read_text())


def test_every_cell_has_the_budget_of_one_sentence_pass(compared):
    out, env, _ = compared
    # the DP release aligned with the model learned on ALIGN_PUBLIC, cached in RUNS
    owner = _manifest(out / "rel-dp-release" / "owner")
    assert owner["params"]["aligner"].startswith("public model")
    assert owner["public_aligner"]["align_model"] == os.path.join(env["RUNS"], "align-model")
    assert _manifest(out.parent / "align-model")["public"]["pairs_used"] == 300
    budget = _manifest(out / "ft-sent")["result"]["num_updates"]
    n_train = 200 + 1 * (1 + 5)  # the sample plus the planted canaries
    assert _manifest(out / "ft-sent")["counts"]["train"]["pairs"] == n_train
    for cell in ("len4", "len4-tag", "dp-release"):
        assert _manifest(out / f"ft-{cell}")["result"]["num_updates"] == budget, cell
    # the DP cell: the default recipe (LoRA, public rate 0.1), cut to 3 steps by DP_ARGS
    cert = json.loads((out / "ft-dp-sgd" / "privacy.json").read_text())
    assert cert["training"]["steps"] == 3 and "n_units" not in cert["training"]
    assert cert["training"]["history"][-1][1:] == [0.1, 3]
    assert _manifest(out / "ft-dp-sgd" / "owner")["units"]["n"] == n_train
    assert _manifest(out / "ft-dp-sgd")["params"]["trained_parameters"]["kind"] == "lora"


def test_report_has_one_row_per_cell_with_its_figures(compared):
    out, _, proc = compared
    rep = json.loads((out / "comparison" / "report.json").read_text())
    rows = {r["name"]: r for r in rep["runs"]}
    assert list(rows) == ["baseline"] + CELLS.split()
    for name, r in rows.items():
        assert r["bleu"] is not None and r["length_ratio"] > 0
        assert r["membership"]["auc"] is not None and "1" in r["exposure"]
        assert (r["p_bleu"] is None) == (name == "baseline")
    for name in ("len4", "len4-tag", "dp-release"):
        assert rows[name]["reconstruction"]["max_len"] == 4
    assert "reconstruction" not in rows["sent"]
    assert rows["baseline"]["epsilon"] == 0
    assert rows["dp-sgd"]["epsilon"] == pytest.approx(8, rel=0.02)
    assert rows["dp-release"]["epsilon"] == pytest.approx(8)
    assert "epsilon" not in rows["sent"]
    assert "| dp-sgd |" in proc.stdout  # the report is printed at the end


def test_each_cell_is_reported_as_soon_as_it_is_evaluated(compared):
    """Results as they come: the report is rewritten after every evaluated cell, the
    first one (the baseline alone) before any model is trained; one progress line per
    step, with the time since the start."""
    out, _, proc = compared
    lines = proc.stderr.splitlines()
    reports = [i for i, ln in enumerate(lines) if "] report: " in ln]
    assert len(reports) == 1 + len(CELLS.split()) + 1  # one per evaluated cell, the final
    first_training = next(i for i, ln in enumerate(lines) if "] fine-tune " in ln)
    assert reports[0] < first_training
    assert lines[reports[0]].split("] report: ")[1].startswith("baseline ->")
    assert "baseline sent ->" in lines[reports[1]]  # the budget cell comes next
    # the cell's evaluation precedes its report, and its training the evaluation
    for cell in CELLS.split():
        ev = lines.index(next(ln for ln in lines if ln.endswith(f"] evaluate {cell}")))
        ft = lines.index(next(ln for ln in lines if f"] fine-tune {cell}" in ln))
        rep = next(i for i in reports if i > ev)
        assert ft < ev < rep, cell
        assert cell in lines[rep].split("] report: ")[1].split(" ->")[0].split()
    for ln in lines:
        if ln.startswith("[compare "):
            assert re.match(r"\[compare toy \d\d:\d\d:\d\d \+\d+:\d\d:\d\d\] ", ln), ln
    # the data checks (warnings, if any) come before any training
    checks = next(i for i, ln in enumerate(lines) if "] data checks" in ln)
    assert checks < first_training
    assert all(i < first_training for i, ln in enumerate(lines) if ln.startswith("warning: "))
    md = (out / "comparison" / "report.md").read_text()
    assert proc.stdout.endswith(md)  # the final report is the one printed


def test_rerun_skips_finished_steps(compared):
    out, env, _ = compared
    before = {d: os.stat(out / d / "manifest.json").st_mtime_ns
              for d in ("rel-len4", "ft-sent", "ft-dp-sgd", "eval-len4", "mi-sent")}
    proc = subprocess.run(["bash", os.path.join(ROOT, "scripts", "compare.sh"), "toy"],
                          env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "fine-tune" not in proc.stderr and "evaluate" not in proc.stderr
    assert before == {d: os.stat(out / d / "manifest.json").st_mtime_ns for d in before}


def test_table2_reads_the_same_layout(compared):
    out, env, _ = compared
    env = dict(env, RUNS=str(out.parent))
    proc = subprocess.run(["bash", os.path.join(ROOT, "scripts", "table2.sh"), "toy"],
                          env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    bleu = json.loads((out / "eval-len4" / "report.json").read_text())["scores"]["bleu"]
    row = [ln for ln in proc.stdout.splitlines() if ln.startswith("| Phrases, max length 4 |")]
    assert row and f"{bleu:.2f}" in row[0]
    # the Table-2 cells compare.sh had not run are run now, on the same owner data
    assert "fine-tune len7" in proc.stderr and "fine-tune len4 " not in proc.stderr
    assert _manifest(out / "ft-len7")["counts"]["train"]["pairs"] > 0
    assert "| Phrases, max length 7 | – |" not in proc.stdout
    assert (out.parent / "table2-toy.md").read_text() in proc.stdout
    # the comparison report keeps every evaluated cell, not only table2's
    rep = json.loads((out / "comparison" / "report.json").read_text())
    assert [r["name"] for r in rep["runs"]] == ["baseline", "len4", "len4-tag", "len7",
                                                "len7-tag", "sent", "dp-release", "dp-sgd"]


def test_rerun_with_other_settings_is_refused(compared):
    out, env, _ = compared
    proc = subprocess.run(["bash", os.path.join(ROOT, "scripts", "compare.sh"), "toy"],
                          env=dict(env, TRAIN_LINES="150"), capture_output=True, text=True)
    assert proc.returncode == 2 and "other settings" in proc.stderr
    assert "now:    TRAIN_LINES=150" in proc.stderr
    assert "before: TRAIN_LINES=200" in proc.stderr


@pytest.mark.parametrize("script", ["compare.sh", "table2.sh"])
def test_missing_settings_are_a_usage_error(script, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("MODEL", "DATA_ROOT")}
    proc = subprocess.run(["bash", os.path.join(ROOT, "scripts", script), "EMEA"], env=env,
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2 and "set MODEL" in proc.stderr
    proc = subprocess.run(["bash", os.path.join(ROOT, "scripts", script)], env=env,
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2 and "usage:" in proc.stdout
    assert not os.listdir(tmp_path)  # nothing created


def test_missing_domain_files_are_named(tiny_model_dir, tmp_path):
    (tmp_path / "d").mkdir()
    proc = subprocess.run(["bash", os.path.join(ROOT, "scripts", "compare.sh"), "d"],
                          env=_env(MODEL=tiny_model_dir, DATA_ROOT=str(tmp_path),
                                   RUNS=str(tmp_path / "r")),
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "d/train.de: no such file" in proc.stderr


def test_dp_release_without_public_text_is_a_usage_error(tiny_model_dir, tmp_path):
    data = write_domain(tmp_path / "data", "d", (20, 5, 5))
    env = _env(MODEL=tiny_model_dir, DATA_ROOT=data, RUNS=str(tmp_path / "r"),
               APPROACHES="sent dp-release")
    env.pop("ALIGN_PUBLIC", None)
    proc = subprocess.run(["bash", os.path.join(ROOT, "scripts", "compare.sh"), "d"],
                          env=env, capture_output=True, text=True)
    assert proc.returncode == 2 and "needs ALIGN_PUBLIC" in proc.stderr
    proc = subprocess.run(["bash", os.path.join(ROOT, "scripts", "compare.sh"), "d"],
                          env=dict(env, ALIGN_PUBLIC=str(tmp_path / "none")),
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "none.de not found" in proc.stderr
    assert not (tmp_path / "r").exists()


def test_unknown_cell_is_a_usage_error(tiny_model_dir, tmp_path):
    (tmp_path / "d").mkdir()
    for f in ("train", "valid", "test"):
        write_parallel(make_corpus(5, seed=1), str(tmp_path / "d" / f))
    proc = subprocess.run(["bash", os.path.join(ROOT, "scripts", "compare.sh"), "d"],
                          env=_env(MODEL=tiny_model_dir, DATA_ROOT=str(tmp_path),
                                   RUNS=str(tmp_path / "r"), APPROACHES="sent len5"),
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "unknown cell 'len5'" in proc.stderr
    assert not (tmp_path / "r").exists()


def test_runs_spec_lists_only_evaluated_cells(tmp_path):
    for d in ("eval-baseline", "eval-sent", "exposure-sent", "reconstruct-len4"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "report.json").write_text("{}")
    (tmp_path / "ft-sent").mkdir()
    (tmp_path / "ft-sent" / "privacy.json").write_text("{}")
    spec = runs_spec(str(tmp_path), ["baseline", "len4", "sent"], "t")
    assert [r["name"] for r in spec["runs"]] == ["baseline", "sent"]
    assert spec["runs"][1] == {"name": "sent", "approach": "full sentences",
                               "evaluate": "eval-sent", "exposure": "exposure-sent",
                               "privacy": "ft-sent/privacy.json"}
    assert spec["runs"][0]["epsilon"] == 0


def test_runs_yaml_cli_refuses_an_empty_dir(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "nmtfrag.audit.runs_yaml", "--out-dir",
                           str(tmp_path), "--approaches", "baseline"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("error:")
