"""Speed and memory of the reconstruction attack (`nmtfrag.audit.reconstruct`).

Prints, for releases of 10k, 100k and 1M phrase pairs (or --sizes): the time to make
the synthetic pairs (not part of the attack), attack time, pairs/s, the RSS once the
pairs are in memory and the peak RSS, and the ratio of the attack's time to a reference
measured in the same process on the same pairs (counting and sorting the distinct
pairs, the least any attack must do). Targets: ≤ 15 s and ≤ 1 GB peak at 1M pairs;
growth close to linear. With --compare FILE, another implementation of `reconstruct`
(a Python file, e.g. an older version saved with `git show REV:nmtfrag/audit/reconstruct.py`)
is timed in the same process on the same pairs and its output checked for equality
(sizes above --compare-max-size skip it).

The releases are synthetic but shaped like real ones: a Zipfian vocabulary (20k words
per side), sentence lengths 5–40, a word-for-word alignment with local swaps, every
consistent phrase pair up to --max-len (Moses semantics, `nmtfrag.fragment.phrases`), shuffled
and cut to the requested size. Each size runs in a fresh subprocess (own peak RSS).
With --release DIR the attack also runs on that real release (e.g. EMEA).

    python3 benchmarks/reconstruct.py [--max-len 4] [--sizes 10000,100000,1000000]
                                      [--release RELEASE_DIR] [--compare OLD.py]
"""
import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import gc, json, random, resource, sys, time
from collections import Counter
from nmtfrag.audit.reconstruct import reconstruct
from nmtfrag.data.release_text import read_release
from nmtfrag.fragment.phrases import extract_spans

def rss_mb():  # current RSS (Linux); NaN elsewhere
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")

args = json.loads(sys.argv[1])
t_gen = time.perf_counter()
if args.get("release"):
    pairs, _ = read_release(args["release"])
else:
    rng = random.Random(args["seed"])
    V = 20000
    weights = [1.0 / (r + 1) for r in range(V)]
    cum, acc = [], 0.0
    for w in weights:
        acc += w
        cum.append(acc)
    pairs = []
    while len(pairs) < args["size"] * 1.05:
        k = rng.randint(5, 40)
        idx = rng.choices(range(V), cum_weights=cum, k=k)
        tgt = [f"e{i}" for i in idx]
        order = list(range(k))
        for j in range(0, k - 1, 2):
            if rng.random() < 0.3:
                order[j], order[j + 1] = order[j + 1], order[j]
        src = [f"d{idx[o]}" for o in order]
        points = [(si, order[si]) for si in range(k)]
        for s0, s1, t0, t1 in extract_spans(k, k, points, args["max_len"]):
            pairs.append((tuple(src[s0:s1 + 1]), tuple(tgt[t0:t1 + 1])))
    rng.shuffle(pairs)
    del pairs[args["size"]:]
t_gen = time.perf_counter() - t_gen
gc.collect()
rss_input = rss_mb()
t0 = time.perf_counter()
ref = sorted(Counter(pairs))
t_ref = time.perf_counter() - t0
del ref
t0 = time.perf_counter()
chains, stats = reconstruct(pairs, mode=args.get("mode", "conservative"))
t_attack = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
other = {}
if args.get("compare"):
    import importlib.util
    spec = importlib.util.spec_from_file_location("reconstruct_other", args["compare"])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    t0 = time.perf_counter()
    theirs, stats_other = mod.reconstruct(pairs, mode=args.get("mode", "conservative"))
    other = {"other_s": time.perf_counter() - t0,
             "identical": [tuple(vars(c).values()) for c in chains]
             == [tuple(vars(c).values()) for c in theirs] and stats == stats_other}
print(json.dumps({"pairs": len(pairs), "attack_s": t_attack, "reference_s": t_ref,
                  "generate_s": t_gen, "input_rss_mb": rss_input,
                  "chains": stats["chains"], "edges": stats["edges"],
                  "peak_rss_mb": peak, **other}))
"""


def run(**kwargs):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(kwargs)],
                         capture_output=True, text=True, env=env)
    if out.returncode:
        sys.exit(f"benchmark child failed ({kwargs}):\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max-len", type=int, default=4)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--release", help="also time the attack on this real release")
    ap.add_argument("--mode", choices=("conservative", "greedy"), default="conservative",
                    help="attack mode to time (default: conservative)")
    ap.add_argument("--compare", metavar="FILE",
                    help="also time this implementation of reconstruct (a .py file) in the "
                         "same process, after the peak RSS is taken, and check its output")
    ap.add_argument("--compare-max-size", type=int, default=1000000,
                    help="largest size at which --compare runs (default 1000000)")
    a = ap.parse_args()
    print(f"reconstruction attack ({a.mode}), synthetic releases, max-len {a.max_len}")
    print(f"{'pairs':>9} {'gen s':>7} {'attack s':>9} {'pairs/s':>9} {'ref s':>7} "
          f"{'ratio':>6} {'input MB':>9} {'peak MB':>8} {'chains':>8}"
          + (f" {'other s':>8} {'speed-up':>8} {'same':>5}" if a.compare else ""))
    rows = []
    for size in [int(x) for x in a.sizes.split(",")]:
        compare = a.compare if a.compare and size <= a.compare_max_size else None
        r = run(size=size, max_len=a.max_len, seed=a.seed, mode=a.mode, compare=compare)
        rows.append(r)
        print(f"{r['pairs']:>9} {r['generate_s']:>7.1f} {r['attack_s']:>9.2f} "
              f"{r['pairs'] / r['attack_s']:>9.0f} "
              f"{r['reference_s']:>7.2f} {r['attack_s'] / r['reference_s']:>6.1f} "
              f"{r['input_rss_mb']:>9.0f} {r['peak_rss_mb']:>8.0f} {r['chains']:>8}"
              + (f" {r['other_s']:>8.2f} {r['other_s'] / r['attack_s']:>8.1f} "
                 f"{'yes' if r['identical'] else 'NO':>5}" if 'other_s' in r else ""),
              flush=True)
    for prev, cur in zip(rows, rows[1:]):
        print(f"growth {prev['pairs']} → {cur['pairs']} pairs (×{cur['pairs'] / prev['pairs']:.0f}):"
              f" time ×{cur['attack_s'] / prev['attack_s']:.1f}, "
              f"peak memory ×{cur['peak_rss_mb'] / prev['peak_rss_mb']:.1f}")
    million = [r for r in rows if r["pairs"] == 1000000]
    if million:
        t, m = million[0]["attack_s"], million[0]["peak_rss_mb"]
        print(f"target ≤ 15 s and ≤ 1 GB peak at 1M pairs: {t:.2f} s, {m:.0f} MB — "
              f"{'met' if t <= 15 and m <= 1024 else 'MISSED'}")
    if a.release:
        r = run(release=a.release, mode=a.mode, compare=a.compare)
        print(f"release {a.release}: {r['pairs']} pairs, attack {r['attack_s']:.2f} s, "
              f"reference {r['reference_s']:.2f} s (ratio {r['attack_s'] / r['reference_s']:.1f}), "
              f"peak {r['peak_rss_mb']:.0f} MB"
              + (f"; other {r['other_s']:.2f} s, same output: {r['identical']}"
                 if 'other_s' in r else ""))


if __name__ == "__main__":
    main()
