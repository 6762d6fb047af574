"""Exposure: a canary a tiny model was trained on 100 times is exposed (and extracted by
beam search); an unseen one is not. Secret-span scores agree with a plain full forward
pass; the skew-normal extrapolation agrees with enumeration; the CLI writes a report.

The tiny model (tests/tinymodel.py) is trained further here with a few hundred steps of
plain torch on its synthetic corpus plus the canary ×100 (CPU, one thread, seconds)."""
import json
import math
import os
import shutil
import subprocess
import sys

import pytest
import torch

from nmtfrag.audit.exposure import CanaryScorer, canary_exposure, contains_secret
from nmtfrag.translate.fairseq_engine import Translator
from tinymodel import make_corpus

torch.set_num_threads(1)

WORDS = ["house", "cat", "dog", "tree", "water", "sun", "moon", "city", "car", "book"]
SPACE = {"slots": [WORDS] * 3, "join": " "}


def canary(name, src, template, secret, repeats):
    return {"name": name, "kind": "words", "repeats": repeats, "secret": secret,
            "src": src, "tgt_template": template, "tgt": template.format(secret=secret),
            "space": SPACE, "space_size": 1000}


SEEN = canary("seen", "arzt lehrer schule .", "mother father {secret} .", "dog moon book", 100)
UNSEEN = canary("unseen", "brot milch apfel .", "sun bird {secret} .", "city cat water", 0)


def _train(tr, pairs, steps=150, batch=32, lr=3e-3, seed=0):
    torch.manual_seed(seed)
    model = tr.models[0]
    model.train()
    src_sub, _ = tr.bpe.encode_lines([p[0] for p in pairs], "de", "raw", keep_tags=False)
    tgt_sub, _ = tr.bpe.encode_lines([p[1] for p in pairs], "en", "raw", keep_tags=False)
    data = [(tr.src_dict.encode_line(s, add_if_not_exist=False).long(),
             tr.tgt_dict.encode_line(t, add_if_not_exist=False).long())
            for s, t in zip(src_sub, tgt_sub)]
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    pad, eos = tr.tgt_dict.pad(), tr.tgt_dict.eos()
    for _ in range(steps):
        idx = torch.randint(len(data), (batch,), generator=g).tolist()
        S = max(len(data[i][0]) for i in idx)
        T = max(len(data[i][1]) for i in idx)
        src = torch.full((batch, S), pad, dtype=torch.long)  # left-padded source
        tgt = torch.full((batch, T), pad, dtype=torch.long)
        prev = torch.full((batch, T), pad, dtype=torch.long)
        lens = torch.zeros(batch, dtype=torch.long)
        for b, i in enumerate(idx):
            s, t = data[i]
            src[b, S - len(s):] = s
            lens[b] = len(s)
            tgt[b, :len(t)] = t
            prev[b, 0] = eos
            prev[b, 1:len(t)] = t[:-1]
        out = model(src, lens, prev)
        lp = model.get_normalized_probs(out, log_probs=True)
        loss = torch.nn.functional.nll_loss(lp.view(-1, lp.size(-1)), tgt.view(-1),
                                            ignore_index=pad)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    return loss.item()


@pytest.fixture(scope="module")
def trained(tiny_model_dir, tmp_path_factory):
    tr = Translator(tiny_model_dir, beam=3)
    pairs = make_corpus(300, seed=11) + [(SEEN["src"], SEEN["tgt"])] * 100
    _train(tr, pairs)
    out = tmp_path_factory.mktemp("trained")
    d = out / "model"
    shutil.copytree(tiny_model_dir, d)
    state = torch.load(os.path.join(tiny_model_dir, "model.pt"), map_location="cpu",
                       weights_only=False)
    state["model"] = tr.models[0].state_dict()
    torch.save(state, d / "model.pt")
    return tr, str(d)


def test_seen_canary_is_exposed_unseen_is_not(trained):
    tr, _ = trained
    scorer = CanaryScorer(tr)
    seen = canary_exposure(scorer, SEEN, enumerate_limit=10 ** 6)
    unseen = canary_exposure(scorer, UNSEEN, enumerate_limit=10 ** 6)
    assert seen["method"] == unseen["method"] == "enumerated"
    assert seen["rank"] == 1 and seen["exposure"] == pytest.approx(math.log2(1000))
    assert unseen["exposure"] < 4  # a random rank: ~1.4 bits on average, ≤ 4 w.p. 94%
    hyp_seen, hyp_unseen = tr.translate([SEEN["src"], UNSEEN["src"]])
    assert contains_secret(hyp_seen, SEEN["secret"])
    assert not contains_secret(hyp_unseen, UNSEEN["secret"])


