"""Privacy accounting for DP-SGD and the DP vocabulary: ε at δ, σ for a target ε.

Why: the guarantee of a DP model is only as good as its accounting. One interface over
the opacus accountants — RDP (Mironov et al. 2019, "Rényi Differential Privacy of the
Sampled Gaussian Mechanism") and PRV (Gopi et al. 2021, "Numerical Composition of
Differential Privacy") — chosen by name from a registry, with per-step composition of
Poisson-subsampled Gaussian steps whose sampling rate may change (increasing batch-size
schedules, Anil et al. 2021 §5.2.2). The vocabulary's ε_V and the training's ε_T are
added by basic composition (ε_V + ε_T, δ_V + δ_T) only when both are guarantees for the
same privacy unit (`check_composable`): ε's of different units never add. Tests
cross-check both accountants against Google's dp-accounting (RDP and PLD).

A privacy *history* is a list of (noise_multiplier, sample_rate, steps) segments, the
format opacus accountants keep in `.history`.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence

from ..errors import InputError

Step = tuple[float, float, int]  # (noise multiplier σ, sample rate q, steps)

# RDP orders: opacus' defaults plus the large orders dp-accounting also uses, which
# matter for small ε (many steps with little noise per step need high orders).
RDP_ORDERS = ([1 + x / 10.0 for x in range(1, 100)] + list(range(11, 64))
              + [128, 256, 512, 1024])


def _rdp_epsilon(history, delta):
    from opacus.accountants import RDPAccountant

    acc = RDPAccountant()
    acc.history = [tuple(h) for h in history]
    return float(acc.get_epsilon(delta=delta, alphas=RDP_ORDERS))


# The PRV accountant discretises the privacy loss on a grid whose size grows with the
# steps and shrinks with eps_error (mesh = eps_error / √(T·ln(12/δ_err)/2)); its FFT
# composition takes about 170 bytes a point (measured: 7.5M points, 1.2 GB over the
# imports). At 1,000,000 steps and eps_error 0.01 that is 1.1e8 points, ~19 GB. Grids
# are capped here: the error is raised until the grid fits (PRV's upper end stays an
# upper bound on ε, only a looser one), and `prv_epsilon` says which error was used.
PRV_MAX_POINTS = 8_000_000  # ≈ 1.4 GB of working memory
PRV_EPS_ERROR = 0.01        # opacus' default: refined below for small ε


def _prv_grid_points(acc, delta, eps_error):
    from opacus.accountants.analysis.prv import PoissonSubsampledGaussianPRV

    hist = acc.history  # [(σ, q, steps)]
    domain = acc._get_domain(prvs=[PoissonSubsampledGaussianPRV(q, s) for s, q, _ in hist],
                             num_self_compositions=[int(t) for _, _, t in hist],
                             eps_error=eps_error, delta_error=delta / 1000)
    return int(domain.size)


def _prv_fitting_error(acc, delta, eps_error):
    """The smallest error ≥ eps_error whose grid has at most PRV_MAX_POINTS points."""
    for _ in range(20):
        points = _prv_grid_points(acc, delta, eps_error)
        if points <= PRV_MAX_POINTS:
            return eps_error
        eps_error *= 1.05 * points / PRV_MAX_POINTS
    raise InputError(f"the PRV accountant cannot fit this history in "
                     f"{PRV_MAX_POINTS:,} grid points; use --accountant rdp")


def prv_epsilon(history: Sequence[Step], delta: float) -> tuple[float, float]:
    """(ε, its error bound) by opacus' PRV accountant: the upper end of its estimate
    (a guarantee), on a grid of at most PRV_MAX_POINTS points."""
    return _prv_cached(tuple((float(s), float(q), int(t)) for s, q, t in history),
                       float(delta))


@functools.lru_cache(maxsize=32)  # a plan asks for ε, then for its error bound
def _prv_cached(history: tuple[Step, ...], delta: float) -> tuple[float, float]:
    import numpy as np

    acc = _prv_accountant()
    acc.history = list(history)
    with np.errstate(divide="ignore", invalid="ignore"):  # log(1 − q) at q = 1
        return _prv_refined(acc, delta)


def _prv_accountant():
    """opacus' PRVAccountant, computing each discretisation domain once. ε at one error
    asks for its domain twice (the grid-size check above, then get_epsilon), and the
    domain's RDP bound is most of PRV's time; the domain is a function of its arguments
    alone, so every ε is the same as without the memo."""
    from opacus.accountants import PRVAccountant

    class DomainOnce(PRVAccountant):
        def __init__(self):
            super().__init__()
            self.domains = {}

        def _get_domain(self, prvs, num_self_compositions, eps_error, delta_error):
            key = (tuple((p.sample_rate, p.noise_multiplier) for p in prvs),
                   tuple(num_self_compositions), eps_error, delta_error)
            if key not in self.domains:
                self.domains[key] = super()._get_domain(
                    prvs=prvs, num_self_compositions=num_self_compositions,
                    eps_error=eps_error, delta_error=delta_error)
            return self.domains[key]

    return DomainOnce()


def _prv_epsilon(history, delta):
    return prv_epsilon(history, delta)[0]


def _prv_refined(acc, delta):
    # opacus' default eps_error (0.01 absolute) is coarse for small ε: refine it to
    # 0.2 % of a first estimate. The result is an upper bound (a guarantee). Both
    # errors are raised where the grid would not fit (_prv_fitting_error); below the cap
    # the figures are those of earlier certificates.
    error = _prv_fitting_error(acc, delta, PRV_EPS_ERROR)
    eps = float(acc.get_epsilon(delta=delta, eps_error=error))
    wanted = max(1e-4, 0.002 * eps)
    if wanted >= error:  # the fitting error is never below what is asked: no refinement
        return eps, error
    fine = _prv_fitting_error(acc, delta, wanted)
    if fine < error:
        eps, error = float(acc.get_epsilon(delta=delta, eps_error=fine)), fine
    return eps, error


# name -> (function(history, delta) -> ε, description). Add accountants here.
ACCOUNTANTS = {
    "rdp": (_rdp_epsilon, "Rényi DP of the Poisson-subsampled Gaussian (opacus RDPAccountant)"),
    "prv": (_prv_epsilon, "privacy random variables, numerical composition (opacus PRVAccountant)"),
}

# The accountant that calibrates σ for a target ε and whose figure a new certificate
# states (`--accountant`): PRV, the tighter of the two every certificate reports (its
# upper end, so the stated ε holds with its error bound). At the default recipe's plan
# (q 0.1, 100 steps, δ 1e-5, the count composed in front) RDP calibration gave σ 0.994
# for ε_RDP 7.99 while PRV put that run at 7.14: 5 % more noise than ε 8 needs. A run
# recorded with "rdp" (the default before) keeps it: its certificate is recomputed with
# it, and --resume continues it with the σ it planned (nmtfrag.dp.resume).
DEFAULT_ACCOUNTANT = "prv"


def calibration_record(accountant: str, target_epsilon: float | None) -> dict:
    """What set σ, for a certificate: the accountant it was calibrated with, or None
    (σ given with --noise-multiplier)."""
    if target_epsilon is None:
        return {"by": "given (--noise-multiplier)", "accountant": None}
    how = ("PRV, the upper end of its ε estimate" if accountant == "prv"
           else "RDP" if accountant == "rdp" else accountant)
    return {"by": f"calibrated to ε ≤ {target_epsilon:g} with {how}",
            "accountant": accountant}


def check_delta(delta: float | None, n_examples: int | None = None,
                what: str = "--delta") -> None:
    """Refuse a missing or meaningless δ, and (given n) a δ not below 1/n."""
    if delta is None:
        raise InputError(f"{what} is required: a DP guarantee without δ is void")
    if not (0.0 < delta < 1.0):
        raise InputError(f"{what} must be in (0, 1), got {delta}")
    if n_examples is not None and delta >= 1.0 / n_examples:
        raise InputError(f"{what}={delta} is not below 1/n = 1/{n_examples}: such a δ "
                         "allows releasing a whole training example; use a smaller δ")


def check_history(history: Sequence[Step]) -> None:
    if not history:
        raise InputError("no privacy steps to account for (steps must be ≥ 1)")
    for sigma, q, steps in history:
        if not (sigma > 0) or math.isinf(sigma) or math.isnan(sigma):
            raise InputError(f"noise multiplier must be a positive number, got {sigma}")
        if not (0.0 < q <= 1.0):
            raise InputError(f"sample rate must be in (0, 1], got {q}")
        if int(steps) != steps or steps < 1:
            raise InputError(f"steps must be a positive integer, got {steps}")


def epsilon(history: Sequence[Step], delta: float, accountant: str = "rdp") -> float:
    """ε spent by a history of Poisson-subsampled Gaussian steps, at δ."""
    if accountant not in ACCOUNTANTS:
        raise InputError(f"unknown accountant {accountant!r}; choose from "
                         f"{', '.join(sorted(ACCOUNTANTS))}")
    check_delta(delta)
    check_history(history)
    eps = ACCOUNTANTS[accountant][0]([(float(s), float(q), int(t)) for s, q, t in history],
                                     float(delta))
    if math.isnan(eps):
        raise RuntimeError(f"the {accountant} accountant returned no ε")
    # A conversion below 0 (large δ, little composition) still proves (0, δ)-DP, since
    # DP is monotone in ε: never report a negative ε.
    return max(0.0, eps)


def plan_epsilon(noise_multiplier: float, sample_rate: float, steps: int, delta: float,
                 accountant: str = "rdp") -> float:
    """ε of `steps` identical steps (the `nmtfrag privacy --noise-multiplier` plan)."""
    return epsilon([(noise_multiplier, sample_rate, steps)], delta, accountant)


def rates_history(noise_multiplier: float,
                  rate_segments: Iterable[tuple[float, int]]) -> list[Step]:
    """[(q, steps), …] → [(σ, q, steps), …] with consecutive equal rates merged."""
    out: list[Step] = []
    for q, steps in rate_segments:
        if steps <= 0:
            continue
        if out and out[-1][1] == q:
            out[-1] = (noise_multiplier, q, out[-1][2] + steps)
        else:
            out.append((noise_multiplier, q, steps))
    return out


def noise_multiplier_for(target_epsilon: float, delta: float,
                         rate_segments: Sequence[tuple[float, int]],
                         accountant: str = "rdp",
                         rel_tol: float = 0.002, fixed: Iterable[Step] = ()) -> float:
    """Smallest σ (within `rel_tol` of ε) whose history reaches at most `target_epsilon`.

    `rate_segments` is [(sample_rate, steps), …] — one segment for a fixed batch size,
    several for a batch-size schedule. `fixed` segments [(σ, q, steps), …] (the DP unit
    count of nmtfrag.dp.unit_count) are composed in front of them and spend part of it.
    """
    if target_epsilon is None or not (target_epsilon > 0) or math.isinf(target_epsilon):
        raise InputError(f"target ε must be a positive number, got {target_epsilon}")
    check_delta(delta)

    def eps(sigma):
        return epsilon(list(fixed) + rates_history(sigma, rate_segments), delta,
                       accountant)

    lo, hi = 0.0, 1.0
    while eps(hi) > target_epsilon:
        lo, hi = hi, hi * 2
        if hi > 1e6:
            raise InputError(f"ε = {target_epsilon} at δ = {delta} is out of reach "
                             "for this sampling plan (σ would exceed 1e6)")
    # bisection on σ; ε is decreasing in σ
    for _ in range(100):
        mid = (lo + hi) / 2
        if eps(mid) > target_epsilon:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-4 * hi:
            break
        if target_epsilon - eps(hi) <= rel_tol * target_epsilon and hi - lo <= 0.01 * hi:
            break
    return hi


def effective_noise_multiplier(noise_multiplier: float, shards: int = 1) -> float:
    """σ to account with when each of P shards adds its own noise N(0, σ²C²) to its
    (locally averaged) gradient and the shards are then averaged: the noise of the
    average, relative to the clip norm of the global mean, is σ√P (Hoory et al. 2021,
    Eq. 3) — more noise than one device adding σ once."""
    if shards < 1:
        raise InputError(f"number of shards must be ≥ 1, got {shards}")
    return noise_multiplier * math.sqrt(shards)


def compose_basic(*guarantees: tuple[float, float]) -> tuple[float, float]:
    """Basic composition of (ε, δ) pairs: (Σε, Σδ)."""
    return (sum(float(e) for e, _ in guarantees), sum(float(d) for _, d in guarantees))


NO_VOCABULARY = {"epsilon": 0.0, "delta": 0.0, "note": "public vocabulary of the base model"}


# How a DP-SGD certificate composes the DP unit count (history[0]) with the training
# (history[1:]): training["composition"]["kind"].
RDP_COMPOSITION = "rdp"
BASIC_COMPOSITION = "basic"
COMPOSITION_WHY = {
    RDP_COMPOSITION: "rates fixed in advance: RDP composition",
    BASIC_COMPOSITION: "rates chosen from the DP count: basic composition of "
                       "(ε_count, δ_count) and (ε_train, δ_train)",
}


def composition_record(kind: str, delta: float, epsilon_train_bound: float | None = None,
                       delta_count: float | None = None) -> dict:
    """The composition spec a certificate records before ε is computed: for basic
    composition, the δ split and the training's ε bound, fixed before ñ was drawn."""
    if kind == RDP_COMPOSITION:
        return {"kind": kind, "why": COMPOSITION_WHY[kind]}
    assert delta_count is not None, "basic composition splits δ: delta_count is required"
    return {"kind": kind, "why": COMPOSITION_WHY[kind], "delta_count": delta_count,
            "delta_train": float(delta) - delta_count,
            "epsilon_train_bound": epsilon_train_bound}


