"""Checking a shipped privacy certificate field by field: every figure recomputed.

Why: `privacy.json` is the only evidence that leaves with a DP output, and it is a
plain JSON file anyone can edit. `nmtfrag privacy` therefore recomputes every ε, δ,
threshold and bound from the mechanism parameters the file records, checks that the
redundant fields agree with each other (σ and the steps against the history, the DP
unit count's segment, the δ split, the cap against the sensitivity, the randomness
record) and that the copy in `manifest.json` is the same certificate, and refuses
(CertificateError, one line) the first field that does not follow. This catches an
edited or forged field; it does not authenticate: a file rewritten consistently (every
copy and every derived figure) passes, as it would for any unsigned file.

Each check names the field as a path (`training.history[0]`), so the error line says
what was edited. `check_model`, `check_release` and `check_vocabulary` take the parsed
privacy.json and manifest.json of a finetune --dp model dir, an extract --dp release
and a vocab --dp output.
"""
from __future__ import annotations

import math
from typing import Any

from ..errors import InputError
from ..randomness import SECRET, SEEDED
from . import accounting, histogram, unit_count

# Relative tolerance of a recomputed figure against the stored one: closed forms and
# RDP are deterministic (1e-6 leaves room for float formatting); PRV is numerical, with
# an error bound of its own (nmtfrag.dp.accounting._prv_refined).
TOL = 1e-6
TOL_BY_ACCOUNTANT = {"rdp": 1e-6, "prv": 2e-3}


from .cert_files import CertificateError  # noqa: E402 (defined beside the file check)


# The keys each object of a certificate may hold: anything else (an added
# "epsilon_headline") is refused, so no reader takes a figure nmtfrag did not compute.
TRAINING_KEYS = {"mechanism", "neighbouring", "unit", "privacy_unit", "unit_key",
                 "trained_parameters", "clipping", "clip_mode", "processes", "accountant",
                 "delta", "noise_multiplier", "max_grad_norm", "steps", "sample_rate",
                 "unit_count", "composition", "history", "target_epsilon", "calibration",
                 "randomness", "epsilon", "epsilon_all_accountants", "public_data",
                 "outside_epsilon"}
MODEL_KEYS = {"training", "vocabulary", "earlier_training", "earlier_releases",
              "base_model", "total", "files"}
RELEASE_KEYS = {"mechanism", "weights", "sensitivity", "cutoff", "unit", "unit_key",
                "neighbouring", "epsilon", "delta", "delta_gauss", "delta_threshold", "sigma",
                "threshold", "cap", "single_unit_pass_probability", "repeat", "randomness",
                "aligner", "outside_epsilon"}
VOCABULARY_KEYS = {"epsilon", "delta", "method", "epsilon_corollary_1", "corollary_1_valid",
                   "sigma", "tuple_len", "threshold", "unit", "unit_key", "neighbouring",
                   "randomness", "outside_epsilon"}
RANDOMNESS_KEYS = {"source", "private", "note"}
TOTAL_KEYS = {"epsilon", "delta", "composition", "parts", "composable", "reason"}


def only_keys(d: Any, allowed: set[str], path: str) -> None:
    """Refuse an object holding a key nmtfrag does not write there."""
    if not isinstance(d, dict):
        raise _fail(f"{path} is not an object")
    extra = sorted(set(d) - allowed)
    if extra:
        raise _fail(f"{path}.{extra[0]} is not a field of nmtfrag's certificates")


def outside(entry: dict, stated: list[str], path: str) -> None:
    """What lies outside ε is nmtfrag's fixed statement for the kind, never free text."""
    if field(entry, "outside_epsilon", path) != stated:
        raise _fail(f"{path}.outside_epsilon is not nmtfrag's statement of what lies "
                    "outside this kind's ε")


def in_delta_range(delta: float, path: str) -> None:
    if not 0 < delta <= accounting.MAX_DELTA:
        raise _fail(f"{path} is {delta:g}, outside (0, {accounting.MAX_DELTA:g}]: such a δ "
                    "allows releasing a unit outright with a real chance")


