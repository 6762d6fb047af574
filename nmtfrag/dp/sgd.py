"""DP-SGD fine-tuning of a fairseq Transformer (Abadi et al. 2016, "Deep Learning with
Differential Privacy"), with the large-batch practice of Anil et al. 2021,
"Large-Scale Differentially Private BERT".

Why each piece:
- *Poisson sampling*: every noisy (logical) step includes each training pair
  independently with probability q = logical batch / n; the accountants' guarantee is
  for exactly this sampling, so a logical batch is never built any other way.
- *Virtual steps*: a logical batch is processed in physical batches of at most
  `physical_batch` pairs and `max_tokens` padded (source + target) tokens; each pair's
  gradient (of its summed token loss) is computed exactly (nmtfrag.dp.fairseq_opacus),
  clipped to `max_grad_norm` (norm, factor and running sum in float64, with a margin:
  CLIP_MARGIN), and added to a running sum; Gaussian noise N(0, σ²C²) is
  added once per logical batch and the sum is divided by the expected batch size q·n.
  So one logical batch is one privacy step whatever the physical batch (what opacus'
  BatchMemoryManager does). Summing unclipped gradients over physical batches ("plain
  accumulation", fairseq's --update-freq) would void the guarantee and is refused.
- An empty Poisson batch still takes its step, with noise only (skipping it would make
  the step count depend on the data).
- Gradient SNR ‖mean clipped gradient‖ / ‖noise / (q·n)‖ is logged per step (Anil et
  al. §5.2.1); weight decay is decoupled (AdamW) and may be large (§4.3); the logical
  batch may grow by a schedule (§5.2.2), the accountant composing each step's q.
- *Privacy unit*: a sentence pair, or a group of pairs (a document). For groups, the
  unit's gradient is the sum of its pairs' gradients, clipped once; Poisson sampling
  picks units, and the accountant counts units. Pairs of one unit may span physical
  batches: their sums stay open until the unit's last pair is processed.
- One or several processes (torch.distributed: gloo on CPU, nccl on GPUs): every
  process draws the same Poisson sample and the same noise (rank 0's secret seed is
  broadcast), clips its share of the physical batches, and the clipped sums are
  all-reduced before the noise is added once; so the accountant sees one logical batch
  per step, exactly as in one process. Noise is drawn on the CPU, so runs match across
  devices.
- Secret randomness: Poisson sampling and noise are seeded from the operating system's
  cryptographic source (nmtfrag.randomness); with a known seed the mechanism is
  deterministic and ε means nothing, so `--seed` is an opt-in marked not private.
The draw of each step's rows and their physical batches: nmtfrag.dp.batches.
"""
from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from ..errors import InputError
from ..randomness import Seed, resolve_seed
from . import fairseq_opacus, resume
from .batches import PublicBatches, physical_batches, poisson_indices, unit_batches

if TYPE_CHECKING:  # fairseq is imported where it runs
    from fairseq.data import LanguagePairDataset


def to_device(sample: dict, device: torch.device | str) -> dict:
    """A fairseq sample with every tensor on `device` (no copy when already there)."""
    from fairseq.utils import apply_to_sample

    return apply_to_sample(lambda t: t.to(device), sample)


