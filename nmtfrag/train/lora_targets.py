"""Which projections of fairseq's Transformer layers LoRA can adapt, by the short names
users give (`--lora-modules q,v,fc1`).

Why a module of its own: the names are shared by the adapters (nmtfrag.train.lora, which needs
torch) and by the choice of trained parameters (nmtfrag.train.trainable, which the CLI imports
to build its parser and must stay free of torch). Here, neither imports the other for
them.
"""
from __future__ import annotations

from collections.abc import Iterable

# short names users give (--lora-modules) → attribute names in fairseq's layers
LORA_MODULES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "out": "out_proj",
                "fc1": "fc1", "fc2": "fc2"}
LORA_DEFAULT_MODULES = ("q", "k", "v", "out", "fc1", "fc2")


def parse_lora_modules(spec: str | Iterable[str]) -> tuple[str, ...]:
    """"q,v,fc1" (or a sequence) → ("q", "v", "fc1"); unknown names raise ValueError."""
    names = tuple(s.strip() for s in spec.split(",") if s.strip()) if isinstance(spec, str) \
        else tuple(spec)
    bad = [n for n in names if n not in LORA_MODULES]
    if bad or not names:
        raise ValueError(f"LoRA modules must be among {','.join(LORA_MODULES)}; "
                         f"got {spec!r}")
    return names
