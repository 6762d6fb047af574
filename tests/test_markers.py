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


def test_a_test_is_marked_by_its_own_code_its_fixtures_and_the_helpers_it_calls(tmp_path):
    """Per test, not per module: a model-free test beside tests that train stays on the
    fast path; one that trains through a module helper or a fixture is marked."""
    import importlib.util
    import types

    from conftest import module_markers, test_source

    path = tmp_path / "test_mixed.py"
    path.write_text(
        "from nmtfrag.cli import main\n\n"
        "def _train(root):\n    return main(['finetune', '--model', root])\n\n"
        "def _inner(root):\n    return _train(root)\n\n"
        "def test_plans_only():\n    assert 1 + 1 == 2\n\n"
        "def test_trains_through_a_helper():\n    assert _inner('x') == 0\n\n"
        "def trained_model():\n    return make_tiny_model_dir('d')\n\n"
        "def test_uses_a_fixture(trained_model):\n    assert trained_model\n")
    spec = importlib.util.spec_from_file_location("test_mixed", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def item(name, fixtures=()):
        defs = {f: [types.SimpleNamespace(func=getattr(module, f), argnames=())]
                for f in fixtures}
        return types.SimpleNamespace(module=module, function=getattr(module, name),
                                     fixturenames=list(fixtures),
                                     _fixtureinfo=types.SimpleNamespace(name2fixturedefs=defs))
    assert module_markers(test_source(item("test_plans_only"))) == []
    assert module_markers(test_source(item("test_trains_through_a_helper"))) == ["model"]
    assert module_markers(test_source(item("test_uses_a_fixture", ["trained_model"]))) \
        == ["model"]
