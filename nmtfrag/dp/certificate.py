"""Reading and checking privacy certificates, and the ε of a training plan.

A DP output carries its guarantee in `privacy.json`: a model trained with
`nmtfrag finetune --dp` (the training history, the vocabulary's ε_V, earlier DP trainings
of the base model) or a release of `nmtfrag extract --dp` (the set union's σ, threshold
and cap). Why recompute instead of printing what the file says: the certificate is the
only evidence that leaves with the output, so `read_certificate` recomputes every ε from
the recorded mechanism parameters (both accountants for training) and refuses a file
whose figures do not follow from them. `privacy_plan` gives the same numbers before any
training, so a run can be planned to a budget.

These are library functions: `nmtfrag privacy` only parses and prints their results.
"""
from __future__ import annotations

import json
import os

from ..errors import InputError
from . import accounting, histogram, schedule

CERTIFICATE = "privacy.json"


def read_certificate(directory: str) -> dict:
    """The checked certificate of a DP model dir or DP release, every ε recomputed.

    A model dir gives {"model_dir", "training", "earlier_training", "vocabulary",
    "base_model", "total"}; a release gives {"release_dir", "release", "total"}. Parts
    of different privacy units have no sum: then `total` is {"composable": False,
    "reason": …} (the caller decides whether that is an error). Raises InputError for a
    missing or malformed certificate, or for a not-private (simulated) run."""
    path = os.path.join(directory, CERTIFICATE)
    if not os.path.exists(directory):
        raise InputError(f"{directory}: no such directory")
    if not os.path.isdir(directory):
        raise InputError(f"{directory}: not a directory (give a model directory trained "
                         "with `nmtfrag finetune --dp` or a release of `extract --dp`)")
    refuse_not_private(directory)
    if not os.path.isfile(path):
        raise InputError(f"{path} not found: {directory} was not trained with "
                         "`nmtfrag finetune --dp` (no privacy certificate)")
    try:
        with open(path, encoding="utf-8") as f:
            cert = json.load(f)
        if "release" in cert:
            return check_release(directory, cert["release"])
        certified = _certify_training(cert)
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path}: malformed privacy certificate ({exc})") from None
    return _training_report(directory, cert, certified)


def _certify_training(cert: dict) -> tuple[float, dict, dict, dict]:
    """(ε_T, ε_T by each accountant, the composition's parts, the total) of a model's
    certificate: the checks whose failure means a malformed file."""
    training = cert["training"]
    earlier = cert.get("earlier_training") or []
    for t in [training, *earlier]:
        hist = t["history"]
        if len(hist) == 0 or any(len(h) != 3 for h in hist):
            raise ValueError("history must be [[σ, q, steps], …]")
    certified, recomputed, parts = accounting.certify_training(training)
    try:
        total = accounting.compose_certificate(training, cert.get("vocabulary"),
                                               earlier, training_eps=certified)
    except accounting.NotComposable as exc:
        total = {"epsilon": None, "delta": None, "composable": False,
                 "reason": str(exc)}
    return certified, recomputed, parts, total


def _training_report(model_dir: str, cert: dict,
                     certified: tuple[float, dict, dict, dict]) -> dict:
    training = cert["training"]
    epsilon, recomputed, parts, total = certified
    composition = training.get("composition") or {
        "kind": accounting.RDP_COMPOSITION,
        "why": accounting.COMPOSITION_WHY[accounting.RDP_COMPOSITION]}
    return {"model_dir": os.path.abspath(model_dir),
            "training": {**training, "epsilon": epsilon,
                         "epsilon_recomputed": recomputed,
                         "composition": {**composition, "parts": parts}},
            "earlier_training": [{**t, "epsilon": accounting.training_epsilon(t)}
                                 for t in cert.get("earlier_training") or []],
            "vocabulary": cert.get("vocabulary") or accounting.NO_VOCABULARY,
            "base_model": cert.get("base_model") or {},
            "total": total}


