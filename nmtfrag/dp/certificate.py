"""Reading and checking privacy certificates, and the ε of a training plan.

A DP output carries its guarantee in `privacy.json`: a model trained with
`nmtfrag finetune --dp` (the training history, the vocabulary's ε_V, earlier DP trainings
of the base model), a release of `nmtfrag extract --dp` (the set union's σ, threshold
and cap) or a vocabulary of `nmtfrag vocab --dp`. Why recompute instead of printing what
the file says: the certificate is the only evidence that leaves with the output, so
`read_certificate` recomputes every figure from the recorded mechanism parameters (both
accountants for training) and refuses a file whose stored figures, redundant fields or
manifest copy do not follow from them (nmtfrag.dp.cert_check). It does not authenticate. `privacy_plan` gives the same numbers before any
training, so a run can be planned to a budget.

These are library functions: `nmtfrag privacy` only parses and prints their results.
"""
from __future__ import annotations

import json
import os

from ..errors import InputError
from ..randomness import SEEDED_MARK
from . import accounting, cert_check, cert_files, schedule

CERTIFICATE = "privacy.json"


def read_certificate(directory: str) -> dict:
    """The checked certificate of a DP model dir, DP release or DP vocabulary, every
    figure recomputed (nmtfrag.dp.cert_check) and compared with what privacy.json and
    the manifest's copy store.

    A model dir gives {"model_dir", "training", "earlier_training", "vocabulary",
    "base_model", "total"}; a release gives {"release_dir", "release", "total"}; a
    vocabulary {"vocabulary_dir", "vocabulary", "total"}. Each also has "private"
    (False for a seeded run) and, when not private, "not_private" ("seeded: not
    private …"). Parts of different privacy units have no sum: then `total` is
    {"composable": False, "reason": …} (the caller decides whether that is an error).
    Raises InputError (one line) for a missing, malformed, edited or forged
    certificate, or for a not-private (simulated) run."""
    path = os.path.join(directory, CERTIFICATE)
    if not os.path.exists(directory):
        raise InputError(f"{directory}: no such directory")
    if not os.path.isdir(directory):
        raise InputError(f"{directory}: not a directory (give a model directory trained "
                         "with `nmtfrag finetune --dp`, a release of `extract --dp` or a "
                         "vocabulary of `vocab --dp`)")
    refuse_not_private(directory)
    if not os.path.isfile(path):
        raise InputError(f"{path} not found: {directory} is no output of `nmtfrag "
                         "finetune --dp`, `extract --dp` or `vocab --dp` (no privacy "
                         "certificate)")
    cert = _read_json(path)
    man_path = os.path.join(directory, "manifest.json")
    if not os.path.isfile(man_path):
        raise InputError(f"{man_path} not found: a DP output's manifest holds the "
                         "certificate's copy (an unfinished or edited output)")
    manifest = _read_json(man_path)
    try:
        if isinstance(cert, dict):
            cert_files.check_bound(cert, directory, certified_files(cert, manifest))
        if isinstance(cert, dict) and "release" in cert:
            checked = cert_check.check_release(cert, manifest)
            out = {"release_dir": os.path.abspath(directory),
                   "release": cert["release"], "total": cert["total"]}
        elif isinstance(cert, dict) and "released_from" in cert:
            checked = cert_check.check_post_processed(cert, manifest)
            out = {"model_dir": os.path.abspath(directory),
                   "released_from": cert["released_from"], "total": cert["total"],
                   "post_processing": cert["post_processing"]}
        elif isinstance(cert, dict) and "training" in cert:
            checked = cert_check.check_model(cert, manifest)
            out = _training_report(directory, cert, checked)
        elif isinstance(cert, dict) and set(cert) - {cert_files.FILES} == {"vocabulary"}:
            checked = cert_check.check_vocabulary(cert, manifest)
            v = cert["vocabulary"]
            out = {"vocabulary_dir": os.path.abspath(directory), "vocabulary": v,
                   "total": {"epsilon": v["epsilon"], "delta": v["delta"],
                             "composition": "one mechanism (ε_V, δ of the counts + δ "
                                            "of the threshold)"}}
        else:
            raise cert_check.CertificateError(
                "it holds no training, release or vocabulary entry")
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from None
    except (ValueError, KeyError, TypeError, IndexError, AttributeError,
            ArithmeticError) as exc:
        raise InputError(f"{path}: malformed privacy certificate "
                         f"({type(exc).__name__}: {exc})") from None
    out["private"] = not checked["seeded"]
    if checked["seeded"]:
        out["not_private"] = (f"{SEEDED_MARK}: the noise came from a "
                              "user-given --seed, so whoever learns the seed can replay "
                              "it; the ε below is the mechanism's, not a guarantee")
    return out


