"""Speed and memory of `nmtfrag extract` on a real corpus (default: EMEA train).

Prints, for max-len 4 and 7: alignment, symmetrisation and extraction time, pairs/s and
peak memory; the ratio of our alignment step to calling `eflomal-align` directly on the
same files (target ≤ 1.10); and, as the corpus grows (the corpus repeated with its
alignment, e.g. 1×, 10×, 100× EMEA = 1M pairs), the time of each step (symmetrise,
extract, sample, write) and peak memory (target: flat). Each measurement runs in a
fresh subprocess so peak RSS is its own.

    python3 benchmarks/extract.py [--corpus ../shared/data/indomain/EMEA/train]
    python3 benchmarks/extract.py --alignments OUT/owner/corpus.align --repeats 1,10,100

With --alignments (one line per corpus line) eflomal is not run at all.
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

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT = os.path.join(HERE, "..", "..", "shared", "data", "indomain", "EMEA", "train")

CHILD = r"""
import json, resource, sys, time
from nmtfrag.fragment.extract import extract_release
kw = json.loads(sys.argv[1])
t0 = time.perf_counter()
r = extract_release(**kw)
print(json.dumps({"timings": r.timings, "counts": r.owner["counts"],
                  "total_s": time.perf_counter() - t0,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run_stage(**kwargs):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(kwargs)], check=True,
                         capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def time_raw_eflomal(src, tgt, work):
    fwd, rev = os.path.join(work, "raw.fwd"), os.path.join(work, "raw.rev")
    for path in (fwd, rev):
        if os.path.exists(path):
            os.unlink(path)
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(["eflomal-align", "-s", src, "-t", tgt, "-f", fwd, "-r", rev],
                   check=True, capture_output=True)
    wall = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)


def repeat_files(paths, times, work, tag):
    out = []
    for path in paths:
        target = os.path.join(work, f"{tag}.{os.path.basename(path)}")
        with open(path, "rb") as f:
            data = f.read()
        with open(target, "wb") as f:
            for _ in range(times):  # not data * times: 100x a corpus in memory
                f.write(data)
        out.append(target)
    return out


def growth_table(src, tgt, alignments, repeats, max_len, work):
    """Time per step and peak memory of the corpus repeated `repeats` times."""
    print(f"\nas the corpus grows (max-len {max_len}, given alignment, sample-rate 0.5):")
    print("| sentence pairs | occurrences | symmetrise s | extract s | sample s | write s "
          "| total s | peak MB |")
    print("|---|---|---|---|---|---|---|---|")
    for times in repeats:
        s, t, a = repeat_files([src, tgt, alignments], times, work, f"x{times}")
        out = os.path.join(work, f"m{times}")
        r = run_stage(src=s, tgt=t, out=out, alignments=a, max_len=max_len,
                      sample_rate=0.5, pretokenized=True, work_dir=work)
        tm = r["timings"]
        print(f"| {r['counts']['sentence_pairs_used']} | "
              f"{r['counts']['occurrences_extracted']} | {tm['symmetrise']:.1f} | "
              f"{tm['extract']:.1f} | {tm['sample+write'] - tm['write']:.1f} | "
              f"{tm['write']:.1f} | {r['total_s']:.1f} | {r['peak_rss_mb']:.0f} |")
        for path in (s, t, a):
            os.unlink(path)
        shutil.rmtree(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=DEFAULT, help="prefix of PREFIX.de / PREFIX.en "
                    "(Moses-tokenised)")
    ap.add_argument("--alignments", help="Pharaoh alignment of the corpus: skip eflomal")
    ap.add_argument("--repeats", default="1,10,100", help="corpus sizes for the growth "
                    "table (times the corpus)")
    ap.add_argument("--work-dir", help="where the repeated corpora and buckets go "
                    "(default: system temp; 100× EMEA needs ~5 GB)")
    args = ap.parse_args()
    src, tgt = args.corpus + ".de", args.corpus + ".en"
    if not (os.path.exists(src) and os.path.exists(tgt)):
        sys.exit(f"error: {src} / {tgt} not found (pass --corpus)")

    with tempfile.TemporaryDirectory(prefix="nmtfrag-bench-", dir=args.work_dir) as work:
        print(f"corpus: {args.corpus}.{{de,en}}")
        kept = args.alignments or align_table(src, tgt, work)
        growth_table(src, tgt, kept, [int(x) for x in args.repeats.split(",")], 7, work)


def align_table(src, tgt, work):
    """Our eflomal step vs raw eflomal-align, then extraction; returns the alignment."""
    print("Alignment: ours (eflomal's Python API on our tokenised files) vs "
          "`eflomal-align` on the same corpus, wall and CPU seconds (CPU time is "
          "robust to other load on the machine; eflomal's sampler is random, so "
          "its work varies a little between runs).")
    print("| max-len | align s (CPU s) | raw eflomal-align s (CPU s) | ratio wall | "
          "ratio CPU | symmetrise s | extract s (CPU s) | occurrences | pairs/s | peak MB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    kept = None
    for max_len in (4, 7):
        out = os.path.join(work, f"r{max_len}")
        r = run_stage(src=src, tgt=tgt, out=out, max_len=max_len, sample_rate=0.5,
                      pretokenized=True, keep_alignments=max_len == 4, work_dir=work)
        raw, raw_cpu = time_raw_eflomal(src, tgt, work)
        t = r["timings"]
        n = r["counts"]["occurrences_extracted"]
        print(f"| {max_len} | {t['align']:.1f} ({t['align_cpu']:.1f}) | {raw:.1f} "
              f"({raw_cpu:.1f}) | {t['align'] / raw:.3f} | "
              f"{t['align_cpu'] / raw_cpu:.3f} | "
              f"{t['symmetrise']:.2f} | {t['extract']:.2f} ({t['extract_cpu']:.2f}) | {n} | "
              f"{n / t['extract']:,.0f} | {r['peak_rss_mb']:.0f} |")
        kept = kept or os.path.join(out, "owner", "corpus.align")
    return kept


if __name__ == "__main__":
    main()
