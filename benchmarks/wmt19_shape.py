"""Time and peak memory of every path at the size of fairseq's WMT19 de→en release.

Builds a randomly initialised model of WMT19 de→en's shape in its release layout, in a
temporary directory:
- `transformer_wmt_en_de_big` (6+6 layers, d 1,024, 16 heads) with an 8,192-wide encoder
  FFN, a 4,096-wide decoder FFN and all embeddings shared (a joined dictionary). These are
  the options the WMT19 checkpoints store (their `args`; see fairseq issue #2489 for the
  en-de ones): 270M parameters, as released;
- `bpecodes` copied from the model dir given with --bpe-from; `dict.de.txt` =
  `dict.en.txt`: that model's symbols padded with unused ones to 42,024 types (with
  fairseq's 4 specials), WMT19's size;
- model1.pt … modelN.pt saved as 2019's fairseq saved them: an argparse `args`
  Namespace, no `cfg`.

Then each path runs in its own subprocess (one torch thread on CPU), so the peak RSS
reported (the child's ru_maxrss, from wait4) is that path's own; a path that fails, or
runs into the memory limit (RLIMIT_AS, --mem-limit-gb, so that a path too large for the
machine fails alone instead of waking the kernel's OOM killer), is reported as such and
the others still run:
- load: validate the model dir and load one member with fairseq;
- evaluate (fairseq, one member / the whole ensemble) and evaluate (CTranslate2, one
  member; its conversion measured as a path of its own): `nmtfrag evaluate`, beam 5,
  --sentences test sentences. A random model rarely emits </s>: its outputs run to the
  200-token limit (fairseq's default), so these are worst-case decoding times;
- finetune: `nmtfrag finetune --max-updates 1` (preprocessing, one validation, one
  update, writing the model dir), with the training time of the update itself;
- DP step: one DP-SGD step (nmtfrag.dp.sgd.DPSGD, per-example clipping, noise, AdamW)
  on a physical batch of --dp-batch training pairs, per trained set (--dp-params all,
  lora, bias), with the clipping method `auto` picks (nmtfrag.dp.clipping) and why.

    python3 benchmarks/wmt19_shape.py --bpe-from MODEL_DIR --test PREFIX --train PREFIX
        [--members 4] [--device cpu|cuda] [--mem-limit-gb 16] [--keep DIR]
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

N_TYPES = 42024  # WMT19 de-en's joined dictionary, fairseq's 4 specials included
WMT19_ARGS = dict(arch="transformer_wmt_en_de_big", encoder_ffn_embed_dim=8192,
                  decoder_ffn_embed_dim=4096, share_all_embeddings=True,
                  share_decoder_input_output_embed=True)

BUILD = r"""
import argparse, json, os, sys
import torch
torch.set_num_threads(1)
from fairseq.data import Dictionary
from fairseq.models import ARCH_CONFIG_REGISTRY
from fairseq.models.transformer import TransformerModel

cfg = json.loads(sys.argv[1])
out = cfg["out"]
d = Dictionary.load(os.path.join(out, "dict.de.txt"))
# the options a 2019 fairseq-train run stored (fairseq issue #2489 shows WMT19's)
args = argparse.Namespace(
    task="translation", source_lang="de", target_lang="en", data=[out],
    criterion="label_smoothed_cross_entropy", label_smoothing=0.1,
    optimizer="adam", adam_betas="(0.9, 0.98)", adam_eps=1e-8, lr=[0.0007],
    lr_scheduler="inverse_sqrt", warmup_updates=4000, warmup_init_lr=1e-7,
    weight_decay=0.0, clip_norm=0.0, max_tokens=3584, max_sentences=None,
    update_freq=[1], fp16=True, seed=1, dropout=0.2, attention_dropout=0.1,
    max_source_positions=1024, max_target_positions=1024, left_pad_source="True",
    left_pad_target="False", raw_text=False, dataset_impl="mmap",
    no_token_positional_embeddings=False, **cfg["arch"])
ARCH_CONFIG_REGISTRY[args.arch](args)

class Task:  # what TransformerModel.build_model reads from a task
    source_dictionary = target_dictionary = d