def distributed_group() -> tuple[int, int]:
    """(rank, world size) of the torch.distributed group, or (0, 1) without one."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def shared_generators(seed: Seed) -> tuple[np.random.Generator, torch.Generator]:
    """(numpy rng for sampling, torch generator for noise), identical on every process:
    a secret seed is drawn once on rank 0 and broadcast (it never leaves memory)."""
    import secrets

    if seed.reproducible:
        a = b = seed.value
    else:
        draws = torch.tensor([secrets.randbits(62), secrets.randbits(62)], dtype=torch.int64)
        if distributed_group()[1] > 1:
            import torch.distributed as dist

            dist.broadcast(draws, src=0)
        a, b = int(draws[0]), int(draws[1])
    return np.random.default_rng(a), torch.Generator().manual_seed(b)


# Relative margin of the clipping factor: a unit with norm N is scaled by
# C / (N̂·(1 + CLIP_MARGIN)), N̂ the float64 norm of its float32 gradient. Why it is enough
# for the scaled gradient to have norm ≤ C in exact arithmetic: squares of float32 values
# are exact in float64, and a float64 sum of P ≤ 2^31 of them is within P·2^-53 ≤ 2.4e-7
# (relative) of the true sum, so N̂ ≥ N·(1 − 2.4e-7); the scaled values are float64
# products f·g, each within 2^-53 of the exact one (hooks, documents). 1e-6 covers both
# with room, and costs a millionth of the signal.
CLIP_MARGIN = 1e-6
# Ghost clipping's second backward pass produces the scaled sum in float32 (rounding in
# every backward operation and in the batch-wide weight-gradient products, not bounded a
# priori), so its margin is empirical: with 1e-6, removing one pair moved the sum by
# 1.0000034 C (benchmarks/dp_sensitivity.py, generic-deen-medium, all-noemb, 8 EMEA
# pairs); 1e-4 leaves 30× that, checked by tests/dp/test_dp_clip_bound.py and that benchmark.
GHOST_CLIP_MARGIN = 1e-4

# float64 temporaries of per-example gradients are made this many elements at a time
_BLOCK = 1 << 22


def clip_factors(norms: torch.Tensor, max_grad_norm: float,
                 margin: float = CLIP_MARGIN) -> torch.Tensor:
    """Per-unit scale (float64) that brings float64 norms `norms` to at most
    max_grad_norm (with a relative `margin`); 1 for units already within it (a zero
    gradient included)."""
    norms = norms.double()
    bound = norms * (1.0 + margin)
    return torch.where(bound > max_grad_norm,
                       max_grad_norm / bound.clamp(min=max_grad_norm),
                       torch.ones_like(norms))


def _column_blocks(flat):
    """Column slices of an (n, P) tensor holding at most _BLOCK elements each."""
    step = max(1, _BLOCK // max(1, flat.shape[0]))
    for a in range(0, flat.shape[1], step):
        yield slice(a, a + step)


def example_sq_norms(grads: Sequence[torch.Tensor], n: int) -> torch.Tensor:
    """Squared norms (float64, shape n) of n per-example gradients given as
    [batch × param shape tensors]: each float32 value squared and summed in float64.
    (torch's float32 norm of a 42,024 × 1,024 embedding gradient is 0.33% low.)"""
    sq = torch.zeros(n, dtype=torch.float64, device=grads[0].device if grads else "cpu")
    for gs in grads:
        flat = gs.reshape(n, -1)
        for cols in _column_blocks(flat):
            sq += flat[:, cols].double().square().sum(1)
    return sq


def add_scaled(acc: torch.Tensor, gs: torch.Tensor, factor: torch.Tensor) -> None:
    """acc (float64) += Σ_b factor[b] · gs[b], every product and the sum in float64
    (gs: batch × acc's shape, float32)."""
    n = gs.shape[0]
    flat, out = gs.reshape(n, -1), acc.view(-1)
    f = factor.to(torch.float64).reshape(n, 1)
    for cols in _column_blocks(flat):
        out[cols] += (flat[:, cols].double() * f).sum(0)


class DPSGD:
    """Per-example clipping, accumulation over physical batches, one noisy step.

    `model` is a fairseq TransformerModel (modified in place by prepare_model);
    `optimizer` updates its trainable parameters from `.grad`.
    """

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, *,
                 max_grad_norm: float, noise_multiplier: float,
             expected_batch_size: float,
                 seed: int | Seed | None = None, label_smoothing: float = 0.0,
                 pad_idx: int = 1, clipping: str = "hooks", clip_mode: str = "clip",
                 loss: str = "sum", allow_zero_noise: bool = False) -> None:
        if not max_grad_norm > 0:
            raise InputError(f"--max-grad-norm must be positive, got {max_grad_norm}")
        if not (noise_multiplier > 0 or (allow_zero_noise and noise_multiplier == 0)):
            raise InputError(f"the noise multiplier must be positive, got {noise_multiplier}")
        from .clipping import CLIP_MODES, LOSSES

        if clip_mode not in CLIP_MODES or loss not in LOSSES:
            raise InputError(f"clip mode must be one of {CLIP_MODES} and loss one of "
                             f"{LOSSES}, got {clip_mode!r}, {loss!r}")
        self.clip_mode, self.loss = clip_mode, loss
        if clipping not in ("hooks", "ghost"):
            raise InputError(f"clipping must be 'hooks' or 'ghost', got {clipping!r} "
                             "(nmtfrag.dp.clipping.choose_clipping resolves 'auto')")
        self.clipping = clipping  # nmtfrag.dp.fairseq_opacus explains both
        self.gsm = fairseq_opacus.wrap(model, clipping)
        self.model = model
        self.optimizer = optimizer
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.max_grad_norm = float(max_grad_norm)
        self.noise_multiplier = float(noise_multiplier)
        self.expected_batch_size = float(expected_batch_size)
        self.label_smoothing = label_smoothing
        self.pad_idx = pad_idx
        self.device = self.params[0].device
        # noise is drawn on the CPU (same numbers on any device), then moved
        self.generator = resolve_seed(seed).torch_generator()
        # the clipped sums are float64: each unit's contribution is added exactly enough
        # that removing it moves the sum by its own norm (≤ C), not by rounding
        self.summed = [torch.zeros_like(p, dtype=torch.float64) for p in self.params]
        self.n_examples = 0
        # unit → (loss, gradient norm, clipped norm)
        self.example_stats: dict[int, tuple[float, float, float]] = {}
        # unit → (summed loss, [gradient sum per parameter])
        self.open_units: dict[int, tuple[float, list[torch.Tensor]]] = {}
        # public pairs of the logical batch: their weighted, unclipped gradient sum and
        # weighted count, outside the clipped sum (add_public)
        self.public_sum = [torch.zeros_like(p, dtype=torch.float64) for p in self.params]
        self.public_count = 0.0

    def add_public(self, sample: dict, weight: float) -> None:
        """Forward/backward one physical batch of PUBLIC pairs: their gradients join the
        step unclipped and noise-free, each weighted `weight` against a private pair.

        Why this keeps the guarantee: the noise is calibrated to the clipped sum of the
        private units (sensitivity C); the public term is a function of public text and
        of the current model, itself a post-processing of earlier noisy steps, so adding
        it to the update is post-processing too (the sum the noise covers is unchanged,
        take_clipped_sum)."""
        if not sample or sample.get("nsentences", 0) == 0:
            return
        sample = to_device(sample, self.device)
        self.gsm.disable_hooks()
        try:
            losses = fairseq_opacus.example_losses(self.model, sample, self.label_smoothing,
                                                   self.pad_idx)
            if self.loss == "mean":
                losses = losses / sample["target"].ne(self.pad_idx).sum(1).clamp(min=1)
            self._backward(losses.sum() * weight)
            for acc, p in zip(self.public_sum, self.params):
                if p.grad is not None:
                    acc += p.grad.double()
                p.grad = None
        finally:
            self.gsm.enable_hooks()
        self.public_count += weight * sample["nsentences"]

    def accumulate(self, sample: dict, unit_of: Mapping[int, int] | None = None) -> dict:
        """Forward/backward one physical batch; add its clipped per-example gradients.

        With `unit_of` (dataset id → unit), gradients are summed per unit instead and
        left open; `close_units` clips and adds them once a unit is complete."""
        if not sample or sample.get("nsentences", 0) == 0:
            return {}
        n = sample["nsentences"]
        sample = to_device(sample, self.device)
        self.gsm.expected_batch_size = n
        self.gsm.enable_hooks()
        losses = fairseq_opacus.example_losses(self.model, sample, self.label_smoothing,
                                               self.pad_idx)
        if self.loss == "mean":  # each pair's mean token loss: long pairs weigh no more
            losses = losses / sample["target"].ne(self.pad_idx).sum(1).clamp(min=1)
        ghost = self.clipping == "ghost"
        if ghost and unit_of is not None:
            raise InputError("ghost clipping clips rows, not units (documents): use hooks")
        self._backward(losses.sum(), retain_graph=ghost)
        if ghost:
            # pass 1 gave each example's gradient norm; pass 2 (no hooks) backpropagates
            # Σ factor·loss, whose gradient is the clipped sum itself
            norms = fairseq_opacus.per_example_norms(self.params)
            factor = self._clip_factors(norms)
            for p in self.params:
                p.grad = None
            self.gsm.disable_hooks()
            self._backward((losses * factor.to(losses.dtype)).sum())
            self.gsm.enable_hooks()
            for acc, p in zip(self.summed, self.params):
                assert p.grad is not None, "pass 2 backpropagates into every parameter"
                acc += p.grad.double()
                p.grad = None
        else:
            grads = fairseq_opacus.per_example_grads(self.gsm, self.params)
            if unit_of is not None:
                return self._add_to_units(sample, losses.detach(), grads, unit_of)
            norms = example_sq_norms([gs for _, gs in grads], n).sqrt()
            factor = self._clip_factors(norms)
            for acc, (p, gs) in zip(self.summed, grads):
                add_scaled(acc, gs, factor)
                p.grad_sample = None
                p.grad = None
        clipped = norms * factor
        # match per-example results by dataset id: the collater re-sorts by length
        for i, loss, norm, c in zip(sample["id"].tolist(), losses.detach().tolist(),
                                    norms.tolist(), clipped.tolist()):
            self.example_stats[i] = (loss, norm, c)
        self.n_examples += n
        return {"ids": sample["id"].tolist(), "norms": norms, "clipped_norms": clipped,
                "loss": float(losses.detach().sum())}

    def _clip_factors(self, norms):
        """Per-example scale (float64) that clips each gradient norm to max_grad_norm
        (or, with clip_mode "normalize", scales every gradient to norm below it); the
        relative margin covers float rounding in both modes."""
        margin = GHOST_CLIP_MARGIN if self.clipping == "ghost" else CLIP_MARGIN
        if self.clip_mode == "normalize":
            from .clipping import normalize_factors

            return normalize_factors(norms.double(), self.max_grad_norm) / (1.0 + margin)
        return clip_factors(norms, self.max_grad_norm, margin)

    @staticmethod
    def _backward(loss, retain_graph=False):
        with warnings.catch_warnings():
            # token-id inputs need no gradient: torch's notice about hooks on the
            # embedding is expected and harmless
            warnings.filterwarnings("ignore", message="Full backward hook is firing")
            loss.backward(retain_graph=retain_graph)

    def _add_to_units(self, sample, losses, grads, unit_of):
        ids = sample["id"].tolist()
        units = [unit_of[i] for i in ids]
        for u in dict.fromkeys(units):
            rows = torch.tensor([j for j, x in enumerate(units) if x == u],
                                device=self.device)
            part = [gs.index_select(0, rows).sum(0) for _, gs in grads]
            loss = float(losses.index_select(0, rows).sum())
            if u in self.open_units:
                old_loss, old = self.open_units[u]
                part = [a + b for a, b in zip(old, part)]
                loss += old_loss
            self.open_units[u] = (loss, part)
        for p, _ in grads:
            p.grad_sample = None
            p.grad = None
        self.n_examples += len(ids)
        return {"ids": ids, "units": list(dict.fromkeys(units))}

    def close_units(self, keep: int | None = None) -> None:
        """Clip each open unit's summed gradient (all but `keep`, which may continue in
        the next physical batch) and add it to the step's sum."""
        for u in [u for u in self.open_units if u != keep]:
            loss, part = self.open_units.pop(u)
            sq = example_sq_norms([g.unsqueeze(0) for g in part], 1)
            factor = self._clip_factors(sq.sqrt())
            for acc, g in zip(self.summed, part):
                add_scaled(acc, g.unsqueeze(0), factor)
            norm = float(sq.sqrt())
            self.example_stats[u] = (loss, norm, norm * float(factor))

    def take_clipped_sum(self) -> list[torch.Tensor]:
        """The clipped sum accumulated since the last step (float64 copies; open units
        closed), then reset without a step: the quantity noise is added to, whose change
        when one unit is removed tests/dp/test_dp_clip_bound.py and
        benchmarks/dp_sensitivity.py measure."""
        self.close_units()
        out = [s.clone() for s in self.summed]
        for s in self.summed:
            s.zero_()
        self.n_examples = 0
        self.example_stats = {}
        return out

    def take_update_numerator(self) -> list[torch.Tensor]:
        """The clipped private sum plus the weighted public sum (what the update divides,
        before noise), then reset: removing one private unit moves it by at most C too,
        since the public part does not depend on the private units."""
        public = [s.clone() for s in self.public_sum]
        for s in self.public_sum:
            s.zero_()
        self.public_count = 0.0
        return [a + b for a, b in zip(self.take_clipped_sum(), public)]

    def _step_counts(self):
        """The step's statistics (pairs and units seen, mean loss, share clipped), summed
        over processes; the clipped gradient sums are summed over processes too."""
        stats = self.example_stats.values()
        counts = torch.tensor([self.n_examples, len(self.example_stats),
                               sum(v[0] for v in stats),
                               sum(1 for v in stats if v[1] > self.max_grad_norm)],
                              dtype=torch.float64)
        public = torch.tensor([self.public_count], dtype=torch.float64)
        if distributed_group()[1] > 1:
            import torch.distributed as dist

            for s in self.summed + self.public_sum:
                dist.all_reduce(s)
            dist.all_reduce(counts)
            dist.all_reduce(public)
        self.public_count = float(public[0])
        examples, units, loss, clipped = counts.tolist()
        return {"examples": int(examples), "units": int(units),
                "mean_loss": loss / max(1, units), "clipped_share": clipped / max(1, units)}

    def noise(self) -> list[torch.Tensor]:
        std = self.noise_multiplier * self.max_grad_norm
        return [torch.normal(0.0, std, size=p.shape, generator=self.generator,
                             dtype=torch.float32).to(p.device, p.dtype) for p in self.params]

    def step(self) -> dict:
        """Add noise once, average by the expected batch size, update; return stats."""
        self.close_units()
        stats = self._step_counts()
        noise = self.noise()
        e = self.expected_batch_size
        sig = math.sqrt(sum(float(s.double().pow(2).sum()) for s in self.summed)) / e
        nz = math.sqrt(sum(float(z.double().pow(2).sum()) for z in noise)) / e
        # public pairs join the logical batch: the update is the mean over its private
        # (clipped, noised) and public (weighted) members
        denom = e + self.public_count
        for p, s, z, g in zip(self.params, self.summed, noise, self.public_sum):
            p.grad = ((s + z + g) / denom).to(p.dtype)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        stats.update(signal_norm=sig, noise_norm=nz,
                     snr=sig / nz if nz > 0 else float("inf"))
        if self.public_count:
            stats.update(public_weight=self.public_count, public_norm=math.sqrt(sum(
                float(g.pow(2).sum()) for g in self.public_sum)) / self.public_count)
        for s in self.summed + self.public_sum:
            s.zero_()
        self.public_count = 0.0
        self.n_examples = 0
        self.example_stats = {}
        return stats