def _fail(what: str) -> CertificateError:
    return CertificateError(f"{what}: the certificate was edited or is not a "
                            "certificate of nmtfrag; refusing it")


def field(d: Any, key: str, path: str) -> Any:
    if not isinstance(d, dict):
        raise _fail(f"{path} is not an object")
    if key not in d:
        raise _fail(f"{path}.{key} is missing")
    return d[key]


def number(d: Any, key: str, path: str, *, positive: bool = False) -> float:
    v = field(d, key, path)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise _fail(f"{path}.{key} is {v!r}, not a finite number")
    if positive and not v > 0:
        raise _fail(f"{path}.{key} is {v!r}, not positive")
    return float(v)


def integer(d: Any, key: str, path: str) -> int:
    v = field(d, key, path)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise _fail(f"{path}.{key} is {v!r}, not a positive integer")
    return v


def same(stored: Any, recomputed: float, what: str, rel: float = TOL,
         how: str = "") -> None:
    """Refuse a stored figure that differs from its recomputed value."""
    ok = (not isinstance(stored, bool) and isinstance(stored, (int, float))
          and math.isfinite(stored)
          and abs(stored - recomputed) <= rel * max(abs(recomputed), 1e-12))
    if not ok:
        raise _fail(f"{what} is {stored!r}, but recomputed from "
                    f"{how or 'the recorded parameters'} it is {recomputed:.6g}")


def same_tree(stored: Any, recomputed: Any, path: str, rel: float = TOL) -> None:
    """Recursive equality, numbers within `rel`."""
    if isinstance(recomputed, dict):
        if not isinstance(stored, dict) or set(stored) != set(recomputed):
            raise _fail(f"{path} is {_short(stored)}, expected the keys "
                        f"{sorted(recomputed)}")
        for k in recomputed:
            same_tree(stored[k], recomputed[k], f"{path}.{k}", rel)
    elif isinstance(recomputed, (list, tuple)):
        if not isinstance(stored, (list, tuple)) or len(stored) != len(recomputed):
            raise _fail(f"{path} is {_short(stored)}, expected {_short(recomputed)}")
        for k, (a, b) in enumerate(zip(stored, recomputed)):
            same_tree(a, b, f"{path}[{k}]", rel)
    elif isinstance(recomputed, float) and not isinstance(recomputed, bool):
        same(stored, recomputed, path, rel)
    elif stored != recomputed or type(stored) is not type(recomputed):
        raise _fail(f"{path} is {_short(stored)}, expected {_short(recomputed)}")


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def first_difference(a: Any, b: Any, path: str) -> str | None:
    """The path of the first place two JSON values differ (exactly), or None."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}.{k}"
            d = first_difference(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return path
        for k, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{path}[{k}]")
            if d:
                return d
        return None
    return None if (a == b and type(a) is type(b)) else path


def check_copy(cert: Any, copy: Any, prefix: str = "") -> None:
    """The manifest's copy of the certificate must be the same, field for field."""
    diff = first_difference(cert, copy, prefix)
    if diff is not None:
        raise _fail(f"privacy.json and manifest.json's copy of it differ at "
                    f"{diff.lstrip('.') or 'the top level'}")


def randomness(rec: Any, path: str) -> bool:
    """Check a public randomness record; True when it is seeded (not private)."""
    only_keys(rec, RANDOMNESS_KEYS, path)
    source = field(rec, "source", path)
    private = field(rec, "private", path)
    if (source, private) not in ((SEEDED, False), (SECRET, True)):
        raise _fail(f"{path} says source {source!r} with private {private!r}: a seeded "
                    "run is never private, a secret one always is")
    return source == SEEDED


# --- DP-SGD model directories (`nmtfrag finetune --dp`) -------------------------------

