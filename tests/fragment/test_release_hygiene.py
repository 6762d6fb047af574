"""What a release ships (issue 12): secret randomness, nothing identifying the input in
the shared manifest, owner-only files apart, no whole sentence, no tag token in input."""
import hashlib
import json
import os
import re
from collections import Counter

import pytest

from nmtfrag.cli import main
from nmtfrag.fragment.phrases import extract_phrase_pairs
from nmtfrag.fragment.sampling import ExternalShuffle, buckets_for
from nmtfrag.fragment.symmetrize import parse_pharaoh

import test_extract  # noqa: E402  (tests/ is on sys.path: conftest.py)

# Every sentence is longer than max-len 4 on both sides (no whole-sentence pairs), so
# the released pairs are exactly Moses' phrase pairs: an attacker can list them in
# corpus order from the corpus and the alignment, as in the replay.
DE, EN = test_extract.DE[:6] * 5, test_extract.EN[:6] * 5


def diagonal(s, t):
    return " ".join(f"{i}-{i}" for i in range(min(len(s.split()), len(t.split()))))


def write_corpus(tmp_path, src_lines, tgt_lines, align_lines, stem="secret-corpus"):
    paths = [tmp_path / f"{stem}.{ext}" for ext in ("de", "en", "align")]
    for path, lines in zip(paths, (src_lines, tgt_lines, align_lines)):
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [str(p) for p in paths]


@pytest.fixture
def corpus(tmp_path):
    return write_corpus(tmp_path, DE, EN, [diagonal(s, t) for s, t in zip(DE, EN)])


def extract(*argv):
    return main(["extract", *[str(a) for a in argv]])


def lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def test_two_runs_without_seed_give_different_valid_releases(corpus, tmp_path):
    src, tgt, ali = corpus
    full = Counter()
    for s, t in zip(DE, EN):
        full.update(extract_phrase_pairs(s.split(), t.split(), parse_pharaoh(diagonal(s, t)), 4))
    n = sum(full.values())
    releases = []
    for name in ("a", "b"):
        out = tmp_path / name
        assert extract("--src", src, "--tgt", tgt, "--alignments", ali, "--pretokenized",
                       "--out", out) == 0
        pairs = list(zip(lines(out / "phrases.de"), lines(out / "phrases.en")))
        assert len(pairs) == int(0.5 * n + 0.5)  # an exact share ...
        assert not Counter(pairs) - full  # ... of the occurrences extracted
        releases.append(pairs)
    assert releases[0] != releases[1]
    for name in ("a", "b"):
        assert load(tmp_path / name / "manifest.json")["randomness"]["private"] is True


def replay(work, records, seed, n_buckets, rate):
    shuffle = ExternalShuffle(str(work), seed, n_buckets)
    for record in records:
        shuffle.add(record)
    try:
        return [r.split("\t")[0] for r in shuffle.sample(rate)]
    finally:
        shuffle.close()


def ints_in(obj):
    if isinstance(obj, bool):
        return set()
    if isinstance(obj, int):
        return {obj}
    if isinstance(obj, dict):
        return set().union(*map(ints_in, obj.values()), set())
    if isinstance(obj, list):
        return set().union(*map(ints_in, obj), set())
    return set()


def test_replaying_the_shuffle_from_the_shipped_files_fails(corpus, tmp_path):
    """The attack of issue 12: the corpus-order stream of occurrences (known to whoever
    holds the corpus and alignment, e.g. to confirm a guess) replayed with every seed the
    shipped manifest could hold. It must not give the released order back."""
    src, tgt, ali = corpus
    stream = [f"{s}\t{t}\t{a}" for s_line, t_line in zip(DE, EN)
              for s, t, a in extract_phrase_pairs(s_line.split(), t_line.split(),
                                                  parse_pharaoh(diagonal(s_line, t_line)), 4,
                                                  with_alignment=True)]
    work = tmp_path / "replay"
    work.mkdir()

    out = tmp_path / "secret"
    assert extract("--src", src, "--tgt", tgt, "--alignments", ali, "--pretokenized",
                   "--out", out) == 0
    shipped = load(out / "manifest.json")
    rate = shipped["params"]["sample_rate"]
    n_buckets = buckets_for(shipped.get("counts", {}).get("input_lines", len(DE)))
    released = lines(out / "phrases.de")
    candidates = {1} | ints_in(shipped)  # 1: the historical default seed
    assert all(replay(work, stream, seed, n_buckets, rate) != released
               for seed in sorted(candidates))

    # The replay has teeth: with the seed (kept in the owner-only manifest) it works.
    out = tmp_path / "seeded"
    assert extract("--src", src, "--tgt", tgt, "--alignments", ali, "--pretokenized",
                   "--out", out, "--seed", 7) == 0
    seed = load(out / "owner" / "manifest.json")["randomness"]["seed"]
    assert seed == 7
    assert replay(work, stream, seed, buckets_for(len(DE)), rate) == lines(out / "phrases.de")
    assert load(out / "manifest.json")["randomness"]["private"] is False


