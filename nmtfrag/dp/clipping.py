"""Which way per-example gradients are clipped: opacus hooks or ghost clipping.

Why a choice: ghost clipping (Li et al. 2022, "Large Language Models Can Be Strong
Differentially Private Learners", §4) keeps memory flat in the number of trained
parameters, but costs a second backward pass and T×T products for T-token sentences;
benchmarks/dp_step.py measured it slower than hooks for every trained set of
generic-deen-medium on CPU. So "auto" takes hooks unless a physical batch's per-example
gradients would not fit, and never takes ghost where opacus cannot serve it exactly (a
trained matrix used by two layers, document units). How each works:
nmtfrag.dp.fairseq_opacus.
"""
from __future__ import annotations

import os

import torch
from torch import nn

from ..errors import InputError

CLIPPING = ("auto", "ghost", "hooks")
# what is done to each per-example gradient g: "clip" scales it to min(1, C/‖g‖)·g
# (Abadi et al. 2016); "normalize" to C·g/(‖g‖ + γ), automatic clipping (Bu et al. 2022,
# "Automatic Clipping: Differentially Private Deep Learning Made Easier and Stronger",
# AUTO-S): every contribution has norm < C, so the sensitivity stays C, and C is only a
# scale of the update (with Adam, nearly none): no clipping norm to tune.
CLIP_MODES = ("clip", "normalize")
NORMALIZE_GAMMA = 0.01  # γ of AUTO-S, the paper's value
CLIP_MODE_TEXT = {"clip": "each unit's gradient clipped to norm ≤ C",
                  "normalize": f"each unit's gradient normalised: C·g/(‖g‖ + "
                               f"{NORMALIZE_GAMMA}) (automatic clipping, Bu et al. 2022)"}
# what each pair's loss is: the sum over its target tokens, or their mean
LOSSES = ("sum", "mean")


def normalize_factors(norms: torch.Tensor, max_grad_norm: float) -> torch.Tensor:
    """Scale of each gradient under automatic clipping: C/(‖g‖ + γ), so that the
    contribution's norm C·‖g‖/(‖g‖ + γ) is below C for every g."""
    return max_grad_norm / (norms + NORMALIZE_GAMMA)


CLIPPING_TEXT = {
    "hooks": "opacus hooks, per-example gradients materialised",
    "ghost": "opacus ghost clipping: per-example norms without per-example gradients, "
             "two backward passes"}


def shared_trainable(model: nn.Module) -> list[str]:
    """Names of trained parameters that more than one layer uses (tied matrices, or a
    layer reachable twice, like the shared encoder/decoder embedding)."""
    users: dict[int, set[str]] = {}
    names: dict[int, str] = {}
    for name, module in model.named_modules(remove_duplicate=False):
        for pname, p in module.named_parameters(recurse=False):
            if p.requires_grad:
                users.setdefault(id(p), set()).add(name)
                names.setdefault(id(p), f"{name}.{pname}")
    return sorted(names[k] for k, used_by in users.items() if len(used_by) > 1)


# auto picks ghost clipping only when the per-example gradients of one physical batch
# would take more than this share of the device's free memory (LoRA on
# generic-deen-medium, CPU: ghost 2.15×, hooks 1.01× a non-private step)
GHOST_MEMORY_SHARE = 0.25


def free_memory_bytes(device: torch.device | str) -> int:
    """Free memory of `device` (CUDA: the driver's count; CPU: MemAvailable)."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _gradient_bytes(trained):
    """Bytes of one example's gradient of the trained parameters (what hooks keep per
    example of a physical batch)."""
    return sum(p.numel() * p.element_size() for p in trained)


# hooks materialise one gradient per example of a physical batch: keep them within this
# share of free memory by taking fewer examples per pass (the mechanism is unchanged: the
# logical batch, its Poisson sampling and the noise do not depend on the physical batch)
HOOKS_MEMORY_SHARE = 0.5


def fitting_physical_batch(model: nn.Module, physical_batch: int, free_bytes: int | None = None
                           ) -> tuple[int, str | None]:
    """(pairs per pass, why or None): `physical_batch`, or fewer when the per-example
    gradients of that many would take more than HOOKS_MEMORY_SHARE of the memory left free
    once the run's own state is allocated (the real WMT19 with every parameter trained:
    1.08 GB per example). Refuses when not even one example's gradient fits."""
    trained = [p for p in model.parameters() if p.requires_grad]
    per_example = _gradient_bytes(trained)
    if free_bytes is None:
        free_bytes = free_memory_bytes(trained[0].device)
    # what the run allocates once, after this choice: the float64 clipped sum and
    # AdamW's two float32 moments (16 bytes per trained parameter)
    free_bytes = max(0, free_bytes - 16 * sum(p.numel() for p in trained))
    fits = int(HOOKS_MEMORY_SHARE * free_bytes // max(1, per_example))
    if fits >= physical_batch:
        return physical_batch, None
    if fits < 1:
        raise InputError(
            f"one example's gradient of the trained parameters takes "
            f"{per_example / 2**30:.2f} GiB, more than half the free memory "
            f"({free_bytes / 2**30:.1f} GiB): train fewer parameters (--dp-params lora or "
            "bias) or use a machine with more memory")
    return fits, (f"physical batch {physical_batch} → {fits}: per-example gradients take "
                  f"{per_example / 2**30:.2f} GiB each, {free_bytes / 2**30:.1f} GiB free")


def choose_clipping(model: nn.Module, requested: str = "auto", unit: str = "sentence",
                    physical_batch: int = 32, free_bytes: int | None = None
                    ) -> tuple[str, str]:
    """(method, why). "auto": hooks, unless the per-example gradients of a physical batch
    would not fit comfortably (GHOST_MEMORY_SHARE of `free_bytes`, default: the free
    memory of the model's device) and opacus' ghost clipping covers the trained layers.

    `requested` "ghost" on a model or unit it cannot serve is an error, not a fallback."""
    if requested not in CLIPPING:
        raise InputError(f"--dp-clipping must be one of {CLIPPING}, got {requested!r}")
    if requested == "hooks":
        return "hooks", "asked for"
    blocker = None
    if unit != "sentence":
        blocker = (f"the privacy unit is a {unit}: its norm is that of a sum of per-pair "
                   "gradients")
    else:
        tied = shared_trainable(model)
        if tied:
            blocker = (f"trained matrices are shared by several layers ({', '.join(tied)}), "
                       "which opacus' ghost clipping does not support")
    if requested == "ghost":
        if blocker:
            raise InputError(f"--dp-clipping ghost: {blocker}; use --dp-clipping hooks "
                             "(or auto)" + (" or --dp-freeze-embeddings"
                                            if unit == "sentence" else ""))
        return "ghost", "asked for"
    trained = [p for p in model.parameters() if p.requires_grad]
    need = physical_batch * _gradient_bytes(trained)
    if free_bytes is None:
        free_bytes = free_memory_bytes(trained[0].device)
    size = f"{need / 2**30:.2f} GiB per physical batch of {physical_batch}"
    if need <= GHOST_MEMORY_SHARE * free_bytes:
        return "hooks", (f"per-example gradients fit ({size}, {need / free_bytes:.0%} of free "
                         "memory); ghost clipping would cost a second backward pass")
    if blocker:
        return "hooks", f"per-example gradients are large ({size}), but {blocker}"
    return "ghost", (f"per-example gradients would take {size}, {need / free_bytes:.0%} of "
                     "free memory")