def training_entry(t: Any, path: str) -> tuple[float, dict, dict, bool]:
    """Check one training entry; returns (ε certified, {accountant: ε}, parts, seeded)."""
    hist = field(t, "history", path)
    if not isinstance(hist, list) or len(hist) < 2 or any(
            not isinstance(h, list) or len(h) != 3 for h in hist):
        raise _fail(f"{path}.history must be [[s, 1.0, 1], [σ, q, steps], …] (the DP "
                    "unit count's segment, then the training's)")
    for k, h in enumerate(hist):
        p = f"{path}.history[{k}]"
        number({"σ": h[0]}, "σ", p, positive=True)
        q = number({"q": h[1]}, "q", p, positive=True)
        if q > 1:
            raise _fail(f"{p} has the sample rate {q}, above 1")
        integer({"steps": h[2]}, "steps", p)
    only_keys(t, TRAINING_KEYS, path)
    delta = number(t, "delta", path, positive=True)
    in_delta_range(delta, f"{path}.delta")
    number(t, "max_grad_norm", path, positive=True)
    integer(t, "processes", path)
    main = field(t, "accountant", path)
    if main not in accounting.ACCOUNTANTS:
        raise _fail(f"{path}.accountant is {main!r}, not one of "
                    f"{', '.join(sorted(accounting.ACCOUNTANTS))}")
    for key in ("mechanism", "unit", "privacy_unit"):
        if not isinstance(field(t, key, path), str):
            raise _fail(f"{path}.{key} is not text")
    key = field(t, "unit_key", path)
    if key not in accounting.UNIT_LABELS:
        raise _fail(f"{path}.unit_key is {key!r}, not one of "
                    f"{', '.join(accounting.UNIT_LABELS)}")
    unit = field(t, "privacy_unit", path)
    if key != accounting.unit_key(unit, key == "distinct-sentence") or \
            unit not in ("sentence", "document"):
        raise _fail(f"{path}.privacy_unit {unit!r} and {path}.unit_key {key!r} disagree")
    if t["unit"] != accounting.TRAINING_UNIT_TEXT[key]:
        raise _fail(f"{path}.unit is not the text of its unit_key {key!r}")
    target = field(t, "target_epsilon", path)
    if target is not None:
        target = number(t, "target_epsilon", path, positive=True)
        if target > 100:
            raise _fail(f"{path}.target_epsilon is {target:g}, above 100")
    outside(t, accounting.OUTSIDE_TRAINING, path)
    calib = field(t, "calibration", path)
    if calib != accounting.calibration_record(main, target):
        raise _fail(f"{path}.calibration is {_short(calib)}, but its accountant and "
                    f"target_epsilon give {accounting.calibration_record(main, target)!r}")
    only_keys(field(t, "unit_count", path), {"mechanism", "noise_std", "planning_count"},
              f"{path}.unit_count")
    seeded = randomness(field(t, "randomness", path), f"{path}.randomness")
    # the DP unit count ñ is the history's first segment [s, 1.0, 1]
    count = field(t, "unit_count", path)
    s = number(count, "noise_std", f"{path}.unit_count", positive=True)
    if hist[0] != [s, 1.0, 1]:
        raise _fail(f"{path}.history[0] is {hist[0]!r}, not the DP unit count's segment "
                    f"[{s:g}, 1.0, 1] (unit_count.noise_std = {s:g}): a composed part is "
                    "missing or edited")
    sigma = number(t, "noise_multiplier", path, positive=True)
    steps = integer(t, "steps", path)
    rate = (None if field(t, "sample_rate", path) is None
            else number(t, "sample_rate", path, positive=True))
    for k, (h_sigma, h_q, _) in enumerate(hist[1:], 1):
        if h_sigma != sigma:
            raise _fail(f"{path}.history[{k}] has σ = {h_sigma!r} but "
                        f"{path}.noise_multiplier is {sigma!r}")
        if rate is not None and h_q != rate:
            raise _fail(f"{path}.history[{k}] has q = {h_q!r} but {path}.sample_rate "
                        f"is {rate!r}")
    if sum(h[2] for h in hist[1:]) != steps:
        raise _fail(f"{path}.history's training segments hold "
                    f"{sum(h[2] for h in hist[1:])} steps but {path}.steps is {steps}")
    comp = field(t, "composition", path)
    kind = field(comp, "kind", f"{path}.composition")
    want_kind = accounting.RDP_COMPOSITION if rate is not None else \
        accounting.BASIC_COMPOSITION
    if kind != want_kind:
        raise _fail(f"{path}.composition.kind is {kind!r} but a run "
                    + ("with --sample-rate (rates fixed in advance) is composed by "
                       if rate is not None else
                       "whose rates come from the DP count (no sample_rate) is composed by ")
                    + repr(want_kind))
    if kind == accounting.BASIC_COMPOSITION:
        d_count = unit_count.basic_split(delta, s)[1]
        record = accounting.composition_record(
            kind, delta, epsilon_train_bound=number(
                comp, "epsilon_train_bound", f"{path}.composition", positive=True),
            delta_count=d_count)
    else:
        record = accounting.composition_record(kind, delta)
    same_tree({k: v for k, v in comp.items() if k != "parts"}, record,
              f"{path}.composition")
    try:
        eps, eps_all, parts = accounting.certify_training(t)
    except (ValueError, InputError) as exc:
        raise _fail(f"{path}: {exc}") from None
    same(field(t, "epsilon", path), eps, f"{path}.epsilon", TOL_BY_ACCOUNTANT[main],
         f"its history and composition ({main})")
    stored_all = field(t, "epsilon_all_accountants", path)
    for name, e in eps_all.items():
        same(field(stored_all, name, f"{path}.epsilon_all_accountants"), e,
             f"{path}.epsilon_all_accountants.{name}", TOL_BY_ACCOUNTANT[name],
             f"its history ({name})")
    if set(stored_all) != set(eps_all):
        raise _fail(f"{path}.epsilon_all_accountants names {sorted(stored_all)}, "
                    f"expected {sorted(eps_all)}")
    same_tree(field(comp, "parts", f"{path}.composition"), parts,
              f"{path}.composition.parts", max(TOL_BY_ACCOUNTANT.values()))
    return eps, eps_all, parts, seeded


