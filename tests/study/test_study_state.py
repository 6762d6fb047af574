"""A study killed outright (SIGKILL, a machine stopping) keeps the CPU time its running
steps had used: the runner saves it every minute, the next run folds it in."""
import subprocess
import sys

from nmtfrag.study import runner
from nmtfrag.study.plan import Paths, Step
from nmtfrag.study.state import read_state, settle_killed, update_state


def test_a_running_step_saves_its_cpu_time_while_it_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "SAVE_CPU_EVERY", 0.2)
    paths = Paths(str(tmp_path))
    ex = runner.Executor(paths, lambda message: None)
    busy = subprocess.Popen([sys.executable, "-c",
                             "import time\nt = time.time()\nwhile time.time() - t < 1.5: pass"])
    step = Step("c", "finetune", str(tmp_path / "c" / "finetune"), ("finetune",))
    update_state(paths, "c", lambda s: s.update(
        running={"step": "finetune", "pid": busy.pid, "since": 0.0}))
    seen = []
    real = runner.update_state

    def spy(p, cell, change):
        real(p, cell, change)
        seen.append(read_state(p, cell).get("running", {}).get("cpu_seconds"))
    monkeypatch.setattr(runner, "update_state", spy)
    ex._wait(step, busy.pid, 0.0)
    saved = [c for c in seen if c is not None]
    assert saved and max(saved) > 0.3, seen  # a busy second was measured before the end


def test_the_next_run_counts_a_killed_steps_cpu_time(tmp_path):
    paths = Paths(str(tmp_path))
    update_state(paths, "sent", lambda s: s.update(
        steps={"finetune": {"cpu_seconds": 100.0, "wall_seconds": 200.0, "attempts": 1}},
        running={"step": "finetune", "pid": 999999999, "since": 1000.0,
                 "cpu_seconds": 50.0, "seen": 1060.0}))
    update_state(paths, "len4", lambda s: s.update(steps={}))
    assert settle_killed(paths, ["sent", "len4", "never-ran"]) == ["sent: finetune"]
    state = read_state(paths, "sent")
    assert "running" not in state
    st = state["steps"]["finetune"]
    assert (st["cpu_seconds"], st["wall_seconds"], st["attempts"], st["last_exit"]) == (
        150.0, 260.0, 2, "killed")
    assert settle_killed(paths, ["sent"]) == []  # counted once
