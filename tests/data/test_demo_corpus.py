"""The bundled demo corpus (corpora/demo) is well-formed and reproducible from make_demo.py."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO = os.path.join(ROOT, "corpora", "demo")
SPLITS = {"train": 400, "valid": 50, "test": 100}


def _lines(path):
    with open(path, "rb") as f:
        data = f.read()
    text = data.decode("utf-8")  # raises on invalid UTF-8
    assert "\r" not in text, f"{path} has CR characters"
    assert text.endswith("\n"), f"{path} does not end with a newline"
    return text[:-1].split("\n")


@pytest.mark.parametrize("split", sorted(SPLITS))
def test_split_is_aligned_utf8_nonempty(split):
    de = _lines(os.path.join(DEMO, f"{split}.de"))
    en = _lines(os.path.join(DEMO, f"{split}.en"))
    assert len(de) == len(en) == SPLITS[split]
    for i, (s, t) in enumerate(zip(de, en), 1):
        assert s.strip() and t.strip(), f"{split} line {i} is empty on one side"
        assert s == s.strip() and t == t.strip(), f"{split} line {i} has stray spaces"
        assert "\t" not in s + t


def test_committed_files_equal_generator_output(tmp_path):
    subprocess.run([sys.executable, os.path.join(DEMO, "make_demo.py"), "--out",
                    str(tmp_path)], check=True)
    for split in SPLITS:
        for lang in ("de", "en"):
            with open(tmp_path / f"{split}.{lang}", "rb") as a, \
                    open(os.path.join(DEMO, f"{split}.{lang}"), "rb") as b:
                assert a.read() == b.read(), f"{split}.{lang} differs from make_demo.py"


def test_no_report_crosses_splits():
    sys.path.insert(0, DEMO)
    try:
        import make_demo
    finally:
        sys.path.remove(DEMO)
    splits = make_demo.generate()
    owners = {}
    for split, pairs in splits.items():
        assert len(pairs) == SPLITS[split]
        for report_id, _, _ in pairs:
            assert owners.setdefault(report_id, split) == split, report_id
    # every invented person (patient, physician, reporter) belongs to one report, so
    # no full name — a secret for the audit — occurs in two splits
    import re
    first = "|".join(make_demo.FEMALE_FIRST + make_demo.MALE_FIRST)
    last = "|".join(re.escape(x) for x in make_demo.SURNAMES)
    name = re.compile(rf"\b(?:{first}) (?:{last})\b")
    names = {split: {n for _, de, en in pairs for n in name.findall(de + " " + en)}
             for split, pairs in splits.items()}
    assert len(names["train"]) > 100
    assert not names["train"] & names["test"]
    assert not names["train"] & names["valid"]
    assert not names["valid"] & names["test"]


def test_no_sentence_pair_in_two_splits():
    """Held-out means held out: the 19 test lines that were also training pairs made the
    demo's membership and BLEU figures on the test set partly figures on training data."""
    seen = {}
    for split in SPLITS:
        pairs = set(zip(_lines(os.path.join(DEMO, f"{split}.de")),
                        _lines(os.path.join(DEMO, f"{split}.en"))))
        for other, earlier in seen.items():
            assert not pairs & earlier, f"{split} and {other} share pairs"
        seen[split] = pairs
