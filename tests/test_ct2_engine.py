"""`--engine ctranslate2`: same output as fairseq on the tiny model, a conversion cache
keyed by the checkpoint, ensembles refused, a clear error without ctranslate2.

Tests that need ctranslate2 skip (importorskip) only when it is not installed;
scripts/install.sh installs it (the `ct2` extra), so CI runs them.
"""
import json
import os
import random
import shutil
import subprocess
import sys

import pytest
import torch

from nmtfrag.cli import main
from nmtfrag.errors import InputError
from nmtfrag.generate import Translator, load_translator
from tinymodel import make_corpus

torch.set_num_threads(1)


def _lines():
    """Sentences like the training data, plus junk (unknown words, repetitions, up to
    30 words) whose outputs often run to the length limit, an empty and a tagged line."""
    lines = [p[0] for p in make_corpus(300, seed=5, max_len=20)]
    r = random.Random(1)
    words = ["haus", "katze", "xyz", "blumen", "tisch", "."]
    lines += [" ".join(r.choice(words) for _ in range(r.randint(1, 30)))
              for _ in range(200)]
    lines[7] = ""
    lines[8] = "<P> haus katze </P>"
    return lines


@pytest.fixture
def model_copy(tiny_model_dir, tmp_path):
    """A private copy of the tiny model dir (the session one is read-only for tests)."""
    return shutil.copytree(tiny_model_dir, str(tmp_path / "model"),
                           ignore=shutil.ignore_patterns(".ct2-cache"))


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("ct2cache"))


def _diff(a, b):
    return [(i, x, y) for i, (x, y) in enumerate(zip(a, b)) if x != y]


@pytest.mark.parametrize("beam,batch_size", [(1, 64), (5, 64), (8, 16)])
def test_float32_output_equals_fairseq(tiny_model_dir, shared_cache, beam, batch_size):
    pytest.importorskip("ctranslate2")
    lines = _lines()
    fs = Translator(tiny_model_dir, beam=beam, batch_size=batch_size)
    ct = load_translator(tiny_model_dir, "ctranslate2", ct2_cache=shared_cache, beam=beam,
                         batch_size=batch_size)
    assert ct.max_positions == fs.max_positions
    a, b = fs.translate(lines), ct.translate(lines)
    assert len(b) == len(lines) and b[7] == "" and b[8] and "<P>" not in b[8]
    # Identical on all 500 lines here, including outputs cut by the length limit (beam 5,
    # batches of 64) and an empty hypothesis in CTranslate2's n-best (beam 8). Allow one
    # line for numerics on another CPU (float32 kernels differ).
    diff = _diff(a, b)
    assert len(diff) <= 1, diff[:5]
    assert ct.settings["engine"] == "ctranslate2"
    assert ct.settings["compute_type"] == "float32"


@pytest.mark.parametrize("a,b", [(0, 3), (0.5, 1), (1.2, 10)])
def test_short_length_limit_equals_fairseq(tiny_model_dir, shared_cache, a, b):
    """Most hypotheses are cut by max_len: fairseq forces </s> there, we rescore them."""
    pytest.importorskip("ctranslate2")
    lines = _lines()
    kw = dict(beam=5, max_len_a=a, max_len_b=b)
    a = Translator(tiny_model_dir, **kw).translate(lines)
    b = load_translator(tiny_model_dir, "ctranslate2", ct2_cache=shared_cache,
                        **kw).translate(lines)
    diff = _diff(a, b)
    assert len(diff) <= 1, diff[:5]


def test_int8_translates_every_line(tiny_model_dir, shared_cache):
    pytest.importorskip("ctranslate2")
    lines = _lines()[:100]
    a = Translator(tiny_model_dir).translate(lines)
    ct = load_translator(tiny_model_dir, "ctranslate2", compute_type="int8",
                         ct2_cache=shared_cache)
    b = ct.translate(lines)
    assert len(b) == 100 and b[7] == ""
    assert ct.settings["compute_type"] == "int8"
    same = sum(x == y for x, y in zip(a, b))
    assert same >= 50, same  # quantised: mostly, not necessarily, the same


def test_cache_reused_then_invalidated_by_a_new_checkpoint(model_copy):
    pytest.importorskip("ctranslate2")
    from nmtfrag.ct2_engine import CACHE_DIRNAME, CACHE_INFO
    from nmtfrag.model_dir import load_state, save_state

    first = load_translator(model_copy, "ctranslate2")
    assert first.converted
    cache_root = os.path.join(model_copy, CACHE_DIRNAME)
    assert os.path.dirname(first.model_path) == cache_root
    info = json.load(open(os.path.join(first.model_path, CACHE_INFO)))
    assert info["checkpoint"] == "model.pt" and len(info["checkpoint_sha256"]) == 64
    model_bin = os.path.join(first.model_path, "model.bin")
    mtime = os.stat(model_bin).st_mtime_ns

    again = load_translator(model_copy, "ctranslate2", compute_type="int8")
    assert not again.converted and again.model_path == first.model_path
    assert os.stat(model_bin).st_mtime_ns == mtime
    assert [n for n in os.listdir(cache_root) if n.startswith(".")] == []  # no temp dirs

    state = load_state(os.path.join(model_copy, "model.pt"))
    for k, v in state["model"].items():
        if k.endswith("embed_tokens.weight"):
            state["model"][k] = v * 0.5
    save_state(state, os.path.join(model_copy, "model.pt"))
    changed = load_translator(model_copy, "ctranslate2")
    assert changed.converted and changed.model_path != first.model_path
    assert os.listdir(cache_root) == [os.path.basename(changed.model_path)]  # stale gone
    fs = Translator(model_copy)
    assert changed.translate(["haus katze ."]) == fs.translate(["haus katze ."])


