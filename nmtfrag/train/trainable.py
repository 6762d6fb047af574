"""Which parameters a fine-tuning run trains (`--dp-params`).

Why: DP noise is added to every trained coordinate, so its total norm grows with the
number of trained parameters while the clipped signal does not; training few parameters
keeps most of the gain under DP (Yu et al. 2022; BitFit, Ben Zaken et al. 2022). The
same sets serve non-private fine-tuning (cheap adaptation of a large model).

- all:     every parameter (optionally without the embedding matrices);
- lora:    low-rank adapters on the attention and FFN projections (nmtfrag.train.lora);
- bias:    every bias vector (BitFit);
- decoder: the decoder's layers and final layer norm (embeddings stay frozen).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

# the LoRA names live in a torch-free leaf module: lora.py (torch) and this module (which
# the CLI imports) both read them, and neither imports the other for them
from .lora_targets import LORA_DEFAULT_MODULES, parse_lora_modules

if TYPE_CHECKING:
    from torch import nn

CHOICES = ("all", "lora", "bias", "decoder")
_EMBEDDINGS = ("embed_tokens", "output_projection")


@dataclass
class TrainableSet:
    """A parameter set and its LoRA settings (used when `kind` is "lora")."""
    kind: str = "all"
    lora_rank: int = 8
    lora_alpha: float = 16.0
    lora_modules: tuple[str, ...] = field(default=LORA_DEFAULT_MODULES)
    freeze_embeddings: bool = False

    def __post_init__(self) -> None:
        if self.kind not in CHOICES:
            raise ValueError(f"trained parameters must be one of {CHOICES}, got {self.kind!r}")
        if self.freeze_embeddings and self.kind != "all":
            raise ValueError(f"--dp-freeze-embeddings leaves the embeddings out of --dp-params "
                             f"all; {self.kind} never trains them")
        self.lora_modules = parse_lora_modules(self.lora_modules)

    @property
    def lora_scaling(self) -> float:
        return self.lora_alpha / self.lora_rank

    def public_record(self) -> dict:
        rec: dict[str, object] = {"kind": self.kind}
        if self.kind == "lora":
            rec.update(rank=self.lora_rank, alpha=self.lora_alpha,
                       modules=list(self.lora_modules))
        if self.kind == "all" and self.freeze_embeddings:
            rec["frozen"] = "embeddings"
        return rec


def apply(model: nn.Module, spec: TrainableSet, seed: int = 0) -> tuple[int, list[str]]:
    """Set `requires_grad` on `model`'s parameters (adding adapters for "lora").
    Returns (number of trained parameters, names of the trained tensors)."""
    if spec.kind == "lora":
        from . import lora

        lora.add_lora(model, spec.lora_rank, spec.lora_alpha, spec.lora_modules, seed=seed)
    else:
        for name, p in model.named_parameters():
            p.requires_grad_(_trained(name, spec))
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    if not names:
        raise ValueError(f"--dp-params {spec.kind}: the model has no such parameters")
    return sum(p.numel() for p in model.parameters() if p.requires_grad), names


def _trained(name: str, spec: TrainableSet) -> bool:
    embedding = any(e in name for e in _EMBEDDINGS)
    if spec.kind == "all":
        return not (spec.freeze_embeddings and embedding)
    if spec.kind == "bias":
        return name.endswith(".bias")
    if spec.kind == "decoder":
        return name.startswith("decoder.") and not embedding
    raise AssertionError(spec.kind)
