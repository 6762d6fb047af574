"""LoRA adapters and trained-parameter sets on a tiny fairseq Transformer: the merged
model equals the adapter model, a pretrained checkpoint loads into an adapted model,
per-example gradients of adapters (and of biases) are exact, each set trains what it
says."""
import copy

import pytest
import torch

from nmtfrag.train import lora, lora_targets, trainable
from test_dp_sgd import check_per_example_grads, tiny  # noqa: F401 (fixture)

torch.set_num_threads(1)


def _outputs(model, ds, ids=range(12)):
    batch = ds.collater([ds[i] for i in ids])
    with torch.no_grad():
        return model(**batch["net_input"])[0]


def _adapted(model, rank=4, alpha=8.0, modules=lora_targets.LORA_DEFAULT_MODULES, seed=3):
    """A copy of `model` with adapters whose B is random (not the zero start), so that
    the adapters change the outputs."""
    m = copy.deepcopy(model)
    names = lora.add_lora(m, rank, alpha, modules, seed=seed)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, lora.LoRALinear):
                mod.lora_B.weight.normal_(0.0, 0.3, generator=gen)
    return m, names


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_merged_model_gives_the_adapter_models_outputs(tiny, mode):
    base, ds = tiny
    adapted, names = _adapted(base)
    # every attention projection and FFN matrix of every layer got an adapter
    assert len(names) == sum(1 for n, _ in base.named_modules()
                             if n.rsplit(".", 1)[-1] in {"q_proj", "k_proj", "v_proj",
                                                         "out_proj", "fc1", "fc2"})
    plain = copy.deepcopy(base)
    merged = lora.merge_state(adapted.state_dict(), scaling=8.0 / 4)
    assert not lora.has_adapters(merged)
    plain.load_state_dict(merged, strict=True)  # an ordinary checkpoint again
    for m in (adapted, plain, base):
        getattr(m, mode)()
    got, want, before = _outputs(plain, ds), _outputs(adapted, ds), _outputs(base, ds)
    assert not torch.allclose(want, before, atol=1e-3)  # the adapters do change outputs
    assert torch.allclose(got, want, atol=1e-4, rtol=1e-4)


def test_attention_fast_path_does_not_skip_the_adapters(tiny):
    # adapters on q,v only: if fairseq's fused attention path ran, they would be ignored
    base, ds = tiny
    adapted, _ = _adapted(base, modules=("q", "v"))
    adapted.train()
    assert not torch.allclose(_outputs(adapted, ds), _outputs(base.train(), ds), atol=1e-3)


def test_pretrained_checkpoint_loads_into_adapted_model_and_starts_unchanged(tiny):
    base, ds = tiny
    m = copy.deepcopy(base)
    lora.add_lora(m, rank=2, alpha=4.0)
    a_before = [mod.lora_A.weight.clone() for mod in m.modules()
                if isinstance(mod, lora.LoRALinear)]
    m.load_state_dict(base.state_dict(), strict=True)  # no adapter keys in it
    a_after = [mod.lora_A.weight for mod in m.modules() if isinstance(mod, lora.LoRALinear)]
    assert all(torch.equal(x, y) for x, y in zip(a_before, a_after))
    m.eval(), base.eval()
    assert torch.allclose(_outputs(m, ds), _outputs(base, ds), atol=1e-6)  # B = 0


def test_adapter_per_example_gradients_are_exact(tiny):
    model, _ = _adapted(tiny[0], rank=3)
    names = check_per_example_grads(model, tiny[1], list(range(9)))
    assert names and all(n.endswith(("lora_A.weight", "lora_B.weight")) for n in names)


def test_bias_set_per_example_gradients_are_exact(tiny):
    model = copy.deepcopy(tiny[0])
    n, names = trainable.apply(model, trainable.TrainableSet("bias"))
    assert all(x.endswith(".bias") for x in names)
    assert check_per_example_grads(model, tiny[1], list(range(6))) == names


