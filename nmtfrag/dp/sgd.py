"""DP-SGD fine-tuning of a fairseq Transformer (Abadi et al. 2016, "Deep Learning with
Differential Privacy"), with the large-batch practice of Anil et al. 2021,
"Large-Scale Differentially Private BERT".

Why each piece:
- *Poisson sampling*: every noisy (logical) step includes each training pair
  independently with probability q = logical batch / n; the accountants' guarantee is
  for exactly this sampling, so a logical batch is never built any other way.
- *Virtual steps*: a logical batch is processed in physical batches of at most
  `physical_batch` pairs; each pair's gradient (of its summed token loss) is computed
  exactly (nmtfrag.dp.fairseq_opacus), clipped to `max_grad_norm`, and added to a
  running sum; Gaussian noise N(0, σ²C²) is added once per logical batch and the sum is
  divided by the expected batch size q·n. So one logical batch is one privacy step
  whatever the physical batch (what opacus' BatchMemoryManager does). Summing unclipped
  gradients over physical batches ("plain accumulation", fairseq's --update-freq) would
  void the guarantee and is refused.
- An empty Poisson batch still takes its step, with noise only (skipping it would make
  the step count depend on the data).
- Gradient SNR ‖mean clipped gradient‖ / ‖noise / (q·n)‖ is logged per step (Anil et
  al. §5.2.1); weight decay is decoupled (AdamW) and may be large (§4.3); the logical
  batch may grow by a schedule (§5.2.2), the accountant composing each step's q.
- One process, one device: the noise is added once (no per-shard noise to account for).
Noise comes from torch's generator seeded by --seed, for reproducibility; a deployment
that must resist an attacker who knows the seed should draw it from a secure source.
"""
import math
import time

import numpy as np
import torch

from ..errors import InputError
from . import accounting, fairseq_opacus


def poisson_indices(n, q, rng):
    """Indices of one Poisson-sampled logical batch (each of n kept with prob. q)."""
    return np.flatnonzero(rng.random(n) < q)


def physical_batches(indices, physical_batch, sizes=None):
    """Split one logical batch into physical batches (by length, to limit padding)."""
    idx = list(indices)
    if sizes is not None:
        idx.sort(key=lambda i: (sizes[i], i))
    return [idx[k:k + physical_batch] for k in range(0, len(idx), physical_batch)]