def test_named_cache_dir_and_unwritable_model_dir(model_copy, tmp_path, monkeypatch):
    pytest.importorskip("ctranslate2")
    import nmtfrag.ct2_engine as ce

    named = str(tmp_path / "cache")
    tr = load_translator(model_copy, "ctranslate2", ct2_cache=named)
    assert tr.converted and os.path.dirname(tr.model_path) == named
    assert not os.path.exists(os.path.join(model_copy, ce.CACHE_DIRNAME))

    os.chmod(model_copy, 0o555)  # like ../shared/models (read-only even for root here)
    try:
        with pytest.raises(InputError, match="read-only.*--ct2-cache DIR"):
            load_translator(model_copy, "ctranslate2")
        # an existing conversion is used even where nothing can be written
        assert not load_translator(model_copy, "ctranslate2", ct2_cache=named).converted
    finally:
        os.chmod(model_copy, 0o755)
    assert not os.path.exists(os.path.join(model_copy, ce.CACHE_DIRNAME))

    def refuse(*a, **k):  # a cache dir we may not write into
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(ce.tempfile, "mkdtemp", refuse)
    with pytest.raises(InputError, match="Permission denied.*writable --ct2-cache"):
        load_translator(model_copy, "ctranslate2", ct2_cache=str(tmp_path / "other"))


def test_conversion_failure_leaves_no_cache_entry(model_copy, monkeypatch):
    pytest.importorskip("ctranslate2")
    import nmtfrag.ct2_engine as ce

    def boom(md, out, ct2):
        with open(os.path.join(out, "model.bin"), "wb") as f:
            f.write(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(ce, "_convert", boom)
    with pytest.raises(KeyboardInterrupt):
        load_translator(model_copy, "ctranslate2")
    assert os.listdir(os.path.join(model_copy, ce.CACHE_DIRNAME)) == []


def test_ensemble_refused_unless_one_checkpoint_named(model_copy):
    pytest.importorskip("ctranslate2")
    os.rename(os.path.join(model_copy, "model.pt"), os.path.join(model_copy, "model1.pt"))
    shutil.copy(os.path.join(model_copy, "model1.pt"), os.path.join(model_copy, "model2.pt"))
    with pytest.raises(InputError, match="ensemble.*--checkpoint model1.pt"):
        load_translator(model_copy, "ctranslate2")
    tr = load_translator(model_copy, "ctranslate2", checkpoint="model2.pt")
    assert tr.settings["checkpoints"] == ["model2.pt"]


def test_engine_options_need_ctranslate2_engine(tiny_model_dir):
    with pytest.raises(InputError, match="--compute-type"):
        load_translator(tiny_model_dir, "fairseq", compute_type="int8")
    with pytest.raises(InputError, match="--ct2-cache"):
        load_translator(tiny_model_dir, "fairseq", ct2_cache="/tmp/x")


def test_missing_ctranslate2_exits_2(tiny_model_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # `import ctranslate2` fails
    src = tmp_path / "in.de"
    src.write_text("haus katze .\n")
    code = main(["translate", "--model", tiny_model_dir, "--input", str(src),
                 "--engine", "ctranslate2", "--device", "cpu", "--threads", "1"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:")
    assert "ctranslate2" in err[0] and "pip install" in err[0]


def test_cli_translate_and_evaluate_report_engine(tiny_model_dir, shared_cache, tmp_path):
    pytest.importorskip("ctranslate2")
    pairs = make_corpus(23, seed=21)
    src, ref = tmp_path / "t.de", tmp_path / "t.en"
    src.write_text("".join(p[0] + "\n" for p in pairs))
    ref.write_text("".join(p[1] + "\n" for p in pairs))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-m", "nmtfrag", "translate", "--model",
                        tiny_model_dir, "--threads", "1", "--device", "cpu",
                        "--engine", "ctranslate2", "--ct2-cache", shared_cache],
                       input=src.read_text(), capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-1500:]
    expected = Translator(tiny_model_dir).translate([p[0] for p in pairs])
    assert r.stdout.split("\n")[:-1] == expected

    out = str(tmp_path / "eval")
    code = main(["evaluate", "--model", tiny_model_dir, "--src", str(src), "--ref",
                 str(ref), "--out", out, "--engine", "ctranslate2", "--compute-type",
                 "int8", "--ct2-cache", shared_cache, "--threads", "1", "--device", "cpu"])
    assert code == 0
    rep = json.load(open(os.path.join(out, "report.json")))
    gen = rep["params"]["generation"]
    assert gen["engine"] == "ctranslate2" and gen["compute_type"] == "int8"
    assert gen["translation_seconds"] >= 0 and rep["tool_versions"]["ctranslate2"]
    md = open(os.path.join(out, "report.md")).read()
    assert "ctranslate2 (int8)" in md
