"""`nmtfrag extract` end to end: reproducibility, bad inputs, data hygiene."""
import hashlib
import json
import os
from collections import Counter

import pytest

from nmtfrag.cli import main
from nmtfrag.fragment.extract import extract_release
from nmtfrag.fragment.phrases import extract_phrase_pairs
from nmtfrag.fragment.symmetrize import parse_pharaoh

DE = [
    "der patient erhielt 5 mg täglich .",
    "die dosis wurde am montag erhöht .",
    "der arzt empfahl eine niedrigere dosis .",
    "nach zwei wochen trat übelkeit auf .",
    "der patient erhielt die dosis am montag .",
    "die übelkeit verschwand nach zwei tagen .",
    "der arzt setzte das medikament ab .",
    "eine niedrigere dosis wurde empfohlen .",
] * 4
EN = [
    "the patient received 5 mg daily .",
    "the dose was increased on monday .",
    "the doctor recommended a lower dose .",
    "after two weeks nausea occurred .",
    "the patient received the dose on monday .",
    "the nausea disappeared after two days .",
    "the doctor stopped the medicine .",
    "a lower dose was recommended .",
] * 4


def diagonal_alignment(src, tgt):
    return " ".join(f"{i}-{i}" for i in range(min(len(src.split()), len(tgt.split()))))


@pytest.fixture
def corpus(tmp_path):
    src, tgt, ali = tmp_path / "train.de", tmp_path / "train.en", tmp_path / "train.align"
    src.write_text("\n".join(DE) + "\n", encoding="utf-8")
    tgt.write_text("\n".join(EN) + "\n", encoding="utf-8")
    ali.write_text("\n".join(diagonal_alignment(s, t) for s, t in zip(DE, EN)) + "\n")
    return str(src), str(tgt), str(ali)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def run_cli(*argv):
    return main([str(a) for a in argv])


def test_same_seed_and_alignment_give_identical_bytes(corpus, tmp_path):
    src, tgt, ali = corpus
    outs = []
    for name in ("a", "b"):
        out = tmp_path / name
        assert run_cli("extract", "--src", src, "--tgt", tgt, "--out", out, "--alignments",
                       ali, "--pretokenized", "--seed", 7, "--tag", "--keep-alignments") == 0
        outs.append(out)
    for name in ("phrases.de", "phrases.en", "phrases.extract", "owner/corpus.align"):
        assert read(outs[0] / name) == read(outs[1] / name)
    out_c = tmp_path / "c"
    run_cli("extract", "--src", src, "--tgt", tgt, "--out", out_c, "--alignments", ali,
            "--pretokenized", "--seed", 8, "--tag")
    assert read(outs[0] / "phrases.de") != read(out_c / "phrases.de")
    # without --keep-alignments (inner alignments not computed) the phrases are the same
    out_d = tmp_path / "d"
    run_cli("extract", "--src", src, "--tgt", tgt, "--out", out_d, "--alignments", ali,
            "--pretokenized", "--seed", 7, "--tag")
    for name in ("phrases.de", "phrases.en"):
        assert read(outs[0] / name) == read(out_d / name)


def test_eflomal_release_is_reproducible_from_its_kept_alignment(corpus, tmp_path):
    src, tgt, _ = corpus
    first = extract_release(src, tgt, str(tmp_path / "r1"), pretokenized=True, seed=3,
                            keep_alignments=True).owner
    kept = str(tmp_path / "r1" / "owner" / "corpus.align")
    second = extract_release(src, tgt, str(tmp_path / "r2"), pretokenized=True, seed=3,
                             alignments=kept).owner
    assert first["alignment_sha256"] == second["alignment_sha256"] == sha(kept)
    for name in ("phrases.de", "phrases.en"):
        assert read(tmp_path / "r1" / name) == read(tmp_path / "r2" / name)
    assert first["counts"]["occurrences_extracted"] > len(DE)


