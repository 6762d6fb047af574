"""Public pairs beside the private material and releases packed to sentence length: the
asked share is the trained share, packed examples hold only release pairs, nothing of the
owner is read beyond the training split, the release itself is untouched."""
import json
import os
import random

import pytest
import torch

from nmtfrag.data.bpe import BPE
from nmtfrag.errors import InputError
from nmtfrag.fileio import sha256_file
from nmtfrag.fragment.extract import extract_release
from nmtfrag.train.packing import PackSpec, pack
from nmtfrag.train.public_mix import PublicMix, draw_public, subword_tokens, words
from nmtfrag.train.reshape import Reshape
from test_finetune import FAST, run_finetune
from tinymodel import make_corpus, write_parallel

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    d = tmp_path_factory.mktemp("mix")
    owner = write_parallel(make_corpus(120, seed=11), str(d / "train"))
    valid = write_parallel(make_corpus(20, seed=12), str(d / "valid"))
    # public text: other sentences of the same toy language, longer on average
    public = make_corpus(3000, seed=13, min_len=5, max_len=14)
    write_parallel(public, str(d / "public"))
    return {"dir": d, "owner": owner, "valid": valid, "public": str(d / "public")}


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def _subword_pairs(prefix):
    return list(zip(_read(prefix + ".de"), _read(prefix + ".en")))


@pytest.mark.parametrize("share", [0.2, 0.5, 0.8])
def test_the_public_share_of_target_tokens_is_the_asked_one(tiny_model_dir, corpora, share):
    bpe = BPE(os.path.join(tiny_model_dir, "bpecodes"))
    private = [tuple(x) for x in zip(*[bpe.encode_lines(side, lang, "raw")[0] for side, lang in
                                      ((_read(corpora["owner"][0]), "de"),
                                       (_read(corpora["owner"][1]), "en"))])]
    mix = PublicMix.of_prefix(corpora["public"], "de", "en", share)
    draw = draw_public(mix, bpe, private, seed=3, src_lang="de", tgt_lang="en")
    pub = sum(subword_tokens(t) for _, t in draw.pairs)
    priv = sum(subword_tokens(t) for _, t in private)
    assert abs(pub / (pub + priv) - share) <= 0.01
    assert draw.share == pytest.approx(pub / (pub + priv))
    # the draw is a seeded function of public text: same seed, same pairs; another, others
    again = draw_public(mix, bpe, private, seed=3, src_lang="de", tgt_lang="en")
    other = draw_public(mix, bpe, private, seed=4, src_lang="de", tgt_lang="en")
    assert again.pairs == draw.pairs and other.pairs != draw.pairs


def test_a_share_the_public_text_cannot_give_is_refused(tiny_model_dir, corpora, tmp_path):
    small = write_parallel(make_corpus(5, seed=1), str(tmp_path / "small"))
    bpe = BPE(os.path.join(tiny_model_dir, "bpecodes"))
    private = [("a b", "c d " * 50)]
    with pytest.raises(InputError, match="short of"):
        draw_public(PublicMix(*small, share=0.9), bpe, private, 1, "de", "en")
    with pytest.raises(InputError, match="public-share"):
        PublicMix(*small, share=1.0)
    with pytest.raises(InputError, match="no pair with a target"):
        draw_public(PublicMix(*small, share=0.5, min_words=1000), bpe, private, 1, "de", "en")


def test_packing_uses_every_fragment_once_and_keeps_the_sides_aligned():
    rng = random.Random(0)
    frags = [(f"<P> s{i} s{i}b </P>", f"<P> t{i} </P>") for i in range(500)]
    lengths = [rng.randint(5, 20) for _ in range(100)]
    for tags in ("keep", "drop"):
        examples = pack(frags, lengths, PackSpec("public", tags), seed=7)
        src_groups = [e[0] for e in examples]
        tgt_groups = [e[1] for e in examples]
        used = [t for line in tgt_groups for t in line.split() if t not in ("<P>", "</P>")]
        assert sorted(used) == sorted(f"t{i}" for i in range(500))  # each once
        used_src = [w for line in src_groups for w in line.split() if w not in ("<P>", "</P>")]
        assert sorted(used_src) == sorted(w for i in range(500) for w in (f"s{i}", f"s{i}b"))
        for s, t in examples:  # fragment k of the source is fragment k of the target
            src_ids = [w[1:] for w in s.split() if w.startswith("s") and not w.endswith("b")]
            tgt_ids = [w[1:] for w in t.split() if w.startswith("t")]
            assert src_ids == tgt_ids
            assert ("<P>" in t) == (tags == "keep")
        # every example but the last reaches its drawn length, and none overshoots by
        # more than one fragment (here: one word)
        assert all(min(lengths) <= words(t) <= max(lengths) for t in tgt_groups[:-1])


