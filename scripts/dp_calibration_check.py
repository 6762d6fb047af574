#!/usr/bin/env python3
"""σ and ε at the default recipe's plan, calibrated with RDP (the default before issue
31, item 8) and with PRV (the default now), each checked against Google's dp-accounting.

usage: python3 scripts/dp_calibration_check.py [--epsilon 8] [--delta 1e-5]

The plan is `finetune --dp --epsilon E --delta D` with nothing else given: the default
recipe's public rate q (nmtfrag.dp.recipe) for its expected passes (ceil(E/q) steps), the
DP unit count [s, 1, 1] composed in front (RDP composition: rates fixed in advance).
σ comes from nmtfrag.dp.planning.plan_noise, as a run plans it; dp-accounting composes a
Gaussian of std s with the Poisson-subsampled Gaussian steps (its RDP and PLD
accountants), independently of opacus.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def google(sigma: float, q: float, steps: int, count: float, delta: float,
           kind: str) -> float:
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant
    from dp_accounting.rdp import rdp_privacy_accountant

    acc = (rdp_privacy_accountant.RdpAccountant() if kind == "rdp"
           else pld_privacy_accountant.PLDAccountant())
    acc.compose(dp_event.GaussianDpEvent(count))
    acc.compose(dp_event.SelfComposedDpEvent(
        dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), steps))
    return float(acc.get_epsilon(delta))


def main() -> int:
    import warnings

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epsilon", type=float, default=8.0)
    ap.add_argument("--delta", type=float, default=1e-5)
    args = ap.parse_args()
    warnings.filterwarnings("ignore", message="Optimal order is the largest alpha")
    import logging

    logging.getLogger("absl").setLevel(logging.ERROR)  # dp-accounting's skipped orders
    from nmtfrag.dp import accounting, unit_count
    from nmtfrag.dp.engine import DPConfig
    from nmtfrag.dp.planning import plan_noise

    count = unit_count.count_segment()
    print(f"plan: the default recipe at ε {args.epsilon:g}, δ {args.delta:g}; "
          f"count segment {list(count)} composed in front")
    for label, acc in (("before (rdp)", "rdp"), ("after (prv) ", "prv")):
        config = DPConfig(delta=args.delta, target_epsilon=args.epsilon, accountant=acc)
        plan = plan_noise(config, 10_000, fixed=[count])
        sigma, steps, rate_segs = plan.sigma, plan.steps, plan.rate_segments
        (q, _), = rate_segs
        hist = [count] + accounting.rates_history(sigma, rate_segs)
        ours = {name: accounting.epsilon(hist, args.delta, name)
                for name in accounting.ACCOUNTANTS}
        err = accounting.prv_epsilon(hist, args.delta)[1]
        ref = {kind: google(sigma, q, steps, count[0], args.delta, kind)
               for kind in ("rdp", "pld")}
        print(f"{label}: σ = {sigma:.4f} (q {q:g} × {steps} steps); certified ε = "
              f"{ours[acc]:.4f} ({acc}) | ours: rdp {ours['rdp']:.4f}, prv "
              f"{ours['prv']:.4f} (upper end, error ≤ {err:.3g}) | dp-accounting: rdp "
              f"{ref['rdp']:.4f}, pld {ref['pld']:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