def vocabulary_entry(v: Any, path: str) -> bool:
    """Check a DP vocabulary entry (or the public vocabulary's); returns seeded."""
    if v == accounting.NO_VOCABULARY:
        return False
    from .vocab import vocab_epsilon

    only_keys(v, VOCABULARY_KEYS, path)
    outside(v, accounting.OUTSIDE_VOCABULARY, path)
    sigma = number(v, "sigma", path, positive=True)
    delta = number(v, "delta", path, positive=True)
    n = integer(v, "tuple_len", path)
    in_delta_range(delta, f"{path}.delta")
    half = delta / 2  # δ_V = δ of the counts + δ of the threshold
    eps = vocab_epsilon(sigma, half, n)
    same(field(v, "epsilon", path), eps["analytic_gaussian"], f"{path}.epsilon",
         how="its σ, δ and tuple length")
    same(field(v, "epsilon_corollary_1", path), eps["corollary_1"],
         f"{path}.epsilon_corollary_1", how="its σ, δ and tuple length")
    if field(v, "corollary_1_valid", path) is not (eps["corollary_1"] < 1.0):
        raise _fail(f"{path}.corollary_1_valid does not follow from its ε")
    same(field(v, "threshold", path), histogram.threshold(sigma, half, n),
         f"{path}.threshold", how="its σ, δ and tuple length")
    if field(v, "unit_key", path) not in ("sentence", "distinct-sentence"):
        raise _fail(f"{path}.unit_key is {v['unit_key']!r}")
    return randomness(field(v, "randomness", path), f"{path}.randomness")