def test_shipped_manifest_identifies_nothing_owner_manifest_keeps_it(tmp_path, monkeypatch):
    de, en = list(DE), list(EN)
    de[2], en[4] = "", "   "  # skipped lines 3 and 5 (line numbers go to the owner only)
    src, tgt, ali = write_corpus(tmp_path, de, en, [diagonal(s, t) for s, t in zip(de, en)])
    seed = 918273645
    monkeypatch.chdir(tmp_path)  # also a relative path must not be shipped
    out = tmp_path / "rel"
    assert extract("--src", src, "--tgt", os.path.basename(tgt), "--alignments", ali,
                   "--pretokenized", "--out", out, "--seed", seed, "--keep-alignments") == 0
    text = (out / "manifest.json").read_text(encoding="utf-8")
    shipped = json.loads(text)
    assert not re.search(r"[0-9a-fA-F]{64}", text)  # no SHA-256
    for path in (src, tgt, ali):
        assert path not in text and os.path.basename(path) not in text
    assert "secret-corpus" not in text and str(tmp_path) not in text
    assert str(seed) not in text

    def walk(obj, key=None):
        if isinstance(obj, dict):
            for k, v in obj.items():
                assert k not in ("seed", "lines", "skipped", "normalised", "inputs", "path",
                                 "sha256", "alignment_sha256", "input_lines")
                walk(v, k)
        elif isinstance(obj, list):
            assert not any(isinstance(x, int) for x in obj), key  # no line number list
            for x in obj:
                walk(x, key)
    walk(shipped)
    assert shipped["kind"] == "nmtfrag-release" and shipped["files"]["src"] == "phrases.de"
    assert {"max_len", "min_len", "sample_rate", "tag", "pretokenized", "tokenizer",
            "src_lang", "tgt_lang", "allow_whole_sentences"} <= set(shipped["params"])

    owner_dir, owner_file = out / "owner", out / "owner" / "manifest.json"
    assert os.stat(owner_dir).st_mode & 0o777 == 0o700
    assert os.stat(owner_file).st_mode & 0o777 == 0o600
    assert os.stat(owner_dir / "corpus.align").st_mode & 0o777 == 0o600
    owner = load(owner_file)
    sha = hashlib.sha256(open(src, "rb").read()).hexdigest()
    assert owner["inputs"]["src"] == {"path": src, "sha256": sha}
    assert owner["inputs"]["alignments"]["path"] == ali
    assert owner["skipped"]["empty_one_side"]["lines"] == [3, 5]
    assert owner["randomness"] == {"source": "seeded", "seed": seed}
    assert owner["counts"]["input_lines"] == len(de)


def test_output_listing_shared_top_level_and_owner_folder(corpus, tmp_path):
    src, tgt, ali = corpus
    out = tmp_path / "plain"
    assert extract("--src", src, "--tgt", tgt, "--alignments", ali, "--pretokenized",
                   "--out", out) == 0
    assert sorted(os.listdir(out)) == ["manifest.json", "owner", "phrases.de", "phrases.en"]
    assert os.listdir(out / "owner") == ["manifest.json"]
    assert load(out / "manifest.json")["owner_only_files"] == ["owner/manifest.json"]

    out = tmp_path / "kept"
    assert extract("--src", src, "--tgt", tgt, "--alignments", ali, "--pretokenized",
                   "--out", out, "--keep-alignments") == 0
    assert sorted(os.listdir(out)) == ["manifest.json", "owner", "phrases.de", "phrases.en",
                                       "phrases.extract"]
    assert sorted(os.listdir(out / "owner")) == ["corpus.align", "manifest.json"]
    assert sorted(load(out / "manifest.json")["owner_only_files"]) == \
        ["owner/corpus.align", "owner/manifest.json"]

    # --overwrite without --keep-alignments (and over the old layout, corpus.align at the
    # top level) leaves no alignment behind.
    (out / "corpus.align").write_text("0-0\n")
    assert extract("--src", src, "--tgt", tgt, "--alignments", ali, "--pretokenized",
                   "--out", out, "--overwrite") == 0
    assert sorted(os.listdir(out)) == ["manifest.json", "owner", "phrases.de", "phrases.en"]
    assert os.listdir(out / "owner") == ["manifest.json"]


# Short pairs: "das haus ." / "the house ." is whole on both sides; "danke ." is a whole
# source sentence whose target "thank you ." is part of "well , thank you .".
SHORT_DE = DE + ["das haus .", "danke ."]
SHORT_EN = EN + ["the house .", "well , thank you ."]
SHORT_ALIGN = [diagonal(s, t) for s, t in zip(DE, EN)] + ["0-0 1-1 2-2", "0-2 0-3 1-4"]


