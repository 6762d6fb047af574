"""The resume-point clock: due every MIN_SECONDS, longer after a slow save (up to
MAX_SECONDS); the DP checkpointer saves on it. tests/conftest.py turns the clock off in
every other test; these set MIN_SECONDS themselves."""
import pickle

import pytest

from nmtfrag import resume_clock
from nmtfrag.resume_clock import COST_FACTOR, MAX_SECONDS, ResumeClock


class FakeTime:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def t(monkeypatch):
    monkeypatch.setattr(resume_clock, "MIN_SECONDS", 120.0)
    return FakeTime()


def test_due_after_min_seconds_counted_from_the_last_save(t):
    clock = ResumeClock(clock=t)
    t.now += 119.9
    assert not clock.due()
    t.now += 0.1
    assert clock.due()
    clock.saved()  # a save made elsewhere (fairseq's at an epoch's end) restarts it
    assert not clock.due()
    t.now += 120
    assert clock.due()


def test_a_slow_save_spaces_the_points_to_cost_a_fiftieth_up_to_the_cap(t):
    clock = ResumeClock(clock=t)
    with clock.timing():
        t.now += 10.0  # a 10 s save: the next is due 500 s after it ends, not 120 s
    assert clock.cost == 10.0 and clock.interval() == 10.0 * COST_FACTOR
    t.now += 499
    assert not clock.due()
    t.now += 1
    assert clock.due()
    with clock.timing():
        t.now += 60.0  # one stalled save: 50 × 60 s would be 50 minutes; capped
    assert clock.interval() == MAX_SECONDS
    with clock.timing():
        t.now += 0.5  # a fast save again: back to the floor
    assert clock.interval() == 120
    t.now += 120
    assert clock.due()


def test_a_failed_save_leaves_the_point_owed(t):
    clock = ResumeClock(clock=t)
    t.now += 200
    with pytest.raises(OSError), clock.timing():
        t.now += 3
        raise OSError("disk full")
    assert clock.due() and clock.cost == 0.0


def test_the_floor_is_read_when_the_clock_is_made(t, monkeypatch):
    """tests/conftest.py pins it for every test; a clock made before a change keeps its own."""
    made = ResumeClock(clock=t)
    monkeypatch.setattr(resume_clock, "MIN_SECONDS", float("inf"))
    t.now += 120
    assert made.due() and not ResumeClock(clock=t).due()


def test_the_dp_checkpointer_saves_on_the_clock_and_restarts_it(t, tmp_path, monkeypatch):
    """Between its every-N-steps saves, the checkpointer saves when the clock is due, and
    that save restarts the clock; never after the last step, never on rank 1; spawned
    processes get it pickled, clock and floor included."""
    from nmtfrag.dp import resume

    path = str(tmp_path / "state.pt")
    ck = resume.Checkpointer(path, every=10)
    ck.clock.clock = t
    ck.clock.saved()

    def state(step):
        return lambda: {"step": step}

    ck.after_step(1, 100, state(1))
    assert not (tmp_path / "state.pt").exists()
    t.now += 120
    ck.after_step(2, 100, state(2), rank=1)  # only rank 0 writes
    assert not (tmp_path / "state.pt").exists()
    ck.after_step(2, 100, state(2))
    assert ck.step == 2 and (tmp_path / "state.pt").exists()
    ck.after_step(3, 100, state(3))  # the save restarted the clock
    assert ck.step == 2
    t.now += 120
    ck.after_step(100, 100, state(100))  # the last step: the run finishes instead
    assert ck.step == 2
    ck.after_step(10 * 2 + 1, 100, state(21))
    assert ck.step == 21
    off = resume.Checkpointer(path, every=0)  # --dp-save-every 0: never, clock or not
    off.clock.clock = t
    t.now += 10_000
    off.after_step(5, 100, state(5))
    assert off.step is None
    copy = pickle.loads(pickle.dumps(resume.Checkpointer(path)))
    assert copy.clock.min_seconds == 120.0 and copy.clock.clock is resume_clock.time.monotonic
