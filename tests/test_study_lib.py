"""scripts/study_lib.sh: a setting the script chose (ENGINE) is recorded as automatic, a
rerun keeps it even when what is installed changed, and a refused rerun names the value
to set to continue. Whether ctranslate2 imports is simulated with a module on
PYTHONPATH (an empty one imports, one that raises ImportError does not)."""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = """. {lib}
OUT=$1
default_engine "$OUT"
guard_settings "$OUT" SEED ENGINE
echo "ENGINE=$ENGINE"
"""


def _run(out, tmp_path, ct2, **env):
    fake = tmp_path / ("ct2-yes" if ct2 else "ct2-no")
    fake.mkdir(exist_ok=True)
    (fake / "ctranslate2.py").write_text("" if ct2 else "raise ImportError('absent')\n")
    e = {k: v for k, v in os.environ.items() if k != "ENGINE"}
    e.update({"PYTHONPATH": str(fake), "DEVICE": "cpu", "SEED": "1", **env})
    script = SCRIPT.format(lib=os.path.join(ROOT, "scripts", "study_lib.sh"))
    return subprocess.run(["bash", "-c", script, "guard", str(out)], env=e,
                          capture_output=True, text=True)


def test_an_automatic_choice_is_recorded_and_kept(tmp_path):
    out = tmp_path / "runs"
    out.mkdir()
    first = _run(out, tmp_path, ct2=False)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "ENGINE=fairseq"
    assert (out / "settings").read_text() == "SEED=1\nENGINE=fairseq (automatic)\n"
    # ctranslate2 installed since: the rerun keeps the recorded choice
    again = _run(out, tmp_path, ct2=True)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "ENGINE=fairseq"
    # without a record, the same machine would have chosen ctranslate2
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    assert _run(fresh, tmp_path, ct2=True).stdout.strip() == "ENGINE=ctranslate2"
    # an explicit ENGINE equal to the recorded automatic one is the same setting
    assert _run(out, tmp_path, ct2=True, ENGINE="fairseq").returncode == 0


def test_a_refused_rerun_names_the_values_that_continue_it(tmp_path):
    out = tmp_path / "runs"
    out.mkdir()
    assert _run(out, tmp_path, ct2=False).returncode == 0
    proc = _run(out, tmp_path, ct2=True, ENGINE="ctranslate2", SEED="2")
    assert proc.returncode == 2
    assert "now:    ENGINE=ctranslate2" in proc.stderr
    assert "before: ENGINE=fairseq (automatic)" in proc.stderr
    assert "to continue: SEED=1 ENGINE=fairseq" in proc.stderr


def test_a_recorded_choice_that_is_gone_is_named(tmp_path):
    out = tmp_path / "runs"
    out.mkdir()
    assert _run(out, tmp_path, ct2=True).stdout.strip() == "ENGINE=ctranslate2"
    proc = _run(out, tmp_path, ct2=False)
    assert proc.returncode == 2
    assert "ENGINE=ctranslate2 (chosen automatically)" in proc.stderr
    assert "install ctranslate2" in proc.stderr
