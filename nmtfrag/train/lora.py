"""LoRA adapters for fairseq's Transformer (Hu et al. 2021, "LoRA: Low-Rank Adaptation
of Large Language Models"), as used under DP by Yu et al. 2022 ("Differentially Private
Fine-tuning of Language Models").

Why this shape:
- A projection `W x + b` becomes `W x + b + (α/r)·B A x` with W, b frozen and A (r×in),
  B (out×r) trained. A and B are plain `nn.Linear` modules, so opacus' Linear grad
  sampler gives their exact per-example gradients (nmtfrag.dp.fairseq_opacus), and DP
  noise goes only into the few adapter parameters.
- The adapted module stays an `nn.Linear` with the same `weight`/`bias` keys, so a
  pretrained checkpoint loads into the adapted model unchanged (fairseq's
  `--restore-file` included); adapter keys missing from a checkpoint keep their
  initialisation (A random, B zero: the adapted model starts as the pretrained one).
- At the end `merge_state` folds B A into W and drops the adapter keys: the output is an
  ordinary WMT19-layout checkpoint that fairseq, `evaluate`, `translate` and the audit
  load without knowing about LoRA.
- fairseq's attention fast path (`F.multi_head_attention_forward`) reads the projection
  weights directly and would silently skip the adapters; `add_lora` forces the Python
  path of every attention module it adapts.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import cast

import torch
from torch import nn
from torch.nn import functional as F

from .lora_targets import LORA_DEFAULT_MODULES, LORA_MODULES

SUFFIX_A, SUFFIX_B = "lora_A.weight", "lora_B.weight"


class LoRALinear(nn.Linear):
    """nn.Linear plus a low-rank update; made from an existing Linear by `adapt`."""

    lora_A: nn.Linear
    lora_B: nn.Linear
    scaling: float

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias) + self.lora_B(self.lora_A(x)) * self.scaling

    @classmethod
    def adapt(cls, linear: nn.Linear, rank: int, alpha: float,
              generator: torch.Generator | None = None) -> LoRALinear:
        """Turn `linear` into a LoRALinear in place (its weight and bias are kept)."""
        linear.__class__ = cls
        lora = cast("LoRALinear", linear)  # the same object, now of class cls
        dev, dt = lora.weight.device, lora.weight.dtype
        lora.lora_A = nn.Linear(lora.in_features, rank, bias=False, device=dev, dtype=dt)
        lora.lora_B = nn.Linear(rank, lora.out_features, bias=False, device=dev, dtype=dt)
        bound = 1.0 / math.sqrt(lora.in_features)  # nn.Linear's default range
        with torch.no_grad():
            lora.lora_A.weight.uniform_(-bound, bound, generator=generator)
            lora.lora_B.weight.zero_()
        lora.scaling = alpha / rank
        return lora

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # a pretrained (adapter-free) checkpoint: keep the adapters' initialisation
        for name in ("lora_A", "lora_B"):
            key = f"{prefix}{name}.weight"
            if key not in state_dict:
                state_dict[key] = getattr(self, name).weight.detach().clone()
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


def add_lora(model: nn.Module, rank: int = 8, alpha: float = 16.0,
             modules: Iterable[str] = LORA_DEFAULT_MODULES, seed: int = 0) -> list[str]:
    """Freeze every parameter of `model` and add adapters to the named projections of
    every encoder and decoder layer. Returns the adapted module names."""
    from fairseq.modules.multihead_attention import MultiheadAttention

    if rank < 1:
        raise ValueError(f"LoRA rank must be ≥ 1, got {rank}")
    # a fixed order: the adapters draw their initialisation from one generator in turn,
    # so iterating a set (its order changes with PYTHONHASHSEED) made seeded runs differ
    attrs = sorted({LORA_MODULES[m] for m in modules})
    for p in model.parameters():
        p.requires_grad_(False)
    gen = torch.Generator().manual_seed(seed)
    adapted = []
    for name, module in list(model.named_modules()):
        if not name.startswith(("encoder.layers.", "decoder.layers.")):
            continue
        for attr in attrs:
            child = getattr(module, attr, None)
            if isinstance(child, nn.Linear) and not isinstance(child, LoRALinear):
                LoRALinear.adapt(child, rank, alpha, gen)
                adapted.append(f"{name}.{attr}")
                if isinstance(module, MultiheadAttention):
                    module._set_skip_embed_dim_check()  # the fast path skips adapters
    return adapted


def merge_state(state_dict: dict[str, torch.Tensor],
                scaling: float) -> dict[str, torch.Tensor]:
    """A state dict with every adapter folded into its base weight (W += s·B A) and the
    adapter keys removed; tensors keep their dtype. Pure: the input is not modified."""
    out = {k: v for k, v in state_dict.items()
           if not k.endswith((SUFFIX_A, SUFFIX_B))}
    for key in state_dict:
        if key.endswith(SUFFIX_A):
            base = key[: -len(SUFFIX_A)]
            a = state_dict[key].double()
            b = state_dict[base + SUFFIX_B].double()
            w = state_dict[base + "weight"]
            out[base + "weight"] = (w.double() + scaling * (b @ a)).to(w.dtype)
    return out


def has_adapters(state_dict: dict[str, torch.Tensor]) -> bool:
    return any(k.endswith(SUFFIX_A) for k in state_dict)
