"""`nmtfrag extract --dp`: a phrase-pair release with an (ε, δ) guarantee (DP set union).

Checked: σ, threshold and ε against independent computations; a pair held by a single
unit passes at exactly the documented rate (and, at a realistic δ, never); the release
holds only pairs of the corpus; secret randomness; nothing private shipped; refusals."""
import json
import math
import os
import re

import numpy as np
import pytest

from nmtfrag.fileio import sha256_file

from nmtfrag.cli import main
from nmtfrag.dp import histogram
from nmtfrag.fragment import dp_release as phrase_release
from nmtfrag.fragment.dp_release import DPReleaseParams
from nmtfrag.fragment.phrases import extract_phrase_pairs

DEMO = os.path.join(os.path.dirname(__file__), "..", "..", "corpora", "demo")


def test_sigma_threshold_and_epsilon_against_independent_computations():
    from scipy.special import erfinv

    dp_accounting = pytest.importorskip("dp_accounting")
    from dp_accounting.gaussian_mechanism import get_epsilon_gaussian

    for eps, delta, cap in ((1.0, 1e-6, 16), (4.0, 1e-6, 4), (8.0, 1e-5, 64)):
        p = DPReleaseParams(eps, delta, cap)
        sigma, thr = phrase_release.calibrate(p)
        # the counts: Gaussian with sensitivity √K, so ε is that of noise σ/√K
        assert get_epsilon_gaussian(sigma / math.sqrt(cap), delta / 2) == \
            pytest.approx(eps, rel=1e-4)
        # T = 1 + σ·√2·erf⁻¹(1 − 2·δ_T/K), the one-sided Gaussian quantile
        assert thr == pytest.approx(1 + sigma * math.sqrt(2) * erfinv(1 - 2 * (delta / 2) / cap),
                                    rel=1e-9)
        # a count-1 pair passes with probability δ_T/K, so ≤ K of them with ≤ δ_T
        assert histogram.tail_probability(sigma, thr) * cap == pytest.approx(delta / 2,
                                                                             rel=1e-6)
    assert dp_accounting is not None


def test_single_unit_pairs_pass_at_the_documented_rate():
    """With a large δ the pass rate is measurable: it must match δ_T/K."""
    p = DPReleaseParams(epsilon=1.0, delta=0.2, cap=2)
    sigma, thr = phrase_release.calibrate(p)
    rate = histogram.tail_probability(sigma, thr)
    assert rate == pytest.approx(0.05)
    units = [[(f"s{u}a", f"t{u}a"), (f"s{u}b", f"t{u}b")] for u in range(500)]
    rng = np.random.default_rng(0)
    passed = sum(len(phrase_release.select_pairs(units, p, sigma, thr, rng))
                 for _ in range(20))
    trials = 20 * 1000
    assert abs(passed / trials - rate) < 4 * math.sqrt(rate * (1 - rate) / trials)


def test_single_unit_pairs_never_pass_at_a_realistic_delta():
    p = DPReleaseParams(epsilon=4.0, delta=1e-6, cap=8)
    sigma, thr = phrase_release.calibrate(p)
    common = [("das", "the"), ("ist", "is")]
    units = [common + [(f"s{u}", f"t{u}")] for u in range(3000)]
    rng = np.random.default_rng(1)
    for _ in range(10):
        kept = phrase_release.select_pairs(units, p, sigma, thr, rng)
        assert set(kept) == set(common)  # held by 3000 units: always above T


def test_cap_bounds_each_units_contribution():
    stats = {}
    counts = histogram.unit_counts([list("abcdefgh"), list("aab")], 3,
                                   lambda d, k: d[-k:], stats)
    assert counts == {"f": 1, "g": 1, "h": 1, "a": 1, "b": 1}
    assert stats == {"units": 2, "truncated_units": 1, "dropped_items": 5}


