"""Tokenisation matches fairseq's hub pipeline; the external shuffle samples exactly."""
from collections import Counter

import pytest

from nmtfrag.fragment.sampling import ExternalShuffle
from nmtfrag.data.tokenize import tokenize

SENTENCES = [
    "Die Dosis (5 mg) wurde am 3. März erhöht.",
    "Patienten <18 Jahre & ältere: keine Daten – siehe Abschnitt 4.4.",
    "Anti-Xa-Aktivität: \"niedrig\", 'hoch' | 12,5%",
]


@pytest.mark.parametrize("text", SENTENCES)
def test_tokenize_equals_fairseq_hub_moses_encoder(text):
    from fairseq.data.encoders.moses_tokenizer import MosesTokenizer, MosesTokenizerConfig

    hub = MosesTokenizer(MosesTokenizerConfig(source_lang="de", target_lang="en"))
    assert tokenize(text, "de") == hub.encode(text)


def test_tokenize_escapes_and_splits_dashes():
    tokens = tokenize(SENTENCES[1], "de").split()
    assert "&lt;" in tokens and "&amp;" in tokens and "<" not in tokens
    assert tokenize("Anti-Xa", "de").split() == ["Anti", "@-@", "Xa"]


def shuffled(records, seed, rate, tmp_path, buckets=4):
    shuffle = ExternalShuffle(str(tmp_path), seed, n_buckets=buckets)
    for r in records:
        shuffle.add(r)
    out = list(shuffle.sample(rate))
    shuffle.close()
    return out


def test_sample_keeps_an_exact_share_and_is_deterministic(tmp_path):
    records = [f"r{i}" for i in range(1001)]
    half = shuffled(records, 1, 0.5, tmp_path)
    assert len(half) == 501 and len(set(half)) == 501 and set(half) <= set(records)
    assert half == shuffled(records, 1, 0.5, tmp_path)
    assert half != shuffled(records, 2, 0.5, tmp_path)
    full = shuffled(records, 1, 1.0, tmp_path)
    assert sorted(full) == sorted(records) and full != records


def test_sample_is_uniform_over_records_and_positions(tmp_path):
    records = [str(i) for i in range(6)]
    kept, first = Counter(), Counter()
    trials = 1500
    for seed in range(trials):
        out = shuffled(records, seed, 0.5, tmp_path, buckets=3)
        assert len(out) == 3
        kept.update(out)
        first[out[0]] += 1
    # Each record is kept with probability 1/2 and leads with probability 1/6;
    # bounds are > 5 standard deviations wide.
    for r in records:
        assert abs(kept[r] / trials - 0.5) < 5 * (0.25 / trials) ** 0.5
        assert abs(first[r] / trials - 1 / 6) < 5 * ((5 / 36) / trials) ** 0.5


def test_sample_leaves_no_files(tmp_path):
    shuffled(["a", "b"], 1, 0.5, tmp_path)
    assert list(tmp_path.iterdir()) == []


def one_draw_per_record_reference(records, seed, rate, buckets):
    """The sampler's definition spelled out: a bucket id per record (drawn in blocks of
    BUCKET_BLOCK), an exact multivariate hypergeometric share, a permutation per bucket."""
    import numpy as np

    from nmtfrag.fragment.sampling import BUCKET_BLOCK

    rng = np.random.default_rng(seed)
    contents = [[] for _ in range(buckets)]
    for k, r in enumerate(records):
        if k % BUCKET_BLOCK == 0:
            ids = rng.integers(0, buckets, BUCKET_BLOCK)
        contents[ids[k % BUCKET_BLOCK]].append(r)
    sizes = np.array([len(c) for c in contents])
    keep = int(np.floor(rate * len(records) + 0.5))
    per_bucket = rng.multivariate_hypergeometric(sizes, keep) if len(records) else sizes
    return [c[i] for c, k in zip(contents, per_bucket) for i in rng.permutation(len(c))[:k]]


@pytest.mark.parametrize("n", [0, 1, 65536, 65537, 140000])
def test_batched_buckets_equal_one_draw_per_record(tmp_path, n):
    """add_many/sample_chunks write per bucket in blocks; the order is still the
    reference's, across block boundaries too (byte-identical releases for a seed)."""
    records = [f"r{i}" for i in range(n)]
    shuffle = ExternalShuffle(str(tmp_path), 3, n_buckets=8)
    for start in range(0, n, 999):
        shuffle.add_many(records[start:start + 999])
    out = [r for chunk in shuffle.sample_chunks(0.7) for r in chunk]
    shuffle.close()
    assert out == one_draw_per_record_reference(records, 3, 0.7, 8)
