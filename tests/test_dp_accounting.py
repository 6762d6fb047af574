"""Privacy accounting: our RDP/PRV interface against Google's dp-accounting (RDP, PLD)."""
import pytest

from nmtfrag.cli import main
from nmtfrag.dp import accounting, schedule
from nmtfrag.errors import InputError

dp_accounting = pytest.importorskip("dp_accounting")

CONFIGS = [  # (σ, q, steps, δ)
    (1.0, 0.01, 1000, 1e-5),
    (0.8, 0.004, 2000, 1e-6),
    (2.0, 0.05, 300, 1e-5),
    (5.0, 0.2, 50, 1e-8),
]


def _google(history, delta, kind):
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant
    from dp_accounting.rdp import rdp_privacy_accountant

    acc = (rdp_privacy_accountant.RdpAccountant() if kind == "rdp"
           else pld_privacy_accountant.PLDAccountant())
    for sigma, q, steps in history:
        acc.compose(dp_event.SelfComposedDpEvent(
            dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), steps))
    return acc.get_epsilon(delta)


@pytest.mark.parametrize("sigma,q,steps,delta", CONFIGS)
def test_rdp_matches_dp_accounting_rdp(sigma, q, steps, delta):
    ours = accounting.plan_epsilon(sigma, q, steps, delta, "rdp")
    ref = _google([(sigma, q, steps)], delta, "rdp")
    assert ours == pytest.approx(ref, rel=0.01)


@pytest.mark.parametrize("sigma,q,steps,delta", CONFIGS)
def test_prv_matches_dp_accounting_pld(sigma, q, steps, delta):
    ours = accounting.plan_epsilon(sigma, q, steps, delta, "prv")
    ref = _google([(sigma, q, steps)], delta, "pld")
    assert ours == pytest.approx(ref, rel=0.01)


def test_schedule_composition_matches_dp_accounting():
    segs = schedule.rate_segments(schedule.parse_schedule("100:0,400:60,800:90"),
                                  total_steps=120, n_examples=20000)
    assert segs == [(0.005, 60), (0.02, 30), (0.04, 30)]
    hist = accounting.rates_history(1.1, segs)
    for ours_name, ref_name in (("rdp", "rdp"), ("prv", "pld")):
        ours = accounting.epsilon(hist, 1e-6, ours_name)
        assert ours == pytest.approx(_google(hist, 1e-6, ref_name), rel=0.01)
    # composing per step (one segment per step) gives the same as grouped segments
    per_step = [(1.1, q, 1) for q, t in segs for _ in range(t)]
    assert accounting.epsilon(per_step, 1e-6, "rdp") == pytest.approx(
        accounting.epsilon(hist, 1e-6, "rdp"), rel=1e-9)


@pytest.mark.parametrize("name", ["rdp", "prv"])
def test_noise_multiplier_for_target_reaches_it(name):
    sigma = accounting.noise_multiplier_for(3.0, 1e-5, [(0.01, 1000)], name)
    eps = accounting.plan_epsilon(sigma, 0.01, 1000, 1e-5, name)
    assert eps <= 3.0
    assert eps >= 3.0 * 0.98  # not needlessly noisy
    assert accounting.plan_epsilon(sigma * 0.97, 0.01, 1000, 1e-5, name) > 3.0 * 0.99


def test_analytic_gaussian_matches_dp_accounting():
    from dp_accounting.gaussian_mechanism import get_epsilon_gaussian

    for s, d in ((12.5, 1e-9), (1.0, 1e-5), (0.5, 1e-3), (40.0, 1e-6)):
        assert accounting.analytic_gaussian_epsilon(s, d) == pytest.approx(
            get_epsilon_gaussian(s, d), rel=1e-6)
    # analytic is never looser than the classic bound
    assert accounting.analytic_gaussian_epsilon(12.5, 1e-9) < \
        accounting.classic_gaussian_epsilon(12.5, 1e-9)


def test_sharded_noise_and_basic_composition():
    assert accounting.effective_noise_multiplier(0.5, 4) == pytest.approx(1.0)
    assert accounting.compose_basic((0.5, 1e-9), (3.0, 1e-6)) == (3.5, 1e-6 + 1e-9)


@pytest.mark.parametrize("bad", [
    dict(delta=None), dict(delta=0.0), dict(delta=1.5), dict(q=0.0), dict(q=1.2),
    dict(sigma=0.0), dict(steps=0)])
def test_void_configurations_refused(bad):
    kw = dict(sigma=1.0, q=0.01, steps=10, delta=1e-5) | bad
    with pytest.raises(InputError):
        accounting.plan_epsilon(kw["sigma"], kw["q"], kw["steps"], kw["delta"])


def test_delta_must_be_below_one_over_n():
    with pytest.raises(InputError, match="1/n"):
        accounting.check_delta(1e-3, n_examples=5000)
    accounting.check_delta(1e-5, n_examples=5000)


def test_bad_schedules_refused():
    for text in ("", "100:5", "abc", "100:0,200:0", "0:0"):
        with pytest.raises(InputError):
            schedule.parse_schedule(text)
    with pytest.raises(InputError):
        schedule.rate_segments(schedule.parse_schedule("100:0"), 10, n_examples=50)
    segs = schedule.parse_schedule("262144:0,524288:2000")
    assert schedule.batch_at(segs, 1999) == 262144 and schedule.batch_at(segs, 2000) == 524288


def test_privacy_command_plan(capsys):
    assert main(["privacy", "--noise-multiplier", "1.0", "--sample-rate", "0.01",
                 "--steps", "1000", "--delta", "1e-5", "--n-examples", "10000",
                 "--json"]) == 0
    import json
    out = json.loads(capsys.readouterr().out)
    assert out["epsilon"]["rdp"] == pytest.approx(2.1014, abs=1e-3)
    assert main(["privacy", "--target-epsilon", "2.1014", "--sample-rate", "0.01",
                 "--steps", "1000", "--delta", "1e-5", "--n-examples", "10000",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["noise_multiplier"] == pytest.approx(1.0, rel=0.01)


def test_privacy_command_refuses_missing_delta(capsys):
    assert main(["privacy", "--noise-multiplier", "1.0", "--sample-rate", "0.01",
                 "--steps", "10"]) == 2
    assert "δ" in capsys.readouterr().err


def test_privacy_command_model_dir(tmp_path, capsys):
    import json

    from certfiles import training_entry, vocabulary_entry, write_model

    vocab = vocabulary_entry(sigma=200.0, delta=1e-9, tuple_len=256)
    write_model(tmp_path, training_entry(sigma=1.0, q=0.01, steps=1000, delta=1e-5),
                vocab)
    assert main(["privacy", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # the DP unit count's segment (s = 100) costs little by RDP composition
    assert out["training"]["epsilon"] == pytest.approx(2.1014, abs=5e-3)
    assert out["total"]["epsilon"] == pytest.approx(vocab["epsilon"]
                                                    + out["training"]["epsilon"])
    assert vocab["epsilon_corollary_1"] == pytest.approx(0.517, abs=0.01)  # Hoory et al.
    assert out["total"]["delta"] == pytest.approx(1e-5 + 2e-9)
    assert main(["privacy", str(tmp_path / "nope")]) == 2