def certify_training(training: dict) -> tuple[float, dict[str, float], dict]:
    """(ε certified, {accountant: ε}, parts) of a DP-SGD training entry, recomputed
    from its history and recorded composition.

    RDP composition (or none recorded: older certificates): ε of the whole history,
    count segment first. Basic composition: ε_count = analytic-Gaussian ε of the count
    segment at δ_count, ε_train = the accountant's ε of history[1:] at δ_train, which
    must not exceed the bound fixed in advance; the certificate is ε_count + the bound
    (the guarantee is the pre-fixed budget, not the realised ε_train, which depends on
    ñ). The per-accountant figures of basic composition are ε_count + realised ε_train.
    """
    hist = [tuple(h) for h in training["history"]]
    delta, main = training["delta"], training.get("accountant", "rdp")
    comp = training.get("composition") or {"kind": RDP_COMPOSITION}
    if comp["kind"] == RDP_COMPOSITION:
        eps = {name: epsilon(hist, delta, name) for name in ACCOUNTANTS}
        return eps[main], eps, {"history": "count segment + training segments",
                                "delta": delta}
    if comp["kind"] != BASIC_COMPOSITION:
        raise ValueError(f"unknown composition {comp['kind']!r}")
    d_count, d_train = float(comp["delta_count"]), float(comp["delta_train"])
    if abs(d_count + d_train - delta) > 1e-12 * delta:
        raise ValueError("δ_count + δ_train must equal the certificate's δ")
    count_sigma, count_q, count_steps = hist[0]
    if count_q != 1.0 or count_steps != 1:
        raise ValueError("the history's first segment must be the unit count [s, 1, 1]")
    eps_count = analytic_gaussian_epsilon(count_sigma, d_count)
    train = {name: epsilon(hist[1:], d_train, name) for name in ACCOUNTANTS}
    bound = float(comp["epsilon_train_bound"])
    if train[main] > bound * (1 + 1e-9):
        raise ValueError(f"ε_train {train[main]} ({main}) exceeds the bound {bound} "
                         "fixed in advance")
    parts = {"count": {"epsilon": eps_count, "delta": d_count,
                       "mechanism": "analytic Gaussian, sensitivity 1"},
             "training": {"epsilon": train[main], "epsilon_bound": bound,
                          "delta": d_train, "accountant": main,
                          "epsilon_all_accountants": train}}
    return (eps_count + bound, {name: eps_count + e for name, e in train.items()}, parts)