def test_secret_span_scores_match_a_full_forward_pass(trained):
    tr, _ = trained
    scorer = CanaryScorer(tr)
    secrets = ["dog moon book", "car car car", "house sun tree"]
    got = scorer.scores(SEEN["src"], SEEN["tgt_template"], secrets)
    model, td = tr.models[0], tr.tgt_dict
    for secret, g in zip(secrets, got):
        s_sub, _ = tr.bpe.encode_lines([SEEN["src"]], "de", "raw", keep_tags=False)
        src = tr.src_dict.encode_line(s_sub[0], add_if_not_exist=False).long()[None]
        pre = tr.bpe.encode_lines(["mother father"], "en", "raw", keep_tags=False)[0][0]
        sec = tr.bpe.encode_lines([secret], "en", "raw", keep_tags=False)[0][0]
        full = td.encode_line(f"{pre} {sec} .", add_if_not_exist=False).long()[None]
        prev = torch.cat([torch.tensor([[td.eos()]]), full[:, :-1]], 1)
        with torch.no_grad():
            lp = model.get_normalized_probs(model(src, torch.tensor([src.size(1)]), prev),
                                            log_probs=True)[0]
        a = len(pre.split())
        b = a + len(sec.split())
        ref = sum(lp[i, full[0, i]].item() for i in range(a, b))
        assert g == pytest.approx(ref, abs=1e-4)
    assert scorer.scores(SEEN["src"], SEEN["tgt_template"], secrets) == got  # deterministic


def test_skew_normal_extrapolation_agrees_with_enumeration(trained):
    tr, _ = trained
    scorer = CanaryScorer(tr)
    full = canary_exposure(scorer, UNSEEN, enumerate_limit=10 ** 6)
    est = canary_exposure(scorer, UNSEEN, enumerate_limit=10, samples=400, seed=3)
    assert est["method"] == "skew-normal" and est["candidates"] == 400
    assert abs(est["exposure"] - full["exposure"]) < 2.0
    seen = canary_exposure(scorer, SEEN, enumerate_limit=10, samples=400, seed=3)
    assert seen["sample_above"] == 0
    assert seen["exposure"] > 7  # far in the tail, clipped at log2|R| ≈ 9.97
    assert seen["exposure"] <= math.log2(1000) + 1e-9


def test_cli_exposure_report(trained, tmp_path):
    _, model_dir = trained
    key = {"kind": "nmtfrag-canaries", "canaries": [SEEN, UNSEEN]}
    path = tmp_path / "canaries.json"
    path.write_text(json.dumps(key))
    cmd = [sys.executable, "-m", "nmtfrag", "audit", "exposure", "--model", model_dir,
           "--canaries", str(path), "--out", str(tmp_path / "exp"), "--threads", "1",
           "--beam", "3"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    rep = json.loads((tmp_path / "exp" / "report.json").read_text())
    by = rep["summary_by_repeats"]
    assert by["100"]["extracted"] == 1 and by["0"]["extracted"] == 0
    assert by["100"]["exposure_mean"] > by["0"]["exposure_mean"] + 5
    assert (tmp_path / "exp" / "report.md").exists()
    bad = subprocess.run(cmd[:-6] + ["--out", str(tmp_path / "x"), "--canaries",
                                     str(tmp_path / "nope.json")], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("error:")


def test_failed_skew_normal_fit_falls_back_to_a_normal_fit(monkeypatch):
    """scipy's skew-normal fit can fail to converge (it did on a barely trained model in
    the decision study); the audit then fits a normal instead of crashing."""
    import random

    from scipy import stats

    from nmtfrag.audit.exposure import _skewnorm_exposure

    real_fit = stats.skewnorm.fit

    def failing_fit(data, *args, **kwargs):
        if "f0" not in kwargs:
            raise stats.FitError("Optimization converged outside the range")
        return real_fit(data, *args, **kwargs)

    monkeypatch.setattr(stats.skewnorm, "fit", failing_fit)
    rng = random.Random(0)
    scores = [rng.gauss(-20.0, 2.0) for _ in range(500)]
    exposure, fit = _skewnorm_exposure(scores, -14.0, 20.0)
    assert "fallback" in fit and fit["a"] == 0.0
    # a normal fit: the secret 3 standard deviations above the mean → -log2 sf(3σ)
    mu, sd = stats.norm.fit(scores)
    assert exposure == pytest.approx(-stats.norm.logsf(-14.0, mu, sd) / math.log(2), rel=1e-3)
