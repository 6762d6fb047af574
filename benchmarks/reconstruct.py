"""Speed and memory of the reconstruction attack (`nmtfrag.audit.reconstruct`).

Prints, for releases of 10k, 100k and 1M phrase pairs: attack time, pairs/s, peak RSS,
and the ratio of the attack's time to a reference measured in the same process on the
same pairs (counting and sorting the distinct pairs, the least any attack must do).
Target: ≤ 30 s at 100k pairs on this machine; growth close to linear.

The releases are synthetic but shaped like real ones: a Zipfian vocabulary (20k words
per side), sentence lengths 5–40, a word-for-word alignment with local swaps, every
consistent phrase pair up to --max-len (Moses semantics, `nmtfrag.phrases`), shuffled
and cut to the requested size. Each size runs in a fresh subprocess (own peak RSS).
With --release DIR the attack also runs on that real release (e.g. EMEA).

    python3 benchmarks/reconstruct.py [--max-len 4] [--sizes 10000,100000,1000000]
                                      [--release RELEASE_DIR]
"""
import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, random, resource, sys, time
from collections import Counter
from nmtfrag.audit.reconstruct import reconstruct, read_release
from nmtfrag.phrases import extract_spans

args = json.loads(sys.argv[1])
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
    pairs = pairs[:args["size"]]
t0 = time.perf_counter()
ref = sorted(Counter(pairs))
t_ref = time.perf_counter() - t0
del ref
t0 = time.perf_counter()
chains, stats = reconstruct(pairs, mode=args.get("mode", "conservative"))
t_attack = time.perf_counter() - t0
print(json.dumps({"pairs": len(pairs), "attack_s": t_attack, "reference_s": t_ref,
                  "chains": stats["chains"], "edges": stats["edges"],
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run(**kwargs):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(kwargs)], check=True,
                         capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max-len", type=int, default=4)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--release", help="also time the attack on this real release")
    ap.add_argument("--mode", choices=("conservative", "greedy"), default="conservative",
                    help="attack mode to time (default: conservative)")
    a = ap.parse_args()
    print(f"reconstruction attack ({a.mode}), synthetic releases, max-len {a.max_len}")
    print(f"{'pairs':>9} {'attack s':>9} {'pairs/s':>9} {'ref s':>7} {'ratio':>6} "
          f"{'peak MB':>8} {'chains':>8}")
    rows = []
    for size in [int(x) for x in a.sizes.split(",")]:
        r = run(size=size, max_len=a.max_len, seed=a.seed, mode=a.mode)
        rows.append(r)
        print(f"{r['pairs']:>9} {r['attack_s']:>9.2f} {r['pairs'] / r['attack_s']:>9.0f} "
              f"{r['reference_s']:>7.2f} {r['attack_s'] / r['reference_s']:>6.1f} "
              f"{r['peak_rss_mb']:>8.0f} {r['chains']:>8}")
    for prev, cur in zip(rows, rows[1:]):
        print(f"growth {prev['pairs']} → {cur['pairs']} pairs (×{cur['pairs'] / prev['pairs']:.0f}):"
              f" time ×{cur['attack_s'] / prev['attack_s']:.1f}, "
              f"peak memory ×{cur['peak_rss_mb'] / prev['peak_rss_mb']:.1f}")
    hundred = [r for r in rows if r["pairs"] == 100000]
    if hundred:
        t = hundred[0]["attack_s"]
        print(f"target ≤ 30 s at 100k pairs: {t:.2f} s — {'met' if t <= 30 else 'MISSED'}")
    if a.release:
        r = run(release=a.release, mode=a.mode)
        print(f"release {a.release}: {r['pairs']} pairs, attack {r['attack_s']:.2f} s, "
              f"reference {r['reference_s']:.2f} s (ratio {r['attack_s'] / r['reference_s']:.1f}), "
              f"peak {r['peak_rss_mb']:.0f} MB")


if __name__ == "__main__":
    main()
