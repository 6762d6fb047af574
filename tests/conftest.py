"""Shared test setup: tests/ and its stage folders on sys.path (for `from tinymodel import
...`, and for the fixtures test modules share by module name, e.g. `from test_dp_sgd import
tiny` in tests/train/), one torch thread (the CI machine has 2 cores shared by everything), fairseq checkpoint loading
allowed under torch >= 2.6, a private user cache ($XDG_CACHE_HOME) for the session."""
import os
import sys

TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [TESTS] + sorted(os.path.join(TESTS, d) for d in os.listdir(TESTS)
                                if os.path.isdir(os.path.join(TESTS, d))
                                and not d.startswith((".", "_")))
os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def private_cache_home(tmp_path_factory):
    """$XDG_CACHE_HOME for the session (and the commands it runs): what nmtfrag keeps
    in the user's cache (CTranslate2 conversions) never lands in the real ~/.cache."""
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield os.environ["XDG_CACHE_HOME"]
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old


@pytest.fixture(autouse=True)
def no_timed_resume_points(monkeypatch):
    """Resume points on the clock (nmtfrag.resume_clock) off in every test: which update or
    step a run saves must not depend on how loaded the machine is. A test of the clock sets
    MIN_SECONDS itself."""
    from nmtfrag import resume_clock

    monkeypatch.setattr(resume_clock, "MIN_SECONDS", float("inf"))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A tiny trained de→en model dir (WMT19 layout), built once per test session.

    Read-only for tests: copy it before changing anything in it.
    """
    import torch
    from tinymodel import make_tiny_model_dir

    torch.set_num_threads(1)
    return make_tiny_model_dir(str(tmp_path_factory.mktemp("tinymodel")), updates=150)


@pytest.fixture(scope="session")
def public_align_model(tmp_path_factory):
    """(model dir, public PREFIX): a public alignment model learned once per session on
    the demo corpus' valid + test text (a stand-in for public data; the DP tests'
    private corpus is demo train). Read-only for tests."""
    from nmtfrag.outlock import release_output_lock
    from nmtfrag.fragment.public_align import learn_model

    root = tmp_path_factory.mktemp("public-align")
    demo = os.path.join(os.path.dirname(__file__), "..", "corpora", "demo")
    for lang in ("de", "en"):
        with open(root / f"public.{lang}", "w", encoding="utf-8") as out:
            for part in ("valid", "test"):
                with open(os.path.join(demo, f"{part}.{lang}"), encoding="utf-8") as f:
                    out.write(f.read())
    learn_model(str(root / "public"), str(root / "model"))
    release_output_lock(str(root / "model"))  # made: no run writes into it any more
    return str(root / "model"), str(root / "public")


# --- markers: a fast path for a change (`-m "not model and not subprocess"`) ---------
# Read from each test's own source, so a new test is marked by what it does without
# anyone remembering to: `model` builds or trains a model (the tiny fairseq model, a toy
# model, a fine-tuning run), `subprocess` runs nmtfrag or a script as a child process,
# `distributed` starts several torch.distributed processes. A test's source is its
# function, the fixtures it requests (and theirs) and the module's functions it calls
# (and theirs): so a model-free test in a module that also trains runs on the fast
# path, and a test that trains through a helper does not.
MARKER_SIGNS = {
    "model": ("tiny_model_dir", "make_tiny_model_dir", "train_toy_model", "public_align_model",
              "finetune(", "dp_finetune(", '"finetune",', "'finetune',"),
    "subprocess": ("subprocess.", "Popen(", '"study", "run"', "'study', 'run'"),
    "distributed": ("torch.distributed", "mp.spawn", "multiprocessing.spawn"),
}


def module_markers(source):
    """The markers a piece of test source earns (nmtfrag's MARKER_SIGNS)."""
    return [name for name, signs in MARKER_SIGNS.items() if any(s in source for s in signs)]


def _source(obj):
    import inspect

    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return ""


def _is_test_code(fn):
    """A function of the test suite's own modules (helpers imported from another test
    module count: their code runs as the test's)."""
    import inspect

    path = inspect.getsourcefile(fn) or ""
    return os.path.abspath(path).startswith(TESTS + os.sep)


def test_source(item):
    """The source a test runs: its function, its fixtures' (transitively) and the module
    functions its code names (transitively)."""
    import inspect
    import re

    module = getattr(item, "module", None)
    seen_code, seen_fix, parts = set(), set(), []
    todo = [getattr(item, "function", None)]
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {}) or {}
    fixtures = list(getattr(item, "fixturenames", ()))
    while todo or fixtures:
        if fixtures:
            name = fixtures.pop()
            if name in seen_fix or name not in defs:
                continue
            seen_fix.add(name)
            fdef = defs[name][-1]
            todo.append(fdef.func)
            fixtures += [a for a in getattr(fdef, "argnames", ()) if a not in seen_fix]
            continue
        fn = todo.pop()
        if fn is None or fn in seen_code:
            continue
        seen_code.add(fn)
        src = _source(fn)
        parts.append(src)
        if module is None:
            continue
        scope = vars(inspect.getmodule(fn) or module)
        for word in set(re.findall(r"\b[A-Za-z_]\w*\b", src)):
            obj = scope.get(word)
            if inspect.isfunction(obj) and (obj.__module__ == module.__name__ or
                                            _is_test_code(obj)):
                todo.append(obj)
    return "\n".join(parts)


def pytest_collection_modifyitems(config, items):
    for item in items:
        for name in module_markers(test_source(item)):
            item.add_marker(getattr(pytest.mark, name))
