"""DP-SGD rates and the DP unit count: every certificate is a proof.

The count ñ = n + N(0, s²) is released first. With --sample-rate Q the training's rate
and steps are public inputs (ñ only scales the update), so its RDP curve is fixed in
advance and the certificate is the RDP composition of [count] + training. With a logical
batch, q = B/ñ is chosen from ñ: the certificate is basic composition of the count's
analytic-Gaussian (ε_count, δ/10) and a training budget (E − ε_count, 9δ/10) fixed
before ñ is drawn; --noise-multiplier (no budget fixed in advance) is refused there.
"""
import json
import math

import pytest
from scipy.stats import norm

from nmtfrag.cli import main
from nmtfrag.dp import accounting, unit_count
from nmtfrag.dp.engine import DPConfig
from nmtfrag.dp.planning import plan_noise

N_PAIRS = 150
DELTA = 1e-3


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    import torch
    from tinymodel import make_corpus, make_tiny_model_dir, write_parallel

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("adaptive")
    base = make_tiny_model_dir(str(root / "base"), updates=2)
    write_parallel(make_corpus(N_PAIRS, seed=51), str(root / "train"))
    write_parallel(make_corpus(10, seed=52), str(root / "valid"))
    return root, base


def _finetune(root, base, out, *extra):
    return main(["finetune", "--model", base, "--train", str(root / "train.de"),
                 str(root / "train.en"), "--valid-src", str(root / "valid.de"),
                 "--valid-tgt", str(root / "valid.en"), "--out", str(root / out),
                 "--pretokenized", "--threads", "1", "-q", "--dp", "--delta", str(DELTA),
                 "--physical-batch", "16", "--dp-params", "bias", "--seed", "4", *extra])