def test_pack_specs_are_checked():
    with pytest.raises(InputError, match="--pack"):
        PackSpec.of_text("long")
    with pytest.raises(InputError, match="--pack"):
        PackSpec(0)
    with pytest.raises(InputError, match="--pack-tags"):
        PackSpec(10, "maybe")
    with pytest.raises(InputError, match="public-train"):
        Reshape(None, PackSpec("public"))


def _release_dir(corpora, tmp_path, name="release"):
    src, tgt = corpora["owner"]
    return extract_release(src, tgt, str(tmp_path / name), max_len=3, sample_rate=0.5,
                           tag=True, seed=5)


def test_a_release_is_byte_identical_and_the_owner_unread_when_packed_and_mixed(
        tiny_model_dir, corpora, tmp_path):
    """The release step's files, manifest and certificate do not depend on what is done
    with them later; the fine-tuning run that packs and mixes reads only the release, the
    public text and the validation set: the owner's corpus is made unreadable first."""
    rel = tmp_path / "release"
    _release_dir(corpora, tmp_path)
    before = {f: sha256_file(os.path.join(rel, f)) for f in sorted(os.listdir(rel))
              if os.path.isfile(os.path.join(rel, f)) and not f.startswith(".")}
    assert {"phrases.de", "phrases.en", "manifest.json"} <= set(before)
    # the same release made again (seeded) is the same bytes: nothing in it depends on
    # how it will be trained on
    _release_dir(corpora, tmp_path, "again")
    again = {f: sha256_file(os.path.join(tmp_path / "again", f)) for f in before}
    assert again == before
    hidden = [f + ".hidden" for f in corpora["owner"]]
    for f, h in zip(corpora["owner"], hidden):  # gone: any open of them would fail
        os.rename(f, h)
    try:
        man = run_finetune(tiny_model_dir, str(rel), str(tmp_path / "ft"),
                           valid_src=corpora["valid"][0], valid_tgt=corpora["valid"][1],
                           max_updates=4, reshape=Reshape(
                               PublicMix.of_prefix(corpora["public"], "de", "en", 0.5),
                               PackSpec("public", "keep")), **FAST)
    finally:
        for f, h in zip(corpora["owner"], hidden):
            os.rename(h, f)
    after = {f: sha256_file(os.path.join(rel, f)) for f in before}
    assert after == before
    assert man["params"]["pack"]["fragments"] > man["params"]["pack"]["examples"]
    assert abs(man["params"]["public_train"]["share"] - 0.5) <= 0.01
    assert "public_src" in man["inputs_sha256"]


def test_packed_examples_hold_only_release_pairs_and_public_pairs_stay_untagged(
        tiny_model_dir, corpora, tmp_path):
    rel = _release_dir(corpora, tmp_path)
    rel_pairs = set(zip(_read(os.path.join(tmp_path / "release", "phrases.de")),
                        _read(os.path.join(tmp_path / "release", "phrases.en"))))
    man = run_finetune(tiny_model_dir, str(tmp_path / "release"), str(tmp_path / "ft"),
                       valid_src=corpora["valid"][0], valid_tgt=corpora["valid"][1],
                       max_updates=2, keep_work=True, reshape=Reshape(
                           PublicMix.of_prefix(corpora["public"], "de", "en", 0.3),
                           PackSpec(12, "keep")), **FAST)
    del rel
    bpe = BPE(os.path.join(tiny_model_dir, "bpecodes"))
    rel_sub = {(bpe.encode_lines([s], "de", "hub")[0][0], bpe.encode_lines([t], "en", "hub")[0][0])
               for s, t in rel_pairs}
    train = _subword_pairs(str(tmp_path / "ft" / ".work" / "train"))
    packed = [p for p in train if "<P>" in p[1]]
    public = [p for p in train if "<P>" not in p[0] and "<P>" not in p[1]]
    assert len(packed) == man["params"]["pack"]["examples"]
    assert len(public) == man["params"]["public_train"]["pairs"]
    for s, t in packed:
        src_frags = [f.strip() for f in s.replace("</P>", "").split("<P>") if f.strip()]
        tgt_frags = [f.strip() for f in t.replace("</P>", "").split("<P>") if f.strip()]
        assert len(src_frags) == len(tgt_frags)
        for fs, ft in zip(src_frags, tgt_frags):
            assert (f"<P> {fs} </P>", f"<P> {ft} </P>") in rel_sub
    with open(os.path.join(tmp_path / "ft", "manifest.json")) as f:
        shipped = json.load(f)
    assert "guarantee" in shipped["params"]["pack"]["note"]


