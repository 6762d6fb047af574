"""nmtfrag.data.sample: a seeded uniform sample of sentence pairs in corpus order, with
the document ids alongside; inputs untouched; bad sizes refused."""
import os
import subprocess
import sys

import pytest

from nmtfrag.data.sample import sample_corpus, sample_lines
from nmtfrag.errors import InputError


@pytest.fixture
def corpus(tmp_path):
    (tmp_path / "train.de").write_text("".join(f"de {i}\n" for i in range(100)))
    (tmp_path / "train.en").write_text("".join(f"en {i}\n" for i in range(100)))
    (tmp_path / "train.docs").write_text("".join(f"doc{i // 10}\n" for i in range(100)))
    return tmp_path


def test_sample_is_aligned_ordered_and_seeded(corpus):
    before = {p: p.read_bytes() for p in corpus.iterdir()}
    m = sample_corpus(str(corpus / "train.de"), str(corpus / "train.en"), 30,
                      str(corpus / "s"), seed=3)
    de = (corpus / "s" / "train.de").read_text().split("\n")[:-1]
    en = (corpus / "s" / "train.en").read_text().split("\n")[:-1]
    docs = (corpus / "s" / "train.docs").read_text().split("\n")[:-1]
    ids = [int(x.split()[1]) for x in de]
    assert len(ids) == 30 and ids == sorted(set(ids))  # distinct lines, corpus order
    assert [int(x.split()[1]) for x in en] == ids
    assert docs == [f"doc{i // 10}" for i in ids]
    assert ids == sample_lines(100, 30, 3) and ids != sample_lines(100, 30, 4)
    assert m["files"] == ["train.de", "train.en", "train.docs"]
    assert {p: p.read_bytes() for p in before} == before  # inputs untouched
    assert os.stat(corpus / "s" / "train.de").st_mode & 0o077 == 0  # owner-only text


def test_sample_is_uniform():
    # every line is kept with probability n/N: counts over many seeds near 1000·30/100
    counts = [0] * 100
    for seed in range(1000):
        for i in sample_lines(100, 30, seed):
            counts[i] += 1
    assert min(counts) > 240 and max(counts) < 360  # ±4 standard deviations (14.5)


@pytest.mark.parametrize("n", [0, 101])
def test_impossible_size_is_refused(corpus, n):
    with pytest.raises(InputError, match="cannot sample"):
        sample_corpus(str(corpus / "train.de"), str(corpus / "train.en"), n,
                      str(corpus / "s"))
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                          "sample_corpus.py")
    proc = subprocess.run([sys.executable, script, "--src",
                           str(corpus / "train.de"), "--tgt", str(corpus / "train.en"),
                           "--lines", str(n), "--out", str(corpus / "s")],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("error:")
    assert not (corpus / "s").exists()
