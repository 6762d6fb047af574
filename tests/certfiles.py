"""Hand-made DP outputs for tests of `nmtfrag privacy`: a privacy.json and the
manifest.json that carries its copy, complete as `finetune --dp` writes them, every
figure computed by nmtfrag's own accounting (no training). Only the fields a test
chooses differ from a real run's."""
import json

from nmtfrag.dp import accounting, cert_files, histogram, unit_count
from nmtfrag.randomness import Seed


def vocabulary_entry(sigma=6.0, delta=1e-9, tuple_len=16, unit_key="sentence",
                     seeded=False):
    """A `vocab --dp` certificate entry (δ is the counts' δ; δ_V = 2δ)."""
    from nmtfrag.dp.vocab import UNIT, UNIT_DEDUP, vocab_epsilon

    eps = vocab_epsilon(sigma, delta, tuple_len)
    return {"epsilon": eps["analytic_gaussian"], "delta": 2 * delta,
            "method": "analytic Gaussian mechanism (Balle & Wang 2018) at sensitivity "
                      "√N, plus δ for the threshold",
            "epsilon_corollary_1": eps["corollary_1"],
            "corollary_1_valid": eps["corollary_1"] < 1.0,
            "sigma": sigma, "tuple_len": tuple_len,
            "threshold": histogram.threshold(sigma, delta, tuple_len),
            "unit": UNIT_DEDUP if unit_key == "distinct-sentence" else UNIT,
            "unit_key": unit_key, "neighbouring": "add/remove one unit",
            "randomness": Seed(1, reproducible=seeded).public_record(),
            "outside_epsilon": list(accounting.OUTSIDE_VOCABULARY)}


def training_entry(sigma=1.0, q=0.01, steps=1000, delta=1e-5, unit="sentence",
                   accountant="rdp", seeded=False):
    """A `finetune --dp --sample-rate q` training entry: the DP unit count's segment,
    then `steps` steps at (σ, q), RDP composition."""
    count = unit_count.count_segment()
    training = {
        "mechanism": "DP-SGD, Poisson-subsampled Gaussian, add/remove one unit",
        "neighbouring": "add/remove one unit; the number of units is not shipped",
        "unit": accounting.TRAINING_UNIT_TEXT[unit], "privacy_unit": unit,
        "unit_key": unit, "trained_parameters": {"kind": "all", "count": 1},
        "clipping": "hooks", "clip_mode": "clip", "processes": 1,
        "accountant": accountant, "delta": delta,
        "noise_multiplier": sigma, "max_grad_norm": 1.0, "steps": steps,
        "sample_rate": q, "target_epsilon": None,
        "calibration": accounting.calibration_record(accountant, None),
        "unit_count": {"mechanism": "ñ = n + N(0, s²)", "noise_std": count[0],
                       "planning_count": 1000.0},
        "composition": accounting.composition_record(accounting.RDP_COMPOSITION, delta),
        "history": [list(count), [sigma, q, steps]],
        "randomness": Seed(1, reproducible=seeded).public_record(),
        "outside_epsilon": list(accounting.OUTSIDE_TRAINING)}
    eps, eps_all, parts = accounting.certify_training(training)
    training.update(epsilon=eps, epsilon_all_accountants=eps_all)
    training["composition"]["parts"] = parts
    return training


def write_model(directory, training, vocabulary=None, earlier=()):
    """privacy.json and manifest.json of a DP model dir in `directory`."""
    vocab = vocabulary or accounting.NO_VOCABULARY
    try:
        total = accounting.compose_certificate(training, vocab, list(earlier),
                                               training_eps=training["epsilon"])
    except accounting.NotComposable as exc:  # an old-style certificate
        total = {"epsilon": None, "delta": None, "composable": False,
                 "reason": str(exc)}
    cert = {"training": training, "vocabulary": vocab,
            "earlier_training": list(earlier), "base_model": {"dp_trainings": 0},
            "total": total}
    manifest = {"kind": "nmtfrag-finetuned-model", "dp": True, "model_files": ["model.pt"],
                "params": {**{k: training[k] for k in (
                    "noise_multiplier", "delta", "steps", "accountant", "sample_rate",
                    "max_grad_norm", "target_epsilon", "privacy_unit")},
                    "logical_batch": None, "batch_schedule": None,
                    "dedup": training["unit_key"] == "distinct-sentence"},
                "privacy": cert, "randomness": training["randomness"]}
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "model.pt").write_bytes(b"a stand-in for the weights")
    cert_files.bind(cert, str(directory))  # the manifest's copy is the same object
    (directory / "privacy.json").write_text(json.dumps(cert))
    (directory / "manifest.json").write_text(json.dumps(manifest))
    return cert


def write_release(directory, epsilon=8.0, delta=1e-5, cap=4, seeded=False):
    """A DP release directory as `extract --dp` writes it: phrase files, privacy.json
    bound to them, and the manifest that carries its copy and the asked parameters."""
    from nmtfrag.fragment.dp_release import DPReleaseParams, calibrate, certificate

    params = DPReleaseParams(epsilon=epsilon, delta=delta, cap=cap)
    randomness = Seed(1, reproducible=seeded).public_record()
    cert = certificate(params, *calibrate(params), randomness)
    cert["release"]["aligner"] = "a public alignment model"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "phrases.de").write_text("<P> das haus </P>\n")
    (directory / "phrases.en").write_text("<P> the house </P>\n")
    cert_files.bind(cert, str(directory))
    manifest = {"kind": "nmtfrag-release", "files": {"src": "phrases.de", "tgt": "phrases.en"},
                "randomness": randomness, "privacy": cert,
                "params": {"dp": {"epsilon": epsilon, "delta": delta, "cap": cap,
                                  "unit": "sentence", "repeat": "count", "weights": "count"}}}
    (directory / "privacy.json").write_text(json.dumps(cert))
    (directory / "manifest.json").write_text(json.dumps(manifest))
    return cert
