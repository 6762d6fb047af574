"""Peak memory of reading a TMX with nmtfrag.data.tmx: flat in the number of units.

Generates a .tmx.gz of N units on the fly (synthetic German/English sentences with
language variants, inline codes and a document prop; written straight to gzip, never
held in memory), then reads it in a fresh subprocess with nmtfrag.data.tmx.read_tmx and
reports that child's peak RSS (ru_maxrss from wait4). A reader that kept the parsed
units would grow with N; the ratio of the peaks at the largest and smallest N says
whether it does.

    python3 benchmarks/tmx_read.py [--units 100000,1000000]
"""
import argparse
import gzip
import os
import random
import subprocess
import sys
import tempfile
import time

WORDS = ["haus", "katze", "dosis", "patient", "tablette", "arzt", "fenster", "datei",
         "wasser", "schule", "garten", "menue"]
READ = r"""
import sys
from nmtfrag.data.tmx import read_tmx
n = sum(1 for _ in read_tmx(sys.argv[1], "de", "en", doc_prop="x-document"))
print(n)
"""


def write_tmx(path, n, seed=0):
    """N units, streamed into gzip."""
    rng = random.Random(seed)
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n<tmx version="1.4"><header '
                'srclang="de-DE" segtype="sentence" o-tmf="x" adminlang="en" '
                'datatype="plaintext" creationtool="gen" creationtoolversion="1"/><body>\n')
        for k in range(n):
            words = [rng.choice(WORDS) for _ in range(rng.randint(4, 25))]
            de = " ".join(words)
            f.write(f'<tu tuid="{k}"><prop type="x-document">doc-{k // 50}</prop>'
                    f'<tuv xml:lang="de-DE"><seg><bpt i="1">&lt;b&gt;</bpt>{de}'
                    f'<ept i="1">&lt;/b&gt;</ept></seg></tuv><tuv xml:lang="en-GB"><seg>'
                    f'<hi>{de.upper()}</hi> .</seg></tuv></tu>\n')
        f.write("</body></tmx>\n")


def peak_read(path, repo):
    env = dict(os.environ, PYTHONPATH=repo + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-c", READ, path], stdout=subprocess.PIPE,
                         text=True, env=env)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"reading {path} failed")
    return int(out.strip()), usage.ru_maxrss / 1024, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--units", default="100000,1000000")
    args = ap.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sizes = [int(x) for x in args.units.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="tmx-bench-") as tmp:
        for n in sizes:
            path = os.path.join(tmp, f"{n}.tmx.gz")
            write_tmx(path, n)
            got, peak, secs = peak_read(path, repo)
            assert got == n, (got, n)
            rows.append((n, os.path.getsize(path) / 2**20, peak, secs))
            os.unlink(path)
    print("| units | .tmx.gz MB | peak RSS MB | read s |")
    print("|---:|---:|---:|---:|")
    for n, mb, peak, secs in rows:
        print(f"| {n:,} | {mb:.1f} | {peak:.1f} | {secs:.1f} |")
    print(f"peak RSS ratio {rows[-1][0]:,} / {rows[0][0]:,} units: "
          f"{rows[-1][2] / rows[0][2]:.2f}")


if __name__ == "__main__":
    main()
