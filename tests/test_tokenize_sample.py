"""Tokenisation matches fairseq's hub pipeline; the external shuffle samples exactly."""
from collections import Counter

import pytest

from nmtfrag.sample import ExternalShuffle
from nmtfrag.tokenize import tokenize

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
