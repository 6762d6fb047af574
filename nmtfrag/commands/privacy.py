"""Print a privacy certificate: for a DP model directory, or for a training plan.

`nmtfrag privacy MODEL_DIR` reads MODEL_DIR/privacy.json (written by
`nmtfrag finetune --dp`), recomputes ε_T from the recorded steps with both accountants
(RDP and PRV) as a cross-check, and prints ε_V (vocabulary), ε_T (training) and
ε_V + ε_T (basic composition).

`nmtfrag privacy --noise-multiplier σ --sample-rate q --steps T --delta δ` prints ε for
a plan before any training; with `--target-epsilon ε` instead of `--noise-multiplier`,
prints the σ that reaches it. `--batch-schedule` with `--n-examples` plans an increasing
batch-size schedule (steps composed segment by segment).

examples:
  nmtfrag privacy dp_model/
  nmtfrag privacy --noise-multiplier 1.0 --sample-rate 0.01 --steps 1000 --delta 1e-5
  nmtfrag privacy --target-epsilon 3 --sample-rate 0.01 --steps 1000 --delta 1e-5 --accountant prv
"""
HELP = "print ε for a DP model directory or a DP-SGD plan (or σ for a target ε)"


def add_arguments(p):
    p.add_argument("model_dir", nargs="?", metavar="MODEL_DIR",
                   help="a model directory trained with `nmtfrag finetune --dp`")
    p.add_argument("--noise-multiplier", type=float, metavar="SIGMA",
                   help="noise std / clipping norm of each step")
    p.add_argument("--target-epsilon", type=float, metavar="EPS",
                   help="print the noise multiplier that reaches this ε")
    p.add_argument("--sample-rate", type=float, metavar="Q",
                   help="Poisson sampling rate of each step (logical batch / examples)")
    p.add_argument("--steps", type=int, metavar="T", help="number of noisy steps")
    p.add_argument("--batch-schedule", metavar="SCHED",
                   help='"SIZE:FROM_STEP,…" logical batch schedule (with --n-examples, '
                        "instead of --sample-rate)")
    p.add_argument("--n-examples", type=int, metavar="N",
                   help="training examples (for --batch-schedule)")
    p.add_argument("--delta", type=float, metavar="DELTA", help="δ of the guarantee")
    p.add_argument("--shards", type=int, default=1, metavar="P",
                   help="devices each adding their own noise (accounted as σ√P)")
    p.add_argument("--accountant", choices=("rdp", "prv"), default="rdp",
                   help="accountant for the headline figure (default rdp)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def _plan(args):
    from ..dp import accounting, schedule
    from ..errors import InputError

    accounting.check_delta(args.delta)
    if args.steps is None:
        raise InputError("--steps is required for a plan")
    if args.batch_schedule:
        if not args.n_examples:
            raise InputError("--batch-schedule needs --n-examples")
        segs = schedule.rate_segments(schedule.parse_schedule(args.batch_schedule),
                                      args.steps, args.n_examples)
    else:
        if args.sample_rate is None:
            raise InputError("--sample-rate is required for a plan (or --batch-schedule "
                             "with --n-examples)")
        segs = [(args.sample_rate, args.steps)]
    if (args.noise_multiplier is None) == (args.target_epsilon is None):
        raise InputError("give exactly one of --noise-multiplier and --target-epsilon")
    out = {"delta": args.delta, "steps": args.steps,
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
    if not os.path.isfile(path):
        raise InputError(f"{path} not found: {model_dir} was not trained with "
                         "`nmtfrag finetune --dp` (no privacy certificate)")
    try:
        with open(path, encoding="utf-8") as f:
            cert = json.load(f)
        hist = [tuple(h) for h in cert["training"]["history"]]
        delta_t = cert["training"]["delta"]
        if len(hist) == 0 or any(len(h) != 3 for h in hist):
            raise ValueError("history must be [[σ, q, steps], …]")
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path}: malformed privacy certificate ({exc})") from None
    recomputed = {name: accounting.epsilon(hist, delta_t, name)
                  for name in accounting.ACCOUNTANTS}
    main = cert["training"].get("accountant", "rdp")
    eps_t = recomputed[main]
    vocab = cert.get("vocabulary") or {"epsilon": 0.0, "delta": 0.0}
    try:
        eps, delta = accounting.compose_basic((vocab["epsilon"], vocab["delta"]),
                                              (eps_t, delta_t))
    except (KeyError, TypeError, ValueError):
        raise InputError(f"{path}: malformed vocabulary entry (needs epsilon and "
                         "delta)") from None
    return {"model_dir": os.path.abspath(model_dir),
            "training": {**cert["training"], "epsilon": eps_t,
                         "epsilon_recomputed": recomputed},
            "vocabulary": vocab,
            "total": {"epsilon": eps, "delta": delta,
                      "composition": "basic (ε_V + ε_T, δ_V + δ_T)"}}


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
            return 0
        t, v, tot = out["training"], out["vocabulary"], out["total"]
        print(f"model: {out['model_dir']}")
        print(f"training  ε_T = {t['epsilon']:.4f} at δ_T = {t['delta']:g} "
              f"({t.get('accountant', 'rdp')}; " + ", ".join(
                  f"{k} {e:.4f}" for k, e in t["epsilon_recomputed"].items()) + ")")
        print(f"          noise multiplier {t.get('noise_multiplier')}, "
              f"{t.get('steps')} noisy steps, clip {t.get('max_grad_norm')}")
        print(f"vocabulary ε_V = {v['epsilon']:.4f} at δ_V = {v['delta']:g}"
              + ("" if v.get("epsilon") else " (no DP vocabulary: the model's public "
                 "vocabulary was used)"))
        print(f"total      ε = {tot['epsilon']:.4f} at δ = {tot['delta']:g} "
              f"({tot['composition']})")
        return 0
    if args.delta is None and all(v is None for v in plan_opts):
        raise InputError("give MODEL_DIR, or a plan: --noise-multiplier σ (or "
                         "--target-epsilon ε) --sample-rate q --steps T --delta δ")
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