for k in range(1, cfg["members"] + 1):
    torch.manual_seed(k)
    model = TransformerModel.build_model(args, Task())
    state = {"args": args, "model": model.state_dict(),
             "optimizer_history": [{"criterion_name": "LabelSmoothedCrossEntropyCriterion",
                                    "optimizer_name": "FP16Optimizer",
                                    "lr_scheduler_state": {"best": None},
                                    "num_updates": 0}],
             "extra_state": {"train_iterator": {"epoch": 1}, "val_loss": None}}
    torch.save(state, os.path.join(out, f"model{k}.pt"))
    n = sum(p.numel() for p in model.parameters())
    del model, state
print(json.dumps({"parameters": n}))
"""

LOAD = r"""
import json, os, sys, time
os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
import torch
torch.set_num_threads(1)
cfg = json.loads(sys.argv[1])
t0 = time.perf_counter()
from nmtfrag.translate.fairseq_engine import Translator
tr = Translator(cfg["model"], checkpoint="model1.pt", device=cfg["device"])
print(json.dumps({"seconds": time.perf_counter() - t0,
                  "note": f"{sum(p.numel() for p in tr.models[0].parameters()):,} parameters"}))
"""

CT2_CONVERT = r"""
import json, sys, time
cfg = json.loads(sys.argv[1])
from nmtfrag.translate.ct2_engine import ensure_converted
from nmtfrag.model_dir import validate_model_dir
md = validate_model_dir(cfg["model"], checkpoint="model1.pt")
t0 = time.perf_counter()
path, converted = ensure_converted(md, cfg["ct2_cache"])
print(json.dumps({"seconds": time.perf_counter() - t0, "note": f"converted: {converted}"}))
"""

DP_STEP = r"""
import json, os, sys, time
os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
import torch
torch.set_num_threads(1)
import fastBPE
from fairseq import checkpoint_utils
from fairseq.data import LanguagePairDataset
from nmtfrag.train import trainable
from nmtfrag.dp import clipping, fairseq_opacus, sgd

cfg = json.loads(sys.argv[1])
device = torch.device(cfg["device"])
models, _, task = checkpoint_utils.load_model_ensemble_and_task(
    [os.path.join(cfg["model"], "model1.pt")],
    arg_overrides={"data": cfg["model"], "source_lang": "de", "target_lang": "en"})
model = models[0].float()
model.train()
bpe = fastBPE.fastBPE(os.path.join(cfg["model"], "bpecodes"))
def lines(path):
    with open(path, encoding="utf-8") as f:
        return [next(f).strip() for _ in range(cfg["batch"])]
src, tgt = lines(cfg["train"] + ".de"), lines(cfg["train"] + ".en")
sd, td = task.source_dictionary, task.target_dictionary
S = [sd.encode_line(x, add_if_not_exist=False).long() for x in bpe.apply(src)]
T = [td.encode_line(x, add_if_not_exist=False).long() for x in bpe.apply(tgt)]
ds = LanguagePairDataset(S, [len(s) for s in S], sd, T, [len(t) for t in T], td)
trainable.apply(model, trainable.TrainableSet(cfg["params"]))
model.to(device)
params = [p for p in model.parameters() if p.requires_grad]
opt = torch.optim.AdamW(params, lr=1e-5)
fairseq_opacus.prepare_model(model)
method, why = clipping.choose_clipping(model, "auto", physical_batch=len(S))
per_pass, smaller = len(S), None
if method == "hooks":  # as finetune --dp: fewer pairs per pass where they would not fit
    per_pass, smaller = clipping.fitting_physical_batch(model, len(S))
    why += f"; {smaller}" if smaller else ""
dp = sgd.DPSGD(model, opt, max_grad_norm=1.0, noise_multiplier=1.0,
               expected_batch_size=len(S), label_smoothing=0.1, clipping=method)
t0 = time.perf_counter()
for a in range(0, len(S), per_pass):  # one logical batch of len(S) pairs
    dp.accumulate(sgd.to_device(ds.collater([ds[i] for i in range(a, min(len(S), a + per_pass))]),
                                device))
dp.step()
if device.type == "cuda":
    torch.cuda.synchronize()
