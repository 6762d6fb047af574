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
                 "--accountant", "rdp", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["noise_multiplier"] == pytest.approx(1.0, rel=0.01)
    assert out["accountant"] == "rdp"
    # by default σ is calibrated with PRV (issue 31, item 8): less noise for the same ε,
    # which dp-accounting's PLD confirms
    assert main(["privacy", "--target-epsilon", "2.1014", "--sample-rate", "0.01",
                 "--steps", "1000", "--delta", "1e-5", "--n-examples", "10000",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["accountant"] == "prv" and out["noise_multiplier"] < 0.96
    pld = _google([(out["noise_multiplier"], 0.01, 1000)], 1e-5, "pld")
    assert 2.1014 * 0.98 <= pld <= 2.1014


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


# --- σ calibrated with the tighter accountant (issue 31, item 8) -----------------------

def _google_plan(sigma, kind, count=(100.0, 1.0, 1), q=0.1, steps=100, delta=1e-5):
    """dp-accounting's ε of the default recipe's plan: the DP unit count (a Gaussian of
    std s, q = 1) composed in front of `steps` Poisson-subsampled Gaussian steps."""
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant
    from dp_accounting.rdp import rdp_privacy_accountant

    acc = (rdp_privacy_accountant.RdpAccountant() if kind == "rdp"
           else pld_privacy_accountant.PLDAccountant())
    acc.compose(dp_event.GaussianDpEvent(count[0]))
    acc.compose(dp_event.SelfComposedDpEvent(
        dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), steps))
    return acc.get_epsilon(delta)


def _default_plan_sigma(accountant):
    from nmtfrag.dp import unit_count
    from nmtfrag.dp.engine import DPConfig
    from nmtfrag.dp.planning import plan_noise
    from nmtfrag.dp.recipe import DEFAULT

    config = DPConfig(delta=1e-5, target_epsilon=8.0, accountant=accountant)
    assert (config.sample_rate, config.epochs) == (DEFAULT.sample_rate, DEFAULT.epochs)
    plan = plan_noise(config, 10_000, fixed=[unit_count.count_segment()])
    assert plan.steps == 100 and plan.rate_segments == [(0.1, 100)]
    assert plan.composition["kind"] == "rdp"
    return plan.sigma


def test_default_plan_is_calibrated_with_prv_and_holds_under_dp_accounting():
    """The default recipe's plan (q 0.1, 100 steps, ε 8, δ 1e-5, the count in front):
    σ by PRV (the default) reaches ε ≤ 8 under dp-accounting's PLD, ~5 % less noise than
    RDP calibration, which reaches ε 8 under dp-accounting's RDP (the figure it states)."""
    from nmtfrag.dp.engine import DPConfig

    assert DPConfig(delta=1e-5, target_epsilon=8.0).accountant == "prv"
    s_prv, s_rdp = _default_plan_sigma("prv"), _default_plan_sigma("rdp")
    pld, google_rdp = _google_plan(s_prv, "pld"), _google_plan(s_rdp, "rdp")
    assert 8.0 * 0.98 <= pld <= 8.0  # a guarantee, not needlessly noisy
    assert 8.0 * 0.99 <= google_rdp <= 8.0 * 1.001
    assert s_prv < 0.96 * s_rdp  # the noise the RDP calibration spent for nothing
    assert _google_plan(s_rdp, "pld") < 7.3  # what RDP's σ really cost
    assert _google_plan(s_prv, "rdp") > 8.5  # and PRV's σ is not an RDP ε 8
    # our certified figure is PRV's upper end: never below the independent estimate
    hist = [(100.0, 1.0, 1), (s_prv, 0.1, 100)]
    eps, err = accounting.prv_epsilon(hist, 1e-5)
    assert eps <= 8.0 and eps >= pld - 0.005 and 0 < err <= 0.01


def test_prv_grid_is_bounded_and_stays_an_upper_bound(monkeypatch):
    """A million steps would need a 1.1e8-point PRV grid (~19 GB): the error is raised
    until the grid fits the cap; the figure stays above dp-accounting's estimate."""
    from opacus.accountants import PRVAccountant

    acc = PRVAccountant()
    acc.history = [(1.0, 0.01, 1_000_000)]
    assert accounting._prv_grid_points(acc, 1e-7, 0.01) > 10 * accounting.PRV_MAX_POINTS
    err = accounting._prv_fitting_error(acc, 1e-7, 0.01)
    assert err > 0.01 and accounting._prv_grid_points(acc, 1e-7, err) <= \
        accounting.PRV_MAX_POINTS
    # the same at a cap small enough to compute here, against dp-accounting's PLD
    monkeypatch.setattr(accounting, "PRV_MAX_POINTS", 40_000)
    accounting._prv_cached.cache_clear()
    hist = [(1.0, 0.01, 5000)]
    eps, err = accounting.prv_epsilon(hist, 1e-5)
    assert err > 0.05  # coarsened (0.01 would take ~5e5 points)
    ref = _google(hist, 1e-5, "pld")
    assert ref <= eps <= ref + 2 * err
    accounting._prv_cached.cache_clear()


@pytest.mark.parametrize("history,delta,refined", [
    ([(0.8, 0.1, 100)], 1e-5, False),    # ε ≈ 11: 0.01 is finer than 0.2 % of it
    ([(1.0, 0.01, 1000)], 1e-5, True),   # ε ≈ 1.8: the error refined to 0.2 % of it
    ([(100.0, 1.0, 1), (0.9, 0.1, 100)], 1e-5, False)])  # a unit count in front
def test_prv_figures_equal_opacus_with_each_domain_computed_once(monkeypatch, history, delta,
                                                                 refined):
    """Our PRV path computes each discretisation domain once (its RDP bound is most of the
    time): ε and its error equal opacus' own PRVAccountant asked the same way, and one
    ε at one error computes one domain."""
    from opacus.accountants import PRVAccountant
    from opacus.accountants import prv as opacus_prv

    plain = PRVAccountant()
    plain.history = list(history)
    coarse = plain.get_epsilon(delta=delta, eps_error=0.01)
    fine = max(1e-4, 0.002 * coarse)
    assert (fine < 0.01) == refined
    expected = (plain.get_epsilon(delta=delta, eps_error=fine), fine) if refined \
        else (coarse, 0.01)

    computed = []
    real = opacus_prv.compute_safe_domain_size
    monkeypatch.setattr(opacus_prv, "compute_safe_domain_size",
                        lambda *a, **k: computed.append(k["eps_error"]) or real(*a, **k))
    accounting._prv_cached.cache_clear()
    assert accounting.prv_epsilon(history, delta) == expected
    assert computed == ([0.01, fine] if refined else [0.01])
    accounting._prv_cached.cache_clear()


def test_privacy_plan_of_a_million_steps_in_bounded_memory(capsys):
    """`nmtfrag privacy --steps 1000000` (it needed ~19 GB): both figures, each named by
    its accountant, PRV's with the error its bounded grid allows; under 2 GB here."""
    import json
    import subprocess
    import sys

    code = ("import resource, sys; from nmtfrag.cli import main; rc = main(sys.argv[1:]); "
            "print('MAXRSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "
            "file=sys.stderr); sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", code, "privacy", "--noise-multiplier", "1",
                        "--sample-rate", "0.01", "--steps", "1000000", "--delta", "1e-7",
                        "--n-examples", "1000000", "--json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    maxrss_kb = int(r.stderr.split("MAXRSS")[1].split()[0])
    assert maxrss_kb < 2_000_000
    assert 0.01 < out["prv_eps_error"] < 0.01 * out["epsilon"]["prv"]
    assert out["epsilon"]["prv"] < out["epsilon"]["rdp"]  # both bounds; PRV the tighter