def training_epsilon(training: dict) -> float:
    """Certified ε of a certificate's training entry, recomputed from its recorded
    history by its recorded composition (certify_training)."""
    return certify_training(training)[0]


# Privacy units of the certificates, finest last. A guarantee for one distinct sentence
# pair (--dedup) is also one for one pair occurrence: removing an occurrence removes at
# most one distinct pair from the deduplicated data.
# What a certificate says its unit is, one text per unit_key: derived, never read back.
TRAINING_UNIT_TEXT = {
    "sentence": ("one training sentence pair (a pair repeated k times in the data is "
                 "protected only as a group of k: use --dedup)"),
    "distinct-sentence": "one distinct training sentence pair (duplicates removed with --dedup)",
    "document": ("one document (all its sentence pairs together; the documents file says "
                 "which pair belongs to which)")}
RELEASE_UNIT_TEXT = {
    "sentence": ("one sentence pair (a pair repeated k times in the corpus is protected "
                 "only as a group of k)"),
    "document": "one document"}
MAX_DELTA = 0.01  # a certificate's δ above this allows a unit out with a real chance

# What a certificate states lies outside its ε, fixed per kind (checked, never free text):
# the refusals that read the exact private count before anything ran. Whether a run ran
# at all depends on them, and no certificate covers that event.
OUTSIDE_TRAINING = [
    "the checks before training on the exact number of units n (δ < 1/n; at least 100 "
    "units unless --allow-few-units; a logical batch not above n): whether the run ran "
    "at all depends on n"]
