"""An OUT is locked by the run that writes it (issue 31, item 3): a second run into it
is refused while the first lives, with one line naming the first's pid; a killed run's
lock never blocks (the kernel's flock on OUT/.nmtfrag.lock dies with its process); the
lock file never makes an OUT look like an output, and a finished OUT keeps none.

The holder is a real `nmtfrag stats --out OUT` whose counting is made to wait, so it
holds OUT exactly as every command does (outdir.prepare_output_dir)."""
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from nmtfrag import outdir, outlock
from nmtfrag.errors import InputError
from nmtfrag.outdir import prepare_output_dir
from nmtfrag.outlock import LOCK_NAME, lock_output_dir, release_output_locks
from test_output_guard import tree

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS="1")

# `nmtfrag stats ...` that stops after preparing OUT; with FORK set, it first forks a
# child that outlives it (as a data loader worker may, for a moment).
HOLDER = textwrap.dedent("""
    import os, sys, time
    import nmtfrag.data.stats as st

    def wait(*a, **k):
        if os.environ.get("FORK"):
            child = os.fork()
            if child == 0:
                time.sleep(120)
                os._exit(0)
            print("child", child, flush=True)
        print("ready", flush=True)
        time.sleep(120)

    st.describe_corpora = wait
    from nmtfrag.cli import main
    sys.exit(main(sys.argv[1:]))
""")


@pytest.fixture
def ws(tmp_path):
    (tmp_path / "c.de").write_text("ein Haus .\nzwei Katzen .\n", encoding="utf-8")
    (tmp_path / "c.en").write_text("a house .\ntwo cats .\n", encoding="utf-8")
    (tmp_path / "holder.py").write_text(HOLDER, encoding="utf-8")
    outdir.CREATED_OUTPUTS.clear()
    yield tmp_path
    release_output_locks()  # whatever a test locked in this process
    outdir.CREATED_OUTPUTS.clear()


def _stats(ws, out, *extra, holder=False, env=None):
    argv = ["stats", "--src", str(ws / "c.de"), "--tgt", str(ws / "c.en"), "--out", str(out),
            *extra]
    if holder:
        return subprocess.Popen([sys.executable, str(ws / "holder.py"), *argv],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env or ENV, cwd=ws)
    return subprocess.run([sys.executable, "-m", "nmtfrag", *argv], capture_output=True,
                          text=True, env=ENV, cwd=ws, timeout=120)


def _wait_ready(proc):
    """The holder's lines up to "ready" (it then holds OUT)."""
    lines = []
    while True:
        line = proc.stdout.readline()
        assert line, f"the holder ended: {proc.stderr.read()}"
        lines.append(line.split())
        if line.strip() == "ready":
            return lines


def _errors(stderr):
    return [ln for ln in stderr.splitlines() if ln.startswith("error:")]


def test_a_second_run_is_refused_while_the_first_lives(ws):
    out = ws / "OUT"
    holder = _stats(ws, out, holder=True)
    try:
        _wait_ready(holder)
        assert (out / LOCK_NAME).read_text().strip() == str(holder.pid)
        before = tree(ws)
        r = _stats(ws, out)
        assert r.returncode == 2, r.stderr
        assert _errors(r.stderr) == [
            f"error: --out {out} is being written by another nmtfrag run (pid "
            f"{holder.pid}): wait for it to end, or choose another --out"], r.stderr
        assert "Traceback" not in r.stderr
        assert tree(ws) == before  # the refused run wrote nothing, removed nothing
        assert holder.poll() is None
        # an --overwrite run is refused the same way
        r = _stats(ws, out, "--overwrite")
        assert r.returncode == 2 and f"(pid {holder.pid})" in r.stderr
    finally:
        holder.send_signal(signal.SIGTERM)
        holder.wait(60)
    # stopped, the holder removed the OUT it created: its lock file is no output
    assert not out.exists()


