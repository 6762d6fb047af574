"""Randomness of the privacy mechanisms: secret by default, reproducible only on request.

Why: a shuffle, a subsample, a Poisson sample or DP noise drawn from a seed an attacker
knows can be replayed. A release shuffled with a known seed gives its corpus order back;
DP-SGD with known noise is deterministic, so its ε means nothing. So every mechanism
draws from the operating system's cryptographic source (`secrets`) unless the user
passes `--seed`; a seeded run is marked *not private* in what it ships, and the seed
itself is written only to owner-only files.
"""
from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy and torch are imported where a generator is made
    import numpy as np
    import torch

SECRET = "secret"
SEEDED = "seeded"
SEEDED_MARK = "seeded: not private"  # what every ε of a seeded output is printed with


@dataclass(frozen=True)
class Seed:
    """Where one run's randomness comes from.

    `value` seeds numpy/torch generators (63 bits, what torch accepts); for a secret
    seed it comes from `secrets` and is never written anywhere.
    """
    value: int
    reproducible: bool

    @property
    def source(self) -> str:
        return SEEDED if self.reproducible else SECRET

    def public_record(self) -> dict[str, Any]:
        """What a shipped manifest may say about the randomness (never the seed)."""
        if self.reproducible:
            return {"source": SEEDED, "private": False,
                    "note": f"{SEEDED_MARK}: drawn from a user-given --seed, reproducible "
                            "(whoever learns the seed can replay the shuffle or noise, so "
                            "no ε stated beside it is a guarantee)"}
        return {"source": SECRET, "private": True,
                "note": "drawn from the operating system's cryptographic source"}

    def owner_record(self) -> dict[str, Any]:
        """What an owner-only manifest records (the seed, so the owner can reproduce)."""
        return {"source": self.source, "seed": self.value if self.reproducible else None}

    def numpy_rng(self) -> np.random.Generator:
        import numpy as np

        return np.random.default_rng(self.value if self.reproducible
                                     else secrets.randbits(128))

    def torch_generator(self) -> torch.Generator:
        import torch

        return torch.Generator().manual_seed(self.value if self.reproducible
                                             else secrets.randbits(63))


def resolve_seed(seed: int | Seed | None = None) -> Seed:
    """`--seed N` → a reproducible Seed; no seed → a fresh secret one (a Seed is kept)."""
    if isinstance(seed, Seed):
        return seed
    if seed is None:
        return Seed(secrets.randbits(63), reproducible=False)
    return Seed(int(seed), reproducible=True)