OUTSIDE_RELEASE = [
    "the check before the release on the exact number of units n (δ < 1/n): whether the "
    "release was made at all depends on n"]
OUTSIDE_VOCABULARY = [
    "the check before counting on the exact number of units n (δ_V < 1/n): whether the "
    "vocabulary was made at all depends on n"]

UNIT_LABELS = {"sentence": "one sentence pair",
               "distinct-sentence": "one distinct sentence pair (--dedup)",
               "document": "one document"}


class NotComposable(InputError):
    """Two guarantees are for different privacy units: their ε's do not add."""


def unit_key(unit: str = "sentence", dedup: bool = False) -> str:
    """The unit of a guarantee: "sentence", "distinct-sentence" (sentence pairs after
    --dedup) or "document" (a document unit covers its repeated pairs: no dedup)."""
    if unit == "document":
        return "document"
    return "distinct-sentence" if dedup else "sentence"


def entry_unit_key(entry: dict, default: str = "sentence") -> str:
    """The `unit_key` of a vocabulary or training entry, read from its recorded fields
    (older certificates: from the wording of `unit`; a vocabulary without one was per
    sentence pair)."""
    if entry.get("unit_key"):
        return entry["unit_key"]
    text = str(entry.get("unit") or "")
    if entry.get("privacy_unit") == "document" or "document" in text:
        return unit_key("document")
    if "distinct" in text or entry.get("dedup"):
        return unit_key("sentence", dedup=True)
    return default


