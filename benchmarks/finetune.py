"""Benchmark: `nmtfrag finetune` training throughput vs calling fairseq-train directly.

Both train the same model from the same grown init checkpoint on the same binarised data
(the one `nmtfrag finetune --keep-work` prepared), with the same options and threads;
runs alternate (ours, fairseq, ours, fairseq, …) so load from other processes on the
machine hits both alike. Printed per run and as medians:

- fairseq's own training throughput (`wps` of the train summary: target tokens per
  second of training wall time) — the figure the issue asks for;
- target tokens / wall second of the training call (ours: the training phase of
  `nmtfrag finetune`, i.e. without our preprocessing but with model loading and the
  final validation; fairseq: the whole `fairseq-train` process including its Python
  start-up) — indicative only, the boundaries differ.

Both runs are fresh processes with the same OMP/MKL thread settings.

Target: ours / fairseq ≥ 0.95.

usage: python3 benchmarks/finetune.py [--model DIR] [--src F --tgt F --valid-src F
       --valid-tgt F] [--pretokenized] [--updates 10] [--max-tokens 1024] [--reps 2]
       [--threads 1]
--model and the data files are required unless `--tiny`, which uses a tiny model and
synthetic data built on the fly (seconds).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")

ARCH_FLAGS = [  # model options passed explicitly to fairseq-train (value from checkpoint)
    "encoder_layers", "decoder_layers", "encoder_embed_dim", "decoder_embed_dim",
    "encoder_ffn_embed_dim", "decoder_ffn_embed_dim", "encoder_attention_heads",
    "decoder_attention_heads", "attention_dropout", "activation_dropout", "activation_fn",
    "max_source_positions", "max_target_positions",
]
BOOL_FLAGS = ["share_all_embeddings", "share_decoder_input_output_embed",
              "encoder_normalize_before", "decoder_normalize_before",
              "encoder_learned_pos", "decoder_learned_pos", "no_scale_embedding",
              "layernorm_embedding"]


def summary(log_text):
    """(wps, target tokens, num_updates) from fairseq's last train summary line."""
    lines = [ln for ln in log_text.splitlines() if "| train | epoch" in ln]
    if not lines:
        raise RuntimeError("no fairseq train summary in the log")
    ln = lines[-1]

    def get(key):
        m = re.search(rf"\| {key} ([\d.]+)", ln)
        return float(m.group(1)) if m else None

    wps, wpb, n = get("wps"), get("wpb"), get("num_updates")
    return wps, wpb * n, int(n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="WMT19-layout model dir (e.g. generic-deen-small)")
    ap.add_argument("--src", help="training source (e.g. EMEA train.de)")
    ap.add_argument("--tgt", help="training target")
    ap.add_argument("--valid-src")
    ap.add_argument("--valid-tgt")
    ap.add_argument("--pretokenized", action="store_true", default=True)
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--updates", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--work", default=None, help="scratch dir (default: a temp dir)")
    a = ap.parse_args()
    if not a.tiny and not all([a.model, a.src, a.tgt, a.valid_src, a.valid_tgt]):
        ap.error("give --model, --src, --tgt, --valid-src and --valid-tgt (or --tiny)")

    import torch

    torch.set_num_threads(a.threads)
    from nmtfrag.train.finetune import FineTuneConfig, finetune
    from nmtfrag.train.job import FineTuneJob
    from nmtfrag.model_dir import validate_model_dir

    work = a.work or tempfile.mkdtemp(prefix="bench-finetune-")
    if a.tiny:
        sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
        from tinymodel import make_corpus, make_tiny_model_dir, write_parallel

        a.model = make_tiny_model_dir(os.path.join(work, "tiny"), updates=20)
        a.src, a.tgt = write_parallel(make_corpus(3000, seed=1), os.path.join(work, "tr"))
        a.valid_src, a.valid_tgt = write_parallel(make_corpus(50, seed=2),
                                                  os.path.join(work, "va"))
        a.pretokenized = False

    # preparation (ours) once; keep .work for fairseq-train
    prep = os.path.join(work, "prep")
    finetune(FineTuneJob(model=a.model, train=[a.src, a.tgt], out=prep, valid_src=a.valid_src,
                         valid_tgt=a.valid_tgt, pretokenized=a.pretokenized, device="cpu",
                         keep_work=True, quiet=True, threads=a.threads),
             FineTuneConfig(max_updates=1, max_tokens=a.max_tokens, measure_before=False))
    bin_dir, init = os.path.join(prep, ".work", "bin"), os.path.join(prep, ".work", "init.pt")
    md = validate_model_dir(a.model)
    argv0 = json.load(open(os.path.join(prep, "manifest.json")))["fairseq_train_argv"]

    def fairseq_argv(save_dir):
        argv = list(argv0)
        argv[0] = bin_dir
        argv[argv.index("--save-dir") + 1] = save_dir
        argv[argv.index("--max-update") + 1] = str(a.updates)
        argv[argv.index("--restore-file") + 1] = init
        # same options as ours, so both validate once when training stops (fairseq's
        # wps counts that time too)
        for k in ARCH_FLAGS:
            if md.arch.get(k) is not None:
                argv += ["--" + k.replace("_", "-"), str(md.arch[k])]
        for k in BOOL_FLAGS:
            if md.arch.get(k):
                argv.append("--" + k.replace("_", "-"))
        return argv

    ours, theirs = [], []
    for rep in range(a.reps):
        # ours: the command users run (a fresh process, like fairseq-train below)
        out = os.path.join(work, f"ours{rep}")
        env = dict(os.environ, OMP_NUM_THREADS=str(a.threads),
                   MKL_NUM_THREADS=str(a.threads))
        cmd = ["nmtfrag", "finetune", "--model", a.model, "--train", a.src, a.tgt,
               "--valid-src", a.valid_src, "--valid-tgt", a.valid_tgt, "--out", out,
               "--max-updates", str(a.updates), "--max-tokens", str(a.max_tokens),
               "--validate-every", str(10 ** 9), "--patience", "-1", "--threads",
               str(a.threads), "--device", "cpu", "-q", "--overwrite"]
        if a.pretokenized:
            cmd.append("--pretokenized")
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stderr[-3000:], file=sys.stderr)
            raise SystemExit("nmtfrag finetune failed")
        m = json.load(open(os.path.join(out, "manifest.json")))
        wps, toks, n = summary(open(os.path.join(out, "train.log")).read())
        ours.append({"wps": wps, "tokens": toks, "updates": n,
                     "wall_tok_s": toks / m["result"]["train_seconds_this_run"]})
        # fairseq-train directly
        save = os.path.join(work, f"fairseq{rep}")
        env = dict(os.environ, OMP_NUM_THREADS=str(a.threads),
                   MKL_NUM_THREADS=str(a.threads))
        t = time.time()
        r = subprocess.run(["fairseq-train", *fairseq_argv(save)], env=env,
                           capture_output=True, text=True)
        wall = time.time() - t
        if r.returncode != 0:
            print(r.stderr[-3000:], file=sys.stderr)
            raise SystemExit("fairseq-train failed")
        wps2, toks2, n2 = summary(r.stdout + r.stderr)
        theirs.append({"wps": wps2, "tokens": toks2, "updates": n2,
                       "wall_tok_s": toks2 / wall})
        print(f"rep {rep}: ours wps {wps:.1f} ({n} updates, {toks:.0f} tgt tokens, "
              f"{ours[-1]['wall_tok_s']:.1f} tok/s wall) | fairseq-train wps {wps2:.1f} "
              f"({n2} updates, {toks2:.0f} tgt tokens, {theirs[-1]['wall_tok_s']:.1f} tok/s "
              f"wall)", flush=True)

    mo = statistics.median(x["wps"] for x in ours)
    mt = statistics.median(x["wps"] for x in theirs)
    wo = statistics.median(x["wall_tok_s"] for x in ours)
    wt = statistics.median(x["wall_tok_s"] for x in theirs)
    print(f"training throughput (fairseq wps, target tokens/s): nmtfrag {mo:.1f}, "
          f"fairseq-train {mt:.1f}, ratio {mo / mt:.3f} (target >= 0.95)")
    print(f"training call, tokens / wall s (boundaries differ, indicative): nmtfrag {wo:.1f}, "
          f"fairseq-train {wt:.1f}, ratio {wo / wt:.3f}")
    print(f"model {a.model}, {a.updates} updates of <= {a.max_tokens} tokens, "
          f"{a.threads} thread(s), {a.reps} alternating reps, scratch {work}")


if __name__ == "__main__":
    main()
