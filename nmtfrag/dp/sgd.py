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
- One process, one device (CPU or one CUDA GPU): the noise is added once (no per-shard
  noise to account for); noise is drawn on the CPU, so runs match across devices.
- Secret randomness: Poisson sampling and noise are seeded from the operating system's
  cryptographic source (nmtfrag.randomness); with a known seed the mechanism is
  deterministic and ε means nothing, so `--seed` is an opt-in marked not private.
"""
import math
import time
import warnings

import numpy as np
import torch

from ..errors import InputError
from ..randomness import resolve_seed
from . import accounting, fairseq_opacus


def to_device(sample, device):
    """A fairseq sample with every tensor on `device` (no copy when already there)."""
    from fairseq.utils import apply_to_sample

    return apply_to_sample(lambda t: t.to(device), sample)


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
                 expected_batch_size, seed=None, label_smoothing=0.0, pad_idx=1):
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
        self.device = self.params[0].device
        # noise is drawn on the CPU (same numbers on any device), then moved
        self.generator = resolve_seed(seed).torch_generator()
        self.summed = [torch.zeros_like(p) for p in self.params]
        self.n_examples = 0
        self.example_stats = {}

    def accumulate(self, sample):
        """Forward/backward one physical batch; add its clipped per-example gradients."""
        if not sample or sample.get("nsentences", 0) == 0:
            return {}
        n = sample["nsentences"]
        sample = to_device(sample, self.device)
        self.gsm.expected_batch_size = n
        self.gsm.enable_hooks()
        losses = fairseq_opacus.example_losses(self.model, sample, self.label_smoothing,
                                               self.pad_idx)
        with warnings.catch_warnings():
            # token-id inputs need no gradient: torch's notice about hooks on the
            # embedding is expected and harmless
            warnings.filterwarnings("ignore", message="Full backward hook is firing")
            losses.sum().backward()
        grads = fairseq_opacus.per_example_grads(self.gsm, self.params)
        sq = torch.zeros(n, dtype=torch.float64, device=self.device)
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
                             dtype=torch.float32).to(p.device, p.dtype) for p in self.params]

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
             physical_batch, lr, weight_decay=0.0, seed=None, label_smoothing=0.0,
             log=None, valid_fn=None, valid_every=0):
    """Run `steps` noisy steps; the logical batch of step t is Poisson with rate
    `rate_of_step(t)`. Returns (per-step log, privacy history [(σ, q, steps)]).
    `seed` None draws sampling and noise from secret randomness."""
    seed = resolve_seed(seed)
    n = len(dataset)
    pad = dataset.src_dict.pad()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.98), eps=1e-8,
                            weight_decay=weight_decay)
    dp = DPSGD(model, opt, max_grad_norm=max_grad_norm, noise_multiplier=noise_multiplier,
               expected_batch_size=rate_of_step(0) * n, seed=seed,
               label_smoothing=label_smoothing, pad_idx=pad)
    rng = seed.numpy_rng()
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
        sample = to_device(sample, next(model.parameters()).device)
        total += float(fairseq_opacus.example_losses(model, sample, label_smoothing,
                                                     pad).sum())
        tokens += int(sample["ntokens"])
    model.train(was)
    return total / max(1, tokens)


# --------------------------------------------------------------------------- the command
def _check_args(args):
    """Refuse configurations that would void (or silently change) the guarantee."""
    if args.delta is None:
        raise InputError("--dp needs --delta: a DP guarantee without δ is void")
    if (args.target_epsilon is None) == (args.noise_multiplier is None):
        raise InputError("--dp needs exactly one of --target-epsilon and --noise-multiplier")
    if getattr(args, "update_freq", 1) not in (None, 1):
        raise InputError("--update-freq with --dp would accumulate unclipped gradients over "
                         "Poisson batches and void the guarantee; use --logical-batch and "
                         "--physical-batch (virtual steps) instead")
    if getattr(args, "fp16", False):
        raise InputError("--fp16 is not supported with --dp")
    if getattr(args, "resume", False):
        raise InputError("--resume is not supported with --dp (the privacy accountant "
                         "would restart); start again with --overwrite")
    if getattr(args, "gpus", 1) not in (None, 0, 1):
        raise InputError("--dp runs in one process on one device (CPU or one GPU), so the "
                         "noise is added once; multi-device DP training is not implemented")
    if args.max_grad_norm is None or not args.max_grad_norm > 0:
        raise InputError("--max-grad-norm must be positive")
    if args.physical_batch is None or args.physical_batch < 1:
        raise InputError("--physical-batch must be ≥ 1")
    if not args.batch_schedule and not args.logical_batch:
        raise InputError("--dp needs --logical-batch (expected pairs per noisy step) or "
                         "--batch-schedule")


def _dp_device(args):
    device = getattr(args, "device", None)
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda: no CUDA device is available")
    return torch.device(device)


def _total_steps(args, segments, n):
    if args.dp_steps:
        return int(args.dp_steps)
    if getattr(args, "max_updates", None):
        return int(args.max_updates)
    epochs = getattr(args, "max_epoch", None)
    if not epochs:
        raise InputError("give a DP training budget: --dp-steps, --max-updates or "
                         "--max-epochs")
    from .schedule import batch_at

    steps, seen = 0, 0.0
    while seen < epochs * n:
        seen += batch_at(segments, steps)
        steps += 1
    return steps


def base_model_privacy(model_dir):
    """What a base model already spent: (vocabulary entry, earlier DP trainings, note).

    Fine-tuning a DP model again on the owner's data composes with its earlier ε; a base
    fine-tuned without DP is outside any certificate, so it gets a warning."""
    import os

    from ..fileio import MANIFEST, read_json

    cert_path = os.path.join(model_dir, "privacy.json")
    cert = read_json(cert_path) if os.path.isfile(cert_path) else {}
    earlier = list(cert.get("earlier_training") or [])
    if cert.get("training"):
        earlier.append(cert["training"])
    note = {"dp_trainings": len(earlier)}
    man_path = os.path.join(model_dir, MANIFEST)
    man = read_json(man_path) if os.path.isfile(man_path) else {}
    if man.get("kind") == "nmtfrag-finetuned-model" and not man.get("dp"):
        note["warning"] = ("the base model was fine-tuned WITHOUT differential privacy: "
                           "if its training data was confidential, this certificate does "
                           "not cover it")
    elif cert.get("base_model", {}).get("warning"):
        note["warning"] = cert["base_model"]["warning"]
    return cert.get("vocabulary"), earlier, note


def _unit(dedup):
    if dedup:
        return "one distinct training sentence pair (duplicates removed with --dedup)"
    return ("one training sentence pair (a pair repeated k times in the data is "
            "protected only as a group of k: use --dedup)")


def _refuse_release(train_info):
    if train_info["kind"] == "release":
        raise InputError(
            "--dp on a release directory is refused: one sentence yields many phrase-pair "
            "examples (dozens), so a guarantee per example is not one per sentence. Train "
            "with --dp on the full sentence pairs instead (the DP guarantee replaces "
            "fragmentation)")


def _clean_stale_work(out):
    """Older versions put the private work dir inside OUT: remove any left by a kill."""
    import os
    import shutil

    for name in os.listdir(out):
        if name.startswith(".dp-work-"):
            shutil.rmtree(os.path.join(out, name), ignore_errors=True)


def dp_finetune(args):
    """`nmtfrag finetune --dp`: DP-SGD fine-tuning of a model dir.

    OUT gets what may be shared — the model files, privacy.json (the certificate) and a
    manifest of public parameters — and OUT/owner/ (never to be shared): the owner's
    manifest (input paths and hashes, exact counts, validation losses, seed) and
    train.log (one JSON line of non-private statistics per noisy step). The private work
    dir holding the corpus lives in the system's temp dir, never inside OUT."""
    import json
    import os
    import sys

    os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    from ..bpe import BPE, TAGS
    from ..binarize import fairseq_log_level
    from ..fileio import (MANIFEST, OWNER_DIR, owner_path, prepare_output_dir,
                          private_workdir, sha256_file, tool_versions, write_json,
                          write_owner_json)
    from ..finetune import _prepare, resolve_train
    from ..model_dir import (grow_state, load_state, save_state, validate_model_dir,
                             write_dict_with, write_model_dir)
    from . import schedule

    _check_args(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    seed = resolve_seed(args.seed)
    if seed.reproducible:  # dropout masks too, so a seeded run repeats exactly
        torch.manual_seed(seed.value)
    src_lang, tgt_lang = args.src_lang, args.tgt_lang
    md = validate_model_dir(args.model, src_lang, tgt_lang, args.checkpoint)
    if len(args.train) > 2:
        raise InputError("--train takes a release directory, a prefix, or two files")
    train = args.train if len(args.train) == 2 else args.train[0]
    src_path, tgt_path, mode, train_info = resolve_train(train, src_lang, tgt_lang,
                                                         args.pretokenized)
    _refuse_release(train_info)
    valid_mode = "moses" if args.pretokenized else "raw"
    for p in (src_path, tgt_path, args.valid_src, args.valid_tgt):
        if not os.path.isfile(p):
            raise InputError(f"{p}: no such file")
    vocab_privacy, earlier, base_note = base_model_privacy(md.path)
    if base_note.get("warning"):
        print(f"warning: {base_note['warning']}", file=sys.stderr)
    out = prepare_output_dir(args.out, args.overwrite)
    _clean_stale_work(out)
    for f in (MANIFEST, "privacy.json", "train.log", os.path.join(OWNER_DIR, MANIFEST)):
        if os.path.exists(os.path.join(out, f)):
            os.unlink(os.path.join(out, f))
    inputs = {"model": md.checkpoints[0], "train_src": src_path, "train_tgt": tgt_path,
              "valid_src": args.valid_src, "valid_tgt": args.valid_tgt}
    hashes = {k: sha256_file(v) for k, v in inputs.items()}
    t0 = time.time()
    with private_workdir(keep=args.keep_work, prefix="nmtfrag-dp-") as work:
        bin_dir = os.path.join(work, "bin")
        init_ckpt = os.path.join(work, "init.pt")
        with fairseq_log_level():
            prep = _prepare(md, src_path, tgt_path, mode, args.valid_src, args.valid_tgt,
                            valid_mode, work, bin_dir, init_ckpt, src_lang, tgt_lang,
                            1 if args.seed is None else args.seed, BPE, TAGS, load_state,
                            grow_state, save_state, write_dict_with,
                            tags=bool(args.tags), dedup=args.dedup)
            from fairseq import checkpoint_utils

            models, _, task = checkpoint_utils.load_model_ensemble_and_task(
                [init_ckpt], arg_overrides={"data": bin_dir, "source_lang": src_lang,
                                            "target_lang": tgt_lang,
                                            "dropout": args.dropout})
            task.load_dataset("train")
            task.load_dataset("valid")
        device = _dp_device(args)
        model = models[0].float().to(device)
        train_ds, valid_ds = task.dataset("train"), task.dataset("valid")
        n = len(train_ds)
        accounting.check_delta(args.delta, n_examples=n)
        segs = schedule.parse_schedule(args.batch_schedule or f"{args.logical_batch}:0")
        steps = _total_steps(args, segs, n)
        rate_segs = schedule.rate_segments(segs, steps, n)
        if args.noise_multiplier is not None:
            sigma = float(args.noise_multiplier)
        else:
            sigma = accounting.noise_multiplier_for(args.target_epsilon, args.delta,
                                                    rate_segs, args.accountant)
        frozen = []
        if args.dp_freeze_embeddings:
            for name, p in model.named_parameters():
                if "embed_tokens" in name or "output_projection" in name:
                    p.requires_grad_(False)
                    frozen.append(name)
        fairseq_opacus.prepare_model(model)  # refuses unsupported layers before training
        n_trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)

        def rate_of_step(t):
            return schedule.batch_at(segs, t) / n

        ls = args.label_smoothing
        before = valid_loss(model, valid_ds, label_smoothing=ls) / math.log(2)
        log_f = open(os.open(owner_path(out, "train.log"),
                             os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
                     "w", encoding="utf-8")
        interval = max(1, getattr(args, "log_interval", 50) or 50)

        def log(rec):
            log_f.write(json.dumps(rec) + "\n")
            log_f.flush()
            if not getattr(args, "quiet", False) and (rec["step"] % interval == 0
                                                      or rec["step"] == 1):
                print(f"dp step {rec['step']}/{steps}: {rec['examples']} pairs, "
                      f"loss/pair {rec['mean_loss']:.2f}, SNR {rec['snr']:.3f}, "
                      f"{rec['seconds']:.1f}s", file=sys.stderr)

        print(f"DP-SGD: n={n} pairs, {steps} noisy steps, σ={sigma:.4f}, "
              f"C={args.max_grad_norm}, logical batch {segs}, physical batch "
              f"{args.physical_batch}, {n_trainable} trainable parameters, "
              f"randomness {seed.source}", file=sys.stderr)
        t_train = time.time()
        try:
            records, history, _ = train_dp(
                model, train_ds, steps=steps, rate_of_step=rate_of_step,
                noise_multiplier=sigma, max_grad_norm=args.max_grad_norm,
                physical_batch=args.physical_batch, lr=args.dp_lr or args.lr,
                weight_decay=args.dp_weight_decay, seed=seed, label_smoothing=ls,
                log=log, valid_fn=(lambda m: valid_loss(m, valid_ds, label_smoothing=ls)
                                   / math.log(2)),
                valid_every=args.dp_valid_every)
        finally:
            log_f.close()
        train_seconds = time.time() - t_train
        after = valid_loss(model, valid_ds, label_smoothing=ls) / math.log(2)
        fairseq_opacus.restore_model(model)
        state = load_state(init_ckpt)
        sd = model.state_dict()
        state["model"] = {k: sd[k].detach().to("cpu", v.dtype) if k in sd else v
                          for k, v in state["model"].items()}
        write_model_dir(out, state, os.path.join(bin_dir, f"dict.{src_lang}.txt"),
                        os.path.join(bin_dir, f"dict.{tgt_lang}.txt"), md.bpecodes,
                        src_lang, tgt_lang)
        del state

    eps = {name: accounting.epsilon(history, args.delta, name)
           for name in accounting.ACCOUNTANTS}
    training = {"mechanism": "DP-SGD, Poisson-subsampled Gaussian, add/remove one unit",
                "unit": _unit(args.dedup), "accountant": args.accountant,
                "epsilon": eps[args.accountant], "epsilon_all_accountants": eps,
                "delta": args.delta, "noise_multiplier": sigma,
                "max_grad_norm": args.max_grad_norm, "steps": steps,
                # n is revealed by the sampling rates q = batch / n anyway
                "n_examples": n, "history": [list(h) for h in history],
                "target_epsilon": args.target_epsilon,
                "randomness": seed.public_record()}
    total = accounting.compose_certificate(training, vocab_privacy, earlier,
                                           training_eps=training["epsilon"])
    privacy = {"training": training,
               "vocabulary": vocab_privacy or accounting.NO_VOCABULARY,
               "earlier_training": earlier, "base_model": base_note, "total": total}
    public_params = {
        "src_lang": src_lang, "tgt_lang": tgt_lang, "lr": args.dp_lr or args.lr,
        "optimizer": "adamw", "dp_weight_decay": args.dp_weight_decay,
        "dropout": args.dropout, "label_smoothing": ls,
        "logical_batch": args.logical_batch, "batch_schedule": args.batch_schedule,
        "physical_batch": args.physical_batch, "max_grad_norm": args.max_grad_norm,
        "noise_multiplier": sigma, "target_epsilon": args.target_epsilon,
        "delta": args.delta, "steps": steps, "accountant": args.accountant,
        "frozen": frozen, "tags": bool(args.tags), "dedup": args.dedup,
        "trainable_parameters": n_trainable}
    snrs = [r["snr"] for r in records]
    write_owner_json(out, {
        "kind": "nmtfrag-finetuned-model-owner-record",
        "params": {"base_model": md.path,
                   "train": train if isinstance(train, str) else list(train),
                   "train_text_mode": mode, "valid_src": os.path.abspath(args.valid_src),
                   "valid_tgt": os.path.abspath(args.valid_tgt)},
        "randomness": seed.owner_record(),
        "counts": prep["counts"], "tags": prep["tags"],
        "result": {"valid_loss_before": before, "valid_loss_after": after,
                   "valid_loss_unit": "label-smoothed loss per target token, base 2",
                   "mean_examples_per_step": sum(r["examples"] for r in records)
                   / max(1, len(records)),
                   "empty_steps": sum(1 for r in records if r["examples"] == 0),
                   "snr_first": snrs[0] if snrs else None,
                   "snr_last": snrs[-1] if snrs else None,
                   "train_seconds": round(train_seconds, 1),
                   "wall_seconds": round(time.time() - t0, 1)},
        "inputs_sha256": hashes,
        "tool_versions": tool_versions("fairseq-fixed", "torch", "opacus", "fastbpe",
                                       "sacremoses"),
    })
    write_json(os.path.join(out, "privacy.json"), privacy)
    write_json(os.path.join(out, MANIFEST), {
        "kind": "nmtfrag-finetuned-model", "dp": True,
        "model_files": ["model.pt", f"dict.{src_lang}.txt", f"dict.{tgt_lang}.txt",
                        "bpecodes"],
        "shareable": "every file here except owner/",
        "owner_only": [f"{OWNER_DIR}/{MANIFEST}", f"{OWNER_DIR}/train.log"],
        "params": public_params, "privacy": privacy,
        "randomness": seed.public_record()})
    print(json.dumps({"out": out, "num_updates": steps, "noise_multiplier": sigma,
                      "epsilon": training["epsilon"], "delta": args.delta,
                      "epsilon_total": total["epsilon"], "valid_loss_before": before,
                      "valid_loss_after": after}))
    return 0
