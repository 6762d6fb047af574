"""Canary insertion: the corpus around the canaries is unchanged, each canary appears
exactly `repeats` times where canaries.json says, the input is never modified, seeds."""
import json
import math
import subprocess
import sys

import pytest

from nmtfrag.audit.canaries import (KINDS, index_of_secret, insert_canaries, make_canaries,
                                    secret_from_index, space_size)
from nmtfrag.errors import InputError
from nmtfrag.fileio import sha256_file


def _corpus(tmp_path, n=200):
    src, tgt = tmp_path / "train.de", tmp_path / "train.en"
    src.write_text("".join(f"satz {i} .\n" for i in range(n)))
    tgt.write_text("".join(f"sentence {i} .\n" for i in range(n)))
    return str(src), str(tgt)


def test_insert_keeps_corpus_and_plants_each_canary_repeats_times(tmp_path):
    src, tgt = _corpus(tmp_path)
    before = sha256_file(src), sha256_file(tgt)
    cs = insert_canaries(src, tgt, str(tmp_path / "out"), count=3, repeats=(1, 5, 20), seed=4)
    assert (sha256_file(src), sha256_file(tgt)) == before
    out_src = (tmp_path / "out" / "train.de").read_text().splitlines()
    out_tgt = (tmp_path / "out" / "train.en").read_text().splitlines()
    assert len(out_src) == len(out_tgt) == 200 + 3 * (1 + 5 + 20)
    key = json.loads((tmp_path / "out" / "canaries.json").read_text())
    assert key["canaries"] == cs
    assert [c["repeats"] for c in cs] == [1] * 3 + [5] * 3 + [20] * 3 + [0] * 3
    lines = set()
    for c in cs:
        assert len(c["lines"]) == c["repeats"]
        for ln in c["lines"]:
            assert out_src[ln - 1] == c["src"] and out_tgt[ln - 1] == c["tgt"]
            lines.add(ln)
        assert c["secret"] not in c["src"]  # the secret is on the target side only
        assert c["tgt"] == c["tgt_template"].format(secret=c["secret"])
    rest = [(s, t) for i, (s, t) in enumerate(zip(out_src, out_tgt), 1) if i not in lines]
    assert rest == [(f"satz {i} .", f"sentence {i} .") for i in range(200)]
    unseen = [c for c in cs if c["repeats"] == 0]
    assert all(c["src"] not in out_src for c in unseen)
    # same seed → same files; another seed → other secrets
    insert_canaries(src, tgt, str(tmp_path / "again"), count=3, repeats=(1, 5, 20), seed=4)
    assert (tmp_path / "again" / "train.en").read_text() == "\n".join(out_tgt) + "\n"
    other = make_canaries(3, (1, 5, 20), seed=5)
    assert [c["secret"] for c in other] != [c["secret"] for c in cs]


def test_secret_space_roundtrip():
    for kind in ("dosage", "name"):
        space = KINDS[kind]["space"]
        n = space_size(space)
        assert n == (10 ** 6 if kind == "dosage" else 1600)
        for i in (0, 1, 17, n // 3, n - 1):
            assert index_of_secret(space, secret_from_index(space, i)) == i
    assert secret_from_index(KINDS["dosage"]["space"], 42) == "000042"
    assert math.log2(space_size(KINDS["name"]["space"])) == pytest.approx(10.644, abs=1e-3)


def test_bad_parameters(tmp_path):
    src, tgt = _corpus(tmp_path, 5)
    with pytest.raises(InputError):
        insert_canaries(src, tgt, str(tmp_path / "o"), count=0)
    with pytest.raises(InputError):
        insert_canaries(src, tgt, str(tmp_path / "o"), kinds=("ssn",))


def test_cli(tmp_path):
    src, tgt = _corpus(tmp_path, 20)
    base = [sys.executable, "-m", "nmtfrag", "audit", "canaries", "insert", "--src", src,
            "--tgt", tgt, "--count", "2", "--repeats", "1,3"]
    res = subprocess.run(base + ["--out", str(tmp_path / "c")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert len((tmp_path / "c" / "train.de").read_text().splitlines()) == 20 + 2 * 4
    bad = subprocess.run(base[:-1] + ["1,x", "--out", str(tmp_path / "d")],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("error:")
    missing = subprocess.run(base[:7] + [str(tmp_path / "nope"), "--tgt", tgt, "--out",
                                         str(tmp_path / "e")], capture_output=True, text=True)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
