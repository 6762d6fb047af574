"""nmtfrag.fragment.public_align: per-sentence word alignment under a model learned on public text.

Checked: a pair's alignment is the same alone and inside any batch (no state across
sentences); a toy model links consistently translated words even against the diagonal;
a saved model round-trips and a tampered one is refused; under --dp every alignment
learned from the private corpus is refused before anything is written; adding one unit
to the corpus leaves every other unit's exact phrase-pair counts unchanged; the shared
manifest names the alignment source but no path; two seeded runs release the same bytes,
whether they learn the public model (once, into the user's cache) or are given one."""
import json
import os
import random
import shutil
from collections import Counter

import pytest

from nmtfrag.cli import main
from nmtfrag.errors import InputError
from nmtfrag.fragment.extract import phrase_pairs
from nmtfrag.fragment.public_align import DESCRIPTION, AlignParams, PublicAligner, learn_model
from nmtfrag.data.tokenize import to_tokens

DEMO = os.path.join(os.path.dirname(__file__), "..", "..", "corpora", "demo")
# 55 made-up nouns and their "translations" (different strings: no identical-token bonus)
DE = [f"{c}{v}n" for c in "bdfgklmprst" for v in "aeiou"]
EN = [f"{c}{v}x" for c in "bdfgklmprst" for v in "aeiou"]


def demo_pairs(part="train"):
    with open(os.path.join(DEMO, f"{part}.de"), encoding="utf-8") as fs, \
            open(os.path.join(DEMO, f"{part}.en"), encoding="utf-8") as ft:
        return [(to_tokens(s.strip(), "de"), to_tokens(t.strip(), "en"))
                for s, t in zip(fs, ft)]


@pytest.fixture(scope="module")
def toy_model(tmp_path_factory):
    """A model learned on 600 toy pairs 'A und B und C .' ||| 'a and b and c .' (1-4
    nouns; a vocabulary large enough that NULL's 1/V does not beat the lexicon)."""
    root = tmp_path_factory.mktemp("toy")
    rng = random.Random(0)
    src, tgt = [], []
    for _ in range(600):
        nouns = rng.sample(range(len(DE)), rng.randint(1, 4))
        src.append(" und ".join(DE[i] for i in nouns) + " .")
        tgt.append(" and ".join(EN[i] for i in nouns) + " .")
    (root / "pub.de").write_text("\n".join(src) + "\n", encoding="utf-8")
    (root / "pub.en").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    learn_model(str(root / "pub"), str(root / "model"))
    return str(root / "model")


def test_toy_model_links_translations_even_against_the_diagonal(toy_model):
    # a moderate diagonal (λ 8, p0 0.2): on 4-word toy sentences the default's stronger
    # one (λ 16, chosen on newstest) would outweigh the toy lexicon
    aligner = PublicAligner(toy_model, AlignParams(8.0, 0.2))
    # the nouns swap places: the lexicon, not the diagonal, must decide
    points = aligner.align(f"{DE[0]} und {DE[1]} .".split(), f"{EN[1]} and {EN[0]} .".split())
    assert points == [(0, 2), (1, 1), (2, 0), (3, 3)]
    # capitalisation does not matter (eflomal lowercased the public text)
    assert aligner.align([DE[3].upper(), DE[4]], [EN[4], EN[3].title()]) == [(0, 1), (1, 0)]
    # unseen words: identical tokens link, the rest follow the diagonal
    points = set(aligner.align("das Blorf 42 .".split(), "the ploof 42 .".split()))
    assert {(1, 1), (2, 2), (3, 3)} <= points


def test_alignment_alone_equals_alignment_inside_any_batch(public_align_model):
    model_dir, _ = public_align_model
    pairs = demo_pairs("train")[:60]
    alone = [PublicAligner(model_dir).align(s, t) for s, t in pairs[:12]]
    rng = random.Random(1)
    batch_aligner = PublicAligner(model_dir)
    for _ in range(5):  # random batches of other pairs (and shuffled nonsense) around it
        for k, (s, t) in enumerate(pairs[:12]):
            for s2, t2 in rng.sample(pairs, 8):
                batch_aligner.align(rng.sample(s2, len(s2)), t2, "grow-diag-final-and")
            assert batch_aligner.align(s, t) == alone[k]
    assert any(alone)