def train_dp(model: torch.nn.Module, dataset: LanguagePairDataset, *, steps: int,
             rate_of_step: Callable[[int], float], noise_multiplier: float,
             max_grad_norm: float, physical_batch: int, lr: float,
             weight_decay: float = 0.0, seed: int | Seed | None = None,
             label_smoothing: float = 0.0, log: Callable[[dict], None] | None = None,
             valid_fn: Callable[[torch.nn.Module], float] | None = None,
             valid_every: int = 0, units: Sequence[Sequence[int]] | None = None,
             clipping: str = "hooks", max_tokens: int | None = None,
             divisor_units: int | None = None,
             checkpointer: resume.Checkpointer | None = None,
             warmup_steps: int = 0, clip_mode: str = "clip", loss: str = "sum",
             allow_zero_noise: bool = False, public: PublicBatches | None = None,
             public_only: bool = False
             ) -> tuple[list[dict], list[tuple[float, float, int]], DPSGD]:
    """Run `steps` noisy steps; the logical batch of step t is Poisson with rate
    `rate_of_step(t)` over the privacy units: dataset rows, or the groups of rows in
    `units` (e.g. documents). Returns (per-step log, privacy history [(σ, q, steps)],
    the DPSGD object). `seed` None draws sampling and noise from secret randomness;
    `clipping` is "hooks" or "ghost" (nmtfrag.dp.clipping.choose_clipping). The noisy
    sum is divided by q·`divisor_units` (the public planning count, so the update's
    scale does not depend on the exact n; default: n).

    `checkpointer` (nmtfrag.dp.resume.Checkpointer) saves the state every few steps and,
    when SIGINT or SIGTERM stops the run, that of its last whole step (a signal waits
    while a step's update is under way: resume.signals_held); resuming, the run
    continues from the saved one; `warmup_steps` raises the learning rate
    linearly over the first steps (lr_at); `clip_mode` "normalize" scales every
    gradient to norm < C (nmtfrag.dp.clipping.normalize_factors); `loss` "mean" trains
    on each pair's mean token loss instead of its sum; `allow_zero_noise` permits σ = 0
    (the noise-free control, not private); `public`: public pairs joining every logical
    batch, unclipped and noise-free (PublicBatches, DPSGD.add_public); `public_only`: no
    private pair joins a batch (the public-only control: needs `public` and σ = 0), the
    update divided as in the run with them."""
    if public_only and (public is None or noise_multiplier != 0):
        raise InputError("a public-only control needs public pairs and σ = 0")
    seed = resolve_seed(seed)
    n = len(units) if units is not None else len(dataset)
    m = n if divisor_units is None else divisor_units
    pad = dataset.src_dict.pad()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.98), eps=1e-8,
                            weight_decay=weight_decay)
    dp = DPSGD(model, opt, max_grad_norm=max_grad_norm, noise_multiplier=noise_multiplier,
               expected_batch_size=rate_of_step(0) * m, seed=seed,
               label_smoothing=label_smoothing, pad_idx=pad, clipping=clipping,
               clip_mode=clip_mode, loss=loss, allow_zero_noise=allow_zero_noise)
    rng, dp.generator = shared_generators(seed)
    rank, world = distributed_group()
    sizes = dataset.src_sizes + (dataset.tgt_sizes if dataset.tgt_sizes is not None else 0)
    history: list[list] = []  # [noise multiplier, rate, steps] per stretch
    records: list[dict] = []
    start = 0
    saved = checkpointer.load() if checkpointer is not None else None
    if saved is not None:
        start, history, records = resume.restore(saved, params, opt, rng, dp.generator)
        if log is not None and hasattr(log, "restart"):
            log.restart(records)
    model.train()
    # the last whole step (None while a step's update is under way): what a run stopped
    # by a signal saves, with the generators' and learning rates' states it ended with
    whole: _WholeStep | None = _WholeStep.after(start, rng, dp.generator, opt)
    try:
        for t in range(start, steps):
            for group in opt.param_groups:
                group["lr"] = lr_at(lr, warmup_steps, t)
            q = rate_of_step(t)
            dp.expected_batch_size = q * m
            t0 = time.time()
            idx = poisson_indices(n, q, rng)  # drawn in a control too: the same generators
            if public_only:
                idx = idx[:0]
            if units is None:
                for chunk in physical_batches(idx, physical_batch, sizes,
                                              max_tokens)[rank::world]:
                    dp.accumulate(dataset.collater([dataset[i] for i in chunk]))
            else:  # each process takes whole units
                for chunk, unit_of in unit_batches(idx[rank::world], units, physical_batch,
                                                   sizes, max_tokens):
                    dp.accumulate(dataset.collater([dataset[i] for i in chunk]), unit_of)
                    dp.close_units(keep=unit_of[chunk[-1]])
            if public is not None:
                pub = public.dataset
                for chunk in physical_batches(public.rows_of_step(t), physical_batch,
                                              public.sizes, max_tokens)[rank::world]:
                    dp.add_public(pub.collater([pub[i] for i in chunk]), public.weight)
            with resume.signals_held():  # the update is whole or not begun
                whole = None
                rec = dp.step()
                rec.update(step=t + 1, sample_rate=q, seconds=time.time() - t0)
                if history and history[-1][1] == q:
                    history[-1][2] += 1
                else:
                    history.append([noise_multiplier, q, 1])
                if valid_fn is not None and valid_every and (t + 1) % valid_every == 0:
                    dp.gsm.disable_hooks()
                    rec["valid_loss"] = valid_fn(model)
                    model.train()
                records.append(rec)
                if log:
                    log(rec)
                whole = _WholeStep.after(t + 1, rng, dp.generator, opt)
            if checkpointer is not None:
                checkpointer.after_step(t + 1, steps, lambda: resume.capture(
                    t + 1, params, opt, rng, dp.generator, history, records), rank)
    except (KeyboardInterrupt, SystemExit):  # SIGINT, SIGTERM (nmtfrag.cli)
        if checkpointer is not None and whole is not None:
            checkpointer.save_interrupted(resume.capture(
                whole.step, params, opt, rng, dp.generator, history, records,
                generators=whole.generators, lrs=whole.lrs), rank)
        raise
    dp.gsm.disable_hooks()
    return records, [tuple(h) for h in history], dp