def test_release_is_an_exact_random_share_of_all_occurrences(corpus, tmp_path):
    src, tgt, ali = corpus
    full = extract_release(src, tgt, str(tmp_path / "full"), alignments=ali,
                           pretokenized=True, sample_rate=1.0, max_len=3).owner
    half = extract_release(src, tgt, str(tmp_path / "half"), alignments=ali,
                           pretokenized=True, sample_rate=0.5, max_len=3).owner
    n = full["counts"]["occurrences_extracted"]
    assert full["counts"]["occurrences_released"] == n
    assert half["counts"]["occurrences_released"] == int(0.5 * n + 0.5)

    def pairs(d):
        return Counter(zip(read(tmp_path / d / "phrases.de").splitlines(),
                           read(tmp_path / d / "phrases.en").splitlines()))

    # Every occurrence extracted from the corpus, independently of the pipeline.
    expected = Counter()
    for s, t in zip(DE, EN):
        expected.update(extract_phrase_pairs(s.split(), t.split(),
                                             parse_pharaoh(diagonal_alignment(s, t)), 3))
    assert pairs("full") == expected
    assert not pairs("half") - pairs("full")  # a sub-multiset
    # Shuffled: not in corpus order.
    assert read(tmp_path / "full" / "phrases.de").splitlines()[:20] != \
        [p for s, t in zip(DE, EN) for p, _ in extract_phrase_pairs(
            s.split(), t.split(), parse_pharaoh(diagonal_alignment(s, t)), 3)][:20]


def test_no_segment_longer_than_max_len_and_tags_are_separate_tokens(corpus, tmp_path):
    src, tgt, ali = corpus
    out = tmp_path / "r"
    extract_release(src, tgt, str(out), alignments=ali, pretokenized=True, max_len=2,
                    tag=True, sample_rate=1.0)
    sentences = set(DE) | set(EN)
    for name in ("phrases.de", "phrases.en"):
        for line in read(out / name).splitlines():
            tokens = line.split(" ")
            assert tokens[0] == "<P>" and tokens[-1] == "</P>"
            assert 1 <= len(tokens) - 2 <= 2
            assert " ".join(tokens[1:-1]) not in sentences


def test_manifests_record_inputs_counts_and_histogram(corpus, tmp_path):
    src, tgt, ali = corpus
    r = extract_release(src, tgt, str(tmp_path / "r"), alignments=ali, pretokenized=True,
                        max_len=4, sample_rate=0.5)
    m, owner = r.manifest, r.owner
    assert json.loads(read(tmp_path / "r" / "manifest.json")) == m
    assert json.loads(read(tmp_path / "r" / "owner" / "manifest.json")) == owner
    assert owner["inputs"]["src"]["sha256"] == sha(src)
    assert owner["inputs"]["alignments"]["sha256"] == sha(ali)
    assert sum(m["length_histogram"]["src"].values()) == m["counts"]["occurrences_released"]
    assert set(m["length_histogram"]["tgt"]) <= {"1", "2", "3", "4"}
    assert m["params"]["max_len"] == 4 and m["params"]["pretokenized"] is True
    for manifest in (m, owner):
        assert "der patient" not in json.dumps(manifest)  # no corpus text


def test_sacremoses_tokenisation_when_not_pretokenized(tmp_path):
    src, tgt = tmp_path / "a.de", tmp_path / "a.en"
    src.write_text("Die Dosis (5 mg) wurde erhöht.\n", encoding="utf-8")
    tgt.write_text("The dose (5 mg) was increased.\n", encoding="utf-8")
    ali = tmp_path / "a.align"
    ali.write_text("0-0 1-1 2-2 3-3 4-4 5-5 6-6 7-7 8-8\n")
    extract_release(str(src), str(tgt), str(tmp_path / "r"), alignments=str(ali),
                    max_len=1, sample_rate=1.0)
    assert sorted(read(tmp_path / "r" / "phrases.de").split()) == \
        sorted("Die Dosis ( 5 mg ) wurde erhöht .".split())


def test_skips_are_counted_and_crlf_normalised(tmp_path):
    src, tgt = tmp_path / "a.de", tmp_path / "a.en"
    src.write_bytes("eins zwei\r\n\ndrei\n \nvier fünf\n".encode())
    tgt.write_bytes("one two\r\nzero\n\n\nfour five\n".encode())
    ali = tmp_path / "a.align"
    ali.write_text("0-0 1-1\n\n\n\n0-0 1-1\n")
    m = extract_release(str(src), str(tgt), str(tmp_path / "r"), alignments=str(ali),
                        pretokenized=True, sample_rate=1.0).owner
    assert m["counts"]["input_lines"] == 5
    assert m["counts"]["sentence_pairs_used"] == 2
    assert m["skipped"]["empty_one_side"] == {"count": 2, "lines": [2, 3],
                                              "lines_truncated": False}
    assert m["skipped"]["empty_both_sides"]["lines"] == [4]
    assert m["normalised"]["crlf_src"]["lines"] == [1]
    assert "\r" not in read(tmp_path / "r" / "phrases.de")