class DPSGD:
    """Per-example clipping, accumulation over physical batches, one noisy step.

    `model` is a fairseq TransformerModel (modified in place by prepare_model);
    `optimizer` updates its trainable parameters from `.grad`.
    """

    def __init__(self, model, optimizer, *, max_grad_norm, noise_multiplier,
                 expected_batch_size, seed=1, label_smoothing=0.0, pad_idx=1):
        if not max_grad_norm > 0:
            raise InputError(f"--max-grad-norm must be positive, got {max_grad_norm}")
        if not noise_multiplier > 0:
            raise InputError(f"the noise multiplier must be positive, got {noise_multiplier}")
        self.gsm = fairseq_opacus.wrap(model)
        self.model = model
        self.optimizer = optimizer
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.max_grad_norm = float(max_grad_norm)
        self.noise_multiplier = float(noise_multiplier)
        self.expected_batch_size = float(expected_batch_size)
        self.label_smoothing = label_smoothing
        self.pad_idx = pad_idx
        self.generator = torch.Generator().manual_seed(seed)
        self.summed = [torch.zeros_like(p) for p in self.params]
        self.n_examples = 0
        self.example_stats = {}

    def accumulate(self, sample):
        """Forward/backward one physical batch; add its clipped per-example gradients."""
        if not sample or sample.get("nsentences", 0) == 0:
            return {}
        n = sample["nsentences"]
        self.gsm.expected_batch_size = n
        self.gsm.enable_hooks()
        losses = fairseq_opacus.example_losses(self.model, sample, self.label_smoothing,
                                               self.pad_idx)
        losses.sum().backward()
        grads = fairseq_opacus.per_example_grads(self.gsm, self.params)
        sq = torch.zeros(n, dtype=torch.float64)
        for _, gs in grads:
            sq += torch.linalg.vector_norm(gs.reshape(n, -1), dim=1).double() ** 2
        norms = sq.sqrt()
        factor = (self.max_grad_norm / (norms + 1e-6)).clamp(max=1.0)
        for acc, (p, gs) in zip(self.summed, grads):
            acc += torch.einsum("b,b...->...", factor.to(gs.dtype), gs)
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

    def noise(self):
        std = self.noise_multiplier * self.max_grad_norm
        return [torch.normal(0.0, std, size=p.shape, generator=self.generator,
                             dtype=torch.float32).to(p.dtype) for p in self.params]

    def step(self):
        """Add noise once, average by the expected batch size, update; return stats."""
        noise = self.noise()
        e = self.expected_batch_size
        sig = math.sqrt(sum(float(s.double().pow(2).sum()) for s in self.summed)) / e
        nz = math.sqrt(sum(float(z.double().pow(2).sum()) for z in noise)) / e
        for p, s, z in zip(self.params, self.summed, noise):
            p.grad = (s + z) / e
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        stats = {"examples": self.n_examples, "signal_norm": sig, "noise_norm": nz,
                 "snr": sig / nz if nz > 0 else float("inf"),
                 "mean_loss": (sum(v[0] for v in self.example_stats.values())
                               / max(1, len(self.example_stats))),
                 "clipped_share": (sum(1 for v in self.example_stats.values()
                                       if v[1] > self.max_grad_norm)
                                   / max(1, len(self.example_stats)))}
        for s in self.summed:
            s.zero_()
        self.n_examples = 0
        self.example_stats = {}
        return stats


def train_dp(model, dataset, *, steps, rate_of_step, noise_multiplier, max_grad_norm,
             physical_batch, lr, weight_decay=0.0, seed=1, label_smoothing=0.0,
             log=None, valid_fn=None, valid_every=0):
    """Run `steps` noisy steps; the logical batch of step t is Poisson with rate
    `rate_of_step(t)`. Returns (per-step log, privacy history [(σ, q, steps)])."""
    n = len(dataset)
    pad = dataset.src_dict.pad()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.98), eps=1e-8,
                            weight_decay=weight_decay)
    dp = DPSGD(model, opt, max_grad_norm=max_grad_norm, noise_multiplier=noise_multiplier,
               expected_batch_size=rate_of_step(0) * n, seed=seed,
               label_smoothing=label_smoothing, pad_idx=pad)
    rng = np.random.default_rng(seed)
    sizes = dataset.src_sizes + (dataset.tgt_sizes if dataset.tgt_sizes is not None else 0)
    history, records = [], []
    model.train()
    for t in range(steps):
        q = rate_of_step(t)
        dp.expected_batch_size = q * n
        t0 = time.time()
        idx = poisson_indices(n, q, rng)
        for chunk in physical_batches(idx, physical_batch, sizes):
            dp.accumulate(dataset.collater([dataset[i] for i in chunk]))
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
    dp.gsm.disable_hooks()
    return records, [tuple(h) for h in history], dp


@torch.no_grad()
def valid_loss(model, dataset, batch_size=64, label_smoothing=0.0):
    """Mean label-smoothed loss per target token (base e) on a dataset."""
    was = model.training
    model.eval()
    total, tokens = 0.0, 0
    order = sorted(range(len(dataset)), key=lambda i: dataset.src_sizes[i])
    pad = dataset.src_dict.pad()
    for k in range(0, len(order), batch_size):
        sample = dataset.collater([dataset[i] for i in order[k:k + batch_size]])
        total += float(fairseq_opacus.example_losses(model, sample, label_smoothing,
                                                     pad).sum())
        tokens += int(sample["ntokens"])
    model.train(was)
    return total / max(1, tokens)