def composes_into(part_key: str, unit: str) -> bool:
    """Whether an (ε, δ) guarantee per `part_key` is one per `unit` as well."""
    return part_key == unit or (part_key == "distinct-sentence" and unit == "sentence")


def _mismatch_advice(part_key, unit, what):
    if what == "vocabulary" and unit == "document":
        return ("`nmtfrag vocab --dp` has no document unit (sentence pairs, or distinct "
                "pairs with --dedup): train on a base model with a public vocabulary, or "
                "with --privacy-unit sentence")
    if what == "vocabulary" and unit == "distinct-sentence":
        return ("build the vocabulary with `nmtfrag vocab --dp --dedup` (a distinct-pair "
                "vocabulary composes with --dedup and with per-pair training)")
    if what == "vocabulary":
        return "build a matching vocabulary with `nmtfrag vocab --dp` (with --dedup or not)"
    return f"train with the unit of the earlier training ({UNIT_LABELS.get(part_key, part_key)})"


def check_composable(unit: str, vocabulary: dict | None = None,
                     earlier: Iterable[dict] = ()) -> None:
    """Refuse to add ε's of different privacy units: a sentence-level ε is a
    document-level one only by group privacy over the document's sentences, and a
    per-occurrence ε covers a pair repeated k times only as a group of k."""
    parts = [("vocabulary", vocabulary)] if vocabulary else []
    parts += [("earlier DP training", t) for t in earlier]
    for what, entry in parts:
        if what == "vocabulary" and not (entry.get("epsilon") or entry.get("delta")):
            continue  # a public vocabulary spends nothing
        key = entry_unit_key(entry)
        if not composes_into(key, unit):
            raise NotComposable(
                f"not composable: the {what} is DP per {UNIT_LABELS.get(key, key)}, this "
                f"training per {UNIT_LABELS.get(unit, unit)}; ε's of different units do "
                f"not add up to a guarantee for either. {_mismatch_advice(key, unit, what)}")


def release_segments(releases: Sequence[dict]) -> list[Step]:
    """The Gaussian counts of DP releases as history segments [σ/Δ, 1.0, 1]: one
    full-batch Gaussian mechanism each, noise multiplier σ over its L2 sensitivity Δ
    (√K for capped counts, 1 for the Policy Gaussian)."""
    return [(float(r["sigma"]) / float(r["sensitivity"]), 1.0, 1) for r in releases]