@pytest.mark.parametrize("case", ["mismatch", "utf8", "empty", "missing", "align_count",
                                  "align_syntax", "align_range", "rate", "maxlen", "lang"])
def test_bad_input_exits_2_with_one_error_line_and_no_release(case, tmp_path, capsys):
    src, tgt, ali = tmp_path / "a.de", tmp_path / "a.en", tmp_path / "a.align"
    src.write_text("eins zwei\ndrei\n", encoding="utf-8")
    tgt.write_text("one two\nthree\n", encoding="utf-8")
    ali.write_text("0-0 1-1\n0-0\n")
    extra = ["--alignments", ali]
    if case == "mismatch":
        tgt.write_text("one two\n")
    elif case == "utf8":
        src.write_bytes(b"eins zwei\ndr\xe9i\n")
    elif case == "empty":
        tgt.write_text("")
    elif case == "missing":
        os.unlink(src)
    elif case == "align_count":
        ali.write_text("0-0\n")
    elif case == "align_syntax":
        ali.write_text("0-0 1:1\n0-0\n")
    elif case == "align_range":
        ali.write_text("0-0 1-5\n0-0\n")
    elif case == "rate":
        extra += ["--sample-rate", "0"]
    elif case == "maxlen":
        extra += ["--max-len", "0"]
    elif case == "lang":
        extra += ["--tgt-lang", "de"]
    out, work = tmp_path / "out", tmp_path / "work"
    before = {p: sha(p) for p in (src, tgt, ali) if os.path.exists(p)}
    code = run_cli("extract", "--src", src, "--tgt", tgt, "--out", out, "--pretokenized",
                   "--work-dir", work, *extra)
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("error:") == 1 and "Traceback" not in err
    assert not out.exists() or os.listdir(out) == []  # nothing half-written
    assert not work.exists() or os.listdir(work) == []  # private work dir removed
    assert before == {p: sha(p) for p in before}  # inputs untouched
    if case in ("utf8",):
        assert "line 2" in err and "a.de" in err
    if case in ("align_syntax", "align_range"):
        assert "a.align line 1" in err


def test_finished_release_is_not_overwritten_without_overwrite(corpus, tmp_path, capsys):
    src, tgt, ali = corpus
    args = ["extract", "--src", src, "--tgt", tgt, "--out", tmp_path / "r",
            "--alignments", ali, "--pretokenized"]
    assert run_cli(*args) == 0
    before = read(tmp_path / "r" / "phrases.de")
    assert run_cli(*args, "--seed", 5) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert read(tmp_path / "r" / "phrases.de") == before
    assert run_cli(*args, "--seed", 5, "--overwrite") == 0


def test_refuses_to_write_over_an_input(tmp_path, capsys):
    src, tgt = tmp_path / "phrases.de", tmp_path / "phrases.en"
    src.write_text("eins zwei\n")
    tgt.write_text("one two\n")
    ali = tmp_path / "a.align"
    ali.write_text("0-0 1-1\n")
    code = run_cli("extract", "--src", src, "--tgt", tgt, "--out", tmp_path,
                   "--alignments", ali, "--pretokenized")
    assert code == 2 and "contains the input file" in capsys.readouterr().err
    assert read(src) == "eins zwei\n"


def test_work_dir_is_private_and_removed(corpus, tmp_path, monkeypatch):
    src, tgt, ali = corpus
    seen = {}
    import nmtfrag.fragment.extract as ex

    original = ex.tokenize_corpus

    def spy(*args, **kwargs):
        work = os.path.dirname(args[5])
        seen["mode"] = os.stat(work).st_mode & 0o777
        seen["dir"] = work
        return original(*args, **kwargs)

    monkeypatch.setattr(ex, "tokenize_corpus", spy)
    extract_release(src, tgt, str(tmp_path / "r"), alignments=ali, pretokenized=True,
                    work_dir=str(tmp_path / "w"))
    assert seen["mode"] == 0o700
    assert not os.path.exists(seen["dir"])


