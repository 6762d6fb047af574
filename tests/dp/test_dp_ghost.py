"""Ghost clipping (opacus, Li et al. 2022) in nmtfrag's DP-SGD: per-example norms and the
clipped sum equal a loop of single-example backward passes, as the hooks path does; the
automatic choice takes ghost clipping only when per-example gradients would not fit in
memory, and never where it cannot be exact (tied matrices, document units)."""
import copy
import math

import pytest
import torch

from nmtfrag.train import trainable
from nmtfrag.dp import clipping, sgd
from nmtfrag.errors import InputError
from test_dp_sgd import _reference_grads, tiny  # noqa: F401 (fixture)
from test_lora import _adapted

torch.set_num_threads(1)

C = 0.05


def _model(tiny, kind):
    if kind == "lora":
        return _adapted(tiny[0], rank=3)[0]
    model = copy.deepcopy(tiny[0])
    spec = trainable.TrainableSet("all", freeze_embeddings=True) if kind == "all-frozen-emb" \
        else trainable.TrainableSet(kind)
    trainable.apply(model, spec)
    return model


def _clipped_reference(ref, ids):
    norms, total = {}, None
    for i in ids:
        norms[i] = math.sqrt(sum(float(g.double().pow(2).sum()) for g in ref[i]))
        f = min(1.0, C / (norms[i] * (1 + sgd.GHOST_CLIP_MARGIN)))  # as DPSGD clips
        part = [g * f for g in ref[i]]
        total = part if total is None else [a + b for a, b in zip(total, part)]
    return norms, total


@pytest.mark.parametrize("kind", ["lora", "bias", "decoder", "all-frozen-emb"])
def test_ghost_norms_and_clipped_sum_equal_single_example_loop(tiny, kind):
    model, ds = _model(tiny, kind), tiny[1]
    model.train()
    ids = list(range(9))
    ref = _reference_grads(model, ds, ids)
    want_norms, want_sum = _clipped_reference(ref, ids)
    assert clipping.choose_clipping(model, "ghost")[0] == "ghost"
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.0)
    dp = sgd.DPSGD(model, opt, max_grad_norm=C, noise_multiplier=1.0,
                   expected_batch_size=len(ids), label_smoothing=0.1, clipping="ghost")
    out = dp.accumulate(ds.collater([ds[i] for i in ids]))
    got = dict(zip(out["ids"], out["norms"].tolist()))
    assert sum(n > C for n in got.values()) >= 3  # clipping actually acted
    for i in ids:
        assert got[i] == pytest.approx(want_norms[i], rel=1e-4), i
    scale = max(float(w.abs().max()) for w in want_sum)
    for a, b in zip(dp.summed, want_sum):
        assert float((a.float() - b).abs().max()) <= 1e-4 * scale
    # no gradient is left behind for the optimizer or the next batch
    assert all(p.grad is None for p in dp.params)


def test_ghost_and_hooks_take_the_same_seeded_steps(tiny, monkeypatch):
    # the same margin for both, so that only the methods differ (ghost's is larger)
    monkeypatch.setattr(sgd, "GHOST_CLIP_MARGIN", sgd.CLIP_MARGIN)
    ds = tiny[1]
    runs = []
    for method in ("ghost", "hooks"):
        model = _model(tiny, "lora")
        sgd.train_dp(model, ds, steps=2, rate_of_step=lambda t: 0.5, noise_multiplier=0.7,
                     max_grad_norm=C, physical_batch=4, lr=1e-2, seed=5,
                     clipping=method)
        runs.append([p.detach().clone() for p in model.parameters() if p.requires_grad])
    moved = max(float((a - b).abs().max()) for a, b in
                zip(runs[0], [p for p in _model(tiny, "lora").parameters() if p.requires_grad]))
    assert moved > 1e-3
    for a, b in zip(*runs):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)


def test_auto_takes_ghost_only_when_per_example_gradients_do_not_fit(tiny):
    lora_model = _model(tiny, "lora")
    need = 32 * sum(p.numel() * 4 for p in lora_model.parameters() if p.requires_grad)
    method, why = clipping.choose_clipping(lora_model, free_bytes=need * 5)
    assert method == "hooks" and "fit" in why and "20% of free memory" in why
    method, why = clipping.choose_clipping(lora_model, free_bytes=need * 3)
    assert method == "ghost" and "33% of free memory" in why
    method, _ = clipping.choose_clipping(lora_model, physical_batch=8,
                                               free_bytes=need * 3)
    assert method == "hooks"  # a quarter of the batch fits again


def test_auto_choice_falls_back_to_hooks_and_says_why(tiny):
    whole = copy.deepcopy(tiny[0])  # shared embedding matrix: tied, trained
    method, why = clipping.choose_clipping(whole, free_bytes=1)
    assert method == "hooks" and "embed_tokens" in why
    assert clipping.shared_trainable(whole)
    with pytest.raises(InputError, match="--dp-freeze-embeddings"):
        clipping.choose_clipping(whole, "ghost")
    lora_model = _model(tiny, "lora")
    assert clipping.shared_trainable(lora_model) == []
    method, why = clipping.choose_clipping(lora_model, "auto", unit="document",
                                                 free_bytes=1)
    assert method == "hooks" and "document" in why
    assert clipping.choose_clipping(lora_model, "hooks") == ("hooks", "asked for")
    with pytest.raises(InputError, match="must be one of"):
        clipping.choose_clipping(lora_model, "fast")