def test_a_killed_runs_lock_never_blocks(ws):
    out = ws / "OUT"
    holder = _stats(ws, out, holder=True)
    try:
        _wait_ready(holder)
    finally:
        holder.kill()  # SIGKILL: no `finally`, no cleanup
        holder.wait(60)
    assert (out / LOCK_NAME).exists()  # left behind, unlocked
    r = _stats(ws, out)
    assert r.returncode == 0, r.stderr
    assert (out / "manifest.json").exists()
    assert sorted(os.listdir(out)) == ["manifest.json", "report.json", "report.md"]
    # a finished OUT: refused without --overwrite, replaced with it, no lock file left
    r = _stats(ws, out)
    assert r.returncode == 2 and "--overwrite" in r.stderr
    r = _stats(ws, out, "--overwrite")
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(out)) == ["manifest.json", "report.json", "report.md"]


def test_a_forked_child_does_not_keep_the_lock(ws):
    """A child forked by the run (a data loader worker) closes its copy of the lock: the
    run's death frees OUT even while the child lives."""
    out = ws / "OUT"
    holder = _stats(ws, out, holder=True, env=dict(ENV, FORK="1"))
    child = None
    try:
        child = int(next(w[1] for w in _wait_ready(holder) if w[0] == "child"))
        holder.kill()
        holder.wait(60)
        os.kill(child, 0)  # still alive
        r = _stats(ws, out)
        assert r.returncode == 0, r.stderr
    finally:
        if holder.poll() is None:
            holder.kill()
        if child:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _lock_in_child(out, queue):
    """In a spawned process: what locking OUT gives there, and whether the parent's lock
    file is among its open files."""
    from nmtfrag.outlock import LOCK_NAME, lock_output_dir

    fds = os.listdir("/proc/self/fd")
    inherited = any(os.path.realpath(f"/proc/self/fd/{fd}").endswith(LOCK_NAME)
                    for fd in fds if os.path.exists(f"/proc/self/fd/{fd}"))
    try:
        lock_output_dir(out)
        queue.put((inherited, "locked"))
    except InputError as exc:
        queue.put((inherited, str(exc)))


def test_spawned_processes_neither_inherit_nor_wait_for_the_lock(ws):
    """DP-SGD's worker processes (torch.multiprocessing.spawn) start without the lock's
    fd and never block on it: a lock attempt there is refused at once."""
    out = str(ws / "OUT")
    prepare_output_dir(out)
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    p = ctx.Process(target=_lock_in_child, args=(out, queue))
    t0 = time.time()
    p.start()
    inherited, what = queue.get(timeout=120)
    p.join(60)
    assert not inherited
    assert f"(pid {os.getpid()})" in what and time.time() - t0 < 120


def test_the_lock_file_is_no_output(ws):
    """In one process an OUT locks once (a stage preparing it twice, a resumed run);
    OUT holding only its lock file is empty to every check, and goes after a failure;
    releasing removes the file."""
    out = str(ws / "OUT")
    assert prepare_output_dir(out) == out
    assert prepare_output_dir(out, overwrite=True) == out  # the same process: fine
    lock_output_dir(out)
    assert os.listdir(out) == [LOCK_NAME]
    assert outdir.dir_kind(out) is False
    assert not outdir._holds_files(out)
    outdir.check_output_dir(out, kind="nmtfrag-release")
    os.makedirs(os.path.join(out, "checkpoints"))
    assert not outdir._holds_files(out)
    with open(os.path.join(out, "checkpoints", "last.pt"), "w") as f:
        f.write("x")
    assert outdir._holds_files(out)
    os.unlink(os.path.join(out, "checkpoints", "last.pt"))
    assert outdir.remove_created_outputs(user_error=False) == [out]
    assert not os.path.exists(out) and not outlock._OUTPUT_LOCKS
    # made again, locked again; the end of the run removes the lock file
    prepare_output_dir(out)
    release_output_locks()
    assert os.listdir(out) == []
    assert outdir.remove_empty_output(out) and not os.path.exists(out)


