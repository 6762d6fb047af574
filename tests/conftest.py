"""Shared test setup: tests/ on sys.path (for `from tinymodel import ...`), one torch
thread (the CI machine has 2 cores shared by everything), fairseq checkpoint loading
allowed under torch >= 2.6."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A tiny trained de→en model dir (WMT19 layout), built once per test session.

    Read-only for tests: copy it before changing anything in it.
    """
    import torch
    from tinymodel import make_tiny_model_dir

    torch.set_num_threads(1)
    return make_tiny_model_dir(str(tmp_path_factory.mktemp("tinymodel")), updates=150)