def check_release(release_dir: str, rel: dict) -> dict:
    """A DP phrase-pair release (`nmtfrag extract --dp`): ε recomputed from σ and the
    cap, and the threshold checked to bound a single unit's pairs by δ_T (ValueError if
    not)."""
    policy = rel.get("weights") == "policy"
    eps = histogram.gaussian_epsilon(rel["sigma"], rel["delta_gauss"],
                                     1 if policy else rel["cap"])
    if policy:
        ok = rel["threshold"] >= histogram.policy_threshold(
            rel["sigma"], rel["delta_threshold"], rel["cap"]) * (1 - 1e-9)
    else:
        ok = histogram.tail_probability(rel["sigma"], rel["threshold"]) * rel["cap"] \
            <= rel["delta_threshold"] * (1 + 1e-6)
    if not ok:
        raise ValueError("the threshold does not bound a single unit's pairs by δ_T")
    return {"release_dir": os.path.abspath(release_dir),
            "release": {**rel, "epsilon": eps},
            "total": {"epsilon": eps, "delta": rel["delta_gauss"] + rel["delta_threshold"],
                      "composition": "one mechanism (ε, δ_G + δ_T)"}}


def refuse_not_private(directory: str) -> None:
    """A DP-SGD simulation or noise-free control (nmtfrag.dp.simulate) has no
    certificate: say so, and why, instead of any ε (InputError)."""
    try:
        with open(os.path.join(directory, "manifest.json"), encoding="utf-8") as f:
            rec = json.load(f).get("not_private")
    except (OSError, ValueError, AttributeError):
        return
    if rec:
        planned = rec.get("planned") or {}
        eps = planned.get("epsilon_if_private")
        raise InputError(f"{directory}: {rec.get('not_private', 'not private')}, no "
                         f"privacy certificate: {rec.get('why', '')} (the planned run "
                         f"would have ε = {'?' if eps is None else format(eps, '.4f')} "
                         f"at δ = {planned.get('delta')}; train it without "
                         "--dp-simulate-batch/--dp-control to get one)")


def privacy_plan(*, delta: float | None, n_examples: int | None, steps: int | None,
                 sample_rate: float | None = None, batch_schedule: str | None = None,
                 noise_multiplier: float | None = None,
                 target_epsilon: float | None = None, shards: int = 1,
                 accountant: str = "rdp") -> dict:
    """ε of a DP-SGD plan by every accountant (or, with `target_epsilon`, the noise
    multiplier that reaches it), before any training.

    The steps run at `sample_rate`, or at the rates of `batch_schedule` ("SIZE:FROM_STEP,
    …" over `n_examples`); `shards` devices each adding noise are accounted as σ√P.
    Raises InputError for a plan that is incomplete or whose δ is not below 1/n."""
    if not n_examples or n_examples < 1:
        raise InputError("--n-examples is required for a plan: δ must be below 1/n "
                         "(n = training examples), else the guarantee allows releasing "
                         "an example outright")
    accounting.check_delta(delta, n_examples=n_examples)
    assert delta is not None  # check_delta refuses a missing δ
    if steps is None:
        raise InputError("--steps is required for a plan")
    segs = _rate_segments(sample_rate, batch_schedule, steps, n_examples)
    if (noise_multiplier is None) == (target_epsilon is None):
        raise InputError("give exactly one of --noise-multiplier and --epsilon")
    out: dict[str, object] = {"delta": delta, "n_examples": n_examples, "steps": steps,
           "rate_segments": [[q, t] for q, t in segs], "shards": shards}
    if target_epsilon is not None:
        eff = accounting.noise_multiplier_for(target_epsilon, delta, segs, accountant)
        sigma = eff / (shards ** 0.5)
        out.update(target_epsilon=target_epsilon, noise_multiplier=sigma,
                   effective_noise_multiplier=eff, accountant=accountant)
    else:
        assert noise_multiplier is not None  # exactly one of the two was given
        sigma = noise_multiplier
        eff = accounting.effective_noise_multiplier(sigma, shards)
        out.update(noise_multiplier=sigma, effective_noise_multiplier=eff)
    hist = accounting.rates_history(eff, segs)
    out["epsilon"] = {name: accounting.epsilon(hist, delta, name)
                      for name in accounting.ACCOUNTANTS}
    return out


def _rate_segments(sample_rate: float | None, batch_schedule: str | None, steps: int,
                   n_examples: int) -> list[tuple[float, int]]:
    """[(q, steps)] of a plan: one fixed rate, or a batch schedule's segments."""
    if batch_schedule:
        return schedule.rate_segments(schedule.parse_schedule(batch_schedule), steps,
                                      n_examples)
    if sample_rate is None:
        raise InputError("--sample-rate is required for a plan (or --batch-schedule "
                         "with --n-examples)")
    if not 0 < sample_rate <= 1:
        raise InputError(f"--sample-rate must be in (0, 1], got {sample_rate}")
    return [(sample_rate, steps)]
