"""Print a privacy certificate: for a DP model directory, or for a training plan.

`nmtfrag privacy MODEL_DIR` reads MODEL_DIR/privacy.json (written by
`nmtfrag finetune --dp`), recomputes ε_T from the recorded history (the DP unit count's
segment first, then the noisy steps) by the recorded composition — RDP/PRV composition
of the whole history when the rates were fixed in advance (--sample-rate), basic
composition ε_count + ε_train when they came from the DP count (logical batch) — with
both accountants (RDP and PRV) as a cross-check, and prints the privacy unit, ε_V (vocabulary), the ε of every earlier DP
training of the base model, ε_T (training) and their sum (basic composition) — only
when all are guarantees for the same privacy unit; otherwise it prints the parts, says
they are not composable, and exits 2.

`nmtfrag privacy --noise-multiplier σ --sample-rate q --steps T --delta δ --n-examples n`
prints ε for a plan before any training (δ must lie in (0, 1/n)); with
`--epsilon ε` instead of `--noise-multiplier`, prints the σ that reaches it.
`--batch-schedule` instead of `--sample-rate` plans an increasing batch-size schedule
(steps composed segment by segment).

examples:
  nmtfrag privacy dp_model/
  nmtfrag privacy --noise-multiplier 1.0 --sample-rate 0.01 --steps 1000 --delta 1e-5 --n-examples 10000
  nmtfrag privacy --epsilon 3 --sample-rate 0.01 --steps 1000 --delta 1e-5 --n-examples 10000 --accountant prv
"""
import argparse

from .. import cli_options as opt
from .. import cli_types as ct

HELP = "print ε for a DP model directory or a DP-SGD plan (or σ for a target ε)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model_dir", nargs="?", metavar="DIR",
                   help="a model directory trained with `nmtfrag finetune --dp`, or a "
                        "release made with `nmtfrag extract --dp`")
    opt.add_noise_multiplier(p, "noise std / clipping norm of each step")
    opt.add_epsilon(p, "print the noise multiplier that reaches this ε",
                    dest="target_epsilon")
    opt.add_sampling_rate(p, "Poisson sampling rate of each step (logical batch / "
                             "examples)")
    p.add_argument("--steps", type=ct.positive_int, metavar="T", help="number of noisy steps")
    opt.add_batch_schedule(p, '"SIZE:FROM_STEP,…" logical batch schedule (with '
                              "--n-examples, instead of --sample-rate)")
    p.add_argument("--n-examples", type=ct.positive_int, metavar="N",
                   help="training examples (privacy units) of the plan (required: δ must "
                        "be below 1/N)")
    opt.add_delta(p, "δ of the guarantee, in (0, 1/N)")
    p.add_argument("--shards", type=ct.positive_int, default=1, metavar="P",
                   help="devices each adding their own noise (accounted as σ√P; "
                        "default %(default)s)")
    opt.add_accountant(p, "accountant for the headline figure (default rdp)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def _plan(args):
    from ..dp import accounting, schedule
    from ..errors import InputError

    if not args.n_examples or args.n_examples < 1:
        raise InputError("--n-examples is required for a plan: δ must be below 1/n "
                         "(n = training examples), else the guarantee allows releasing "
                         "an example outright")
    accounting.check_delta(args.delta, n_examples=args.n_examples)
    if args.steps is None:
        raise InputError("--steps is required for a plan")
    if args.batch_schedule:
        segs = schedule.rate_segments(schedule.parse_schedule(args.batch_schedule),
                                      args.steps, args.n_examples)
    else:
        if args.sample_rate is None:
            raise InputError("--sample-rate is required for a plan (or --batch-schedule "
                             "with --n-examples)")
        if not 0 < args.sample_rate <= 1:
            raise InputError(f"--sample-rate must be in (0, 1], got {args.sample_rate}")
        segs = [(args.sample_rate, args.steps)]
    if (args.noise_multiplier is None) == (args.target_epsilon is None):
        raise InputError("give exactly one of --noise-multiplier and --target-epsilon")
    out = {"delta": args.delta, "n_examples": args.n_examples, "steps": args.steps,
           "rate_segments": [[q, t] for q, t in segs], "shards": args.shards}
    if args.target_epsilon is not None:
        eff = accounting.noise_multiplier_for(args.target_epsilon, args.delta, segs,
                                              args.accountant)
        sigma = eff / (args.shards ** 0.5)
        out.update(target_epsilon=args.target_epsilon, noise_multiplier=sigma,
                   effective_noise_multiplier=eff, accountant=args.accountant)
    else:
        sigma = args.noise_multiplier
        eff = accounting.effective_noise_multiplier(sigma, args.shards)
        out.update(noise_multiplier=sigma, effective_noise_multiplier=eff)
    hist = accounting.rates_history(eff, segs)
    out["epsilon"] = {name: accounting.epsilon(hist, args.delta, name)
                      for name in accounting.ACCOUNTANTS}
    return out


def _certificate(model_dir):
    import json
    import os

    from ..dp import accounting
    from ..errors import InputError

    path = os.path.join(model_dir, "privacy.json")
    if not os.path.exists(model_dir):
        raise InputError(f"{model_dir}: no such directory")
    if not os.path.isdir(model_dir):
        raise InputError(f"{model_dir}: not a directory (give a model directory trained "
                         "with `nmtfrag finetune --dp` or a release of `extract --dp`)")
    _refuse_not_private(model_dir)
    if not os.path.isfile(path):
        raise InputError(f"{path} not found: {model_dir} was not trained with "
                         "`nmtfrag finetune --dp` (no privacy certificate)")
    try:
        with open(path, encoding="utf-8") as f:
            cert = json.load(f)
        if "release" in cert:
            return _release_certificate(model_dir, cert["release"])
        training = cert["training"]
        earlier = cert.get("earlier_training") or []
        for t in [training, *earlier]:
            hist = t["history"]
            if len(hist) == 0 or any(len(h) != 3 for h in hist):
                raise ValueError("history must be [[σ, q, steps], …]")
        certified, recomputed, parts = accounting.certify_training(training)
        main = training.get("accountant", "rdp")
        try:
            total = accounting.compose_certificate(training, cert.get("vocabulary"),
                                                   earlier, training_eps=certified)
        except accounting.NotComposable as exc:
            total = {"epsilon": None, "delta": None, "composable": False,
                     "reason": str(exc)}
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path}: malformed privacy certificate ({exc})") from None
    return {"model_dir": os.path.abspath(model_dir),
            "training": {**training, "epsilon": certified,
                         "epsilon_recomputed": recomputed,
                         "composition": {**(training.get("composition") or {
                             "kind": accounting.RDP_COMPOSITION,
                             "why": accounting.COMPOSITION_WHY[
                                 accounting.RDP_COMPOSITION]}), "parts": parts}},
            "earlier_training": [{**t, "epsilon": accounting.training_epsilon(t)}
                                 for t in earlier],
            "vocabulary": cert.get("vocabulary") or accounting.NO_VOCABULARY,
            "base_model": cert.get("base_model") or {},
            "total": total}