def test_model_dir_round_trips_and_tampering_is_refused(public_align_model, tmp_path):
    model_dir, _ = public_align_model
    copy = tmp_path / "copy"
    shutil.copytree(model_dir, copy)
    a, b = PublicAligner(model_dir), PublicAligner(str(copy))
    assert a.model_id == b.model_id
    for s, t in demo_pairs("train")[:80]:
        for method in ("union", "intersection", "grow-diag-final-and"):
            assert a.align(s, t, method) == b.align(s, t, method)
    with open(copy / "tables.npz", "ab") as f:
        f.write(b"x")
    with pytest.raises(InputError, match="does not match its manifest"):
        PublicAligner(str(copy))


def dp_argv(out, *extra):
    return ["extract", "--src", os.path.join(DEMO, "train.de"),
            "--tgt", os.path.join(DEMO, "train.en"), "--out", str(out), "--dp",
            "--epsilon", "8", "--delta", "1e-4", *extra]


def test_dp_refuses_alignments_learned_on_the_private_corpus(tmp_path, capsys,
                                                             public_align_model):
    align = tmp_path / "corpus.align"
    align.write_text("0-0\n" * 400)
    priors = tmp_path / "priors"
    priors.write_text("LEX\ta\tb\t1.0\n")
    cases = (([], "eflomal on the corpus"), (["--alignments", str(align)], "--alignments"),
             (["--priors", str(priors)], "--priors"))
    for extra, what in cases:
        out = tmp_path / "out"
        assert main(dp_argv(out, *extra)) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error:") and what in err[0]
        assert "private corpus" in err[0] and "--align-public" in err[0]
        assert not out.exists()
    model_dir, _ = public_align_model
    assert main(dp_argv(tmp_path / "o", "--align-model", model_dir, "--alignments",
                        str(align))) == 2
    assert "cannot be combined" in capsys.readouterr().err
    assert main(dp_argv(tmp_path / "o", "--align-model", str(tmp_path))) == 2
    assert "not a finished alignment model" in capsys.readouterr().err
    assert main(dp_argv(tmp_path / "o", "--align-public", os.path.join(DEMO, "train"))) == 2
    assert "is the private corpus itself" in capsys.readouterr().err
    other = tmp_path / "other"
    for lang in ("de", "en"):
        (tmp_path / f"other.{lang}").write_text("ja\n" if lang == "de" else "yes\n")
    assert main(dp_argv(tmp_path / "o", "--align-public", str(other), "--align-model",
                        model_dir)) == 2
    assert "learned on other public text" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def released_counts(out, lang_src="de", lang_tgt="en"):
    with open(out / f"phrases.{lang_src}", encoding="utf-8") as fs, \
            open(out / f"phrases.{lang_tgt}", encoding="utf-8") as ft:
        return Counter(zip(fs.read().splitlines(), ft.read().splitlines()))


def test_adding_one_unit_leaves_every_other_units_counts_unchanged(public_align_model,
                                                                    tmp_path):
    model_dir, _ = public_align_model
    src = open(os.path.join(DEMO, "train.de"), encoding="utf-8").read().splitlines()
    tgt = open(os.path.join(DEMO, "train.en"), encoding="utf-8").read().splitlines()
    added = (" ".join(["Blorf"] * 20 + [src[5]]), " ".join(["zing"] * 20 + [tgt[5]]))
    corpora = {"d": (src, tgt), "d2": (src[:200] + [added[0]] + src[200:],
                                       tgt[:200] + [added[1]] + tgt[200:])}
    counts = {}
    for name, (s, t) in corpora.items():
        (tmp_path / f"{name}.de").write_text("\n".join(s) + "\n", encoding="utf-8")
        (tmp_path / f"{name}.en").write_text("\n".join(t) + "\n", encoding="utf-8")
        out = tmp_path / f"rel-{name}"
        assert main(["extract", "--src", str(tmp_path / f"{name}.de"), "--tgt",
                     str(tmp_path / f"{name}.en"), "--out", str(out), "--sample-rate",
                     "1.0", "--allow-whole-sentences", "--align-model", model_dir]) == 0
        counts[name] = released_counts(out)
    s_tok, t_tok = to_tokens(added[0], "de"), to_tokens(added[1], "en")
    points = PublicAligner(model_dir).align(s_tok, t_tok)
    own = Counter((p[0], p[1]) for p in phrase_pairs(s_tok, t_tok, points, 4, 1, True,
                                                     False)[0])
    assert own and counts["d2"] - own == counts["d"]
    assert sum(counts["d2"].values()) == sum(counts["d"].values()) + sum(own.values())


