"""Digests of seeded `extract`, `extract --dp`, `finetune` and `finetune --dp` outputs (the
latter in both rate modes: a fixed sample rate, and a logical batch from the DP count), so
a restructuring can show it changed no output (issue 20).

Run it once on the code before a change and once after, with the same ROOT (the tiny
inputs built in ROOT/in by the first run are reused, and paths inside manifests and
checkpoints match), and compare:

    PYTHONPATH=OLD_CHECKOUT python3 tests/seeded_outputs.py --root /tmp/so --out before.json
    PYTHONPATH=NEW_CHECKOUT python3 tests/seeded_outputs.py --root /tmp/so --out after.json
    python3 tests/seeded_outputs.py --compare before.json after.json

Every output file is digested: text and binary files by their bytes; JSON files by their
content without wall-clock fields (keys naming seconds, times or dates, fairseq's meters:
the only thing a rerun of the same code changes) and with private temporary dirs' random
names replaced by <tmp>; checkpoints (*.pt) by each tensor's bytes, dtype and
shape plus the rest of the pickle without wall-clock fields. Not collected by pytest (no
test_ prefix): it runs the CLI for ~1 minute on a tiny model and corpus built here.
"""
import argparse
import hashlib
import json
import os
import shutil
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
VOLATILE = ("seconds", "time", "date", "elapsed", "created", "started", "finished",
            "metrics")  # fairseq's meters in a checkpoint: timers
TMP = tempfile.gettempdir() + os.sep


def _volatile(key):
    return any(v in str(key).lower() for v in VOLATILE)


def _strip(obj):
    """`obj` without wall-clock fields, tensors replaced by a digest of their bytes."""
    import torch
    if isinstance(obj, dict):
        return {str(k): _strip(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))
                if not _volatile(k)}
    if isinstance(obj, (list, tuple)):
        return [_strip(v) for v in obj]
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous().reshape(-1)
        raw = t.to(torch.uint8) if t.dtype == torch.bool else t.view(torch.uint8)
        return f"tensor {t.dtype} {tuple(obj.shape)} " + hashlib.sha256(
            raw.numpy().tobytes()).hexdigest()[:16]
    if isinstance(obj, str):  # a private work dir's random name is not an output
        return re.sub(re.escape(TMP) + r"[^/\s]+", "<tmp>", obj)
    if isinstance(obj, (int, float, bool)) or obj is None:
        return obj
    if hasattr(obj, "__dict__"):  # argparse Namespace and the like
        return _strip(vars(obj))
    return repr(obj)


def digest_file(path):
    """A short digest of one output file (see the module docstring)."""
    import torch
    if path.endswith(".json"):
        with open(path, encoding="utf-8") as f:
            content = _strip(json.load(f))
    elif path.endswith(".pt"):
        content = _strip(torch.load(path, map_location="cpu", weights_only=False))
    else:
        with open(path, "rb") as f:
            return "bytes " + hashlib.sha256(f.read()).hexdigest()[:16]
    text = json.dumps(content, sort_keys=True, ensure_ascii=False, default=repr)
    return "content " + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def digest_dir(root):
    """{relative path: digest} of every file under `root` (log files excepted: they hold
    timings and progress lines)."""
    out = {}
    for d, _, files in os.walk(root):
        for name in sorted(files):
            if name.endswith(".log"):
                continue
            p = os.path.join(d, name)
            out[os.path.relpath(p, root)] = digest_file(p)
    return dict(sorted(out.items()))


def _nmtfrag(*args):
    cmd = [sys.executable, "-m", "nmtfrag", *map(str, args)]
    r = subprocess.run(cmd, capture_output=True, text=True,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr[-3000:]}")