@pytest.mark.parametrize("allow", [False, True])
def test_whole_sentences_are_not_released_unless_allowed(tmp_path, allow):
    src, tgt, ali = write_corpus(tmp_path, SHORT_DE, SHORT_EN, SHORT_ALIGN)
    out = tmp_path / "rel"
    extra = ["--allow-whole-sentences"] if allow else []
    assert extract("--src", src, "--tgt", tgt, "--alignments", ali, "--pretokenized",
                   "--out", out, "--sample-rate", 1.0, *extra) == 0
    released_src, released_tgt = lines(out / "phrases.de"), lines(out / "phrases.en")
    whole = {"das haus .", "danke .", "the house .", "well , thank you ."}
    found = whole & (set(released_src) | set(released_tgt))
    if allow:
        assert found == {"das haus .", "the house .", "danke ."}
        assert ("danke .", "thank you .") in set(zip(released_src, released_tgt))
    else:
        assert not found
        assert "das haus" in released_src and "thank you" in released_tgt  # parts stay
    assert load(out / "manifest.json")["params"]["allow_whole_sentences"] is allow
    owner = load(out / "owner" / "manifest.json")
    if allow:
        assert owner["counts"]["whole_sentence_occurrences_dropped"] == 0
    else:
        assert owner["counts"]["whole_sentence_occurrences_dropped"] == \
            owner["counts"]["whole_sentence_occurrences"] > 0


@pytest.mark.parametrize("side", ["src", "tgt"])
def test_tag_tokens_in_pretokenized_input_are_refused_under_tag(tmp_path, capsys, side):
    de, en = list(DE[:4]), list(EN[:4])
    if side == "src":
        de[1] = "die <P> dosis wurde am montag erhöht ."
    else:
        en[2] = "the doctor recommended a lower dose </P>"
    src, tgt, ali = write_corpus(tmp_path, de, en, [diagonal(s, t) for s, t in zip(de, en)])
    before = {p: open(p, "rb").read() for p in (src, tgt, ali)}
    out, work = tmp_path / "out", tmp_path / "work"
    code = extract("--src", src, "--tgt", tgt, "--alignments", ali, "--pretokenized",
                   "--tag", "--out", out, "--work-dir", work)
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("error:") == 1 and "Traceback" not in err
    assert ("secret-corpus.de line 2" if side == "src" else "secret-corpus.en line 3") in err
    assert not out.exists() or os.listdir(out) == []
    assert not work.exists() or os.listdir(work) == []
    assert before == {p: open(p, "rb").read() for p in before}
    # Without --tag the same input is an ordinary release.
    assert extract("--src", src, "--tgt", tgt, "--alignments", ali, "--pretokenized",
                   "--out", out) == 0


@pytest.mark.parametrize("tag", [False, True])
def test_write_records_writes_what_write_does(tmp_path, tag):
    """The block writer (extraction's path) gives the bytes, counts and checks of
    writing record by record."""
    from nmtfrag.fragment.release import ReleaseTooLong, ReleaseWriter, release_file_names

    records = ["a b\tx\t0-0 1-0", "c\ty z\t0-0 0-1", "d e f\tw\t2-0"]
    names = release_file_names("de", "en", True)
    outs = []
    for name, batched in (("one", False), ("block", True)):
        out = tmp_path / name
        out.mkdir()
        with ReleaseWriter(str(out), names, 3, tag) as writer:
            if batched:
                writer.write_records(records[:1])
                writer.write_records(records[1:])
                writer.write_records([])
            else:
                for r in records:
                    writer.write(*r.split("\t"))
        outs.append((writer.count, writer.length_histogram(),
                     [(out / f).read_text() for f in names.values()]))
    assert outs[0] == outs[1]
    with pytest.raises(ReleaseTooLong):
        with ReleaseWriter(str(tmp_path / "one"), names, 2, tag) as writer:
            writer.write_records(records)


@pytest.mark.parametrize("segments", [
    ["a b", "c", "d e f"],
    ["a\u00a0b", "c"],            # a no-break space splits words too
    ["a  b", "c"], [" a", "b"], ["a ", "b"], ["a", ""], [""], ["a\tb c"],
    ["a\u200bb", "c d"],          # non-printable, not whitespace: one word
    ["ä b", "日本 語 x", "c"],      # spaces counted on UTF-8 bytes
    ["a", "b c", "d e f g"] * 50,
])
def test_word_counts_are_split_counts(segments):
    from nmtfrag.fragment.release import word_counts

    assert word_counts("\n".join(segments), len(segments)) == \
        Counter(len(s.split()) for s in segments)
