"""Clipping ≤ C for real: removing one unit (sentence pair or document) moves DP-SGD's
clipped sum by at most C, measured in float64, for every trained set and both clipping
methods; and the float64 norm path keeps a large parameter's contribution ≤ C where a
float32 norm would not."""
import math

import pytest
import torch

from nmtfrag.dp import batches, sgd
from test_dp_ghost import _model
from test_dp_sgd import tiny  # noqa: F401 (fixture)

torch.set_num_threads(1)

SETS = ["all", "all-frozen-emb", "lora", "bias", "decoder"]


def _distance(a, b):
    return math.sqrt(sum(float((x - y).square().sum()) for x, y in zip(a, b)))


def _dp(model, C, method):
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.0)
    return sgd.DPSGD(model, opt, max_grad_norm=C, noise_multiplier=1.0,
                     expected_batch_size=4, label_smoothing=0.1, clipping=method)


def _sum_of_rows(dp, ds, rows):
    dp.accumulate(ds.collater([ds[i] for i in rows]))
    return dp.take_clipped_sum()


def _sum_of_units(dp, ds, units, picked):
    sizes = ds.src_sizes + ds.tgt_sizes
    for rows, unit_of in batches.unit_batches(picked, units, 3, sizes):
        dp.accumulate(ds.collater([ds[i] for i in rows]), unit_of)
        dp.close_units(keep=unit_of[rows[-1]])
    return dp.take_clipped_sum()


@pytest.mark.parametrize("C", [0.5, 1e-3])
@pytest.mark.parametrize("method", ["hooks", "ghost"])
@pytest.mark.parametrize("kind", SETS)
def test_removing_one_pair_moves_the_clipped_sum_by_at_most_C(tiny, kind, method, C):
    if kind == "all" and method == "ghost":
        pytest.skip("ghost clipping refuses the tied embeddings (test_dp_ghost.py)")
    model, ds = _model(tiny, kind), tiny[1]
    model.train()
    dp = _dp(model, C, method)
    rows = list(range(7))
    dp.accumulate(ds.collater([ds[i] for i in rows]))
    assert min(v[1] for v in dp.example_stats.values()) > 10 * C  # large gradients
    full = dp.take_clipped_sum()
    moves = [_distance(full, _sum_of_rows(dp, ds, [i for i in rows if i != u]))
             for u in rows]
    assert max(moves) <= C, (max(moves) / C - 1)
    # not vacuous: each removed pair took (almost) exactly C with it
    assert min(moves) >= C * (1 - 2 * sgd.GHOST_CLIP_MARGIN)
    dp.gsm._close()


@pytest.mark.parametrize("kind", ["all", "lora", "bias"])
def test_removing_one_document_moves_the_clipped_sum_by_at_most_C(tiny, kind):
    model, ds = _model(tiny, kind), tiny[1]
    model.train()
    C = 1e-3
    units = [[0, 5, 7], [1], [2, 3, 4, 8], [6, 9]]
    dp = _dp(model, C, "hooks")
    full = _sum_of_units(dp, ds, units, [0, 1, 2, 3])
    moves = [_distance(full, _sum_of_units(dp, ds, units, [v for v in range(4) if v != u]))
             for u in range(4)]
    assert max(moves) <= C and min(moves) >= C * (1 - 1e-5)
    dp.gsm._close()


def _float32_clip(gs, C):
    """The clipping this module replaced: a float32 norm, factor C / (norm + 1e-6)."""
    norm = torch.linalg.vector_norm(gs.reshape(len(gs), -1), dim=1)
    return (C / (norm + 1e-6)).clamp(max=1.0)


def test_a_large_parameter_is_clipped_to_C_where_float32_norms_are_low():
    # one 4M-element parameter (2,048 × 2,048), two examples with large gradients
    gs = 3.0 + torch.randn((2, 2048, 2048), generator=torch.Generator().manual_seed(1))
    C = 0.5
    exact = gs.double().reshape(2, -1).square().sum(1).sqrt()   # independent reference
    norms = sgd.example_sq_norms([gs], 2).sqrt()
    assert torch.allclose(norms, exact, rtol=1e-12, atol=0)
    # torch's float32 norm of this many elements is measurably low ...
    low = torch.linalg.vector_norm(gs.reshape(2, -1), dim=1).double() / exact - 1
    assert (low < -1e-6).all(), low
    contrib = torch.zeros((2048, 2048), dtype=torch.float64)
    for naive, factor in ((True, _float32_clip(gs, C)), (False, sgd.clip_factors(norms, C))):
        for b in range(2):   # each example's contribution alone, its norm in float64
            contrib.zero_()
            sgd.add_scaled(contrib, gs[b:b + 1], factor[b:b + 1])
            over = float(contrib.square().sum().sqrt()) / C - 1
            if naive:
                assert over > 1e-6, over  # ... so a float32 norm overshoots C
            else:
                assert -2e-6 <= over <= 0, over  # float64: ≤ C, within the margin


