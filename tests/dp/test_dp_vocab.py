"""DP vocabulary (Hoory et al. 2021 with the corrected threshold)."""
import json
import math
import os

import numpy as np
import pytest

from nmtfrag.fileio import sha256_file

from nmtfrag.cli import main
from nmtfrag.dp import vocab
from nmtfrag.dp.histogram import unit_counts


def test_threshold_value_and_tail():
    thr = vocab.threshold(200, 1e-9, 256)
    assert thr == pytest.approx(1369.4, abs=0.05)
    assert vocab.tail_probability(200, thr) <= 1e-9 / 256 * (1 + 1e-6)
    # the paper's printed formula lacks a √2 and its tail is ~5 orders too large
    paper = vocab.paper_threshold(200, 1e-9, 256)
    assert paper == pytest.approx(982.5, abs=0.05)
    assert vocab.tail_probability(200, paper) > 1e-7


def test_threshold_tail_empirically():
    # δ/N = 0.05: a word held by a single tuple must pass with probability 0.05
    sigma, delta, n = 3.0, 0.05 * 8, 8
    thr = vocab.threshold(sigma, delta, n)
    counts = {f"w{i}": 1 for i in range(40000)}
    kept = vocab.noisy_threshold(counts, sigma, thr, np.random.default_rng(0))
    rate = len(kept) / len(counts)
    sd = math.sqrt(0.05 * 0.95 / len(counts))
    assert abs(rate - 0.05) < 4 * sd


def test_epsilon_both_methods():
    eps = vocab.vocab_epsilon(200, 1e-9, 256)
    assert eps["corollary_1"] == pytest.approx(16 / 200 * math.sqrt(2 * math.log(1.25e9)))
    assert eps["corollary_1"] == pytest.approx(0.5178, abs=1e-3)
    dpa = pytest.importorskip("dp_accounting.gaussian_mechanism")
    assert eps["analytic_gaussian"] == pytest.approx(dpa.get_epsilon_gaussian(200 / 16, 1e-9),
                                                     rel=1e-6)


def test_each_word_once_per_pair_and_truncation():
    stats = {}
    counts = unit_counts([["a", "a", "b"], ["a", "c", "d", "e"]], 3, stats=stats)
    assert counts == {"a": 2, "b": 1, "c": 1, "d": 1}  # "e" is beyond N=3 distinct words
    assert stats == {"units": 2, "truncated_units": 1, "dropped_items": 1}
    pairs = [(["x"], ["y"]), (["x"], ["y"]), (["q"], ["x"])]
    assert list(vocab.pair_words(pairs)) == [["x", "y"], ["x", "y"], ["q", "x"]]
    stats = {}
    assert list(vocab.pair_words(pairs, dedup=True, stats=stats)) == [["x", "y"], ["q", "x"]]
    assert stats == {"duplicates_removed": 1}


def _corpus(n=400, seed=0):
    rng = np.random.default_rng(seed)
    common = ["patient", "dosis", "tablette", "insulin", "pharmakokinetik", "nebenwirkung",
              "behandlung", "arzt"]
    pairs = []
    for _ in range(n):
        src = list(rng.choice(common, size=5))
        pairs.append((src, [w.upper() for w in src]))
    pairs.append((["geheimnummer12345"], ["SECRET12345"]))  # one record only
    return pairs


def test_rare_words_never_reach_the_codes():
    res = vocab.dp_vocabulary(_corpus(), sigma=4.0, delta=1e-6, tuple_len=16, merges=200,
                              seed=3)
    assert "pharmakokinetik" in res["noisy"] and "geheimnummer12345" not in res["noisy"]
    assert all(c >= res["threshold"] for c in res["noisy"].values())
    symbols = {a + b for a, b, _ in res["codes"]}
    assert not any("12345" in s or "geheim" in s for s in symbols)
    assert res["privacy"]["delta"] == 2e-6


def test_same_seed_same_vocabulary_and_fastbpe_format(tmp_path):
    a = vocab.dp_vocabulary(_corpus(), 4.0, 1e-6, 16, 200, seed=5)
    b = vocab.dp_vocabulary(_corpus(), 4.0, 1e-6, 16, 200, seed=5)
    assert a["noisy"] == b["noisy"] and a["codes"] == b["codes"]
    path = str(tmp_path / "bpecodes")
    vocab.write_codes(a["codes"], path)
    lines = open(path, encoding="utf-8").read().splitlines()
    assert lines and all(len(ln.split(" ")) == 3 for ln in lines)
    import fastBPE
    seg = fastBPE.fastBPE(path).apply(["pharmakokinetik patient"])[0]
    assert seg.replace("@@ ", "") == "pharmakokinetik patient"