print(json.dumps({"seconds": time.perf_counter() - t0,
                  "note": f"{sum(p.numel() for p in params):,} trained; clipping {method}: {why}"}))
"""


def write_dicts(bpe_from, out):
    """bpecodes + a joined dictionary padded to WMT19's size (unused symbols at the end)."""
    shutil.copy(os.path.join(bpe_from, "bpecodes"), out)
    with open(os.path.join(bpe_from, "dict.de.txt"), encoding="utf-8") as f:
        entries = [ln.rstrip("\n") for ln in f if ln.strip()]
    entries += [f"__wmt19pad{i}__ 1" for i in range(N_TYPES - 4 - len(entries))]
    for lang in ("de", "en"):
        with open(os.path.join(out, f"dict.{lang}.txt"), "w", encoding="utf-8") as f:
            f.writelines(e + "\n" for e in entries)


def first_lines(prefix, n, out_prefix):
    for lang in ("de", "en"):
        with open(f"{prefix}.{lang}", encoding="utf-8") as f, \
                open(f"{out_prefix}.{lang}", "w", encoding="utf-8") as g:
            for _ in range(n):
                g.write(next(f))
    return out_prefix


def run_path(name, argv, limit_bytes, log_dir):
    """Run one path in a child process; its wall time, peak RSS (wait4) and outcome."""
    env = dict(os.environ, OMP_NUM_THREADS="1", TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")

    def limit():
        if limit_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))

    log = os.path.join(log_dir, name.replace(" ", "_").replace("/", "-") + ".log")
    t0 = time.perf_counter()
    with open(log, "w") as err:
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True, env=env,
                             preexec_fn=limit)
        stdout = p.stdout.read()
        _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    rc = os.waitstatus_to_exitcode(status)
    res = {"path": name, "wall_s": round(wall, 1), "peak_rss_gb": usage.ru_maxrss / 2**20,
           "rc": rc}
    tail = open(log, encoding="utf-8", errors="replace").read()[-3000:]
    if rc != 0:
        oom = any(s in tail for s in ("MemoryError", "out of memory", "can't allocate",
                                      "Cannot allocate", "DefaultCPUAllocator"))
        res["status"] = "out of memory" if oom or rc == -9 else f"failed (exit {rc})"
        res["note"] = [ln for ln in tail.strip().splitlines() if ln.strip()][-1][:160] \
            if tail.strip() else ""
        return res
    res["status"] = "ok"
    for line in reversed(stdout.strip().splitlines()):
        try:
            res.update(json.loads(line))
            break
        except ValueError:
            continue
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bpe-from", required=True, metavar="MODEL_DIR",
                    help="model dir whose bpecodes and dictionary symbols are used")
    ap.add_argument("--test", required=True, metavar="PREFIX",
                    help="test set PREFIX.de/PREFIX.en (the first --sentences lines)")
    ap.add_argument("--train", required=True, metavar="PREFIX",
                    help="training pairs for the fine-tuning and DP paths")
    ap.add_argument("--sentences", type=int, default=20)
    ap.add_argument("--members", type=int, default=4)
    ap.add_argument("--dp-params", default="all,lora,bias")
    ap.add_argument("--dp-batch", type=int, default=32,
                    help="physical batch of the DP step (default 32: finetune --dp's)")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--mem-limit-gb", type=float, default=14,
                    help="address-space limit of each path (0: none)")
    ap.add_argument("--paths", default="load,evaluate,ensemble,ct2,finetune,dp")
    ap.add_argument("--keep", metavar="DIR", help="build in DIR and keep it")
    args = ap.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.environ["PYTHONPATH"] = repo + os.pathsep + os.environ.get("PYTHONPATH", "")
    root = os.path.abspath(args.keep) if args.keep else tempfile.mkdtemp(prefix="wmt19-")
    model = os.path.join(root, "model")
    os.makedirs(model, exist_ok=True)
    logs = os.path.join(root, "logs")
    os.makedirs(logs, exist_ok=True)
    limit = int(args.mem_limit_gb * 2**30) if args.mem_limit_gb else 0
    py = sys.executable
    paths = set(args.paths.split(","))
    results = []
    try:
        write_dicts(args.bpe_from, model)
        test = first_lines(args.test, args.sentences, os.path.join(root, "test"))
        train = first_lines(args.train, max(64, args.dp_batch), os.path.join(root, "train"))
        valid = first_lines(args.test, 8, os.path.join(root, "valid"))
        cfg = {"out": model, "members": args.members, "arch": WMT19_ARGS}
        results.append(run_path("build (random init, save)", [py, "-c", BUILD,
                                                              json.dumps(cfg)], 0, logs))
        cfg = {"model": model, "device": args.device, "ct2_cache": os.path.join(root, "ct2"),
               "train": train, "batch": args.dp_batch}
        nm = ["-m", "nmtfrag"]
        ev = nm + ["evaluate", "--model", model, "--src", test + ".de", "--ref",
                   test + ".en", "--beam", "5", "--threads", "1", "--device", args.device]
        todo = []
        if "load" in paths:
            todo.append(("load (fairseq, 1 member)", [py, "-c", LOAD, json.dumps(cfg)]))
        if "finetune" in paths:
            todo.append(("finetune (1 update)", [py] + nm + [
                "finetune", "--model", model, "--checkpoint", "model1.pt", "--train",
                train, "--valid-src", valid + ".de", "--valid-tgt", valid + ".en",
                "--max-updates", "1", "--threads", "1", "--device", args.device, "--quiet",
                "--out", os.path.join(root, "ft")]))
        if "dp" in paths:
            for kind in args.dp_params.split(","):
                todo.append((f"DP step {kind} (batch {args.dp_batch})", [
                    py, "-c", DP_STEP, json.dumps(dict(cfg, params=kind))]))
        if "ct2" in paths:
            todo.append(("ctranslate2 conversion", [py, "-c", CT2_CONVERT, json.dumps(cfg)]))
            todo.append(("evaluate ctranslate2 float32", [py] + ev + [
                "--checkpoint", "model1.pt", "--engine", "ctranslate2", "--ct2-cache",
                cfg["ct2_cache"], "--out", os.path.join(root, "evct2")]))
        if "evaluate" in paths:
            todo.append(("evaluate fairseq (1 member)", [py] + ev + [
                "--checkpoint", "model1.pt", "--out", os.path.join(root, "ev1")]))
        if "ensemble" in paths and args.members > 1:
            todo.append((f"evaluate fairseq ({args.members} members)", [py] + ev + [
                "--out", os.path.join(root, "evN")]))
        for name, argv in todo:
            r = run_path(name, argv, limit, logs)
            if r["status"] == "ok" and name.startswith("evaluate"):
                out = argv[argv.index("--out") + 1]
                rep = json.load(open(os.path.join(out, "report.json")))
                gen = rep["params"]["generation"]
                r["seconds"] = gen["translation_seconds"]
                r["note"] = (f"{rep['scores']['avg_output_tokens']} output tokens/sentence "
                             f"(limit {gen['max_len_b']} subwords)")
            if r["status"] == "ok" and name.startswith("finetune"):
                man = json.load(open(os.path.join(argv[argv.index("--out") + 1],
                                                  "manifest.json")))
                r["seconds"] = man["result"]["train_seconds_this_run"]
                r["note"] = "seconds: fairseq-train (1 update + validation)"
            results.append(r)
            print(json.dumps(r), file=sys.stderr, flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(f"WMT19 de-en shape ({WMT19_ARGS['arch']}, encoder FFN "
          f"{WMT19_ARGS['encoder_ffn_embed_dim']}, decoder FFN "
          f"{WMT19_ARGS['decoder_ffn_embed_dim']}, all embeddings shared, {N_TYPES:,} types"
          f"), random weights; device {args.device}, 1 thread; {args.sentences} test "
          f"sentences, beam 5; address-space limit {args.mem_limit_gb:g} GB per path")
    print(f"| path | status | wall s | step s | peak RSS GB | note |")
    print("|---|---|---:|---:|---:|---|")
    for r in results:
        step = f"{r['seconds']:.1f}" if "seconds" in r else ""
        print(f"| {r['path']} | {r['status']} | {r['wall_s']:.1f} | {step} | "
              f"{r['peak_rss_gb']:.2f} | {r.get('note', '')} |")


if __name__ == "__main__":
    main()
