"""The resume-point clock: due every MIN_SECONDS, or COST_FACTOR times a slow save."""
import pickle

from nmtfrag import resume_clock
from nmtfrag.resume_clock import ResumeClock


class FakeTime:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_due_after_min_seconds_counted_from_the_last_save():
    t = FakeTime()
    clock = ResumeClock(120, clock=t)
    t.now += 119.9
    assert not clock.due()
    t.now += 0.1
    assert clock.due()
    clock.saved()  # a save made elsewhere (fairseq's at an epoch's end) restarts it
    assert not clock.due()
    t.now += 120
    assert clock.due()


def test_a_slow_save_spaces_the_points_to_cost_at_most_one_fiftieth():
    t = FakeTime()
    clock = ResumeClock(120, clock=t)
    with clock.timing():
        t.now += 10.0  # a 10 s save: the next is due 500 s after it ends, not 120 s
    assert clock.cost == 10.0 and clock.interval() == 10.0 * resume_clock.COST_FACTOR
    t.now += 499
    assert not clock.due()
    t.now += 1
    assert clock.due()
    with clock.timing():
        t.now += 0.5  # a fast save again: back to the floor
    assert clock.interval() == 120
    t.now += 120
    assert clock.due()


def test_a_failed_save_leaves_the_clock_as_it_was():
    t = FakeTime()
    clock = ResumeClock(120, clock=t)
    t.now += 200
    try:
        with clock.timing():
            t.now += 3
            raise OSError("disk full")
    except OSError:
        pass
    assert clock.due() and clock.cost == 0.0  # the point is still owed


def test_the_dp_checkpointer_saves_on_the_clock_and_survives_pickling(tmp_path, monkeypatch):
    """Spawned processes get the checkpointer pickled; its clock must come along."""
    from nmtfrag.dp import resume

    path = str(tmp_path / "s.pt")
    assert pickle.loads(pickle.dumps(resume.Checkpointer(path))).clock.interval() == \
        resume.SAVE_SECONDS == resume_clock.MIN_SECONDS
    t = FakeTime()
    monkeypatch.setattr(resume, "ResumeClock", lambda s: ResumeClock(s, clock=t))
    saved = []
    ck = resume.Checkpointer(str(tmp_path / "state.pt"), every=10)
    monkeypatch.setattr(ck, "save", lambda state: saved.append(state["step"]))
    ck.after_step(1, 100, lambda: {"step": 1})
    t.now += resume.SAVE_SECONDS
    ck.after_step(2, 100, lambda: {"step": 2})  # the clock's point, between step 10s
    ck.after_step(10, 100, lambda: {"step": 10})
    assert saved == [2, 10]
