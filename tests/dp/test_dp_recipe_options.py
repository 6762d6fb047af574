"""The DP recipe's options: automatic clipping (every contribution C·g/(‖g‖ + γ), of
norm < C), the per-pair mean-token loss, linear warm-up, and the two runs that are not
private — a simulation (σ·B_SIM/B on batches of B_SIM for the planned steps) and a
noise-free control — which get no certificate."""
import copy
import json
import math

import pytest
import torch

from nmtfrag.dp import batches, sgd
from nmtfrag.dp.clipping import NORMALIZE_GAMMA
from nmtfrag.dp.engine import DPConfig
from nmtfrag.errors import InputError
from test_dp_sgd import _argv, _reference_grads, tiny, tiny_dir  # noqa: F401 (fixtures)

torch.set_num_threads(1)


def _norm(grads):
    return math.sqrt(sum(float(g.double().pow(2).sum()) for g in grads))


@pytest.mark.parametrize("C", [0.05, 1000.0])
def test_normalised_contributions_are_below_C_and_sum_exactly(tiny, C):
    """Whether C is below every gradient norm or far above it, each example contributes
    C·g/(‖g‖ + γ): norm < C, and the sum matches single-example backward passes."""
    model, ds = copy.deepcopy(tiny[0]), tiny[1]
    model.train()
    ids = list(range(8))
    ref = _reference_grads(model, ds, ids)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.0)
    dp = sgd.DPSGD(model, opt, max_grad_norm=C, noise_multiplier=1.0,
                   expected_batch_size=8, label_smoothing=0.1, clip_mode="normalize")
    out = dp.accumulate(ds.collater([ds[i] for i in ids]))
    assert (out["clipped_norms"] < C).all()
    expect = None
    for i in ids:
        norm = _norm(ref[i])
        contrib = [g.double() * (C / (norm + NORMALIZE_GAMMA)) for g in ref[i]]
        assert _norm(contrib) < C
        expect = contrib if expect is None else [a + b for a, b in zip(expect, contrib)]
    scale = max(float(b.abs().max()) for b in expect)  # key biases: ~0 true gradient
    for a, b in zip(dp.summed, expect):
        assert torch.allclose(a.double(), b, rtol=1e-4, atol=1e-6 * scale)
    if C > 1:  # plain clipping would have left these gradients alone: not the same sum
        assert max(float(n) for n in out["norms"]) < C


def test_normalised_document_gradient(tiny):
    model, ds = copy.deepcopy(tiny[0]), tiny[1]
    model.train()
    units = [[0, 3], [1, 2]]
    ref = _reference_grads(model, ds, range(4))
    C = 10.0
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.0)
    dp = sgd.DPSGD(model, opt, max_grad_norm=C, noise_multiplier=1.0,
                   expected_batch_size=2, label_smoothing=0.1, clip_mode="normalize")
    sizes = ds.src_sizes + ds.tgt_sizes
    for rows, unit_of in batches.unit_batches([0, 1], units, 2, sizes):
        dp.accumulate(ds.collater([ds[i] for i in rows]), unit_of)
        dp.close_units(keep=unit_of[rows[-1]])
    dp.close_units()
    expect = None
    for rows in units:
        doc = [sum(ref[i][k] for i in rows).double() for k in range(len(ref[0]))]
        part = [g * (C / (_norm(doc) + NORMALIZE_GAMMA)) for g in doc]
        assert _norm(part) < C
        expect = part if expect is None else [a + b for a, b in zip(expect, part)]
    for a, b in zip(dp.summed, expect):
        assert torch.allclose(a.double(), b, rtol=1e-4, atol=1e-6)


def test_mean_token_loss_divides_each_gradient_by_its_target_length(tiny):
    model, ds = copy.deepcopy(tiny[0]), tiny[1]
    model.train()
    ids = list(range(6))
    ref = _reference_grads(model, ds, ids)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.0)
    dp = sgd.DPSGD(model, opt, max_grad_norm=1e6, noise_multiplier=1.0,
                   expected_batch_size=6, label_smoothing=0.1, loss="mean")
    dp.accumulate(ds.collater([ds[i] for i in ids]))
    lengths = {i: len(ds[i]["target"]) for i in ids}
    assert len(set(lengths.values())) > 1  # the lengths do differ
    expect = [sum(ref[i][k] / lengths[i] for i in ids) for k in range(len(ref[0]))]
    for a, b in zip(dp.summed, expect):
        assert torch.allclose(a.float(), b, rtol=1e-4, atol=1e-7)


