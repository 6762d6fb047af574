"""The sensitivity DP-SGD's accountant assumes, measured: how far the clipped sum moves when
one unit is removed, per trained set and clipping method.

For each trained set (--dp-params: all, all-noemb, lora, bias, decoder) and clipping method
(--clipping hooks,ghost; a set ghost clipping cannot serve is shown as such), on one
batch of the first --pairs sentence pairs of the corpus: the clipped sum S(D) (what the
noise is added to, nmtfrag.dp.sgd.DPSGD.take_clipped_sum) and S(D minus u) for every pair
u, each batch rebuilt and run from scratch. Prints the largest ‖S(D) − S(D∖u)‖ (float64)
and its ratio to C, which must be ≤ 1 (the Gaussian mechanism's noise N(0, σ²C²) is
calibrated for it), and the smallest unclipped norm / C (> 1: clipping acted for every
unit). Dropout is off (`without_dropout`). With --public-pairs N, N further pairs join
every sum as public pairs (DPSGD.add_public: unclipped, noise-free) and the quantity is
the update's numerator (take_update_numerator): removing one private unit must still move
it by at most C. Then the float32 vs float64 norm of a random
gradient of WMT19's embedding size (42,024 × 1,024), and what a float32 norm would make
of one clipped contribution.

    python3 benchmarks/dp_sensitivity.py --model MODEL_DIR --corpus PREFIX (PREFIX.de/.en)
        [--dp-params all,all-noemb,lora,bias] [--clipping hooks,ghost] [--pairs 32]
        [--max-grad-norm 0.5] [--public-pairs 16]
"""
import argparse
import copy
import math
import os
import sys

os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dp_step import load_model_and_pairs  # noqa: E402

WMT19_EMBEDDING = (42024, 1024)


def without_dropout(model):
    """Dropout off: each pair's dropout mask is drawn independently of the other pairs, so
    the bound holds mask by mask; comparing S(D) with S(D∖u) needs the same masks, and
    with dropout on every other pair's gradient would change too."""
    for m in model.modules():
        if isinstance(getattr(m, "p", None), float):
            m.p = 0.0
    return model


def clipped_sum(dp, ds, rows, public=()):
    """S over `rows` of `ds`: the clipped per-pair gradients summed (float64), no noise;
    with `public` rows, plus their unclipped public sum (the update's numerator)."""
    dp.accumulate(ds.collater([ds[i] for i in rows]))
    if not public:
        return dp.take_clipped_sum()
    dp.add_public(ds.collater([ds[i] for i in public]), weight=1.0)
    return dp.take_update_numerator()


def distance(a, b):
    """Float64 norm of the difference of two lists of float64 tensors."""
    return math.sqrt(sum(float((x - y).square().sum()) for x, y in zip(a, b)))


def sensitivity(model, ds, method, C, n_public=0):
    """(largest ‖S(D) − S(D∖u)‖ over private units u, smallest unclipped norm) on ds,
    its last `n_public` rows public pairs in every sum."""
    from nmtfrag.dp import clipping, sgd

    clipping.choose_clipping(model, method)  # refuses what opacus cannot serve
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.0)
    dp = sgd.DPSGD(model, opt, max_grad_norm=C, noise_multiplier=1.0,
                   expected_batch_size=len(ds), label_smoothing=0.1, clipping=method)
    rows = list(range(len(ds) - n_public))
    public = list(range(len(ds) - n_public, len(ds)))
    dp.accumulate(ds.collater([ds[i] for i in rows]))
    smallest = min(v[1] for v in dp.example_stats.values())
    dp.take_clipped_sum()
    full = clipped_sum(dp, ds, rows, public)
    worst = max(distance(full, clipped_sum(dp, ds, [i for i in rows if i != u], public))
                for u in rows)
    dp.gsm._close()
    return worst, smallest


def embedding_norms(C, seed=0):
    """Float32 vs float64 norm of a random WMT19-size embedding gradient, and the norm of
    its contribution clipped with each (ratio to C)."""
    from nmtfrag.dp import sgd

    g = torch.randn((1,) + WMT19_EMBEDDING, generator=torch.Generator().manual_seed(seed))
    n32 = float(torch.linalg.vector_norm(g.reshape(1, -1), dim=1)[0])
    n64 = float(sgd.example_sq_norms([g], 1).sqrt()[0])
    naive = torch.zeros(WMT19_EMBEDDING, dtype=torch.float64)
    sgd.add_scaled(naive, g, torch.tensor([C / n32]))
    ours = torch.zeros(WMT19_EMBEDDING, dtype=torch.float64)
    sgd.add_scaled(ours, g, sgd.clip_factors(torch.tensor([n64]), C))
    return n32, n64, float(naive.norm()) / C, float(ours.norm()) / C


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="model dir (WMT19 layout)")
    ap.add_argument("--corpus", required=True,
                    help="parallel file prefix (PREFIX.de, PREFIX.en), BPE applied here")
    ap.add_argument("--dp-params", default="all,all-noemb,lora,bias",
                    help="comma-separated trained sets (default all,all-noemb,lora,bias)")
    ap.add_argument("--clipping", default="hooks,ghost",
                    help="comma-separated clipping methods (default hooks,ghost)")
    ap.add_argument("--pairs", type=int, default=32, help="batch size (default 32)")
    ap.add_argument("--max-grad-norm", type=float, default=0.5, help="C (default 0.5)")
    ap.add_argument("--public-pairs", type=int, default=0,
                    help="pairs after the first --pairs that join every sum as public pairs "
                         "(unclipped, noise-free; default 0)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    from nmtfrag.errors import InputError

    C = args.max_grad_norm
    print(f"model {args.model}, first {args.pairs} pairs of {args.corpus}, C = {C}, "
          "CPU, 1 thread; units: sentence pairs"
          + (f"; {args.public_pairs} further pairs public in every sum" if args.public_pairs
             else ""))
    print(f"{'set':<10}{'clipping':<10}{'trainable':>11}{'min norm/C':>12}"
          f"{'max |S(D)-S(D-u)|':>19}{'ratio to C':>14}{'1 - ratio':>11}")
    for kind in [s.strip() for s in args.dp_params.split(",") if s.strip()]:
        base, ds = load_model_and_pairs(args.model, args.corpus,
                                        args.pairs + args.public_pairs, kind)
        count = sum(p.numel() for p in base.parameters() if p.requires_grad)
        for method in [s.strip() for s in args.clipping.split(",") if s.strip()]:
            model = without_dropout(copy.deepcopy(base))
            try:
                worst, smallest = sensitivity(model, ds, method, C, args.public_pairs)
            except InputError as exc:
                print(f"{kind:<10}{method:<10}  unavailable: {str(exc).split(';')[0]}")
                continue
            print(f"{kind:<10}{method:<10}{count:>11}{smallest / C:>12.1f}{worst:>19.9g}"
                  f"{worst / C:>14.9f}{1 - worst / C:>11.2e}", flush=True)
    n32, n64, naive, ours = embedding_norms(C)
    print(f"random {WMT19_EMBEDDING[0]:,} × {WMT19_EMBEDDING[1]:,} gradient: float32 norm "
          f"{n32:.6f}, float64 norm {n64:.6f} (float32 {n32 / n64 - 1:+.3%}); one contribution "
          f"clipped with the float32 norm: {naive:.6f} C, with the float64 norm and margin: "
          f"{ours:.9f} C")


if __name__ == "__main__":
    main()
