"""Benchmark: `nmtfrag evaluate` with --engine fairseq vs ctranslate2 (float32, int8).

Runs, one after the other in fresh processes with the same thread settings (torch,
CTranslate2, OMP and MKL all at --threads), the same evaluation three times:

  fairseq (the reference) · ctranslate2 float32 · ctranslate2 int8

and prints for each: wall time of the whole `nmtfrag evaluate` process, translation
time (from its report: model loaded, text in → text out), BLEU, chrF, and against the
fairseq run: the speed-up and the share of identical output lines. The model is
converted for CTranslate2 first (timed separately, not in the runs) into --ct2-cache
(default OUT/ct2-cache, so the model directory is never written to).

Target (issue 11): int8 BLEU within 0.3 of fairseq's.

usage: python3 benchmarks/engines.py --model DIR --src TEST.de --ref TEST.en --out OUT
       [--first 500] [--pretokenized] [--threads 2] [--beam 5] [--ct2-cache DIR]
e.g.   python3 benchmarks/engines.py --model ../shared/models/generic-deen-medium \\
           --src ../shared/data/indomain/EMEA/test.de \\
           --ref ../shared/data/indomain/EMEA/test.en --pretokenized --first 500 \\
           --out /tmp/ct2bench
Writes OUT/<run>/ (evaluate outputs), OUT/engines.json and OUT/engines.md.
"""
import argparse
import json
import os
import subprocess
import sys
import time

RUNS = [("fairseq", "fairseq", None),
        ("ct2-float32", "ctranslate2", "float32"),
        ("ct2-int8", "ctranslate2", "int8")]

CONVERT = r"""
import json, sys, time
from nmtfrag.translate.ct2_engine import ensure_converted
from nmtfrag.model_dir import validate_model_dir
a = json.loads(sys.argv[1])
t = time.perf_counter()
path, converted = ensure_converted(validate_model_dir(a["model"]), a["cache"])
print(json.dumps({"path": path, "converted": converted,
                  "seconds": round(time.perf_counter() - t, 2)}))
"""


def _env(threads):
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(threads)
    return env


def _lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="model directory (one checkpoint)")
    ap.add_argument("--src", required=True, help="test source")
    ap.add_argument("--ref", required=True, help="test reference")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--first", type=int, default=500, help="first N lines (default 500)")
    ap.add_argument("--pretokenized", "--tokenized", dest="tokenized", action="store_true",
                    help="SRC/REF are Moses-tokenised (as ../shared/data/indomain)")
    ap.add_argument("--threads", type=int, default=2, help="threads per run (default 2)")
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--ct2-cache", default=None,
                    help="CTranslate2 conversion cache (default OUT/ct2-cache)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    cache = args.ct2_cache or os.path.join(args.out, "ct2-cache")
    env = _env(args.threads)

    r = subprocess.run([sys.executable, "-c", CONVERT,
                        json.dumps({"model": args.model, "cache": cache})],
                       capture_output=True, text=True, env=env)
    if r.returncode:
        sys.exit(f"conversion failed:\n{r.stderr[-3000:]}")
    conversion = json.loads(r.stdout.strip().splitlines()[-1])
    print(f"conversion: {conversion['seconds']} s "
          f"({'converted now' if conversion['converted'] else 'cached'}) "
          f"→ {conversion['path']}", flush=True)

    results = []
    for name, engine, compute in RUNS:
        out = os.path.join(args.out, name)
        cmd = [sys.executable, "-m", "nmtfrag", "evaluate", "--model", args.model,
               "--src", args.src, "--ref", args.ref, "--out", out, "--overwrite",
               "--first", str(args.first), "--beam", str(args.beam), "--device", "cpu",
               "--threads", str(args.threads), "--engine", engine]
        if args.tokenized:
            cmd.append("--pretokenized")
        if compute:
            cmd += ["--compute-type", compute, "--ct2-cache", cache]
        t = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        wall = time.perf_counter() - t
        if r.returncode:
            sys.exit(f"{name} failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
        with open(os.path.join(out, "report.json"), encoding="utf-8") as f:
            rep = json.load(f)
        results.append({"run": name, "engine": engine,
                        "compute_type": rep["params"]["generation"]["compute_type"],
                        "wall_s": round(wall, 2),
                        "translate_s": rep["params"]["generation"]["translation_seconds"],
                        "bleu": rep["scores"]["bleu"], "chrf": rep["scores"]["chrf"],
                        "hyps": _lines(os.path.join(out, "hyp.txt"))})
        print(f"{name}: {wall:.1f} s wall, {results[-1]['translate_s']} s translating, "
              f"BLEU {rep['scores']['bleu']:.2f}", flush=True)

    ref = results[0]
    for res in results:
        same = sum(a == b for a, b in zip(ref["hyps"], res["hyps"]))
        res["identical_lines"] = same
        res["identical_share"] = round(same / max(1, len(ref["hyps"])), 4)
        res["speedup_translate"] = round(ref["translate_s"] / res["translate_s"], 2)
        res["speedup_wall"] = round(ref["wall_s"] / res["wall_s"], 2)
        res["delta_bleu"] = round(res["bleu"] - ref["bleu"], 2)
    n = len(ref["hyps"])
    for res in results:
        del res["hyps"]
    head = (f"{os.path.basename(os.path.normpath(args.model))}, {n} lines of "
            f"{os.path.basename(args.src)}, beam {args.beam}, {args.threads} thread"
            f"{'s' if args.threads != 1 else ''}, CPU")
    md = [f"# Engines: {head}", "",
          f"CTranslate2 conversion: {conversion['seconds']} s "
          f"({'converted' if conversion['converted'] else 'cached'}), not in the runs.", "",
          "| run | wall s | translate s | speed-up (translate) | speed-up (wall) | BLEU | "
          "Δ BLEU | chrF | identical lines |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for res in results:
        md.append(f"| {res['run']} | {res['wall_s']:.1f} | {res['translate_s']:.1f} | "
                  f"{res['speedup_translate']:.2f}× | {res['speedup_wall']:.2f}× | "
                  f"{res['bleu']:.2f} | {res['delta_bleu']:+.2f} | {res['chrf']:.2f} | "
                  f"{res['identical_lines']}/{n} ({100 * res['identical_share']:.1f}%) |")
    int8 = results[-1]
    verdict = "met" if abs(int8["delta_bleu"]) <= 0.3 else "NOT met"
    md += ["", f"Target int8 |Δ BLEU| ≤ 0.3: {verdict} ({int8['delta_bleu']:+.2f})."]
    text = "\n".join(md) + "\n"
    print()
    print(text, end="")
    with open(os.path.join(args.out, "engines.md"), "w", encoding="utf-8") as f:
        f.write(text)
    with open(os.path.join(args.out, "engines.json"), "w", encoding="utf-8") as f:
        json.dump({"setup": {"model": args.model, "src": args.src, "ref": args.ref,
                             "lines": n, "beam": args.beam, "threads": args.threads,
                             "tokenized": args.tokenized},
                   "conversion": conversion, "runs": results}, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