def test_warmup_rates_and_the_first_adam_step(tiny):
    assert [sgd.lr_at(1.0, 4, t) for t in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert sgd.lr_at(0.3, 0, 0) == 0.3
    moved = {}
    for warmup in (0, 4):
        model = copy.deepcopy(tiny[0])
        before = [p.detach().clone() for p in model.parameters()]
        sgd.train_dp(model, tiny[1], steps=1, rate_of_step=lambda t: 0.5,
                     noise_multiplier=1.0, max_grad_norm=1.0, physical_batch=8, lr=1e-2,
                     seed=1, warmup_steps=warmup)
        moved[warmup] = max(float((a - b).abs().max())
                            for a, b in zip(before, model.parameters()))
    # Adam's first step moves a coordinate by lr·|g|/(|g| + eps) ≤ lr: here lr/4
    # (plus float32 rounding of parameters of size ~1)
    assert 0.9e-2 < moved[0] <= 1e-2 + 1e-6
    assert 0.9 * 0.25e-2 < moved[4] <= 0.25e-2 + 1e-6


def _planning_count(out, batch):
    """The count the run's rates come from: its DP unit count ñ (owner-only)."""
    from nmtfrag.dp import unit_count

    owner = json.loads((out / "owner" / "manifest.json").read_text())
    return unit_count.planning_count(owner["units"]["noisy_count"], batch)


def test_simulation_has_the_planned_noise_per_averaged_gradient_and_no_certificate(
        tiny_dir, capsys):
    from nmtfrag.cli import main

    root, base = tiny_dir
    assert main(_argv(root, base, "sim", "--target-epsilon", "2", "--delta", "1e-3",
                      "--logical-batch", "60", "--physical-batch", "16", "--dp-steps", "4",
                      "--dp-simulate-batch", "15", "--seed", "2")) == 0
    io = capsys.readouterr()
    out = root / "sim"
    summary = json.loads(io.out)
    assert "simulation: not private" in io.err and summary["epsilon"] is None
    man = json.loads((out / "manifest.json").read_text())
    sigma = man["not_private"]["planned"]["noise_multiplier"]  # the planned private run's
    assert sigma > 0 and summary["noise_multiplier"] == pytest.approx(sigma)
    assert summary["trained_noise_multiplier"] == pytest.approx(sigma * 15 / 60)
    assert summary["epsilon_if_private"] <= 2.0
    n_plan = _planning_count(out, 60)
    assert not (out / "privacy.json").exists()
    man = json.loads((out / "manifest.json").read_text())
    assert man["dp"] is False and man["privacy"] is None
    assert man["not_private"]["not_private"] == "simulation: not private"
    assert man["not_private"]["trained"]["logical_batch"] == 15
    log = [json.loads(ln) for ln in (out / "owner" / "train.log").read_text().splitlines()]
    assert len(log) == 4 and all(r["sample_rate"] == 15 / n_plan for r in log)
    assert main(["privacy", str(out)]) == 2
    err = capsys.readouterr().err
    assert "simulation: not private, no privacy certificate" in err
    assert "Traceback" not in err


def test_noise_free_control_has_no_noise_and_no_certificate(tiny_dir, capsys):
    from nmtfrag.cli import main

    root, base = tiny_dir
    assert main(_argv(root, base, "control", "--target-epsilon", "2", "--delta", "1e-3",
                      "--logical-batch", "30", "--physical-batch", "16", "--dp-steps", "2",
                      "--dp-control", "--dp-clip-mode", "normalize",
                      "--dp-warmup-steps", "2")) == 0
    io = capsys.readouterr()
    assert "noise-free control: not private" in io.err
    out = root / "control"
    log = [json.loads(ln) for ln in (out / "owner" / "train.log").read_text().splitlines()]
    assert [r["noise_norm"] for r in log] == [0.0, 0.0]
    n_plan = _planning_count(out, 30)
    assert all(r["signal_norm"] > 0 and r["sample_rate"] == 30 / n_plan for r in log)
    assert not (out / "privacy.json").exists()
    man = json.loads((out / "manifest.json").read_text())
    assert man["not_private"]["mode"] == "control" and man["not_private"]["trained"][
        "noise_multiplier"] == 0.0
    assert man["params"]["dp_clip_mode"] == "normalize"
    assert man["params"]["dp_warmup_steps"] == 2
    assert main(["privacy", str(out)]) == 2
    assert "noise-free control: not private" in capsys.readouterr().err


def test_simulated_control_runs_the_planned_steps_on_small_batches_without_noise():
    """--dp-control with --dp-simulate-batch: σ = 0 on batches of B_SIM for the planned
    steps (zero noise per averaged gradient, as in the full-size control), no certificate."""
    from nmtfrag.dp import simulate

    config = DPConfig(delta=1e-5, target_epsilon=8.0, logical_batch=8, simulate_batch=4,
                      control=True)
    config.check()
    assert simulate.mode(config) == "control"
    assert simulate.training_noise(config, 0.9, [(0, 8)], 100) == (0.0, [(0, 4)])
    full = DPConfig(delta=1e-5, target_epsilon=8.0, logical_batch=8, control=True)
    assert simulate.training_noise(full, 0.9, [(0, 8)], 100) == (0.0, [(0, 8)])
    sim = DPConfig(delta=1e-5, target_epsilon=8.0, logical_batch=8, simulate_batch=4)
    assert simulate.training_noise(sim, 0.9, [(0, 8)], 100) == (0.45, [(0, 4)])
    rec = simulate.record(config, 0.9, [(0, 8)], 20, 0.0, 8.0)
    assert rec["not_private"] == "noise-free control: not private"
    assert rec["trained"] == {"noise_multiplier": 0.0, "steps": 20, "logical_batch": 4}
    assert "batches of 4 instead of 8" in rec["why"]
    with pytest.raises(InputError, match="exceeds"):
        simulate.training_noise(config, 0.9, [(0, 8)], 3)


def test_refused_combinations():
    with pytest.raises(InputError, match="batch-schedule"):
        DPConfig(delta=1e-5, noise_multiplier=1.0, batch_schedule="8:0,16:4",
                 simulate_batch=4).check()
    public_rate = dict(delta=1e-5, noise_multiplier=1.0, sample_rate=0.1)
    with pytest.raises(InputError, match="--dp-clip-mode"):
        DPConfig(**public_rate, clip_mode="auto").check()
    with pytest.raises(InputError, match="--dp-loss"):
        DPConfig(**public_rate, loss="max").check()
    with pytest.raises(InputError, match="positive"):  # σ = 0 only for the control
        sgd.DPSGD(torch.nn.Linear(2, 2), None, max_grad_norm=1.0, noise_multiplier=0.0,
                  expected_batch_size=1)


def test_options_left_out_take_the_default_recipe(tiny_dir, capsys):
    """`finetune --dp --epsilon E --delta D` alone trains the default recipe
    (nmtfrag.dp.recipe): LoRA adapters, Adam lr 0.002, a public rate of 0.1 for 10
    expected passes (ceil(10/0.1) = 100 steps, composed by RDP with no unit count);
    fine-tuning without --dp still trains every parameter."""
    from nmtfrag.cli import main
    from nmtfrag.dp import recipe
    from nmtfrag.dp.planning import total_steps

    config = DPConfig(delta=1e-5, target_epsilon=8)
    assert (config.sample_rate, config.epochs, config.lr, config.params.kind) == (
        0.1, 10.0, 0.002, "lora") == (recipe.DEFAULT.sample_rate, recipe.DEFAULT.epochs,
                                      recipe.DEFAULT.lr, recipe.DEFAULT.params)
    assert total_steps(config, [], 10_001) == 100
    given = DPConfig(delta=1e-5, target_epsilon=8, logical_batch=500, steps=7)
    assert given.sample_rate is None and given.epochs is None

    root, base = tiny_dir
    assert main(_argv(root, base, "recipe", "--epsilon", "8", "--delta", "1e-3",
                      "--seed", "3")) == 0
    capsys.readouterr()
    out = root / "recipe"
    t = json.loads((out / "privacy.json").read_text())["training"]
    assert t["steps"] == 100 and t["history"][-1][1:] == [0.1, 100]
    # the rate was fixed in advance: the DP unit count (first segment) and the training
    # compose by RDP
    assert t["history"][0] == [100.0, 1.0, 1] and t["composition"]["kind"] == "rdp"
    capsys.readouterr()
    assert main(_argv(root, base, "recipe-lr", "--epsilon", "8", "--delta", "1e-3",
                      "--lr", "0.001")) == 2  # --lr is the other method's: refused
    assert "give --dp-lr" in capsys.readouterr().err
    # the other non-private options DP-SGD would ignore are refused too, naming the DP one
    for opt, value, hint in (("--patience", "2", "never cut short"),
                             ("--validate-every", "5", "--dp-valid-every"),
                             ("--weight-decay", "0.01", "--dp-weight-decay"),
                             ("--keep-checkpoints", None, "--dp-save-every")):
        assert main(_argv(root, base, "recipe-x", "--epsilon", "8", "--delta", "1e-3",
                          opt, *([value] if value else []))) == 2, opt
        err = capsys.readouterr().err
        assert f"{opt} is an option of fine-tuning without --dp" in err and hint in err, err
    assert not (root / "recipe-x").exists()
    man = json.loads((out / "manifest.json").read_text())
    assert man["params"]["trained_parameters"]["kind"] == "lora" and man["params"]["lr"] == 0.002

    from nmtfrag.cli import finetune as command
    from nmtfrag.cli import dp_options as cli_args

    parser = __import__("argparse").ArgumentParser()
    command.add_arguments(parser)
    plain = parser.parse_args(["--model", "m", "--train", "a", "b", "--out", "o",
                              "--valid-src", "v", "--valid-tgt", "w"])
    assert cli_args.trainable_set(plain).kind == "all"
    # left out, the non-private options take FineTuneConfig's (the paper's) defaults
    from nmtfrag.train.finetune import FineTuneConfig

    cfg, paper = command.config_from_args(plain), FineTuneConfig()
    assert (cfg.lr, cfg.weight_decay, cfg.patience) == (paper.lr, paper.weight_decay,
                                                        paper.patience) == (0.000175, 0.0001, 5)
    given = command.config_from_args(parser.parse_args(
        ["--model", "m", "--train", "a", "b", "--out", "o", "--valid-src", "v",
         "--valid-tgt", "w", "--patience", "-1",
         "--weight-decay", "0", "--lr", "0.001"]))
    assert (given.lr, given.weight_decay, given.patience) == (0.001, 0.0, -1)


def test_a_fixed_rate_plan_is_simulated_at_its_expected_batch(tiny_dir, capsys):
    """The default recipe plans a public rate q, not a batch: its simulation mirrors the
    expected batch q·ñ — batches of B_SIM (rate B_SIM/ñ) with σ·B_SIM/(q·ñ) — for the
    planned ceil(E/q) steps, and has no certificate."""
    from nmtfrag.cli import main

    root, base = tiny_dir
    assert main(_argv(root, base, "sim-rate", "--epsilon", "8", "--delta", "1e-3",
                      "--max-epochs", "1", "--dp-simulate-batch", "6", "--seed", "2")) == 0
    io = capsys.readouterr()
    out = root / "sim-rate"
    assert "simulation: not private" in io.err and not (out / "privacy.json").exists()
    planned = json.loads((out / "manifest.json").read_text())["not_private"]["planned"]
    n_plan = _planning_count(out, 1)  # a fixed rate takes nothing from ñ but the divisor
    assert planned["steps"] == 10  # ceil(1 / 0.1)
    assert planned["logical_batch"] == round(0.1 * n_plan)
    summary = json.loads(io.out)
    assert summary["trained_noise_multiplier"] == pytest.approx(
        summary["noise_multiplier"] * 6 / (0.1 * n_plan))
    log = [json.loads(ln) for ln in (out / "owner" / "train.log").read_text().splitlines()]
    assert len(log) == 10 and all(r["sample_rate"] == pytest.approx(6 / n_plan) for r in log)
    man = json.loads((out / "manifest.json").read_text())
    assert man["dp"] is False and man["privacy"] is None
    assert main(["privacy", str(out)]) == 2
