"""The markers of the fast path are earned from a test module's source (conftest)."""
from conftest import module_markers


def test_a_module_is_marked_by_what_it_does():
    assert module_markers("def test_x(tiny_model_dir):\n    pass\n") == ["model"]
    assert module_markers("proc = subprocess.run([sys.executable, '-m', 'nmtfrag'])") \
        == ["subprocess"]
    assert sorted(module_markers("torch.multiprocessing.spawn(f)\nfinetune(job, cfg)")) \
        == ["distributed", "model"]
    assert module_markers("def test_parse():\n    assert parse('4') == 4\n") == []


def test_the_study_runs_are_off_the_fast_path(request):
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "study", "test_study_run.py"), encoding="utf-8") as f:
        assert {"model", "subprocess"} <= set(module_markers(f.read()))