@dataclass(frozen=True)
class _WholeStep:
    """A run's state after its noisy step `step`, beside what the parameters, the
    optimizer, the history and the records hold: the generators' states
    (resume.generator_states) and each parameter group's learning rate."""
    step: int
    generators: dict
    lrs: list[float]

    @classmethod
    def after(cls, step: int, rng: np.random.Generator, generator: torch.Generator,
              opt: torch.optim.Optimizer) -> _WholeStep:
        return cls(step, resume.generator_states(rng, generator),
                   [group["lr"] for group in opt.param_groups])


def lr_at(lr: float, warmup_steps: int, step: int) -> float:
    """Learning rate of 0-based noisy step `step`: linear warm-up from lr/W over the
    first W steps, then constant (a few large-batch DP steps are too few to decay)."""
    if warmup_steps and step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    return lr


@torch.no_grad()
def valid_loss(model: torch.nn.Module, dataset: LanguagePairDataset, batch_size: int = 64,
               label_smoothing: float = 0.0) -> float:
    """Mean label-smoothed loss per target token (base e) on a dataset."""
    was = model.training
    model.eval()
    total, tokens = 0.0, 0
    order = sorted(range(len(dataset)), key=lambda i: dataset.src_sizes[i])
    pad = dataset.src_dict.pad()
    for k in range(0, len(order), batch_size):
        sample = dataset.collater([dataset[i] for i in order[k:k + batch_size]])
        sample = to_device(sample, next(model.parameters()).device)
        total += float(fairseq_opacus.example_losses(model, sample, label_smoothing,
                                                     pad).sum())
        tokens += int(sample["ntokens"])
    model.train(was)
    return total / max(1, tokens)