@pytest.fixture(scope="module")
def demo_alignment(tmp_path_factory, public_align_model):
    """The demo corpus aligned (whitespace tokens) by the public model --dp requires,
    recomputed here pair by pair: the reference the releases are checked against."""
    from nmtfrag.fragment.public_align import PublicAligner
    from nmtfrag.fragment.symmetrize import format_pharaoh

    root = tmp_path_factory.mktemp("dprel")
    src = open(os.path.join(DEMO, "train.de"), encoding="utf-8").read().splitlines()
    tgt = open(os.path.join(DEMO, "train.en"), encoding="utf-8").read().splitlines()
    model_dir = public_align_model[0]
    aligner = PublicAligner(model_dir)
    lines = [format_pharaoh(aligner.align(s.split(), t.split())) for s, t in zip(src, tgt)]
    (root / "model").symlink_to(model_dir)
    return root, src, tgt, lines


def corpus_pairs(src, tgt, lines):
    """Every phrase pair of the corpus (max-len 4), recomputed with nmtfrag.fragment.phrases."""
    pairs = set()
    for s, t, a in zip(src, tgt, lines):
        points = [tuple(map(int, x.split("-"))) for x in a.split()]
        pairs.update((ps, pt) for ps, pt, *_ in
                     extract_phrase_pairs(s.split(), t.split(), points, 4, 1))
    return pairs


def dp_argv(root, out, *extra):
    return ["extract", "--src", os.path.join(DEMO, "train.de"),
            "--tgt", os.path.join(DEMO, "train.en"), "--align-model", str(root / "model"),
            "--pretokenized", "--out", str(root / out), "--dp", "--epsilon", "8",
            "--delta", "1e-4", "--unit-cap", "8", *extra]