def test_help_explains_every_option(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["extract", "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    for option in ("--src", "--tgt", "--out", "--max-len", "--min-len", "--sample-rate",
                   "--tag", "--seed", "--symmetrize", "--alignments", "--priors",
                   "--pretokenized", "--keep-alignments", "--work-dir", "--keep-work",
                   "--allow-whole-sentences",
                   "--src-lang", "--tgt-lang", "--overwrite"):
        assert option in text


def test_priors_are_used_and_bad_priors_refused(corpus, tmp_path, capsys):
    src, tgt, _ = corpus
    priors = tmp_path / "public.priors"
    priors.write_text("LEX\tpatient\tpatient\t5\nLEX\tdosis\tdose\t5\nHMMF\t1\t2\n",
                      encoding="utf-8")
    m = extract_release(src, tgt, str(tmp_path / "r"), pretokenized=True,
                        priors=str(priors)).owner
    assert m["params"]["priors"] and m["inputs"]["priors"]["sha256"] == sha(priors)
    priors.write_text("LEX\tpatient\tpatient\t5\nLEX patient patient 5\n")
    code = run_cli("extract", "--src", src, "--tgt", tgt, "--out", tmp_path / "r2",
                   "--pretokenized", "--priors", priors)
    assert code == 2 and "public.priors line 2" in capsys.readouterr().err
    assert not (tmp_path / "r2" / "manifest.json").exists()


def test_sentences_too_long_for_eflomal_are_skipped_and_counted(corpus, tmp_path):
    src, tgt, _ = corpus
    long_src, long_tgt = tmp_path / "l.de", tmp_path / "l.en"
    long_src.write_text(read(src) + " ".join(["wort"] * 1100) + "\n", encoding="utf-8")
    long_tgt.write_text(read(tgt) + " ".join(["word"] * 1100) + "\n", encoding="utf-8")
    m = extract_release(str(long_src), str(long_tgt), str(tmp_path / "r"),
                        pretokenized=True).owner
    assert m["skipped"]["too_long_for_aligner"]["lines"] == [len(DE) + 1]
    assert m["counts"]["sentence_pairs_used"] == len(DE)
    # With a given alignment no aligner limit applies.
    ali = tmp_path / "l.align"
    ali.write_text("\n".join(diagonal_alignment(s, t) for s, t in zip(DE, EN)) + "\n"
                   + diagonal_alignment(*[" ".join(["w"] * 1100)] * 2) + "\n")
    m = extract_release(str(long_src), str(long_tgt), str(tmp_path / "r2"),
                        pretokenized=True, alignments=str(ali)).owner
    assert m["counts"]["sentence_pairs_used"] == len(DE) + 1


def test_sigterm_removes_the_private_work_dir(corpus, tmp_path):
    """A killed run leaves no copy of the corpus behind (and no release)."""
    import signal
    import subprocess
    import sys

    src, tgt, _ = corpus
    work = tmp_path / "w"
    slow = ("import time, sys, nmtfrag.fragment.extract as ex\n"
            "orig = ex.tokenize_corpus\n"
            "def slow(*a, **k):\n"
            "    r = orig(*a, **k); print('ready', flush=True); time.sleep(60); return r\n"
            "ex.tokenize_corpus = slow\n"
            "from nmtfrag.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    proc = subprocess.Popen([sys.executable, "-c", slow, "extract", "--src", src, "--tgt", tgt,
                             "--out", str(tmp_path / "r"), "--pretokenized",
                             "--work-dir", str(work)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    assert len(os.listdir(work)) == 1  # the private dir exists while running
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    assert os.listdir(work) == []
    assert not (tmp_path / "r" / "manifest.json").exists()


def test_extract_command_imports_no_deep_learning_stack():
    """`nmtfrag extract` starts fast: torch and fairseq are imported only by the
    commands that train or translate (their import alone takes seconds)."""
    import subprocess
    import sys

    import nmtfrag

    root = os.path.dirname(os.path.dirname(os.path.abspath(nmtfrag.__file__)))
    code = ("import sys; from nmtfrag.cli import build_parser; build_parser(); "
            "import nmtfrag.fragment.extract; "
            "print(sorted(m for m in ('torch', 'fairseq', 'tqdm') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": root})
    assert out.stdout.strip() == "[]"