def test_vocab_command(tmp_path, capsys):
    src, tgt = tmp_path / "t.de", tmp_path / "t.en"
    pairs = _corpus()
    src.write_text("".join(" ".join(s) + "\n" for s, _ in pairs), encoding="utf-8")
    tgt.write_text("".join(" ".join(t) + "\n" for _, t in pairs), encoding="utf-8")
    out = tmp_path / "out"
    argv = ["vocab", "--dp", "--src", str(src), "--tgt", str(tgt), "--pretokenized",
            "--sigma", "4", "--delta", "1e-6", "--tuple-len", "16", "--merges", "100",
            "--out", str(out)]
    assert main(argv) == 0
    for f in ("bpecodes", "dict.de.txt", "dict.en.txt", "noisy_counts.txt", "manifest.json",
              "privacy.json"):
        assert (out / f).is_file()
    text = "".join((out / f).read_text(encoding="utf-8") for f in os.listdir(out)
                   if (out / f).is_file())
    assert "geheimnummer12345" not in text and "SECRET12345" not in text
    priv = json.loads((out / "privacy.json").read_text())["vocabulary"]
    assert priv["epsilon"] == pytest.approx(vocab.vocab_epsilon(4, 1e-6, 16)["analytic_gaussian"])
    assert main(argv) == 2  # refuses to overwrite a finished output
    capsys.readouterr()
    # --delta is required by the parser itself: a usage error, one line, exit 2
    assert main([a for a in argv if a not in ("--delta", "1e-6")] + ["--overwrite"]) == 2
    assert "--delta" in capsys.readouterr().err


def test_extend_tiny_model(tmp_path):
    import torch
    torch.set_num_threads(1)
    from tinymodel import make_tiny_model_dir

    base = make_tiny_model_dir(str(tmp_path / "base"), updates=1)
    base_syms = vocab._read_dict_symbols(os.path.join(base, "dict.de.txt"))
    noisy = {"tablettedosis": 50.0, ".": 40.0, "patientarzt": 30.0}
    out = str(tmp_path / "ext")
    info = vocab.extend_model(base, out, noisy, min_pieces=2)
    assert info["new_words"] >= 1
    new_syms = vocab._read_dict_symbols(os.path.join(out, "dict.de.txt"))
    assert new_syms[:len(base_syms)] == base_syms
    added = new_syms[len(base_syms):]
    assert "tablettedosis" in added and "." not in added
    # "patientarzt" splits into a piece the base dictionary lacks ("patien@@"): skipped
    assert "patientarzt" not in added and info["new_words"] == 1
    old = torch.load(os.path.join(base, "model.pt"), weights_only=False)["model"]
    new = torch.load(os.path.join(out, "model.pt"), weights_only=False)["model"]
    import fastBPE
    pieces = fastBPE.fastBPE(os.path.join(base, "bpecodes")).apply(["tablettedosis"])[0].split()
    idx = {s: i + 4 for i, s in enumerate(base_syms)}
    row = new["encoder.embed_tokens.weight"][4 + new_syms.index("tablettedosis")]
    expect = old["encoder.embed_tokens.weight"][[idx[p] for p in pieces]].float().mean(0)
    assert torch.allclose(row.float(), expect.to(row.dtype).float())
    assert new["decoder.embed_tokens.weight"].shape[0] == len(new_syms) + 4
    # the extended codes make the word one symbol and fairseq loads the extended dir
    seg = fastBPE.fastBPE(os.path.join(out, "bpecodes")).apply(["die tablettedosis"])[0]
    assert seg == "die tablettedosis" or seg.endswith(" tablettedosis")
    from fairseq.models.transformer import TransformerModel
    hub = TransformerModel.from_pretrained(out, checkpoint_file="model.pt",
                                           data_name_or_path=".", bpe="fastbpe",
                                           source_lang="de", target_lang="en")
    ids = hub.binarize(hub.apply_bpe("tablettedosis"))
    assert ids.tolist()[0] == 4 + new_syms.index("tablettedosis")


def _write(tmp_path, pairs):
    src, tgt = tmp_path / "t.de", tmp_path / "t.en"
    src.write_text("".join(" ".join(s) + "\n" for s, _ in pairs), encoding="utf-8")
    tgt.write_text("".join(" ".join(t) + "\n" for _, t in pairs), encoding="utf-8")
    return ["vocab", "--dp", "--src", str(src), "--tgt", str(tgt), "--pretokenized",
            "--sigma", "4", "--delta", "1e-6", "--tuple-len", "16", "--merges", "50"]


