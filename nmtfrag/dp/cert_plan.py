"""A DP-SGD certificate's rates and σ recomputed from the plan it records.

Why: a certificate lists its history ([σ, q, steps] per segment) and the ε computed from
it; a history with every q divided by 4 and the recorded bound lowered to match used to
pass, as did a planning count set to 10⁹ or the steps rewritten from 6 to 1 with ε
recomputed. The history is not free: it follows from the recorded plan (the fixed rate,
or the logical batch / schedule over the recorded planning count ñ, and the steps), and
σ follows from the target ε (the calibration the run made, with the base model's DP
releases in front when there are any). Both are recomputed here with the planner's own
code (nmtfrag.dp.planning) and compared with what the file says.
"""
from __future__ import annotations

import math
from typing import Any

from . import accounting, schedule, unit_count
from .cert_files import CertificateError

# the calibration's bisection stops within its own tolerances (ε within 0.2%, σ's bracket
# within 1%), and PRV can move a little between versions: 2% covers both, while a plan
# rewritten (steps, rates) moves σ far more
SIGMA_TOL = 0.02


def _fail(what: str) -> CertificateError:
    return CertificateError(f"{what}: the certificate was edited or is not a certificate "
                            "of nmtfrag; refusing it")


def planned_config(training: dict, params: dict) -> Any:
    """The DPConfig whose plan the certificate records (manifest params + training)."""
    from .config import DPConfig

    return DPConfig(delta=training["delta"], target_epsilon=training["target_epsilon"],
                    noise_multiplier=(None if training["target_epsilon"] is not None
                                      else training["noise_multiplier"]),
                    sample_rate=params.get("sample_rate"),
                    logical_batch=params.get("logical_batch"),
                    batch_schedule=params.get("batch_schedule"),
                    steps=training["steps"], accountant=training["accountant"])


def check_plan(training: dict, params: dict, releases: list[dict]) -> None:
    """Refuse a training entry whose unit count, planning count, δ, rates or σ do not
    follow from its recorded plan (CertificateError naming the field)."""
    from .planning import plan_noise, with_releases

    count = training["unit_count"]
    s, n_plan = count["noise_std"], count["planning_count"]
    if s != unit_count.COUNT_NOISE:
        raise _fail(f"training.unit_count.noise_std is {s!r}, not nmtfrag's "
                    f"{unit_count.COUNT_NOISE:g}")
    if isinstance(n_plan, bool) or not isinstance(n_plan, (int, float)) or \
            not math.isfinite(n_plan) or n_plan < 1:
        raise _fail(f"training.unit_count.planning_count is {n_plan!r}")
    mode = [k for k in ("sample_rate", "logical_batch", "batch_schedule")
            if params.get(k) is not None]
    if len(mode) != 1:
        raise _fail(f"manifest.params holds {mode or 'none'} of sample_rate, logical_batch "
                    "and batch_schedule: exactly one is the run's rate")
    if mode[0] != "sample_rate":
        text = params.get("batch_schedule") or f"{params['logical_batch']}:0"
        largest = max(b for _, b in schedule.parse_schedule(text))
        if n_plan < largest:
            raise _fail(f"training.unit_count.planning_count {n_plan:g} is below the largest "
                        f"logical batch {largest} (the planner raises it to that)")
    if not training["delta"] < 1.0 / n_plan:
        raise _fail(f"training.delta {training['delta']:g} is not below 1/ñ = 1/{n_plan:g}: "
                    "such a δ allows releasing a unit outright")
    config = planned_config(training, params)
    calibrated, in_front = with_releases(config, releases)
    count_seg = unit_count.count_segment(s)
    planned = plan_noise(calibrated, n_plan, fixed=in_front + [count_seg])
    sigma = training["noise_multiplier"]
    if abs(planned.sigma - sigma) > SIGMA_TOL * planned.sigma:
        raise _fail(f"training.noise_multiplier is {sigma!r}, but the recorded plan "
                    f"calibrates σ = {planned.sigma:.6g} (target ε, δ, rates, steps"
                    + (", the base model's releases" if releases else "") + ")")
    want = [list(count_seg)] + [list(h) for h in
                                accounting.rates_history(sigma, planned.rate_segments)]
    got = training["history"]
    if len(got) != len(want) or any(
            g[2] != w[2] or abs(g[1] - w[1]) > 1e-12 * max(w[1], 1e-300) or g[0] != w[0]
            for g, w in zip(got, want)):
        raise _fail(f"training.history is {got!r}, but the recorded plan (rates over "
                    f"planning_count {n_plan:g}, {training['steps']} steps) gives {want!r}")
    comp = {k: v for k, v in training["composition"].items() if k != "parts"}
    if comp != planned.composition:
        raise _fail(f"training.composition is {comp!r}, but the recorded plan gives "
                    f"{planned.composition!r}")