def test_align_public_learns_into_model_dir_once_and_the_manifest_names_no_path(
        public_align_model, tmp_path):
    _, prefix = public_align_model
    model = tmp_path / "model"
    argv = ["extract", "--src", os.path.join(DEMO, "train.de"), "--tgt",
            os.path.join(DEMO, "train.en"), "--dp", "--epsilon", "8", "--delta", "1e-4",
            "--unit-cap", "8", "--align-public", prefix, "--align-model", str(model)]
    assert main(argv + ["--out", str(tmp_path / "r1")]) == 0
    first = json.loads((model / "manifest.json").read_text())
    assert main(argv + ["--out", str(tmp_path / "r2")]) == 0
    assert json.loads((model / "manifest.json").read_text()) == first  # reused
    owners = [json.loads((tmp_path / r / "owner" / "manifest.json").read_text())
              for r in ("r1", "r2")]
    assert [o["public_aligner"]["learned"] for o in owners] == [True, False]
    shipped = json.loads((tmp_path / "r2" / "manifest.json").read_text())
    assert shipped["params"]["aligner"] == DESCRIPTION
    assert "align_model_sha256" not in shipped["params"]  # shipped files carry no hash
    cert = json.loads((tmp_path / "r2" / "privacy.json").read_text())
    assert cert["release"]["aligner"] == DESCRIPTION == shipped["privacy"]["release"]["aligner"]
    assert owners[1]["public_aligner"]["model_sha256"] == PublicAligner(str(model)).model_id
    for name in ("manifest.json", "privacy.json"):
        text = (tmp_path / "r2" / name).read_text()
        assert str(tmp_path) not in text and "public" not in text.replace(DESCRIPTION, "")
    # the align-model command learns the same kind of model, and refuses to overwrite
    assert main(["align-model", "--public", prefix, "--out", str(tmp_path / "m2")]) == 0
    assert PublicAligner(str(tmp_path / "m2")).manifest["public"] == first["public"]
    assert main(["align-model", "--public", prefix, "--out", str(tmp_path / "m2")]) == 2


def _seeded_extract(out, prefix=None, model=None, *extra):
    argv = ["extract", "--src", os.path.join(DEMO, "train.de"), "--tgt",
            os.path.join(DEMO, "train.en"), "--out", str(out), "--seed", "3", *extra]
    argv += ["--align-public", prefix] if prefix else []
    argv += ["--align-model", model] if model else []
    assert main(argv) == 0
    return {name: (out / name).read_bytes() for name in sorted(os.listdir(out))
            if os.path.isfile(out / name)}


def test_seeded_release_learning_its_public_model_is_reproducible(public_align_model,
                                                                    tmp_path, monkeypatch):
    """eflomal cannot be seeded: a seeded run learns the public model once into the
    user's cache and reuses it, so two seeded runs release the same bytes; a run with
    secret randomness learns its own model in its work dir, as before."""
    _, prefix = public_align_model
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    first = _seeded_extract(tmp_path / "r1", prefix, None, "--sample-rate", "0.5")
    again = _seeded_extract(tmp_path / "r2", prefix, None, "--sample-rate", "0.5")
    assert {"phrases.de", "phrases.en", "manifest.json"} <= set(first)
    assert first == again  # every released file, byte for byte
    owners = [json.loads((tmp_path / r / "owner" / "manifest.json").read_text())
              ["public_aligner"] for r in ("r1", "r2")]
    assert [o["learned"] for o in owners] == [True, False]
    entry = owners[0]["model_cache"]
    assert entry == owners[1]["model_cache"]
    assert entry.startswith(str(cache / "nmtfrag" / "align-models") + os.sep)
    assert owners[0]["model_sha256"] == PublicAligner(entry).model_id
    shipped = (tmp_path / "r1" / "manifest.json").read_text()
    assert str(tmp_path) not in shipped  # the cache's path stays with the owner
    entries = sorted(os.listdir(os.path.dirname(entry)))
    assert main(["extract", "--src", os.path.join(DEMO, "train.de"), "--tgt",
                 os.path.join(DEMO, "train.en"), "--out", str(tmp_path / "secret"),
                 "--align-public", prefix]) == 0
    assert sorted(os.listdir(os.path.dirname(entry))) == entries  # the cache untouched
    secret = json.loads((tmp_path / "secret" / "owner" / "manifest.json").read_text())
    assert secret["public_aligner"]["learned"] and "model_cache" not in \
        secret["public_aligner"]


def test_seeded_dp_release_with_a_kept_model_is_reproducible(public_align_model,
                                                             tmp_path):
    model, _ = public_align_model
    argv = ("--dp", "--epsilon", "8", "--delta", "1e-4", "--unit-cap", "8")
    first = _seeded_extract(tmp_path / "r1", None, model, *argv)
    again = _seeded_extract(tmp_path / "r2", None, model, *argv)
    assert {"phrases.de", "phrases.en", "manifest.json", "privacy.json"} <= set(first)
    assert first == again
