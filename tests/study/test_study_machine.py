"""The busy-machine warning: a study started beside another run must say that its cells
will share cores (their wall time grows, their CPU hours do not)."""
from nmtfrag.study.machine import busy_warning, load_from, machine_load


def test_an_idle_machine_gets_no_warning():
    assert busy_warning(cpus=2, load=0.1, jobs=2, per_job=1) is None
    assert busy_warning(cpus=16, load=3.0, jobs=4, per_job=2) is None


def test_threads_beyond_the_free_cpus_are_named():
    text = busy_warning(cpus=2, load=1.9, jobs=2, per_job=1)
    assert text is not None
    assert "load 1.9 on 2 CPUs" in text and "2 job(s) × 1 thread(s)" in text


def test_one_thread_beside_one_busy_core_of_two_fits():
    assert busy_warning(cpus=2, load=1.0, jobs=1, per_job=1) is None
    assert busy_warning(cpus=2, load=1.0, jobs=1, per_job=2) is not None


def test_a_run_stopped_a_minute_ago_does_not_count_as_load():
    # /proc/loadavg: 1-, 5-, 15-minute averages, runnable/total tasks, last pid
    assert load_from("1.66 1.52 1.75 3/91 9076") == 1.66  # two others running now
    assert load_from("1.10 1.30 1.50 1/88 9100") == 0.0  # only the reader: it just ended
    assert load_from("0.20 0.30 0.40 4/88 9100") == 0.2  # a burst: the average holds
    assert machine_load() >= 0.0
