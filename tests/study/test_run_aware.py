"""The run-aware test (nmtfrag.study.run_aware) on simulated studies where the truth is
known: its 95% interval covers the true difference in ≥ 93% of 200 studies, whether runs
or test lines dominate the variance, it calls no difference at its level where there is
none, and a share's interval covers the true share; sacrebleu's statistics give its BLEU."""
import numpy as np
import pytest

from nmtfrag.study import run_aware
from nmtfrag.study.run_aware import System


def mean_score(stats):
    stats = np.atleast_2d(stats)
    return stats[:, 0] / stats[:, 1] / 1000.0


def _system(rng, difficulty, mu, runs, tau, noise):
    out = []
    for _ in range(runs):
        effect = rng.normal(0, tau)
        values = mu + difficulty + effect + rng.normal(0, noise, len(difficulty))
        out.append(np.stack([np.round(values * 1000).astype(np.int64),
                             np.ones(len(values), dtype=np.int64)], axis=1))
    return System(out)


def _study(rng, mus, runs, tau, noise, lines=150):
    difficulty = rng.normal(0, 1, lines)  # a new test set drawn from the population
    return {k: _system(rng, difficulty, mu, runs[k], tau, noise) for k, mu in mus.items()}


@pytest.mark.parametrize("tau,noise", [(0.5, 1.0), (0.02, 2.0)])
def test_the_interval_covers_the_true_difference(tau, noise):
    rng = np.random.default_rng(7)
    covered = 0
    for k in range(200):
        systems = _study(rng, {"a": 1.0, "b": 0.6}, {"a": 3, "b": 3}, tau, noise)
        reps = run_aware.replicates(systems, mean_score, samples=300, seed=k)
        d = run_aware.difference(reps, run_aware.run_means(systems, mean_score), "a", "b")
        covered += d.low <= 0.4 <= d.high
    assert covered >= 186, covered


def test_no_difference_is_called_where_there_is_none():
    rng = np.random.default_rng(11)
    called = 0
    for k in range(200):
        systems = _study(rng, {"a": 1.0, "b": 1.0}, {"a": 3, "b": 3}, 0.5, 1.0)
        reps = run_aware.replicates(systems, mean_score, samples=300, seed=k)
        called += run_aware.difference(reps, run_aware.run_means(systems, mean_score),
                                       "a", "b").called
    assert called <= 14, called  # 5% of 200 is 10


def test_a_share_interval_covers_the_true_share_and_one_run_borrows_the_pooled_spread():
    rng = np.random.default_rng(5)
    covered = 0
    for k in range(200):  # share = (1.5 − 1) / (3 − 1) = 0.25; the baseline has one run
        systems = _study(rng, {"base": 1.0, "cell": 1.5, "full": 3.0},
                         {"base": 1, "cell": 3, "full": 3}, 0.3, 1.0)
        reps = run_aware.replicates(systems, mean_score, samples=300, seed=k)
        s = run_aware.share(reps, run_aware.run_means(systems, mean_score), "cell", "base",
                            "full")
        covered += s.low <= 0.25 <= s.high
    assert covered >= 186, covered


def test_without_any_repeated_run_there_is_no_run_aware_figure():
    rng = np.random.default_rng(1)
    systems = _study(rng, {"a": 1.0, "b": 0.5}, {"a": 1, "b": 1}, 0.1, 1.0)
    assert run_aware.replicates(systems, mean_score, samples=50) is None


def test_bleu_from_summed_line_statistics_is_sacrebleus_corpus_bleu():
    from sacrebleu.metrics import BLEU

    hyps = ["the cat sat on the mat .", "a dog", "it is raining today"]
    refs = ["the cat sat on a mat .", "the dog barks", "it rains today"]
    stats = run_aware.bleu_stats(hyps, refs)
    assert run_aware.bleu_score(stats.sum(0))[0] == pytest.approx(
        BLEU().corpus_score(hyps, [refs]).score)