def _privacy_json(root, out, capsys):
    capsys.readouterr()
    assert main(["privacy", str(root / out), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _gaussian_delta(eps, s):
    """δ(ε) of a sensitivity-1 Gaussian with std s (Balle & Wang 2018, Theorem 8),
    written out here as an independent reference for ε_count."""
    return norm.cdf(0.5 / s - eps * s) - math.exp(eps) * norm.cdf(-0.5 / s - eps * s)


def test_sample_rate_mode_is_rdp_composition_of_a_fixed_curve(corpus, capsys):
    root, base = corpus
    assert _finetune(root, base, "rate", "--sample-rate", "0.3", "--max-epochs", "1",
                     "--target-epsilon", "3") == 0
    t = json.loads((root / "rate" / "privacy.json").read_text())["training"]
    steps = math.ceil(1 / 0.3)  # 4: from the public rate, no n
    assert t["steps"] == steps and t["sample_rate"] == 0.3
    assert t["history"] == [[unit_count.COUNT_NOISE, 1.0, 1],
                            [t["noise_multiplier"], 0.3, steps]]  # q = Q exactly
    assert t["composition"]["kind"] == "rdp"
    assert t["composition"]["why"] == "rates fixed in advance: RDP composition"
    assert t["accountant"] == "prv"  # the default calibration (issue 31, item 8)
    whole = accounting.epsilon([tuple(h) for h in t["history"]], DELTA, "prv")
    assert t["epsilon"] == pytest.approx(whole, rel=1e-12) and whole <= 3.0
    assert t["epsilon"] > 0.9 * 3.0  # σ was calibrated with the count in front
    cert = _privacy_json(root, "rate", capsys)
    assert cert["training"]["epsilon"] == pytest.approx(t["epsilon"], rel=1e-12)
    assert cert["training"]["epsilon_recomputed"]["prv"] == pytest.approx(whole, rel=1e-12)
    assert cert["total"]["epsilon"] == pytest.approx(t["epsilon"], rel=1e-12)
    man = json.loads((root / "rate" / "manifest.json").read_text())
    assert man["params"]["sample_rate"] == 0.3 and man["params"]["logical_batch"] is None
    # a fixed σ is allowed here: its curve does not depend on ñ either
    assert _finetune(root, base, "rate-sigma", "--sample-rate", "0.2", "--dp-steps", "2",
                     "--noise-multiplier", "1.5") == 0
    t = json.loads((root / "rate-sigma" / "privacy.json").read_text())["training"]
    assert t["history"][1] == [1.5, 0.2, 2]
    assert t["epsilon"] == pytest.approx(accounting.epsilon(
        [(unit_count.COUNT_NOISE, 1.0, 1), (1.5, 0.2, 2)], DELTA, "prv"), rel=1e-12)


@pytest.fixture(scope="module")
def batch_run(corpus):
    """The logical-batch run, made once for the tests that read it (whichever runs)."""
    root, base = corpus
    assert _finetune(root, base, "batch", "--logical-batch", "20", "--dp-steps", "3",
                     "--target-epsilon", "2") == 0
    return root / "batch"


def test_logical_batch_mode_is_basic_composition_with_a_budget_fixed_in_advance(
        corpus, batch_run, capsys):
    root, base = corpus
    t = json.loads((root / "batch" / "privacy.json").read_text())["training"]
    comp = t["composition"]
    assert comp["kind"] == "basic" and "basic composition" in comp["why"]
    assert comp["delta_count"] == pytest.approx(DELTA / 10)
    assert comp["delta_train"] == pytest.approx(DELTA * 9 / 10)
    eps_count = comp["parts"]["count"]["epsilon"]
    assert _gaussian_delta(eps_count, unit_count.COUNT_NOISE) == pytest.approx(
        DELTA / 10, rel=1e-6)  # the analytic-Gaussian ε of the count at δ/10
    bound = comp["epsilon_train_bound"]
    assert bound == pytest.approx(2.0 - eps_count) and eps_count + bound <= 2.0
    assert t["accountant"] == "prv"  # σ is calibrated with the tightest accountant (item 8)
    eps_train = accounting.epsilon([tuple(h) for h in t["history"][1:]], DELTA * 0.9, "prv")
    assert eps_train <= bound and eps_train > 0.98 * bound  # σ calibrated to the bound
    assert comp["parts"]["training"]["epsilon"] == pytest.approx(eps_train, rel=1e-12)
    assert t["epsilon"] == pytest.approx(eps_count + bound, rel=1e-12)
    assert t["delta"] == DELTA
    n_plan = t["unit_count"]["planning_count"]
    assert t["history"][1][1] == pytest.approx(20 / n_plan)  # q from ñ
    cert = _privacy_json(root, "batch", capsys)
    assert cert["training"]["epsilon"] == pytest.approx(t["epsilon"], rel=1e-12)
    assert cert["training"]["composition"]["parts"]["count"]["epsilon"] == pytest.approx(
        eps_count, rel=1e-9)
    assert cert["total"]["epsilon"] == pytest.approx(t["epsilon"], rel=1e-12)
    assert main(["privacy", str(root / "batch")]) == 0
    text = capsys.readouterr().out
    assert "rates chosen from the DP count: basic composition" in text
    assert "bound fixed in advance" in text


def test_a_tampered_basic_certificate_is_refused(batch_run, tmp_path, capsys):
    """ε_train above the recorded bound is no proof: `nmtfrag privacy` refuses it."""
    import shutil

    shutil.copytree(batch_run, tmp_path / "bad")
    cert = json.loads((tmp_path / "bad" / "privacy.json").read_text())
    cert["training"]["composition"]["epsilon_train_bound"] = 0.01
    (tmp_path / "bad" / "privacy.json").write_text(json.dumps(cert))
    man = json.loads((tmp_path / "bad" / "manifest.json").read_text())
    man["privacy"] = cert  # the manifest's copy edited alike
    (tmp_path / "bad" / "manifest.json").write_text(json.dumps(man))
    assert main(["privacy", str(tmp_path / "bad")]) == 2
    assert "exceeds the bound" in capsys.readouterr().err


@pytest.mark.parametrize("accountant", ["rdp", "prv"])
@pytest.mark.parametrize("n_hat", [400.0, 4000.0])
def test_training_budget_holds_for_the_chosen_accountant_whatever_the_count(accountant,
                                                                            n_hat):
    """σ of a logical-batch plan keeps the training alone at ε_train ≤ E − ε_count at
    9δ/10, by the chosen accountant, for any ñ (the budget does not depend on it)."""
    config = DPConfig(delta=1e-5, target_epsilon=1.0, logical_batch=32, epochs=2,
                      accountant=accountant)
    config.check()
    plan = plan_noise(config, n_hat)
    sigma, steps, rate_segs, comp = (plan.sigma, plan.steps, plan.rate_segments,
                                     plan.composition)
    eps_count = accounting.analytic_gaussian_epsilon(unit_count.COUNT_NOISE, 1e-6)
    assert comp["epsilon_train_bound"] == pytest.approx(1.0 - eps_count)
    assert steps == math.ceil(2 * n_hat / 32)
    hist = accounting.rates_history(sigma, rate_segs)
    assert accounting.epsilon(hist, 9e-6, accountant) <= 1.0 - eps_count
    # a 2 % smaller σ overshoots: the calibration is tight, not trivially safe
    assert accounting.epsilon(accounting.rates_history(0.98 * sigma, rate_segs), 9e-6,
                              accountant) > 0.99 * (1.0 - eps_count)


@pytest.mark.parametrize("extra,msg", [
    (["--noise-multiplier", "1", "--logical-batch", "20", "--dp-steps", "1"],
     "use --sample-rate Q, or --epsilon"),
    (["--noise-multiplier", "1", "--batch-schedule", "10:0,20:2", "--dp-steps", "3"],
     "would depend on it"),
    (["--target-epsilon", "0.01", "--logical-batch", "20", "--dp-steps", "1"],
     "does not exceed the DP unit count's ε_count"),
    (["--noise-multiplier", "1", "--sample-rate", "1.5", "--dp-steps", "1"],
     "--sample-rate must be in (0, 1]"),
    (["--noise-multiplier", "1", "--sample-rate", "0", "--dp-steps", "1"],
     "--sample-rate must be in (0, 1]"),
    (["--noise-multiplier", "1", "--sample-rate", "0.2", "--logical-batch", "20",
      "--dp-steps", "1"], "--sample-rate excludes"),
])
def test_refusals_are_one_line_and_leave_no_output(corpus, capsys, extra, msg):
    root, base = corpus
    capsys.readouterr()
    assert _finetune(root, base, "refused", *extra) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and msg in err[0]
    assert not (root / "refused").exists()