def _refuse_not_private(model_dir):
    """A DP-SGD simulation or noise-free control (nmtfrag.dp.simulate) has no
    certificate: say so, and why, instead of any ε."""
    import json
    import os

    from ..errors import InputError

    try:
        with open(os.path.join(model_dir, "manifest.json"), encoding="utf-8") as f:
            rec = json.load(f).get("not_private")
    except (OSError, ValueError, AttributeError):
        return
    if rec:
        planned = rec.get("planned") or {}
        eps = planned.get("epsilon_if_private")
        raise InputError(f"{model_dir}: {rec.get('not_private', 'not private')}, no privacy "
                         f"certificate: {rec.get('why', '')} (the planned run would have "
                         f"ε = {'?' if eps is None else format(eps, '.4f')} at δ = "
                         f"{planned.get('delta')}; train it without "
                         "--dp-simulate-batch/--dp-control to get one)")


def _release_certificate(release_dir, rel):
    """A DP phrase-pair release (`nmtfrag extract --dp`): ε recomputed from σ and the cap."""
    import os

    from ..dp import histogram

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


def _print_composition(t):
    """How the unit count and the training compose, with the parts."""
    comp = t["composition"]
    print(f"          composition: {comp['why']}")
    parts = comp["parts"]
    if comp["kind"] == "basic":
        c, tr = parts["count"], parts["training"]
        print(f"          ε_count = {c['epsilon']:.4f} at δ_count = {c['delta']:g} "
              f"({c['mechanism']}); ε_train = {tr['epsilon']:.4f} ≤ "
              f"{tr['epsilon_bound']:.4f} (bound fixed in advance) at δ_train = "
              f"{tr['delta']:g} ({tr['accountant']}); ε_T = ε_count + bound")