def certified_files(cert: dict, manifest: object) -> list[str]:
    """The files an output of the certificate's kind must have certified: the model's
    (model.pt, dictionaries, bpecodes), the release's phrase files, the vocabulary's
    codes."""
    man = manifest if isinstance(manifest, dict) else {}
    if "release" in cert:
        files = man.get("files") or {}
        return [files.get("src", "phrases.de"), files.get("tgt", "phrases.en")]
    if "training" in cert or "released_from" in cert:
        return list(man.get("model_files") or ["model.pt", "bpecodes"])
    return ["bpecodes"]


def _refuse_duplicates(pairs: list[tuple[str, object]]) -> dict:
    """json's object_pairs_hook: a key given twice is refused (Python keeps the last,
    other readers the first: two readers would see two certificates)."""
    keys = [k for k, _ in pairs]
    for k in keys:
        if keys.count(k) > 1:
            raise cert_check.CertificateError(f"the key {k!r} appears twice in one object")
    return dict(pairs)


def _read_json(path: str) -> object:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f, object_pairs_hook=_refuse_duplicates)
    except cert_check.CertificateError as exc:
        raise InputError(f"{path}: {exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None


def _training_report(model_dir: str, cert: dict, checked: dict) -> dict:
    training = cert["training"]
    return {"model_dir": os.path.abspath(model_dir),
            "training": {**training, "epsilon": checked["epsilon"],
                         "epsilon_recomputed": checked["epsilon_all"],
                         "composition": {**training["composition"],
                                         "parts": checked["parts"]}},
            "earlier_training": list(cert["earlier_training"]),
            "earlier_releases": list(cert.get("earlier_releases") or []),
            "vocabulary": cert["vocabulary"],
            "base_model": cert["base_model"],
            "total": checked["total"]}


def refuse_not_private(directory: str) -> None:
    """A DP-SGD simulation or noise-free control (nmtfrag.dp.simulate) has no
    certificate: say so, and why, instead of any ε (InputError)."""
    try:
        with open(os.path.join(directory, "manifest.json"), encoding="utf-8") as f:
            man = json.load(f)
    except (OSError, ValueError):
        return
    rec = man.get("not_private") if isinstance(man, dict) else None
    if not rec:
        return
    if not isinstance(rec, dict):
        raise InputError(f"{directory}: its manifest says it is not private "
                         f"({str(rec)[:80]}): no privacy certificate")
    got = rec.get("planned")
    planned: dict = got if isinstance(got, dict) else {}
    eps = planned.get("epsilon_if_private")
    eps_text = (format(eps, ".4f") if isinstance(eps, (int, float))
                and not isinstance(eps, bool) else "?")
    raise InputError(f"{directory}: {rec.get('not_private', 'not private')}, no "
                     f"privacy certificate: {rec.get('why', '')} (the planned run "
                     f"would have ε = {eps_text} at δ = {planned.get('delta')}; train "
                     "it without --dp-simulate-batch/--dp-control to get one)")


def privacy_plan(*, delta: float | None, n_examples: int | None, steps: int | None,
                 sample_rate: float | None = None, batch_schedule: str | None = None,
                 noise_multiplier: float | None = None,
                 target_epsilon: float | None = None, shards: int = 1,
                 accountant: str = accounting.DEFAULT_ACCOUNTANT) -> dict:
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
    out["prv_eps_error"] = accounting.prv_epsilon(hist, delta)[1]  # ε (prv) is its upper end
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