def check_model(cert: Any, manifest: Any) -> dict:
    """A finetune --dp certificate and its manifest: every figure recomputed.
    Returns {"epsilon", "epsilon_all", "parts", "total", "seeded"}."""
    check_copy(cert, field(manifest, "privacy", "manifest"))
    if field(manifest, "dp", "manifest") is not True:
        raise _fail("manifest.dp is not true")
    only_keys(cert, MODEL_KEYS, "privacy")
    training = field(cert, "training", "privacy")
    eps, eps_all, parts, seeded = training_entry(training, "training")
    if field(manifest, "randomness", "manifest") != training["randomness"]:
        raise _fail("manifest.randomness differs from training.randomness")
    params = field(manifest, "params", "manifest")
    for key in ("noise_multiplier", "delta", "steps", "accountant", "sample_rate",
                "max_grad_norm", "target_epsilon"):
        if field(params, key, "manifest.params") != training[key]:
            raise _fail(f"manifest.params.{key} is {params[key]!r} but "
                        f"training.{key} is {training[key]!r}")
    if training["unit_key"] != accounting.unit_key(
            field(params, "privacy_unit", "manifest.params"),
            field(params, "dedup", "manifest.params")):
        raise _fail(f"training.unit_key {training['unit_key']!r} is not the unit of "
                    f"manifest.params (privacy_unit {params['privacy_unit']!r}, dedup "
                    f"{params['dedup']!r})")
    earlier = field(cert, "earlier_training", "privacy")
    if not isinstance(earlier, list):
        raise _fail("earlier_training is not a list")
    for k, e in enumerate(earlier):
        seeded = training_entry(e, f"earlier_training[{k}]")[3] or seeded
    vocab = field(cert, "vocabulary", "privacy")
    seeded = vocabulary_entry(vocab, "vocabulary") or seeded
    if not isinstance(field(cert, "base_model", "privacy"), dict):
        raise _fail("base_model is not an object")
    releases = cert.get("earlier_releases", [])
    if not isinstance(releases, list) or ("earlier_releases" in cert and not releases):
        raise _fail("earlier_releases is not a non-empty list")
    for k, r in enumerate(releases):
        seeded = release_entry(r, f"earlier_releases[{k}]")[2] or seeded
    public = training.get("public_data")
    if public is not None:  # public pairs in every batch: named, and the manifest agrees
        only_keys(public, {"pairs_per_step", "weight", "sha256", "note"},
                  "training.public_data")
        if params.get("dp_public") != public:
            raise _fail("training.public_data differs from manifest.params.dp_public")
    from .cert_plan import check_plan

    check_plan(training, params, releases)
    only_keys(field(cert, "total", "privacy"), TOTAL_KEYS, "total")
    try:
        total = accounting.compose_certificate(training, vocab, earlier,
                                               training_eps=eps, releases=releases)
    except accounting.NotComposable as exc:
        total = {"epsilon": None, "delta": None, "composable": False,
                 "reason": str(exc)}
    else:
        same_tree(field(cert, "total", "privacy"), total, "total",
                  TOL_BY_ACCOUNTANT[training["accountant"]])
    return {"epsilon": eps, "epsilon_all": eps_all, "parts": parts, "total": total,
            "seeded": seeded}


# --- DP phrase-pair releases (`nmtfrag extract --dp`) ---------------------------------