def test_clip_factors_keep_small_norms_and_zero():
    f = sgd.clip_factors(torch.tensor([0.0, 0.2, 0.5, 2.0], dtype=torch.float64), 0.5)
    assert f[0] == 1.0 and f[1] == 1.0  # within C: unchanged (zero included, no 0/0)
    assert f[2] < 1.0 and 0.5 * f[2] <= 0.5 * (1 - 1e-7)  # at C: the margin applies
    assert float(2.0 * f[3]) == pytest.approx(0.5 / (1 + sgd.CLIP_MARGIN), rel=1e-15)
    assert f.dtype == torch.float64


def test_ghost_norm_samplers_run_in_float64():
    from torch import nn

    from nmtfrag.dp import fairseq_opacus

    cls = fairseq_opacus._grad_sample_module_class("ghost")
    layer = nn.Linear(64, 32)
    gen = torch.Generator().manual_seed(2)
    acts, back = torch.randn(3, 5, 64, generator=gen), torch.randn(3, 5, 32, generator=gen)
    got = cls.NORM_SAMPLERS[nn.Linear](layer, [acts], back)
    want = torch.einsum("nti,ntj->nij", back.double(), acts.double()).reshape(3, -1).norm(dim=1)
    assert got[layer.weight].dtype == torch.float64
    assert torch.allclose(got[layer.weight], want, rtol=1e-12, atol=0)
    ln = nn.LayerNorm(32)
    got = cls.NORM_SAMPLERS[nn.LayerNorm](ln, [back], acts[..., :32])
    assert all(v.dtype == torch.float64 for v in got.values())
    assert set(got) == {ln.weight, ln.bias}


def test_physical_batch_shrinks_to_fit_per_example_gradients():
    """At WMT19's size every parameter's per-example gradient is 1.08 GB: hooks take
    fewer pairs per pass (the logical batch is unchanged), and refuse when not one fits."""
    import pytest
    import torch

    from nmtfrag.dp.clipping import fitting_physical_batch
    from nmtfrag.errors import InputError

    model = torch.nn.Linear(1000, 250)  # 250,250 float32 parameters: 1,001,000 bytes
    per_example, state = 1_001_000, 16 * 250_250  # state: float64 sum + AdamW moments
    assert fitting_physical_batch(model, 32, free_bytes=10**9) == (32, None)
    size, why = fitting_physical_batch(model, 32, free_bytes=state + 20 * per_example)
    assert size == 10 and "32 → 10" in why  # half of what is left holds 10 gradients
    with pytest.raises(InputError, match="one example's gradient"):
        fitting_physical_batch(model, 32, free_bytes=state + per_example)


@pytest.mark.parametrize("method", ["hooks", "ghost"])
def test_public_pairs_in_the_batch_leave_the_sum_the_noise_covers_at_sensitivity_C(
        tiny, method):
    """Public pairs join the logical batch unclipped (DPSGD.add_public): removing one
    private pair still moves what the update divides by at most C, and the public part
    is really in it (it moves the numerator far more than C)."""
    model, ds = _model(tiny, "lora"), tiny[1]
    model.train()
    C = 1e-3
    dp = _dp(model, C, method)
    private, public = list(range(6)), [6, 7, 8, 9]

    def numerator(rows):
        dp.accumulate(ds.collater([ds[i] for i in rows]))
        dp.add_public(ds.collater([ds[i] for i in public]), weight=2.0)
        return dp.take_update_numerator()

    full = numerator(private)
    moves = [_distance(full, numerator([i for i in private if i != u])) for u in private]
    assert max(moves) <= C and min(moves) >= C * (1 - 2 * sgd.GHOST_CLIP_MARGIN)
    dp.accumulate(ds.collater([ds[i] for i in private]))
    without_public = dp.take_update_numerator()
    assert _distance(full, without_public) > 100 * C
    dp.gsm._close()
