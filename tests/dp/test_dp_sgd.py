"""DP-SGD on a tiny fairseq Transformer: exact per-example gradients, clipping, noise
scale, virtual steps, empty batches, refusals."""
import copy
import math
import os

import pytest
import torch

from nmtfrag.dp import batches, fairseq_opacus, sgd

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from fairseq import checkpoint_utils
    from fairseq.data import LanguagePairDataset

    from tinymodel import make_corpus, make_tiny_model_dir
    import fastBPE

    d = make_tiny_model_dir(str(tmp_path_factory.mktemp("tiny")), updates=3)
    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [os.path.join(d, "model.pt")],
        arg_overrides={"data": d, "source_lang": "de", "target_lang": "en"})
    model = models[0].float()
    for m in model.modules():  # exact comparisons need deterministic forward passes
        if isinstance(getattr(m, "p", None), float):
            m.p = 0.0
    bpe = fastBPE.fastBPE(os.path.join(d, "bpecodes"))
    pairs = make_corpus(24, seed=7, min_len=1, max_len=10)
    sd, td = task.source_dictionary, task.target_dictionary
    src = [sd.encode_line(bpe.apply([s])[0], add_if_not_exist=False).long() for s, _ in pairs]
    tgt = [td.encode_line(bpe.apply([t])[0], add_if_not_exist=False).long() for _, t in pairs]
    ds = LanguagePairDataset(src, [len(s) for s in src], sd, tgt, [len(t) for t in tgt], td,
                             left_pad_source=True)
    ds16 = LanguagePairDataset(src[:16], [len(s) for s in src[:16]], sd, tgt[:16],
                               [len(t) for t in tgt[:16]], td, left_pad_source=True)
    ds.first16 = ds16
    return model, ds


def _reference_grads(model, ds, ids, ls=0.1):
    """Loop of single-example backward passes (no hooks): {id: [grad per param]}."""
    ref = {}
    params = [p for p in model.parameters() if p.requires_grad]
    for i in ids:
        model.zero_grad()
        fairseq_opacus.example_losses(model, ds.collater([ds[i]]), ls).sum().backward()
        ref[i] = [p.grad.detach().clone() for p in params]
    model.zero_grad()
    return ref


def check_per_example_grads(model, ds, ids):
    """Assert opacus' per-example gradients of every trained parameter of `model` equal
    a loop of single-example backward passes; return the trained parameter names."""
    model.train()
    batch = ds.collater([ds[i] for i in ids])
    assert batch["id"].tolist() != ids  # the collater re-sorts: we must match by id
    ref = _reference_grads(model, ds, ids)
    gsm = fairseq_opacus.wrap(model)
    gsm.expected_batch_size = len(ids)
    fairseq_opacus.example_losses(model, batch, 0.1).sum().backward()
    params = [p for p in model.parameters() if p.requires_grad]
    got = fairseq_opacus.per_example_grads(gsm, params)
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    scale = max(float(g.abs().max()) for r in ref.values() for g in r)
    checked = 0
    for k, (name, (p, gs)) in enumerate(zip(names, got)):
        assert gs.shape == (len(ids),) + p.shape, name
        for j, i in enumerate(batch["id"].tolist()):
            r = ref[i][k]
            # relative to the parameter's own largest entry; attention key biases have
            # a zero true gradient (softmax cancels them), so they get a floor
            denom = max(float(r.abs().max()), 1e-3 * scale)
            rel = float((gs[j] - r).abs().max()) / denom
            assert rel <= 1e-4, (name, i, rel)
            checked += 1
    assert checked == len(names) * len(ids)
    gsm._close()
    return names


def test_per_example_gradients_equal_single_example_loop(tiny):
    names = check_per_example_grads(copy.deepcopy(tiny[0]), tiny[1], list(range(9)))
    # the shared embedding matrix (encoder, decoder, output projection) is among them
    assert "encoder.embed_tokens.weight" in names


def test_clipping_bounds_every_norm_and_sum_is_exact(tiny):
    model, ds = copy.deepcopy(tiny[0]), tiny[1]
    model.train()
    ids = list(range(8))
    ref = _reference_grads(model, ds, ids)
    C = 0.05
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.0)
    dp = sgd.DPSGD(model, opt, max_grad_norm=C, noise_multiplier=1.0,
                   expected_batch_size=8, label_smoothing=0.1)
    out = dp.accumulate(ds.collater([ds[i] for i in ids]))
    assert (out["norms"] > C).all()  # every example actually needed clipping
    assert (out["clipped_norms"] <= C).all()  # no float32 overshoot (CLIP_MARGIN)
    expect = None
    for i in ids:
        norm = math.sqrt(sum(float(g.double().pow(2).sum()) for g in ref[i]))
        f = min(1.0, C / (norm + 1e-6))
        contrib = [g * f for g in ref[i]]
        expect = contrib if expect is None else [a + b for a, b in zip(expect, contrib)]
    for a, b in zip(dp.summed, expect):
        assert torch.allclose(a.float(), b, rtol=1e-4, atol=1e-7 * C)