def release_entry(rel: Any, p: str) -> tuple[float, float, bool]:
    """Check one release entry (its mechanism's figures recomputed); returns (ε, δ,
    seeded)."""
    from ..limits import MAX_UNIT_CAP

    only_keys(rel, RELEASE_KEYS, p)
    outside(rel, accounting.OUTSIDE_RELEASE, p)
    weights = field(rel, "weights", p)
    if weights not in ("count", "policy"):
        raise _fail(f"{p}.weights is {weights!r}, not count or policy")
    policy = weights == "policy"
    cap = integer(rel, "cap", p)
    if cap > MAX_UNIT_CAP:
        raise _fail(f"{p}.cap is {cap}, above {MAX_UNIT_CAP}")
    sigma = number(rel, "sigma", p, positive=True)
    delta = number(rel, "delta", p, positive=True)
    in_delta_range(delta, f"{p}.delta")
    same(field(rel, "delta_gauss", p), delta / 2, f"{p}.delta_gauss", how="δ/2")
    same(field(rel, "delta_threshold", p), delta / 2, f"{p}.delta_threshold", how="δ/2")
    half = delta / 2
    same(field(rel, "sensitivity", p), 1.0 if policy else math.sqrt(cap),
         f"{p}.sensitivity", how="the cap" if not policy else "the Policy Gaussian")
    eps = histogram.gaussian_epsilon(sigma, half, 1 if policy else cap)
    same(field(rel, "epsilon", p), eps, f"{p}.epsilon", how="its σ, δ and cap")
    thr = number(rel, "threshold", p, positive=True)
    if policy:
        same(thr, histogram.policy_threshold(sigma, half, cap), f"{p}.threshold",
             how="its σ, δ and cap")
        if field(rel, "single_unit_pass_probability", p) is not None:
            raise _fail(f"{p}.single_unit_pass_probability must be null (Policy Gaussian)")
        if not number(rel, "cutoff", p) > thr:
            raise _fail(f"{p}.cutoff is not above the threshold")
    else:
        same(thr, histogram.threshold(sigma, half, cap), f"{p}.threshold",
             how="its σ, δ and cap")
        same(field(rel, "single_unit_pass_probability", p),
             histogram.tail_probability(sigma, thr), f"{p}.single_unit_pass_probability",
             how="its σ and threshold")
        if field(rel, "cutoff", p) is not None:
            raise _fail(f"{p}.cutoff must be null (Gaussian counts)")
    if field(rel, "unit_key", p) not in accounting.RELEASE_UNIT_TEXT:
        raise _fail(f"{p}.unit_key is {rel['unit_key']!r}")
    if field(rel, "unit", p) != accounting.RELEASE_UNIT_TEXT[rel["unit_key"]]:
        raise _fail(f"{p}.unit is not the text of its unit_key {rel['unit_key']!r}")
    repeat = field(rel, "repeat", p)
    if repeat not in ("count", "once") or (policy and repeat != "once"):
        raise _fail(f"{p}.repeat is {repeat!r}")
    for key in ("mechanism", "unit", "aligner"):
        if not isinstance(field(rel, key, p), str):
            raise _fail(f"{p}.{key} is not text")
    seeded = randomness(field(rel, "randomness", p), f"{p}.randomness")
    return eps, delta, seeded


def check_release(cert: Any, manifest: Any) -> dict:
    """An extract --dp certificate and its manifest. Returns {"epsilon", "seeded"}."""
    check_copy(cert, field(manifest, "privacy", "manifest"))
    only_keys(cert, {"release", "total", "files"}, "privacy")
    rel = field(cert, "release", "privacy")
    eps, delta, seeded = release_entry(rel, "release")
    if field(manifest, "randomness", "manifest") != rel["randomness"]:
        raise _fail("manifest.randomness differs from release.randomness")
    same_tree(field(cert, "total", "privacy"),
              {"epsilon": eps, "delta": delta,
               "composition": "one mechanism (ε, δ_G + δ_T)"}, "total")
    asked = field(field(manifest, "params", "manifest"), "dp", "manifest.params")
    for key in ("delta", "cap", "unit", "repeat", "weights"):
        want = rel["unit_key"] if key == "unit" else rel[key]
        if field(asked, key, "manifest.params.dp") != want:
            raise _fail(f"manifest.params.dp.{key} is {asked[key]!r} but the certificate "
                        f"says {want!r}")
    asked_eps = number(asked, "epsilon", "manifest.params.dp", positive=True)
    if eps > asked_eps * (1 + TOL):
        raise _fail(f"release.epsilon {eps:.6g} exceeds the ε asked for "
                    f"(manifest.params.dp.epsilon = {asked_eps:g})")
    return {"epsilon": eps, "seeded": seeded}