def test_noise_is_secret_unless_seeded(tmp_path):
    argv = _write(tmp_path, _corpus())
    runs = {}
    for name, extra in (("a", []), ("b", []), ("s1", ["--seed", "7"]), ("s2", ["--seed", "7"])):
        assert main(argv + ["--out", str(tmp_path / name)] + extra) == 0
        runs[name] = (tmp_path / name / "noisy_counts.txt").read_text()
    assert runs["a"] != runs["b"] and runs["s1"] == runs["s2"]
    man = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert man["randomness"]["private"] is True
    seeded = json.loads((tmp_path / "s1" / "manifest.json").read_text())
    assert seeded["randomness"]["private"] is False
    assert json.loads((tmp_path / "s1" / "owner" / "manifest.json").read_text())[
        "randomness"]["seed"] == 7


def test_shipped_files_hold_nothing_non_private(tmp_path):
    import re
    import stat

    # line 402 has an empty source side: skipped, its number is owner-only
    argv = _write(tmp_path, _corpus() + [([], ["LEER"])])
    runs = {"out": [], "seeded": ["--seed", "918273645"]}
    for name, extra in runs.items():
        assert main(argv + ["--out", str(tmp_path / name)] + extra) == 0
    for name in runs:
        out = tmp_path / name
        assert sorted(os.listdir(out)) == ["bpecodes", "dict.de.txt", "dict.en.txt",
                                           "manifest.json", "noisy_counts.txt", "owner",
                                           "privacy.json"]
        for f in ("manifest.json", "privacy.json"):
            text = (out / f).read_text()
            # the only hashes: the shared files' own, which bind the certificate to them
            own = {sha256_file(str(out / g)) for g in ("bpecodes", "dict.de.txt",
                                                       "dict.en.txt", "noisy_counts.txt")}
            assert set(re.findall(r"\b[0-9a-f]{64}\b", text)) <= own, f
            assert not re.search(r"(?<![\w.])t\.(de|en)\b", text), f  # the input names
            assert str(tmp_path) not in text and "918273645" not in text, f
            for key in ('"skipped"', '"seed"', '"lines"', '"distinct_words"',
                        '"input_lines"'):
                assert key not in text, (f, key)
        assert stat.S_IMODE(os.stat(out / "owner").st_mode) == 0o700
        owner = out / "owner" / "manifest.json"
        assert stat.S_IMODE(os.stat(owner).st_mode) == 0o600
        rec = json.loads(owner.read_text())
        assert re.fullmatch(r"[0-9a-f]{64}", rec["inputs"]["src"]["sha256"])
        assert rec["counts"]["distinct_words"] > 0
        assert rec["skipped"]["empty_one_side"]["lines"] == [402]
    assert json.loads((tmp_path / "seeded" / "owner" / "manifest.json").read_text())[
        "randomness"]["seed"] == 918273645


def test_pairs_per_tuple_is_gone(tmp_path, capsys):
    argv = _write(tmp_path, _corpus())
    # argparse: unrecognized argument (a usage error: main returns 2, one error line)
    assert main(argv + ["--out", str(tmp_path / "o"), "--pairs-per-tuple", "4"]) == 2
    assert "--pairs-per-tuple" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_dedup_counts_a_repeated_pair_once(tmp_path):
    pairs = _corpus(100) + [(["wiederholt"], ["REPEATED"])] * 50
    # the count entering the histogram: 50 units as they are, 1 distinct pair with dedup
    assert unit_counts(vocab.pair_words(pairs), 16)["wiederholt"] == 50
    assert unit_counts(vocab.pair_words(pairs, dedup=True), 16)["wiederholt"] == 1
    plain = vocab.dp_vocabulary(pairs, 1.0, 1e-6, 16, 0, seed=1)
    dedup = vocab.dp_vocabulary(pairs, 1.0, 1e-6, 16, 0, seed=1, dedup=True)
    assert "wiederholt" in plain["noisy"] and "wiederholt" not in dedup["noisy"]
    assert dedup["stats"]["duplicates_removed"] == 49
    assert "group of k" in plain["privacy"]["unit"]
    assert "distinct" in dedup["privacy"]["unit"]
    # the command's certificate names the unit it protects
    argv = _write(tmp_path, pairs)
    units = {}
    for name, extra in (("plain", []), ("dedup", ["--dedup"])):
        assert main(argv + ["--out", str(tmp_path / name)] + extra) == 0
        units[name] = json.loads((tmp_path / name / "privacy.json").read_text())[
            "vocabulary"]["unit"]
    assert units == {"plain": vocab.UNIT, "dedup": vocab.UNIT_DEDUP}