def test_release_holds_only_corpus_pairs_and_ships_nothing_private(demo_alignment, capsys):
    root, src, tgt, lines = demo_alignment
    assert main(dp_argv(root, "r1")) == 0
    assert main(dp_argv(root, "r2", "--tag")) == 0
    out = root / "r1"
    assert sorted(os.listdir(out)) == ["manifest.json", "owner", "phrases.de",
                                       "phrases.en", "privacy.json"]
    released = list(zip((out / "phrases.de").read_text().splitlines(),
                        (out / "phrases.en").read_text().splitlines()))
    assert released
    assert set(released) <= corpus_pairs(src, tgt, lines)
    for name in ("manifest.json", "privacy.json"):
        text = (out / name).read_text()
        # the only hashes: the phrase files' own, which bind the certificate to them
        own = {sha256_file(str(out / g)) for g in ("phrases.de", "phrases.en")}
        assert set(re.findall(r"\b[0-9a-f]{64}\b", text)) <= own
        assert "train.de" not in text and str(root) not in text and '"seed"' not in text
    cert = json.loads((out / "privacy.json").read_text())["release"]
    assert cert["epsilon"] == pytest.approx(8, rel=1e-4) and "units" not in cert
    owner = json.loads((out / "owner" / "manifest.json").read_text())
    assert owner["dp_counts"]["units"] == len(src)  # n stays with the owner
    # repeated by rounded noisy count, each ≥ the threshold
    from collections import Counter
    assert min(Counter(released).values()) >= math.floor(cert["threshold"])
    tagged = (root / "r2" / "phrases.en").read_text().splitlines()
    assert all(x.startswith("<P> ") and x.endswith(" </P>") for x in tagged)
    # secret randomness: the two runs' orders differ
    assert [x[5:-5] for x in tagged] != [t for _, t in released]
    capsys.readouterr()
    assert main(["privacy", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"]["epsilon"] == pytest.approx(8, rel=1e-4)


def test_document_unit_and_refusals(demo_alignment, tmp_path, capsys):
    root, src, _, _ = demo_alignment
    docs = tmp_path / "docs"
    docs.write_text("".join(f"d{i // 100}\n" for i in range(len(src))))  # 4 documents
    assert main(dp_argv(root, "doc", "--privacy-unit", "document", "--documents",
                        str(docs), "--delta", "1e-3")) == 2
    assert "no phrase pair could ever be released" in capsys.readouterr().err
    for extra, msg in ((["--sample-rate", "0.5"], "--sample-rate"),
                       (["--privacy-unit", "document"], "--documents"),
                       (["--delta", "0.01"], "1/n")):
        argv = dp_argv(root, "bad", *extra)
        if extra[0] == "--delta":
            argv[argv.index("1e-4")] = "0.01"
            argv = argv[:-2]
        assert main(argv) == 2
        assert msg in capsys.readouterr().err
        assert not (root / "bad" / "manifest.json").exists()


class _InOrder:
    """An rng stand-in that visits units in the given order (sensitivity is per order)."""

    def permutation(self, n):
        return list(range(n))


@pytest.mark.parametrize("seed", range(20))
def test_policy_weights_have_l2_sensitivity_one(seed):
    """Brute force: add one unit anywhere in the order; the weights move by ≤ 1 in L2."""
    rng = np.random.default_rng(seed)
    items = [f"p{i}" for i in range(12)]
    units = [list(rng.choice(items, size=rng.integers(1, 6))) for _ in range(25)]
    extra = list(rng.choice(items + ["only-here"], size=rng.integers(1, 6)))
    cutoff = float(rng.uniform(1, 6))
    for pos in range(0, len(units) + 1, 5):
        a = histogram.policy_weights(units, 8, cutoff, _InOrder())
        b = histogram.policy_weights(units[:pos] + [extra] + units[pos:], 8, cutoff,
                                     _InOrder())
        dist = math.sqrt(sum((a.get(k, 0.0) - b.get(k, 0.0)) ** 2 for k in set(a) | set(b)))
        assert dist <= 1.0 + 1e-9


def test_policy_threshold_bounds_a_single_units_pairs():
    """Monte Carlo: a unit spreading its budget of 1 over t pairs of its own (weights
    1/√t) gets any of them past ρ with probability ≤ δ_T, for every t."""
    sigma, delta_t, cap = 0.8, 0.2, 6
    rho = histogram.policy_threshold(sigma, delta_t, cap)
    rng = np.random.default_rng(0)
    n = 40000
    for t in range(1, cap + 1):
        z = rng.normal(0, sigma, size=(n, t))
        rate = float(np.mean((1 / math.sqrt(t) + z).max(axis=1) > rho))
        assert rate <= delta_t + 4 * math.sqrt(delta_t * (1 - delta_t) / n)
    # and the bound is tight for the worst t
    from scipy.stats import norm
    worst = max(1 - norm.cdf((rho - 1 / math.sqrt(t)) / sigma) ** t for t in range(1, cap + 1))
    assert worst == pytest.approx(delta_t, rel=1e-6)


def test_policy_release_end_to_end(demo_alignment, capsys):
    root, src, tgt, lines = demo_alignment
    assert main(dp_argv(root, "pol", "--dp-weights", "policy", "--unit-cap", "64")) == 0
    out = root / "pol"
    released = list(zip((out / "phrases.de").read_text().splitlines(),
                        (out / "phrases.en").read_text().splitlines()))
    assert released and len(set(released)) == len(released)  # each pair once
    assert set(released) <= corpus_pairs(src, tgt, lines)
    capsys.readouterr()
    assert main(["privacy", str(out), "--json"]) == 0
    cert = json.loads(capsys.readouterr().out)
    assert cert["release"]["weights"] == "policy" and cert["release"]["sensitivity"] == 1.0
    assert cert["total"]["epsilon"] == pytest.approx(8, rel=1e-4)
    assert main(dp_argv(root, "pol2", "--dp-weights", "policy", "--dp-repeat", "count")) == 2
    assert "no frequencies" in capsys.readouterr().err