# --- models trained on a DP release only (`nmtfrag finetune` on an extract --dp) -----

POST_PROCESSED = "post-processing of the DP release(s) it was trained on"


def check_post_processed(cert: Any, manifest: Any) -> dict:
    """A model trained (fairseq's track) on DP releases and public text only: each
    release entry checked, the total recomputed. Returns {"epsilon", "delta", "seeded"}."""
    check_copy(cert, field(manifest, "privacy", "manifest"))
    if field(manifest, "dp", "manifest") is not True:
        raise _fail("manifest.dp is not true")
    only_keys(cert, {"released_from", "total", "post_processing", "files"}, "privacy")
    releases = field(cert, "released_from", "privacy")
    if not isinstance(releases, list) or not releases:
        raise _fail("released_from is not a non-empty list")
    seeded, parts = False, []
    for k, r in enumerate(releases):
        eps, delta, s = release_entry(r, f"released_from[{k}]")
        parts.append((eps, delta))
        seeded = seeded or s
    eps, delta = accounting.compose_basic(*parts)
    same_tree(field(cert, "total", "privacy"),
              {"epsilon": eps, "delta": delta, "composition": POST_PROCESSED}, "total")
    if not isinstance(field(cert, "post_processing", "privacy"), str):
        raise _fail("post_processing is not text")
    return {"epsilon": eps, "delta": delta, "seeded": seeded}


# --- DP vocabularies (`nmtfrag vocab --dp`) -------------------------------------------

def check_vocabulary(cert: Any, manifest: Any) -> dict:
    """A vocab --dp certificate and its manifest. Returns {"seeded"}."""
    only_keys(cert, {"vocabulary", "files"}, "privacy")
    vocab = field(cert, "vocabulary", "privacy")
    check_copy(vocab, field(manifest, "privacy", "manifest"), "vocabulary")
    seeded = vocabulary_entry(vocab, "vocabulary")
    if vocab == accounting.NO_VOCABULARY:
        raise _fail("vocabulary is the public vocabulary's entry: no DP vocabulary here")
    from .vocab import UNIT, UNIT_DEDUP

    dedup = field(field(manifest, "params", "manifest"), "dedup", "manifest.params")
    if vocab["unit_key"] != accounting.unit_key("sentence", dedup is True) or \
            vocab["unit"] != (UNIT_DEDUP if dedup is True else UNIT):
        raise _fail(f"vocabulary.unit_key {vocab['unit_key']!r} and vocabulary.unit are not "
                    f"the unit of manifest.params.dedup = {dedup!r}")
    if field(manifest, "randomness", "manifest") != vocab["randomness"]:
        raise _fail("manifest.randomness differs from vocabulary.randomness")
    params = field(manifest, "params", "manifest")
    for key, want in (("sigma", vocab["sigma"]), ("tuple_len", vocab["tuple_len"])):
        if field(params, key, "manifest.params") != want:
            raise _fail(f"manifest.params.{key} is {params[key]!r} but "
                        f"vocabulary.{key} is {want!r}")
    same(field(params, "delta", "manifest.params"), vocab["delta"] / 2,
         "manifest.params.delta", how="vocabulary.delta / 2")
    both = field(manifest, "epsilon_both_methods", "manifest")
    same(field(both, "analytic_gaussian", "manifest.epsilon_both_methods"),
         vocab["epsilon"], "manifest.epsilon_both_methods.analytic_gaussian",
         how="vocabulary.epsilon")
    same(field(both, "corollary_1", "manifest.epsilon_both_methods"),
         vocab["epsilon_corollary_1"], "manifest.epsilon_both_methods.corollary_1",
         how="vocabulary.epsilon_corollary_1")
    same(field(manifest, "threshold", "manifest"), vocab["threshold"],
         "manifest.threshold", how="vocabulary.threshold")
    return {"seeded": seeded}