def test_noise_has_the_right_scale(tiny):
    model = copy.deepcopy(tiny[0])
    params = [p for p in model.parameters() if p.requires_grad]
    before = [p.detach().clone() for p in params]
    sigma, C, E = 1.3, 0.2, 50.0
    opt = torch.optim.SGD(params, lr=1.0)
    dp = sgd.DPSGD(model, opt, max_grad_norm=C, noise_multiplier=sigma,
                   expected_batch_size=E, seed=123)
    stats = dp.step()  # no examples at all: a noise-only step
    z = torch.cat([((b - p.detach()) * E / (sigma * C)).flatten()
                   for b, p in zip(before, params)]).double()
    n = z.numel()
    assert n > 10000
    assert abs(float(z.mean())) < 4 / math.sqrt(n)
    # std of the sample std of n normals ≈ 1/sqrt(2n)
    assert abs(float(z.std()) - 1.0) < 4 / math.sqrt(2 * n)
    assert stats["noise_norm"] == pytest.approx(float(z.norm()) * sigma * C / E, rel=1e-4)
    assert stats["signal_norm"] == 0.0 and stats["examples"] == 0


@pytest.mark.parametrize("physical", [4, 1])
def test_one_logical_step_in_1_4_16_physical_batches(tiny, physical):
    """16 pairs sampled with q = 1: one logical batch of exactly 16, processed as 1, 4 or
    16 physical batches, must give the same privacy step, noise and update."""
    model0, ds = tiny[0], tiny[1].first16

    def run(pb):
        model = copy.deepcopy(model0)
        recs, hist, _ = sgd.train_dp(model, ds, steps=2, rate_of_step=lambda t: 1.0,
                                     noise_multiplier=0.7, max_grad_norm=0.5,
                                     physical_batch=pb, lr=1e-3, seed=5,
                                     label_smoothing=0.1)
        return model, recs, hist

    m16, r16, h16 = run(16)
    mp, rp, hp = run(physical)
    assert h16 == hp == [(0.7, 1.0, 2)]  # one privacy step per logical batch
    from nmtfrag.dp import accounting
    assert accounting.epsilon(h16, 1e-5) == accounting.epsilon(hp, 1e-5)
    for a, b in zip(r16, rp):
        assert a["examples"] == b["examples"] == 16
        assert a["noise_norm"] == pytest.approx(b["noise_norm"], rel=1e-6)
        assert a["signal_norm"] == pytest.approx(b["signal_norm"], rel=1e-4)
    for (n, a), b in zip(m16.named_parameters(), mp.parameters()):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-6), n


def test_poisson_steps_accumulate_the_same_as_one_batch(tiny):
    model0, ds = tiny
    runs = []
    for pb in (24, 3):
        model = copy.deepcopy(model0)
        recs, hist, _ = sgd.train_dp(model, ds, steps=2, rate_of_step=lambda t: 0.5,
                                     noise_multiplier=0.7, max_grad_norm=0.5,
                                     physical_batch=pb, lr=1e-3, seed=9)
        runs.append((model, recs, hist))
    assert runs[0][2] == runs[1][2] == [(0.7, 0.5, 2)]
    assert [r["examples"] for r in runs[0][1]] == [r["examples"] for r in runs[1][1]]
    for a, b in zip(runs[0][0].parameters(), runs[1][0].parameters()):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-6)