def joint_release_epsilon(training: dict, releases: Sequence[dict]) -> float:
    """ε of DP releases and a DP-SGD training accounted together: the releases' Gaussian
    counts composed with the training's history (unit count first) by the training's
    accountant, at δ = δ_train + Σ δ_G; each release's threshold δ_T is added to δ
    outside (an item only the added unit holds passes with probability ≤ δ_T)."""
    delta = float(training["delta"]) + sum(float(r["delta_gauss"]) for r in releases)
    hist = release_segments(releases) + [tuple(h) for h in training["history"]]
    return epsilon(hist, delta, training.get("accountant", "rdp"))


def composes_jointly(training: dict) -> bool:
    """Whether a training's history may be accounted together with releases: its rates
    were fixed in advance (RDP composition of the count and the steps)."""
    return (training.get("composition") or {}).get("kind", RDP_COMPOSITION) == RDP_COMPOSITION


def compose_certificate(training: dict, vocabulary: dict | None = None,
                        earlier: Sequence[dict] = (),
                        training_eps: float | None = None,
                        releases: Sequence[dict] = ()) -> dict:
    """Total (ε, δ) of a DP model: its vocabulary, every earlier DP training of its base
    model (fine-tuning a DP model again on the same owner's data composes), the DP
    releases its base model was trained on, and this training — by basic composition,
    valid whatever the overlap of the data sets, and only for guarantees of the same
    privacy unit (NotComposable otherwise). Releases and this training are accounted
    together (joint_release_epsilon) when the training's rates were fixed in advance,
    which is tighter than adding their ε's."""
    check_composable(entry_unit_key(training), vocabulary, list(earlier) + list(releases))
    vocab: dict = vocabulary or NO_VOCABULARY  # a certificate entry, like `vocabulary`
    parts = [(vocab["epsilon"], vocab["delta"])]
    parts += [(training_epsilon(t), t["delta"]) for t in earlier]
    own = training_epsilon(training) if training_eps is None else training_eps
    if releases and composes_jointly(training):
        parts.append((joint_release_epsilon(training, releases),
                      training["delta"] + sum(float(r["delta"]) for r in releases)))
        how = (f"basic (ε_V + Σ earlier ε_T + ε of {len(releases)} DP release(s) and this "
               f"training accounted together by {training.get('accountant', 'rdp')}, "
               f"δ likewise)")
    else:
        parts += [(float(r["epsilon"]), float(r["delta"])) for r in releases]
        parts.append((own, training["delta"]))
        how = ("basic (ε_V + Σ earlier ε_T + Σ ε_release + ε_T, δ likewise)" if releases
               else "basic (ε_V + Σ earlier ε_T + ε_T, δ likewise)")
    eps, delta = compose_basic(*parts)
    return {"epsilon": eps, "delta": delta, "composition": how, "parts": len(parts)}


def analytic_gaussian_epsilon(noise_std: float, delta: float,
                              sensitivity: float = 1.0) -> float:
    """ε of one Gaussian mechanism with L2 sensitivity Δ and noise std σ, by the
    analytic Gaussian mechanism (Balle & Wang 2018, Theorem 8): the smallest ε with
    Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ) ≤ δ."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    check_delta(delta)
    s = noise_std / sensitivity

    def log_delta(eps):
        a = norm.logcdf(0.5 / s - eps * s)
        b = eps + norm.logcdf(-0.5 / s - eps * s)
        return a + math.log1p(-math.exp(min(0.0, b - a))) if b < a else -math.inf

    target = math.log(delta)
    if log_delta(0.0) <= target:
        return 0.0
    hi = 1.0
    while log_delta(hi) > target:
        hi *= 2
    return float(brentq(lambda e: log_delta(e) - target, 0.0, hi, xtol=1e-12))


def classic_gaussian_epsilon(noise_std: float, delta: float,
                             sensitivity: float = 1.0) -> float:
    """ε = (Δ/σ)·√(2 ln(1.25/δ)) (Dwork & Roth 2014, Thm A.1; Hoory et al. 2021,
    Corollary 1). Valid only when the result is < 1."""
    check_delta(delta)
    return sensitivity / noise_std * math.sqrt(2 * math.log(1.25 / delta))