def run_all(root):
    """Build the tiny inputs under ROOT/in and run the four seeded stages into ROOT/out."""
    sys.path.insert(0, HERE)
    from tinymodel import make_corpus, make_tiny_model_dir, write_parallel
    import torch
    torch.set_num_threads(1)
    inp, out = os.path.join(root, "in"), os.path.join(root, "out")
    model = os.path.join(inp, "model")
    if not os.path.isfile(os.path.join(inp, "public.en")):  # inputs are kept for reruns
        shutil.rmtree(inp, ignore_errors=True)
        os.makedirs(inp)
        make_tiny_model_dir(model, updates=20, seed=0)  # not bitwise reproducible: once
        write_parallel(make_corpus(120, seed=5), os.path.join(inp, "train"))
        write_parallel(make_corpus(20, seed=6), os.path.join(inp, "valid"))
        write_parallel(make_corpus(200, seed=7), os.path.join(inp, "public"))
        _nmtfrag("align-model", "--public", os.path.join(inp, "public"),  # eflomal: once
                 "--out", os.path.join(inp, "align-model"))
    shutil.rmtree(out, ignore_errors=True)
    src, tgt = (os.path.join(inp, f"train.{l}") for l in ("de", "en"))
    valid = ["--valid-src", os.path.join(inp, "valid.de"),
             "--valid-tgt", os.path.join(inp, "valid.en")]
    _nmtfrag("extract", "--src", src, "--tgt", tgt, "--out", f"{out}/extract",
             "--max-len", 4, "--sample-rate", 0.5, "--tag", "--seed", 3,
             "--align-model", os.path.join(inp, "align-model"))
    _nmtfrag("extract", "--src", src, "--tgt", tgt, "--out", f"{out}/extract-dp", "--dp",
             "--epsilon", 8, "--delta", 1e-3, "--seed", 3,
             "--align-model", os.path.join(inp, "align-model"))
    _nmtfrag("finetune", "--model", model, "--train", f"{out}/extract", *valid,
             "--out", f"{out}/finetune", "--max-updates", 6, "--max-tokens", 400,
             "--seed", 3, "--threads", 1, "--device", "cpu", "-q")
    _nmtfrag("finetune", "--model", model, "--train", src, tgt, *valid,
             "--out", f"{out}/finetune-dp", "--dp", "--noise-multiplier", 1.0,
             "--sample-rate", 0.25, "--delta", 1e-3, "--dp-steps", 4, "--dp-params", "lora",
             "--physical-batch", 16, "--seed", 3, "--threads", 1, "--device", "cpu", "-q")
    _nmtfrag("finetune", "--model", model, "--train", src, tgt, *valid,
             "--out", f"{out}/finetune-dp-batch", "--dp", "--target-epsilon", 8,
             "--logical-batch", 30, "--delta", 1e-3, "--max-epochs", 1, "--dp-params", "bias",
             "--physical-batch", 16, "--seed", 3, "--threads", 1, "--device", "cpu", "-q")
    return {stage: digest_dir(os.path.join(out, stage)) for stage in sorted(os.listdir(out))}


def compare(a_path, b_path):
    """Print the files whose digests differ; exit 1 if any does."""
    with open(a_path) as f:
        a = json.load(f)
    with open(b_path) as f:
        b = json.load(f)
    differ = 0
    for stage in sorted(set(a) | set(b)):
        fa, fb = a.get(stage, {}), b.get(stage, {})
        for name in sorted(set(fa) | set(fb)):
            if fa.get(name) != fb.get(name):
                differ += 1
                print(f"DIFFERS {stage}/{name}: {fa.get(name)} vs {fb.get(name)}")
        print(f"{stage}: {len(fb)} files, "
              f"{sum(fa.get(n) == fb.get(n) for n in fb)} identical")
    print("identical" if not differ else f"{differ} file(s) differ")
    return 1 if differ else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=None, help="where inputs and outputs are built "
                    "(use the same one before and after a change)")
    ap.add_argument("--out", help="write the digests here (JSON)")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args()
    if args.compare:
        sys.exit(compare(*args.compare))
    if not (args.root and args.out):
        ap.error("--root and --out are required (or --compare)")
    digests = run_all(os.path.abspath(args.root))
    with open(args.out, "w") as f:
        json.dump(digests, f, indent=1)
    print(f"{sum(map(len, digests.values()))} files in {len(digests)} stages -> {args.out}")


if __name__ == "__main__":
    main()