def test_empty_poisson_batch_takes_a_noise_only_step(tiny):
    model = copy.deepcopy(tiny[0])
    before = [p.detach().clone() for p in model.parameters()]
    recs, hist, _ = sgd.train_dp(model, tiny[1], steps=3, rate_of_step=lambda t: 1e-12,
                                 noise_multiplier=1.0, max_grad_norm=1.0,
                                 physical_batch=4, lr=1e-3)
    assert [r["examples"] for r in recs] == [0, 0, 0]
    assert hist == [(1.0, 1e-12, 3)]
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_unsupported_layer_refused():
    from nmtfrag.errors import InputError

    class Odd(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv1d(2, 2, 1)

    with pytest.raises(InputError, match="conv"):
        fairseq_opacus.prepare_model(Odd())


def test_poisson_sampler_rate():
    import numpy as np
    rng = np.random.default_rng(0)
    sizes = [len(batches.poisson_indices(1000, 0.05, rng)) for _ in range(400)]
    assert abs(np.mean(sizes) - 50) < 4 * math.sqrt(50 * 0.95 / 400)
    assert batches.physical_batches([5, 1, 3], 2, sizes={1: 3, 3: 1, 5: 2}) == [[3, 5], [1]]


def test_physical_batches_are_bounded_by_padded_tokens():
    sizes = {0: 10, 1: 10, 2: 12, 3: 30, 4: 100, 5: 11}
    got = batches.physical_batches(range(6), 4, sizes, max_tokens=40)
    assert sorted(i for b in got for i in b) == list(range(6))  # nothing lost or repeated
    assert got == [[0, 1, 5], [2], [3], [4]]  # 3×11 ≤ 40 < 4×12; 100 alone
    for batch in got:
        assert len(batch) == 1 or len(batch) * max(sizes[i] for i in batch) <= 40
    assert batches.physical_batches(range(6), 4, sizes) == [[0, 1, 5, 2], [3, 4]]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    from tinymodel import make_corpus, make_tiny_model_dir, write_parallel

    root = tmp_path_factory.mktemp("dpcli")
    base = make_tiny_model_dir(str(root / "base"), updates=2)
    write_parallel(make_corpus(120, seed=11), str(root / "train"))
    write_parallel(make_corpus(10, seed=12), str(root / "valid"))
    return root, base


def _argv(root, base, out, *extra):
    return ["finetune", "--model", base, "--train", str(root / "train.de"),
            str(root / "train.en"), "--valid-src", str(root / "valid.de"),
            "--valid-tgt", str(root / "valid.en"), "--out", str(root / out),
            "--pretokenized", "--threads", "1", "-q", "--dp", *extra]


def test_finetune_dp_end_to_end(tiny_dir, capsys):
    import json

    from nmtfrag.cli import main
    from nmtfrag.dp import accounting

    root, base = tiny_dir
    assert main(_argv(root, base, "dp", "--target-epsilon", "2", "--delta", "1e-3",
                      "--logical-batch", "30", "--physical-batch", "8",
                      "--dp-steps", "4", "--dp-weight-decay", "0.1")) == 0
    out = root / "dp"
    priv = json.loads((out / "privacy.json").read_text())
    t = priv["training"]
    n_plan = t["unit_count"]["planning_count"]  # the DP count ñ, not n = 120
    assert t["history"] == [[100.0, 1.0, 1], [t["noise_multiplier"], 30 / n_plan, 4]]
    assert t["epsilon"] <= 2.0
    # all parameters: the tied embedding matrix rules out ghost clipping
    assert t["clipping"].startswith("opacus hooks")
    # q came from ñ: the count and the training compose by basic composition
    eps_count = accounting.analytic_gaussian_epsilon(100.0, 1e-4)
    assert t["epsilon"] == pytest.approx(eps_count + t["composition"]["epsilon_train_bound"])
    assert t["accountant"] == "prv"  # σ calibrated with PRV, the default (issue 31, item 8)
    assert accounting.epsilon([tuple(h) for h in t["history"][1:]], 9e-4, "prv") \
        <= 2.0 - eps_count
    assert len((out / "owner" / "train.log").read_text().splitlines()) == 4
    assert not [f for f in os.listdir(out) if f.startswith(".dp-work")]  # no text left
    capsys.readouterr()
    assert main(["privacy", str(out), "--json"]) == 0
    cert = json.loads(capsys.readouterr().out)
    assert cert["total"]["epsilon"] == pytest.approx(t["epsilon"])
    # the output is a model dir that fairseq loads
    from fairseq.models.transformer import TransformerModel
    hub = TransformerModel.from_pretrained(str(out), checkpoint_file="model.pt",
                                           data_name_or_path=".", bpe="fastbpe",
                                           source_lang="de", target_lang="en")
    assert isinstance(hub.translate("haus katze ."), str)


def test_vocabulary_epsilon_composes_into_the_certificate(tiny_dir, tmp_path):
    import json
    import shutil

    from nmtfrag.cli import main

    root, base = tiny_dir
    ext = tmp_path / "ext"
    shutil.copytree(base, ext)  # stands for a `nmtfrag vocab --dp --extend` output
    (ext / "privacy.json").write_text(json.dumps(
        {"vocabulary": {"epsilon": 0.4, "delta": 2e-9}}))
    argv = _argv(root, str(ext), "dpv", "--noise-multiplier", "2.0", "--delta", "1e-3",
                 "--sample-rate", "0.25", "--physical-batch", "30", "--dp-steps", "2",
                 "--dp-freeze-embeddings", "--dp-clipping", "ghost")
    assert main(argv) == 0
    priv = json.loads((root / "dpv" / "privacy.json").read_text())
    assert priv["total"]["epsilon"] == pytest.approx(0.4 + priv["training"]["epsilon"])
    assert priv["total"]["delta"] == pytest.approx(1e-3 + 2e-9)
    man = json.loads((root / "dpv" / "manifest.json").read_text())
    assert man["params"]["trained_parameters"] == {"kind": "all", "frozen": "embeddings"}
    assert man["params"]["trainable_parameters"] > 0
    # untied once the embeddings are frozen: ghost clipping can serve
    assert priv["training"]["clipping"].startswith("opacus ghost clipping")


@pytest.mark.parametrize("extra,msg", [
    (["--noise-multiplier", "1", "--logical-batch", "30"], "δ"),
    (["--noise-multiplier", "1", "--target-epsilon", "3", "--delta", "1e-3",
      "--logical-batch", "30"], "exactly one"),
    (["--noise-multiplier", "1", "--delta", "1e-3", "--logical-batch", "30",
      "--update-freq", "2"], "update-freq"),
    (["--noise-multiplier", "1", "--delta", "0.05", "--sample-rate", "0.25",
      "--dp-steps", "1"], "1/n"),
    (["--target-epsilon", "3", "--delta", "1e-3", "--logical-batch", "500",
      "--dp-steps", "1"], "exceeds"),
    (["--noise-multiplier", "1", "--delta", "1e-3", "--sample-rate", "0.25",
      "--dp-steps", "1", "--dp-clipping", "ghost", "--dp-params", "all"],
     "shared by several layers"),
])
def test_finetune_dp_refuses_void_configurations(tiny_dir, capsys, extra, msg):
    from nmtfrag.cli import main

    root, base = tiny_dir
    assert main(_argv(root, base, "refused", "--overwrite", *extra)) == 2
    assert msg in capsys.readouterr().err


def test_example_losses_sum_to_fairseq_criterion(tiny):
    """Our per-pair losses are fairseq's label-smoothed cross-entropy, split by pair."""
    from argparse import Namespace

    from fairseq.criterions.label_smoothed_cross_entropy import (
        LabelSmoothedCrossEntropyCriterion)

    model, ds = copy.deepcopy(tiny[0]), tiny[1]
    model.eval()
    sample = ds.collater([ds[i] for i in range(10)])
    task = Namespace(target_dictionary=ds.tgt_dict)
    crit = LabelSmoothedCrossEntropyCriterion(task, sentence_avg=False, label_smoothing=0.1)
    with torch.no_grad():
        ref, _, _ = crit(model, sample, reduce=True)
        ours = fairseq_opacus.example_losses(model, sample, 0.1)
    assert ours.shape == (10,)
    assert float(ours.sum()) == pytest.approx(float(ref), rel=1e-5)


def test_dp_device_choice_and_process_count():
    import argparse

    import torch

    from nmtfrag.dp import workers

    from nmtfrag.cli import dp_options as cli_args
    from nmtfrag.errors import InputError

    assert workers.dp_device("cpu") == torch.device("cpu")
    if not torch.cuda.is_available():
        with pytest.raises(InputError, match="no CUDA device"):
            workers.dp_device("cuda")
    args = argparse.Namespace(update_freq=1, fp16=False, resume=False, gpus=4,
                              world_size=2, device="cuda")
    with pytest.raises(InputError, match="disagree"):
        cli_args.check_compatible(args)
    args.world_size = None
    cli_args.check_compatible(args)
    assert cli_args.world_size(args) == 4  # one process per GPU
    args.gpus, args.world_size, args.device = 1, 3, "cpu"
    cli_args.check_compatible(args)
    assert cli_args.world_size(args) == 3


def test_to_device_moves_every_tensor():
    import torch

    from nmtfrag.dp.sgd import to_device

    sample = {"id": torch.arange(3), "net_input": {"src_tokens": torch.ones(3, 2)},
              "nsentences": 3}
    moved = to_device(sample, torch.device("cpu"))
    assert moved["nsentences"] == 3 and torch.equal(moved["id"], sample["id"])
