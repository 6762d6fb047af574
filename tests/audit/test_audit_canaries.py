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


def _planted(out):
    key = json.loads((out / "canaries.json").read_text())
    return [(c["record"], c["secret"], tuple(c["lines"])) for c in key["canaries"]]


def test_secrets_are_secret_unless_seeded(tmp_path):
    """Without --seed two runs plant different secrets (and the manifest says the run
    was not seeded); with --seed N the same ones, and the manifest records N."""
    from nmtfrag.cli import main

    src, tgt = _corpus(tmp_path, 50)
    base = ["audit", "canaries", "insert", "--src", src, "--tgt", tgt, "--count", "4",
            "--repeats", "1,3"]
    for name, extra in (("s1", []), ("s2", []), ("n1", ["--seed", "9"]),
                        ("n2", ["--seed", "9"])):
        assert main(base + extra + ["--out", str(tmp_path / name)]) == 0
    s1, s2 = _planted(tmp_path / "s1"), _planted(tmp_path / "s2")
    # 12 canaries from a 10^6 / 1,600 space: two secret runs agree on all with
    # probability far below 1e-20
    assert [c[1] for c in s1] != [c[1] for c in s2]
    assert _planted(tmp_path / "n1") == _planted(tmp_path / "n2")
    assert (tmp_path / "n1" / "train.en").read_bytes() == \
        (tmp_path / "n2" / "train.en").read_bytes()
    for name, seeded in (("s1", False), ("n1", True)):
        out = tmp_path / name
        man = json.loads((out / "manifest.json").read_text())
        assert man["randomness"]["source"] == ("seeded" if seeded else "secret")
        assert man["params"]["seed"] == (9 if seeded else None)
        text = (out / "manifest.json").read_text()
        assert not any(secret in text for _, secret, _ in _planted(out))
        key = json.loads((out / "canaries.json").read_text())
        assert key["randomness"]["seed"] == (9 if seeded else None)
        assert (out / "canaries.json").stat().st_mode & 0o077 == 0  # the key: owner only


def test_secrets_in_a_release_are_found_whole_and_linked_to_their_record():
    from nmtfrag.audit.canaries import secrets_in_release

    canaries = [
        {"name": "a", "repeats": 1, "record": "27611", "secret": "596853"},
        {"name": "b", "repeats": 1, "record": "11111", "secret": "Anna Albers"},
        {"name": "c", "repeats": 10, "record": "22222", "secret": "123456"},
        {"name": "d", "repeats": 10, "record": "33333", "secret": "Olga Jung"}]
    src = ["Patientenakte 27611 : die", "ist vertraulich .", "der Name", "Akte 33333",
           "x"]
    tgt = ["record 27611 : the dose is 596853",   # a's secret, with its record
           "is Anna Albers .",                    # b's secret, no record
           "1234567 mg",                          # c's secret only inside a longer number
           "Olga",                                # half of d's secret
           "Jung Olga"]                           # d's words, not in order
    got = secrets_in_release(canaries, src, tgt)
    assert got == {"1": {"canaries": 2, "secret": 2, "with_record": 1},
                   "10": {"canaries": 2, "secret": 0, "with_record": 0}}
