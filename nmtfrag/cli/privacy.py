"""Print a privacy certificate: for a DP model directory, or for a training plan.

`nmtfrag privacy DIR` checks DIR/privacy.json of a `finetune --dp` model, an
`extract --dp` release or a `vocab --dp` vocabulary: it recomputes every figure and
refuses (exit 2, one line) a certificate whose stored figures, redundant fields or
manifest.json copy do not follow from its recorded mechanism (it does not authenticate:
a consistently rewritten file passes; docs/privacy.md); a seeded output's ε is printed
with "seeded: not private". For a model it recomputes ε_T from the recorded history (the DP unit count's
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

The certificate is read and checked by nmtfrag.dp.certificate (read_certificate,
privacy_plan); this command parses and prints.
"""
from __future__ import annotations

import argparse
import json

from . import options as opt
from . import arg_types as ct

HELP = "print ε for a DP model directory or a DP-SGD plan (or σ for a target ε)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model_dir", nargs="?", metavar="DIR",
                   help="a model directory trained with `nmtfrag finetune --dp`, a "
                        "release made with `nmtfrag extract --dp` or a vocabulary made "
                        "with `nmtfrag vocab --dp`: every figure is recomputed, an "
                        "edited certificate refused")
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
    opt.add_accountant(p, "accountant that calibrates σ to --epsilon in a plan, marked * "
                          "(default prv, as in `finetune --dp`); a certificate states "
                          "its recorded one")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def _print_composition(t: dict) -> None:
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


def _seeded(out: dict) -> str:
    """The mark every printed ε of a seeded output carries."""
    return "" if out.get("private", True) else "  — seeded: not private"


def _print_not_private(out: dict) -> None:
    if out.get("not_private"):
        print(f"randomness {out['not_private']}")


def _print_release(out: dict) -> None:
    from ..dp import accounting

    r, tot = out["release"], out["total"]
    print(f"release: {out['release_dir']}")
    _print_not_private(out)
    print(f"unit      {accounting.RELEASE_UNIT_TEXT[r['unit_key']]} (at most {r['cap']} "
          f"distinct phrase pairs counted each)")
    print(f"mechanism {r['mechanism']}")
    print(f"          σ = {r['sigma']:.4f}, threshold {r['threshold']:.2f}; the pairs held "
          f"by one unit all stay below it with probability ≥ 1 − {r['delta_threshold']:g}")
    print(f"total      ε = {tot['epsilon']:.4f} at δ = {tot['delta']:g}{_seeded(out)}")


def _print_vocabulary(out: dict) -> None:
    v, tot = out["vocabulary"], out["total"]
    print(f"vocabulary: {out['vocabulary_dir']}")
    _print_not_private(out)
    print(f"unit      {v['unit']}")
    print(f"mechanism {v['method']}")
    print(f"          σ = {v['sigma']:g}, tuple length {v['tuple_len']}, threshold "
          f"{v['threshold']:.2f}")
    print(f"total      ε = {tot['epsilon']:.4f} at δ = {tot['delta']:g}{_seeded(out)}")


def _refuse_sum(out: dict) -> None:
    """Parts of different privacy units have no total: say so (exit 2)."""
    from ..errors import InputError

    if out.get("total", {}).get("composable") is False:
        raise InputError(out["total"]["reason"])


def run(args: argparse.Namespace) -> int:
    from ..errors import InputError

    plan_opts = [args.noise_multiplier, args.target_epsilon, args.sample_rate, args.steps,
                 args.batch_schedule]
    if args.model_dir and any(v is not None for v in plan_opts):
        raise InputError("give either MODEL_DIR or a plan (--noise-multiplier/"
                         "--epsilon, --sample-rate, --steps, --delta), not both")
    if args.model_dir:
        from ..dp.certificate import read_certificate

        return _print_certificate(read_certificate(args.model_dir), args.json)
    if args.delta is None and all(v is None for v in plan_opts):
        raise InputError("give MODEL_DIR, or a plan: --noise-multiplier σ (or "
                         "--epsilon ε) --sample-rate q --steps T --delta δ --n-examples n")
    from ..dp.certificate import privacy_plan

    out = privacy_plan(delta=args.delta, n_examples=args.n_examples, steps=args.steps,
                       sample_rate=args.sample_rate, batch_schedule=args.batch_schedule,
                       noise_multiplier=args.noise_multiplier,
                       target_epsilon=args.target_epsilon, shards=args.shards,
                       accountant=args.accountant)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    _print_plan(out, args.accountant)
    return 0


def _print_certificate(out: dict, as_json: bool) -> int:
    from ..dp import accounting  # the unit lines are derived from the checked unit_key

    if as_json:
        print(json.dumps(out, indent=2, ensure_ascii=False))
        _refuse_sum(out)
        return 0
    if "release" in out:
        _print_release(out)
        return 0
    if "vocabulary_dir" in out:
        _print_vocabulary(out)
        return 0
    if "released_from" in out:
        tot = out["total"]
        print(f"model: {out['model_dir']}")
        for r in out["released_from"]:
            print(f"release   ε = {r['epsilon']:.4f} at δ = {r['delta']:g} ({r['unit']})")
        print(f"trained   {out['post_processing']}")
        print(f"total      ε = {tot['epsilon']:.4f} at δ = {tot['delta']:g} "
              f"({tot['composition']}){_seeded(out)}")
        return 0
    t, v, tot = out["training"], out["vocabulary"], out["total"]
    print(f"model: {out['model_dir']}")
    _print_not_private(out)
    print(f"unit      {accounting.TRAINING_UNIT_TEXT[t['unit_key']]}")  # derived, not read
    print(f"training  ε_T = {t['epsilon']:.4f} at δ_T = {t['delta']:g} "
          f"({t.get('accountant', 'rdp')}; " + ", ".join(
              f"{k} {e:.4f}" for k, e in t["epsilon_recomputed"].items()) + ")"
          + _seeded(out))
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
    for k, r in enumerate(out.get("earlier_releases") or (), 1):
        print(f"release   ε = {r['epsilon']:.4f} at δ = {r['delta']:g} (DP release {k} "
              f"the base model was trained on)")
    if out["base_model"].get("warning"):
        print(f"warning: {out['base_model']['warning']}")
    _refuse_sum(out)
    print(f"total      ε = {tot['epsilon']:.4f} at δ = {tot['delta']:g} "
          f"({tot['composition']}){_seeded(out)}")
    return 0


def _print_plan(out: dict, accountant: str) -> None:
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
        mark = " *" if name == accountant else ""
        how = (f" (upper end of PRV's estimate, error ≤ {out['prv_eps_error']:.2g})"
               if name == "prv" and "prv_eps_error" in out else "")
        print(f"ε ({name}) = {e:.4f}{mark}{how}")
