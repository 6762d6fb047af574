"""Time and peak memory of one DP-SGD step vs one non-private step (same model, batch).

The DP step (nmtfrag.dp.sgd.DPSGD: exact per-example gradients through opacus hooks,
per-example clipping, accumulation, Gaussian noise, AdamW) and the non-private step
(summed loss, backward, AdamW) run on the same batch of real sentence pairs; the DP step
is also measured with the tied embedding matrices frozen (--dp-freeze-embeddings).
Each mode runs in a fresh subprocess (one torch thread) so its peak RSS is its own;
"step memory" is the peak RSS minus the RSS after loading the model. Target: DP step
time ≤ 2.0× the non-private step.

    python3 benchmarks/dp_step.py [--model ../shared/models/generic-deen-small]
        [--corpus ../shared/data/indomain/EMEA/train] [--batch 32] [--repeats 3]
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.join(HERE, "..", "..", "shared")

CHILD = r"""
import json, os, resource, sys, time
os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
import torch
torch.set_num_threads(1)
import fastBPE
from fairseq import checkpoint_utils
from fairseq.data import LanguagePairDataset
from nmtfrag.dp import fairseq_opacus, sgd

cfg = json.loads(sys.argv[1])
model_dir, mode = cfg["model"], cfg["mode"]
models, _, task = checkpoint_utils.load_model_ensemble_and_task(
    [os.path.join(model_dir, "model.pt")],
    arg_overrides={"data": model_dir, "source_lang": "de", "target_lang": "en"})
model = models[0].float()
model.train()
bpe = fastBPE.fastBPE(os.path.join(model_dir, "bpecodes"))
def lines(path):
    with open(path, encoding="utf-8") as f:
        return [next(f).strip() for _ in range(cfg["batch"])]
src = lines(cfg["corpus"] + ".de"); tgt = lines(cfg["corpus"] + ".en")
sd, td = task.source_dictionary, task.target_dictionary
S = [sd.encode_line(x, add_if_not_exist=False).long() for x in bpe.apply(src)]
T = [td.encode_line(x, add_if_not_exist=False).long() for x in bpe.apply(tgt)]
ds = LanguagePairDataset(S, [len(s) for s in S], sd, T, [len(t) for t in T], td)
batch = ds.collater([ds[i] for i in range(len(S))])
if mode == "dp_frozen":
    for name, p in model.named_parameters():
        if "embed_tokens" in name or "output_projection" in name:
            p.requires_grad_(False)
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
    dp = sgd.DPSGD(model, opt, max_grad_norm=1.0, noise_multiplier=1.0,
                   expected_batch_size=len(S), label_smoothing=0.1)
    def step():
        dp.accumulate(batch); dp.step()
times = []
for k in range(cfg["repeats"] + 1):  # the first is a warm-up
    t0 = time.perf_counter(); step(); times.append(time.perf_counter() - t0)
times = sorted(times[1:])
print(json.dumps({"mode": mode, "seconds": times[len(times) // 2], "all": times,
                  "tokens": int(batch["ntokens"]), "src_shape": list(batch["net_input"]["src_tokens"].shape),
                  "trainable": sum(p.numel() for p in params),
                  "rss_after_load_mb": rss0,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def measure(mode, args):
    env = dict(os.environ, OMP_NUM_THREADS="1", TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")
    cfg = {"model": args.model, "corpus": args.corpus, "batch": args.batch,
           "repeats": args.repeats, "mode": mode}
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cfg)], check=True,
                         capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=os.path.join(SHARED, "models", "generic-deen-small"))
    ap.add_argument("--corpus", default=os.path.join(SHARED, "data", "indomain", "EMEA", "train"))
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    res = {m: measure(m, args) for m in ("plain", "dp", "dp_frozen")}
    base = res["plain"]
    print(f"model {os.path.abspath(args.model)}, batch {args.batch} pairs "
          f"({base['tokens']} target tokens, source {base['src_shape']}), 1 thread, "
          f"median of {args.repeats}")
    print(f"{'step':<12}{'seconds':>9}{'time ratio':>12}{'step MB':>10}{'mem ratio':>11}"
          f"{'peak RSS MB':>13}{'trainable':>12}")
    base_mem = base["peak_rss_mb"] - base["rss_after_load_mb"]
    for m, r in res.items():
        mem = r["peak_rss_mb"] - r["rss_after_load_mb"]
        print(f"{m:<12}{r['seconds']:>9.3f}{r['seconds'] / base['seconds']:>12.2f}"
              f"{mem:>10.0f}{mem / base_mem:>11.2f}{r['peak_rss_mb']:>13.0f}"
              f"{r['trainable']:>12}")
    ratio = res["dp"]["seconds"] / base["seconds"]
    print(f"DP/non-private time ratio {ratio:.2f} (target ≤ 2.0: "
          f"{'met' if ratio <= 2.0 else 'NOT met'}); with frozen embeddings "
          f"{res['dp_frozen']['seconds'] / base['seconds']:.2f}")


if __name__ == "__main__":
    main()
