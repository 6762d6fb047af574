"""Time and peak memory of one DP-SGD step vs one non-private step, per trained set
and clipping method.

For each trained-parameter set (--dp-params: all, all-noemb (all but the tied embedding
matrices, --dp-freeze-embeddings), lora, bias, decoder; nmtfrag.train.trainable) the DP step
(nmtfrag.dp.sgd.DPSGD: per-example clipping, accumulation, Gaussian noise, AdamW) with
each clipping method (--clipping: hooks materialise per-example gradients, ghost computes
their norms only and backpropagates twice; a set ghost clipping cannot serve is shown as
such) and the non-private step of the same set (summed loss, backward, AdamW) run on the
same batch of real sentence pairs. Each measurement runs in a fresh subprocess (one torch thread on CPU) so its peak
RSS is its own; "step memory" is peak RSS minus RSS after loading. Prints, per set, the
DP/non-private time ratio (target with LoRA: ≤ 1.3×) and the ratio to a non-private step
of the whole model.

    python3 benchmarks/dp_step.py --model MODEL_DIR --corpus PREFIX (PREFIX.de/.en)
        [--dp-params all,lora] [--clipping hooks,ghost] [--device cpu|cuda]
        [--batch 32] [--repeats 3]
"""
import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, os, resource, sys, time
os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
import torch
torch.set_num_threads(1)
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[2])))
from dp_step import load_model_and_pairs
from nmtfrag.dp import clipping, fairseq_opacus, sgd

cfg = json.loads(sys.argv[1])
mode, device = cfg["mode"], torch.device(cfg["device"])
model, ds = load_model_and_pairs(cfg["model"], cfg["corpus"], cfg["batch"], cfg["params"])
batch = sgd.to_device(ds.collater([ds[i] for i in range(len(ds))]), device)
S = range(len(ds))
model.to(device)
params = [p for p in model.parameters() if p.requires_grad]
opt = torch.optim.AdamW(params, lr=1e-5)
def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
rss0 = rss_mb()
if mode == "plain":
    def step():
        fairseq_opacus.example_losses(model, batch, 0.1).sum().backward()
        opt.step(); opt.zero_grad(set_to_none=True)
else:
    fairseq_opacus.prepare_model(model)
    from nmtfrag.errors import InputError
    try:
        clipping.choose_clipping(model, cfg["clipping"])
    except InputError as exc:
        print(json.dumps({"mode": mode, "unavailable": str(exc).split(";")[0]}))
        sys.exit(0)
    dp = sgd.DPSGD(model, opt, max_grad_norm=1.0, noise_multiplier=1.0,
                   expected_batch_size=len(S), label_smoothing=0.1,
                   clipping=cfg["clipping"])
    def step():
        dp.accumulate(batch); dp.step()
def sync():
    if device.type == "cuda":
        torch.cuda.synchronize()
times = []
for k in range(cfg["repeats"] + 1):  # the first is a warm-up
    sync(); t0 = time.perf_counter(); step(); sync(); times.append(time.perf_counter() - t0)
times = sorted(times[1:])
print(json.dumps({"mode": mode, "seconds": times[len(times) // 2], "all": times,
                  "tokens": int(batch["ntokens"]), "src_shape": list(batch["net_input"]["src_tokens"].shape),
                  "trainable": sum(p.numel() for p in params),
                  "rss_after_load_mb": rss0,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def load_model_and_pairs(model_dir, corpus, n, params):
    """(fairseq model in float32, train mode, with the trained set `params` (all,
    all-noemb, lora, bias, decoder) applied; LanguagePairDataset of the first n pairs of
    corpus PREFIX.de/.en, BPE'd with the model's codes). Shared by the DP benchmarks."""
    import fastBPE
    from fairseq import checkpoint_utils
    from fairseq.data import LanguagePairDataset

    from nmtfrag.train import trainable

    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [os.path.join(model_dir, "model.pt")],
        arg_overrides={"data": model_dir, "source_lang": "de", "target_lang": "en"})
    model = models[0].float()
    model.train()
    bpe = fastBPE.fastBPE(os.path.join(model_dir, "bpecodes"))

    def lines(path):
        with open(path, encoding="utf-8") as f:
            return [next(f).strip() for _ in range(n)]

    sd, td = task.source_dictionary, task.target_dictionary
    src = [sd.encode_line(x, add_if_not_exist=False).long()
           for x in bpe.apply(lines(corpus + ".de"))]
    tgt = [td.encode_line(x, add_if_not_exist=False).long()
           for x in bpe.apply(lines(corpus + ".en"))]
    ds = LanguagePairDataset(src, [len(s) for s in src], sd, tgt, [len(t) for t in tgt], td)
    if params == "all-noemb":
        spec = trainable.TrainableSet("all", freeze_embeddings=True)
    else:
        spec = trainable.TrainableSet(params)
    trainable.apply(model, spec)
    return model, ds


def measure(mode, params, args, clipping="hooks"):
    env = dict(os.environ, OMP_NUM_THREADS="1", TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")
    cfg = {"model": args.model, "corpus": args.corpus, "batch": args.batch,
           "repeats": args.repeats, "mode": mode, "params": params, "device": args.device,
           "clipping": clipping}
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cfg), __file__], check=True,
                         capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="model dir (WMT19 layout)")
    ap.add_argument("--corpus", required=True,
                    help="parallel file prefix (PREFIX.de, PREFIX.en), BPE applied here")
    ap.add_argument("--dp-params", default="all,lora",
                    help="comma-separated trained sets to measure, among all, all-noemb, "
                         "lora, bias, decoder (default all,lora)")
    ap.add_argument("--clipping", default="hooks,ghost",
                    help="comma-separated clipping methods to measure (default hooks,ghost)")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    sets = [s.strip() for s in args.dp_params.split(",") if s.strip()]
    methods = [s.strip() for s in args.clipping.split(",") if s.strip()]
    full = measure("plain", "all", args)
    res = {}
    for kind in sets:
        res[kind] = {"plain": full if kind == "all" else measure("plain", kind, args)}
        for c in methods:
            res[kind][f"dp-{c}"] = measure("dp", kind, args, c)
    print(f"model {args.model}, batch {args.batch} pairs ({full['tokens']} target tokens, "
          f"source {full['src_shape']}), device {args.device}, "
          f"{'1 thread, ' if args.device == 'cpu' else ''}median of {args.repeats}")
    print(f"{'set':<10}{'step':<10}{'seconds':>9}{'step MB':>9}{'trainable':>12}"
          f"{'DP/non-private':>16}{'vs full non-private':>21}")
    for kind, r in res.items():
        for mode, m in r.items():
            if "unavailable" in m:
                print(f"{kind:<10}{mode:<10}  unavailable: {m['unavailable']}")
                continue
            mem = m["peak_rss_mb"] - m["rss_after_load_mb"]
            same = m["seconds"] / r["plain"]["seconds"]
            print(f"{kind:<10}{mode:<10}{m['seconds']:>9.3f}{mem:>9.0f}{m['trainable']:>12}"
                  f"{same:>16.2f}{m['seconds'] / full['seconds']:>21.2f}")
    for kind, r in res.items():
        for mode, m in r.items():
            if mode == "plain" or "unavailable" in m:
                continue
            ratio = m["seconds"] / r["plain"]["seconds"]
            target = " (target ≤ 1.3: " + ("met)" if ratio <= 1.3 else "NOT met)") \
                if kind == "lora" else ""
            print(f"DP/non-private step time, {kind}, {mode[3:]}: {ratio:.2f}{target}")


if __name__ == "__main__":
    main()
