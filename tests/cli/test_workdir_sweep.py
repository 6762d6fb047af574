"""Private work dirs do not outlive a SIGKILL: the next nmtfrag start removes the dirs of
dead owners (and says so once), never one whose owner lives or one that is not ours."""
import json
import os
import signal
import subprocess
import sys

import pytest

from nmtfrag import fileio, workdir

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MESSAGE = "left by runs that were killed"

# A Python caller that opens a private work dir, puts a tiny file in it, says where it
# is, and sleeps until killed.
HOLDER = """
import sys, time
from nmtfrag.workdir import private_workdir
with private_workdir(base=sys.argv[1] if len(sys.argv) > 1 else None) as w:
    open(w + "/corpus.tok", "w").write("vertraulicher Satz\\n")
    print(w, flush=True)
    time.sleep(600)
"""


def _env(tmpdir):
    env = dict(os.environ, TMPDIR=str(tmpdir), PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    return env


def _start_holder(tmpdir, base=None):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER] + ([str(base)] if base else []),
                            stdout=subprocess.PIPE, text=True, env=_env(tmpdir))
    path = proc.stdout.readline().strip()
    assert path and os.path.isfile(os.path.join(path, "corpus.tok"))
    return proc, path


def _kill9(proc):
    proc.send_signal(signal.SIGKILL)
    proc.wait()  # reaped: the PID is gone, as after any real kill -9


def _cli(tmpdir, *argv):
    return subprocess.run([sys.executable, "-m", "nmtfrag", *argv], capture_output=True,
                          text=True, env=_env(tmpdir), timeout=120)


@pytest.fixture
def tmpdir_env(tmp_path, monkeypatch):
    """A private system temp dir for this test (TMPDIR for children and for us)."""
    d = tmp_path / "systmp"
    d.mkdir()
    monkeypatch.setenv("TMPDIR", str(d))
    monkeypatch.setattr(workdir.tempfile, "tempdir", str(d))
    return d


def test_sigkilled_workdir_removed_by_next_command(tmpdir_env, tmp_path):
    live, live_dir = _start_holder(tmpdir_env)  # a run still working: must be kept
    proc, dead_dir = _start_holder(tmpdir_env)
    assert os.path.basename(dead_dir).startswith("nmtfrag-")
    assert os.path.dirname(dead_dir) == str(tmpdir_env)
    marker = json.loads(open(os.path.join(dead_dir, workdir.WORK_MARKER)).read())
    assert marker["pid"] == proc.pid and marker["kind"] == workdir.WORK_MARKER_KIND
    _kill9(proc)
    assert os.path.isdir(dead_dir)  # nothing ran its `finally`
    foreign = tmpdir_env / "nmtfrag-not-ours"  # same prefix, no marker: not ours
    foreign.mkdir()
    (foreign / "data.txt").write_text("x")
    try:
        (tmp_path / "a.de").write_text("Hallo Welt .\n")
        (tmp_path / "a.en").write_text("Hello world .\n")
        res = _cli(tmpdir_env, "stats", "--src", str(tmp_path / "a.de"),
                   "--tgt", str(tmp_path / "a.en"))
        assert res.returncode == 0, res.stderr
        assert not os.path.exists(dead_dir)
        assert res.stderr.count(MESSAGE) == 1
        assert "removed 1 work dir(s)" in res.stderr
        assert os.path.isfile(os.path.join(live_dir, "corpus.tok"))
        assert (foreign / "data.txt").exists()
        res2 = _cli(tmpdir_env, "stats", "--src", str(tmp_path / "a.de"),
                    "--tgt", str(tmp_path / "a.en"))
        assert res2.returncode == 0 and MESSAGE not in res2.stderr  # said once
    finally:
        _kill9(live)
    assert workdir.sweep_stale_workdirs(quiet=True) == 1  # the second holder, now dead
    assert not os.path.exists(live_dir) and foreign.exists()


def test_python_caller_sweeps_its_base(tmpdir_env, tmp_path, capsys):
    """private_workdir itself removes a killed run's dir under the same --work-dir base."""
    base = tmp_path / "work"
    proc, dead_dir = _start_holder(tmpdir_env, base)
    assert os.path.dirname(dead_dir) == str(base)
    _kill9(proc)
    with workdir.private_workdir(base=str(base)) as w:
        assert os.path.isdir(w) and not os.path.exists(dead_dir)
    assert not os.path.exists(w)
    assert capsys.readouterr().err.count(MESSAGE) == 1


def test_reused_pid_is_dead_and_kept_dir_survives(tmpdir_env):
    """A marker whose PID now belongs to another process (other start time) is dead;
    a --keep-work dir is the user's and is never swept."""
    me = workdir._owner_record()
    if me["start"] is None:
        pytest.skip("no /proc: a reused PID cannot be told apart (such dirs are kept)")
    with workdir.private_workdir(keep=True) as kept:
        pass
    rec = json.loads(open(os.path.join(kept, workdir.WORK_MARKER)).read())
    assert rec["keep"] is True
    fileio.write_json(os.path.join(kept, workdir.WORK_MARKER), dict(rec, pid=2 ** 22 + 7))
    reused = tmpdir_env / "nmtfrag-reused"
    reused.mkdir()
    fileio.write_json(reused / workdir.WORK_MARKER, dict(me, start=me["start"] - 1))
    mine = tmpdir_env / "nmtfrag-mine"
    mine.mkdir()
    fileio.write_json(mine / workdir.WORK_MARKER, me)
    assert workdir.sweep_stale_workdirs(quiet=True) == 1
    assert not reused.exists() and mine.exists() and os.path.isdir(kept)
