"""Shared test setup: tests/ on sys.path (for `from tinymodel import ...`), one torch
thread (the CI machine has 2 cores shared by everything), fairseq checkpoint loading
allowed under torch >= 2.6."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
