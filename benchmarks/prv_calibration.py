"""Time of calibrating σ to a target ε with the PRV accountant (every DP run's plan, and
every certificate check, which plans again), against opacus' PRVAccountant used as is.

nmtfrag.dp.accounting computes each discretisation domain of the PRV accountant once and
skips the refined grid where it cannot be used; opacus as is computes the domain again in
get_epsilon after our grid-size check, and the refined grid's every time. Both must give
the same σ and ε to the last bit (checked here; tests/dp/test_dp_accounting.py checks ε).
Prints, per plan, both times and their ratio.

    python3 benchmarks/prv_calibration.py [--repeats 1]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from nmtfrag.dp import accounting  # noqa: E402

PLANS = [  # (target ε, δ, [(sample rate, steps), …]): the default recipe, a short run,
    (8.0, 1e-5, [(0.1, 100)]),  # a small ε (refined grid), a batch-size schedule
    (8.0, 1e-3, [(0.25, 5)]),
    (1.0, 1e-6, [(0.01, 500)]),
    (8.0, 1e-5, [(0.05, 20), (0.1, 30)]),
]


def as_is_refined(acc, delta):
    """The refinement with opacus' accountant as is (what nmtfrag did before)."""
    error = accounting._prv_fitting_error(acc, delta, accounting.PRV_EPS_ERROR)
    eps = float(acc.get_epsilon(delta=delta, eps_error=error))
    fine = accounting._prv_fitting_error(acc, delta, max(1e-4, 0.002 * eps))
    if fine < error:
        eps, error = float(acc.get_epsilon(delta=delta, eps_error=fine)), fine
    return eps, error


def calibrate(target, delta, segments):
    accounting._prv_cached.cache_clear()
    start = time.perf_counter()
    sigma = accounting.noise_multiplier_for(target, delta, segments, "prv")
    eps = accounting.prv_epsilon([(sigma, q, n) for q, n in segments], delta)
    return time.perf_counter() - start, sigma, eps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=1, help="best of this many (default 1)")
    args = ap.parse_args()
    from opacus.accountants import PRVAccountant

    ours = accounting._prv_accountant, accounting._prv_refined
    print(f"{'plan':<40} {'nmtfrag s':>10} {'opacus as is s':>15} {'ratio':>6}  σ")
    total = [0.0, 0.0]
    for target, delta, segments in PLANS:
        times, results = [], []
        for make, refine in (ours, (PRVAccountant, as_is_refined)):
            accounting._prv_accountant, accounting._prv_refined = make, refine
            try:
                runs = [calibrate(target, delta, segments) for _ in range(args.repeats)]
            finally:
                accounting._prv_accountant, accounting._prv_refined = ours
            times.append(min(r[0] for r in runs))
            results.append(runs[0][1:])
        if results[0] != results[1]:
            sys.exit(f"error: the two paths differ: {results}")
        plan = f"ε {target:g}, δ {delta:g}, {segments}"
        print(f"{plan:<40} {times[0]:>10.1f} {times[1]:>15.1f} {times[1] / times[0]:>5.2f}×"
              f"  {results[0][0]:g}")
        total = [total[0] + times[0], total[1] + times[1]]
    print(f"{'all plans':<40} {total[0]:>10.1f} {total[1]:>15.1f} "
          f"{total[1] / total[0]:>5.2f}×  (same σ and ε on both paths)")


if __name__ == "__main__":
    main()
