"""Shared test setup: tests/ on sys.path (for `from tinymodel import ...`), one torch
thread (the CI machine has 2 cores shared by everything), fairseq checkpoint loading
allowed under torch >= 2.6, a private user cache ($XDG_CACHE_HOME) for the session."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
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
    from nmtfrag.fileio import release_output_lock
    from nmtfrag.public_align import learn_model

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
