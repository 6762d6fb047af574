"""Which parameters a fine-tuning run trains (`--dp-params`).

Why: DP noise is added to every trained coordinate, so its total norm grows with the
number of trained parameters while the clipped signal does not; training few parameters
keeps most of the gain under DP (Yu et al. 2022; BitFit, Ben Zaken et al. 2022). The
same sets serve non-private fine-tuning (cheap adaptation of a large model).

- all:     every parameter (optionally without the embedding matrices);
- lora:    low-rank adapters on the attention and FFN projections (nmtfrag.lora);
- bias:    every bias vector (BitFit);
- decoder: the decoder's layers and final layer norm (embeddings stay frozen).
"""
from dataclasses import dataclass, field

CHOICES = ("all", "lora", "bias", "decoder")
# short names users give (--lora-modules) → attribute names in fairseq's layers
LORA_MODULES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "out": "out_proj",
                "fc1": "fc1", "fc2": "fc2"}
LORA_DEFAULT_MODULES = ("q", "k", "v", "out", "fc1", "fc2")
_EMBEDDINGS = ("embed_tokens", "output_projection")


@dataclass
class TrainableSet:
    """A parameter set and its LoRA settings (used when `kind` is "lora")."""
    kind: str = "all"
    lora_rank: int = 8
    lora_alpha: float = 16.0
    lora_modules: tuple = field(default=LORA_DEFAULT_MODULES)
    freeze_embeddings: bool = False

    def __post_init__(self):
        if self.kind not in CHOICES:
            raise ValueError(f"trained parameters must be one of {CHOICES}, got {self.kind!r}")
        self.lora_modules = parse_lora_modules(self.lora_modules)

    @property
    def lora_scaling(self):
        return self.lora_alpha / self.lora_rank

    def public_record(self):
        rec = {"kind": self.kind}
        if self.kind == "lora":
            rec.update(rank=self.lora_rank, alpha=self.lora_alpha,
                       modules=list(self.lora_modules))
        if self.kind == "all" and self.freeze_embeddings:
            rec["frozen"] = "embeddings"
        return rec


def parse_lora_modules(spec):
    """"q,v,fc1" (or a sequence) → ("q", "v", "fc1"); unknown names raise ValueError."""
    names = tuple(s.strip() for s in spec.split(",") if s.strip()) if isinstance(spec, str) \
        else tuple(spec)
    bad = [n for n in names if n not in LORA_MODULES]
    if bad or not names:
        raise ValueError(f"LoRA modules must be among {','.join(LORA_MODULES)}; "
                         f"got {spec!r}")
    return names


def apply(model, spec, seed=0):
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


def _trained(name, spec):
    embedding = any(e in name for e in _EMBEDDINGS)
    if spec.kind == "all":
        return not (spec.freeze_embeddings and embedding)
    if spec.kind == "bias":
        return name.endswith(".bias")
    if spec.kind == "decoder":
        return name.startswith("decoder.") and not embedding
    raise AssertionError(spec.kind)