def test_public_only_trains_on_the_same_public_pairs_without_the_release(
        tiny_model_dir, corpora, tmp_path):
    _release_dir(corpora, tmp_path)
    mixed = run_finetune(tiny_model_dir, str(tmp_path / "release"), str(tmp_path / "mixed"),
                         valid_src=corpora["valid"][0], valid_tgt=corpora["valid"][1],
                         max_updates=1, keep_work=True, reshape=Reshape(
                             PublicMix.of_prefix(corpora["public"], "de", "en", 0.4)), **FAST)
    only = run_finetune(tiny_model_dir, str(tmp_path / "release"), str(tmp_path / "only"),
                        valid_src=corpora["valid"][0], valid_tgt=corpora["valid"][1],
                        max_updates=1, keep_work=True, reshape=Reshape(
                            PublicMix.of_prefix(corpora["public"], "de", "en", 0.4,
                                                only=True)), **FAST)
    mixed_train = set(_subword_pairs(str(tmp_path / "mixed" / ".work" / "train")))
    only_train = set(_subword_pairs(str(tmp_path / "only" / ".work" / "train")))
    assert only_train == {p for p in mixed_train if "<P>" not in p[1]}
    assert only["params"]["public_train"]["pairs"] == mixed["params"]["public_train"]["pairs"]
    assert only["counts"]["train"]["pairs"] == only["params"]["public_train"]["pairs"]


def test_packing_sentences_is_refused(tiny_model_dir, corpora, tmp_path):
    with pytest.raises(InputError, match="release"):
        run_finetune(tiny_model_dir, list(corpora["owner"]), str(tmp_path / "ft"),
                     valid_src=corpora["valid"][0], valid_tgt=corpora["valid"][1],
                     max_updates=1, reshape=Reshape(None, PackSpec(10)), **FAST)


def test_a_packed_cells_public_only_control_draws_the_same_public_pairs(
        tiny_model_dir, corpora, tmp_path):
    """Packing without tags changes the release's target tokens, so the public draw of a
    packed cell differs from an unpacked one's; its control packs the release only to size
    the draw and trains on the same public pairs, no release pair."""
    from collections import Counter
    _release_dir(corpora, tmp_path)

    def run(name, only, pack):
        return run_finetune(
            tiny_model_dir, str(tmp_path / "release"), str(tmp_path / name),
            valid_src=corpora["valid"][0], valid_tgt=corpora["valid"][1], max_updates=1,
            keep_work=True, reshape=Reshape(
                PublicMix.of_prefix(corpora["public"], "de", "en", 0.4, only=only),
                PackSpec(12, "drop") if pack else None), **FAST)
    mixed, only, unpacked = run("mixed", False, True), run("only", True, True), \
        run("unpacked", True, False)
    mixed_train = Counter(_subword_pairs(str(tmp_path / "mixed" / ".work" / "train")))
    only_train = Counter(_subword_pairs(str(tmp_path / "only" / ".work" / "train")))
    assert only["params"]["public_train"]["pairs"] == mixed["params"]["public_train"]["pairs"]
    assert only["params"]["public_train"]["pairs"] != \
        unpacked["params"]["public_train"]["pairs"]
    assert only_train <= mixed_train  # a sub-multiset (Counter order, Python ≥ 3.10)
    assert sum((mixed_train - only_train).values()) == mixed["params"]["pack"]["examples"]
    assert sum(only_train.values()) == only["counts"]["train"]["pairs"]
    assert "no release pair" in only["params"]["pack"]["note"]