def test_resume_takes_the_lock(ws, monkeypatch):
    """`finetune --resume` (which prepares no new OUT) locks the interrupted run's OUT,
    and is refused while another run writes into it."""
    from nmtfrag.train.finetune import open_run_dirs
    from nmtfrag.train.job import FineTuneJob

    out = ws / "ft"
    (out / ".work").mkdir(parents=True)
    (out / ".work" / "prepared.json").write_text("{}")
    (out / "checkpoints").mkdir()
    (out / "checkpoints" / "checkpoint_last.pt").write_bytes(b"x")
    job = FineTuneJob(model=str(ws / "model"), train=str(ws / "c"), out=str(out),
                      resume=True)
    dirs = open_run_dirs(job, None, None)  # the resume path reads only OUT
    assert dirs.out == str(out)
    assert (out / LOCK_NAME).read_text().strip() == str(os.getpid())
    probe = ("import sys\nfrom nmtfrag.outlock import lock_output_dir\n"
             "try:\n    lock_output_dir(sys.argv[1])\nexcept Exception as e:\n"
             "    print(e)\n    sys.exit(2)\n")
    r = subprocess.run([sys.executable, "-c", probe, str(out)], capture_output=True,
                       text=True, env=ENV, timeout=120)
    assert r.returncode == 2 and f"(pid {os.getpid()})" in r.stdout
    release_output_locks()
    assert not (out / LOCK_NAME).exists()

    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom nmtfrag.outlock import "
         "lock_output_dir\nlock_output_dir(sys.argv[1])\nprint('ready', flush=True)\n"
         "time.sleep(120)\n", str(out)], stdout=subprocess.PIPE, text=True, env=ENV)
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(InputError, match=f"being written by another nmtfrag run "
                                             f"\\(pid {holder.pid}\\)"):
            open_run_dirs(job, None, None)
    finally:
        holder.kill()
        holder.wait(60)
    assert open_run_dirs(job, None, None).out == str(out)  # its lock died with it


HOLD_UNTIL_TOLD = ("import sys\nfrom nmtfrag.outlock import lock_output_dir, release_output_locks\n"
                   "lock_output_dir(sys.argv[1])\nprint('ready', flush=True)\n"
                   "sys.stdin.readline()\nrelease_output_locks()\n")
WAITER = ("import sys, time\nfrom nmtfrag.outlock import lock_output_dir\n"
          "lock_output_dir(sys.argv[1], wait=True)\nprint('locked', flush=True)\n"
          "time.sleep(120)\n")


@pytest.mark.parametrize("ending", ["released", "killed"])
def test_a_waiting_run_takes_the_lock_when_the_holder_ends(ws, ending):
    """`study run --wait` (a queue of runs into one OUT): the waiting run says whom it
    waits for, takes nothing while the holder lives, and holds OUT once the holder ends,
    whether the holder removed its lock file as it ended (the waiter then locks the new
    one) or was killed outright."""
    out = ws / "OUT"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLD_UNTIL_TOLD, str(out)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV)
    waiter = None
    try:
        assert holder.stdout.readline().strip() == "ready"
        waiter = subprocess.Popen([sys.executable, "-c", WAITER, str(out)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=ENV)
        assert waiter.stderr.readline().strip() == (
            f"--out {out} is being written by another nmtfrag run (pid {holder.pid}): "
            f"waiting for it to end")
        time.sleep(1)
        assert waiter.poll() is None and outlock.output_lock_holder(str(out)) == holder.pid
        if ending == "released":
            holder.communicate("go\n", timeout=60)
            assert holder.returncode == 0
        else:
            holder.kill()
            holder.wait(60)
        assert waiter.stdout.readline().strip() == "locked"
        assert outlock.output_lock_holder(str(out)) == waiter.pid
        assert (out / LOCK_NAME).read_text().strip() == str(waiter.pid)
    finally:
        for p in (holder, waiter):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(60)