@pytest.mark.parametrize("kind", trainable.CHOICES)
def test_each_set_trains_what_it_says(tiny, kind):
    model = copy.deepcopy(tiny[0])
    total = sum(p.numel() for p in model.parameters())
    n, names = trainable.apply(model, trainable.TrainableSet(kind, lora_rank=2))
    assert n == sum(p.numel() for p in model.parameters() if p.requires_grad)
    if kind == "all":
        assert n == total
    elif kind == "lora":
        assert all("lora_" in x for x in names) and n < total / 5
    elif kind == "bias":
        assert all(x.endswith(".bias") for x in names)
    else:
        assert all(x.startswith("decoder.layers.") or x.startswith("decoder.layer_norm")
                   for x in names)
    frozen = trainable.TrainableSet("all", freeze_embeddings=True)
    m2 = copy.deepcopy(tiny[0])
    _, names2 = trainable.apply(m2, frozen)
    assert not any("embed_tokens" in x for x in names2)


def test_bad_specs_are_refused():
    with pytest.raises(ValueError, match="must be one of"):
        trainable.TrainableSet("everything")
    with pytest.raises(ValueError, match="LoRA modules"):
        trainable.TrainableSet("lora", lora_modules="q,gate")


def test_finetune_with_lora_without_dp_writes_a_plain_model(tiny_model_dir, tmp_path):
    """Non-private LoRA through fairseq's own training: only adapters train, the output is
    an ordinary model dir (adapters merged) that differs from the base model."""
    import json

    from nmtfrag.train.finetune import FineTuneConfig, finetune
    from nmtfrag.train.job import FineTuneJob
    from nmtfrag.model_dir import load_state, validate_model_dir
    from tinymodel import make_corpus, write_parallel

    pairs = make_corpus(60, seed=5)
    write_parallel(pairs[:50], str(tmp_path / "train"))
    write_parallel(pairs[50:], str(tmp_path / "valid"))
    out = str(tmp_path / "lora")
    spec = trainable.TrainableSet("lora", lora_rank=2, lora_alpha=4.0, lora_modules="q,v,fc1")
    job = FineTuneJob(model=tiny_model_dir, train=str(tmp_path / "train"), out=out,
                      valid_src=str(tmp_path / "valid.de"), valid_tgt=str(tmp_path / "valid.en"),
                      device="cpu", quiet=True, threads=1)
    finetune(job, FineTuneConfig(max_updates=6, max_tokens=400, lr=0.01, patience=-1,
                                 params=spec))
    validate_model_dir(out)
    new = load_state(f"{out}/model.pt")["model"]
    old = load_state(f"{tiny_model_dir}/model.pt")["model"]
    assert not lora.has_adapters(new) and set(new) == set(old)
    changed = {k for k in old if not torch.equal(old[k].float(), new[k].float())}
    # only the adapted projections moved (their merged B·A), nothing else
    assert changed and all(k.endswith(("q_proj.weight", "v_proj.weight", "fc1.weight"))
                           for k in changed)
    man = json.load(open(f"{out}/manifest.json"))
    assert man["params"]["trained_parameters"]["kind"] == "lora"


_INIT_DIGEST = """
import hashlib, torch
from torch import nn
from nmtfrag.train import lora, lora_targets
layer = nn.Module()
for attr in sorted(set(lora_targets.LORA_MODULES.values())):
    setattr(layer, attr, nn.Linear(6, 6))
model = nn.Module(); model.encoder = nn.Module(); model.encoder.layers = nn.ModuleList([layer])
lora.add_lora(model, rank=2, seed=3)
h = hashlib.sha256()
for name, p in sorted(model.named_parameters()):
    if "lora_A" in name:
        h.update(name.encode() + p.detach().numpy().tobytes())
print(h.hexdigest())
"""


def test_adapter_initialisation_does_not_depend_on_the_hash_seed():
    """A seeded run repeats in another process: the adapters draw from one generator in
    a fixed order (a set's order, which changes with PYTHONHASHSEED, made them differ)."""
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    digests = {subprocess.run(
        [sys.executable, "-c", _INIT_DIGEST], capture_output=True, text=True, check=True,
        env=dict(os.environ, PYTHONHASHSEED=str(seed), PYTHONPATH=root)).stdout
        for seed in range(3)}
    assert len(digests) == 1, digests