def _print_release(out):
    r, tot = out["release"], out["total"]
    print(f"release: {out['release_dir']}")
    print(f"unit      {r['unit']} (at most {r['cap']} distinct phrase pairs counted each)")
    print(f"mechanism {r['mechanism']}")
    print(f"          σ = {r['sigma']:.4f}, threshold {r['threshold']:.2f}; the pairs held "
          f"by one unit all stay below it with probability ≥ 1 − {r['delta_threshold']:g}")
    print(f"total      ε = {tot['epsilon']:.4f} at δ = {tot['delta']:g}")


def _refuse_sum(out):
    """Parts of different privacy units have no total: say so (exit 2)."""
    from ..errors import InputError

    if out.get("total", {}).get("composable") is False:
        raise InputError(out["total"]["reason"])


def run(args):
    import json

    from ..errors import InputError

    plan_opts = [args.noise_multiplier, args.target_epsilon, args.sample_rate, args.steps,
                 args.batch_schedule]
    if args.model_dir and any(v is not None for v in plan_opts):
        raise InputError("give either MODEL_DIR or a plan (--noise-multiplier/"
                         "--target-epsilon, --sample-rate, --steps, --delta), not both")
    if args.model_dir:
        out = _certificate(args.model_dir)
        if args.json:
            print(json.dumps(out, indent=2, ensure_ascii=False))
            _refuse_sum(out)
            return 0
        if "release" in out:
            _print_release(out)
            return 0
        t, v, tot = out["training"], out["vocabulary"], out["total"]
        print(f"model: {out['model_dir']}")
        print(f"unit      {t.get('unit', 'one training sentence pair')}")
        print(f"training  ε_T = {t['epsilon']:.4f} at δ_T = {t['delta']:g} "
              f"({t.get('accountant', 'rdp')}; " + ", ".join(
                  f"{k} {e:.4f}" for k, e in t["epsilon_recomputed"].items()) + ")")
        print(f"          noise multiplier {t.get('noise_multiplier')}, "
              f"{t.get('steps')} noisy steps, clip {t.get('max_grad_norm')}")
        if t.get("unit_count"):
            print(f"          unit count: ñ = n + N(0, {t['unit_count']['noise_std']:g}²), "
                  "the history's first segment (n itself is not shipped)")
        _print_composition(t)
        tp = t.get("trained_parameters") or {"kind": "all"}
        print("trained   " + ", ".join(f"{k} {v}" for k, v in tp.items()
                                       if k != "modules")
              + (f", modules {','.join(tp['modules'])}" if tp.get("modules") else ""))
        if t.get("clipping"):
            print(f"clipping  {t['clipping']}")
        print(f"vocabulary ε_V = {v['epsilon']:.4f} at δ_V = {v['delta']:g}"
              + ("" if v.get("epsilon") else " (no DP vocabulary: the model's public "
                 "vocabulary was used)"))
        for k, e in enumerate(out["earlier_training"], 1):
            print(f"earlier   ε = {e['epsilon']:.4f} at δ = {e['delta']:g} (DP training "
                  f"{k} of the base model)")
        if out["base_model"].get("warning"):
            print(f"warning: {out['base_model']['warning']}")
        _refuse_sum(out)
        print(f"total      ε = {tot['epsilon']:.4f} at δ = {tot['delta']:g} "
              f"({tot['composition']})")
        return 0
    if args.delta is None and all(v is None for v in plan_opts):
        raise InputError("give MODEL_DIR, or a plan: --noise-multiplier σ (or "
                         "--target-epsilon ε) --sample-rate q --steps T --delta δ --n-examples n")
    out = _plan(args)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    if "target_epsilon" in out:
        print(f"noise multiplier σ = {out['noise_multiplier']:.4f} reaches "
              f"ε ≤ {out['target_epsilon']} at δ = {out['delta']:g} ({out['accountant']})")
    else:
        print(f"noise multiplier σ = {out['noise_multiplier']}")
    if out["shards"] > 1:
        print(f"  {out['shards']} shards each adding noise: accounted as σ√P = "
              f"{out['effective_noise_multiplier']:.4f}")
    segs = ", ".join(f"q={q:g} × {t}" for q, t in out["rate_segments"])
    print(f"steps: {out['steps']} ({segs}), δ = {out['delta']:g}")
    for name, e in out["epsilon"].items():
        mark = " *" if name == args.accountant else ""
        print(f"ε ({name}) = {e:.4f}{mark}")
    return 0
