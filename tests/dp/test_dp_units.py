"""Document-level DP and the façade: a document's gradient is the sum over its pairs,
clipped once (also when its pairs span physical batches); Poisson sampling and the
accountant count documents; too few documents are refused; DP with LoRA through the
façade writes a plain model dir whose certificate names the unit and the trained set."""
import copy
import json
import math

import pytest
import torch

from nmtfrag.dp import sgd
from nmtfrag.dp.batches import unit_batches
from nmtfrag.dp.engine import DPConfig, FineTuneJob, dp_finetune, units_of_rows
from nmtfrag.errors import InputError
from nmtfrag.train.trainable import TrainableSet
from test_dp_sgd import _argv, _reference_grads, tiny, tiny_dir  # noqa: F401 (fixtures)

torch.set_num_threads(1)


@pytest.mark.parametrize("physical,max_tokens", [(1, None), (3, None), (16, None), (16, 40)])
def test_document_gradient_is_the_clipped_sum_of_its_pairs(tiny, physical, max_tokens):
    model, ds = copy.deepcopy(tiny[0]), tiny[1]
    model.train()
    units = [[0, 5, 7], [1], [2, 3, 4, 8], [6, 9]]
    ref = _reference_grads(model, ds, range(10))
    C = 0.05
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.0)
    dp = sgd.DPSGD(model, opt, max_grad_norm=C, noise_multiplier=1.0,
                   expected_batch_size=4, label_smoothing=0.1)
    sizes = ds.src_sizes + ds.tgt_sizes
    batches = list(unit_batches([0, 1, 2, 3], units, physical, sizes, max_tokens))
    if physical == 3:  # documents do span physical batches here
        assert any(len({uo[r] for r in rows}) > 1 for rows, uo in batches)
    if max_tokens:  # the token bound splits what 16 rows would allow, documents too
        spans = [sum(1 for rows, uo in batches if u in {uo[r] for r in rows})
                 for u in range(len(units))]
        assert max(spans) > 1
        assert all(len(rows) * max(sizes[i] for i in rows) <= max_tokens or len(rows) == 1
                   for rows, _ in batches)
    for rows, unit_of in batches:
        dp.accumulate(ds.collater([ds[i] for i in rows]), unit_of)
        dp.close_units(keep=unit_of[rows[-1]])
    dp.close_units()
    expect, norms = None, []
    for rows in units:
        doc = [sum(ref[i][k] for i in rows) for k in range(len(ref[0]))]
        norm = math.sqrt(sum(float(g.double().pow(2).sum()) for g in doc))
        norms.append(norm)
        part = [g * min(1.0, C / (norm + 1e-6)) for g in doc]
        expect = part if expect is None else [a + b for a, b in zip(expect, part)]
    assert min(norms) > C  # every document needed clipping
    for a, b in zip(dp.summed, expect):
        assert torch.allclose(a.float(), b, rtol=1e-4, atol=1e-7 * C)
    assert sorted(dp.example_stats) == [0, 1, 2, 3] and not dp.open_units


def test_units_of_rows_follow_the_corpus_lines():
    # rows 0..4 come from corpus lines 0, 2, 3, 5, 6 (lines 1 and 4 were skipped)
    docs = ["a", "a", "b", "a", "c", "c", "b"]
    assert units_of_rows([0, 2, 3, 5, 6], docs) == [[0, 2], [1, 4], [3]]


def _docs(root, n_docs, n_lines=120):
    path = root / f"docs{n_docs}.txt"
    path.write_text("".join(f"doc{i * n_docs // n_lines}\n" for i in range(n_lines)))
    return str(path)


def test_too_few_documents_are_refused_with_the_cost(tiny_dir, capsys):
    from nmtfrag.cli import main

    root, base = tiny_dir
    rc = main(_argv(root, base, "docs-refused", "--target-epsilon", "8", "--delta", "1e-3",
                    "--logical-batch", "4", "--dp-steps", "3", "--privacy-unit", "document",
                    "--documents", _docs(root, 17)))
    err = capsys.readouterr().err
    assert rc == 2 and "only 17 documents" in err and "σ = " in err
    assert "--allow-few-units" in err
    assert not (root / "docs-refused" / "model.pt").exists()
    # a documents file that does not match the training data
    (root / "short-docs.txt").write_text("d1\nd2\n")
    rc = main(_argv(root, base, "docs-bad", "--target-epsilon", "8", "--delta", "1e-3",
                    "--logical-batch", "4", "--dp-steps", "1", "--privacy-unit", "document",
                    "--documents", str(root / "short-docs.txt")))
    assert rc == 2 and "one document id per training line" in capsys.readouterr().err
    # a documents file that is not UTF-8: one error line naming it, no traceback
    (root / "latin1-docs.txt").write_bytes("dök\n".encode("latin-1") * 120)
    rc = main(_argv(root, base, "docs-latin1", "--target-epsilon", "8", "--delta", "1e-3",
                    "--logical-batch", "4", "--dp-steps", "1", "--privacy-unit", "document",
                    "--documents", str(root / "latin1-docs.txt")))
    err = capsys.readouterr().err
    assert rc == 2 and "latin1-docs.txt line 1: invalid UTF-8" in err


def test_document_level_lora_through_the_facade(tiny_dir, tmp_path):
    root, base = tiny_dir
    job = FineTuneJob(model=base, train=(str(root / "train.de"), str(root / "train.en")),
                      valid_src=str(root / "valid.de"), valid_tgt=str(root / "valid.en"),
                      out=str(tmp_path / "doc-lora"), pretokenized=True, threads=1,
                      quiet=True)
    config = DPConfig(delta=1e-3, target_epsilon=4.0, logical_batch=6, physical_batch=8,
                      steps=3, unit="document", documents=_docs(root, 20),
                      allow_few_units=True, seed=5,
                      params=TrainableSet("lora", lora_rank=2, lora_modules="q,v"))
    summary = dp_finetune(job, config)
    assert summary["epsilon"] <= 4.0
    priv = json.loads((tmp_path / "doc-lora" / "privacy.json").read_text())
    t = priv["training"]
    assert t["privacy_unit"] == "document" and "n_units" not in t
    owner = json.loads((tmp_path / "doc-lora" / "owner" / "manifest.json").read_text())
    assert owner["units"]["n"] == 20
    n_plan = t["unit_count"]["planning_count"]  # ñ: q counts documents, never n
    assert t["history"] == [[100.0, 1.0, 1], [t["noise_multiplier"], 6 / n_plan, 3]]
    assert t["trained_parameters"]["kind"] == "lora"
    assert "document" in t["unit"]
    from nmtfrag.model_dir import load_state
    state = load_state(str(tmp_path / "doc-lora" / "model.pt"))["model"]
    assert not any("lora_" in k for k in state)  # adapters merged: a plain model
    log = [json.loads(ln) for ln in
           (tmp_path / "doc-lora" / "owner" / "train.log").read_text().splitlines()]
    assert all(r["units"] <= 20 for r in log) and any(r["examples"] > r["units"] for r in log)


def test_config_refusals():
    with pytest.raises(InputError, match="needs --documents"):
        DPConfig(delta=1e-5, noise_multiplier=1.0, sample_rate=0.1, unit="document").check()
    with pytest.raises(InputError, match="--dedup"):
        DPConfig(delta=1e-5, noise_multiplier=1.0, sample_rate=0.1, unit="document",
                 documents="d.txt", dedup=True).check()
    with pytest.raises(InputError, match="exactly one"):
        DPConfig(delta=1e-5, logical_batch=8).check()


def test_privacy_command_shows_unit_and_trained_set(tiny_dir, tmp_path, capsys):
    from nmtfrag.cli import main

    root, base = tiny_dir
    assert main(_argv(root, base, "lora-cert", "--noise-multiplier", "1.5", "--delta", "1e-3",
                      "--sample-rate", "0.25", "--physical-batch", "16", "--dp-steps", "1",
                      "--dp-params", "lora", "--lora-rank", "2")) == 0
    capsys.readouterr()
    assert main(["privacy", str(root / "lora-cert")]) == 0
    out = capsys.readouterr().out
    assert "unit      one training sentence pair" in out
    assert "trained   kind lora, rank 2, alpha 16.0" in out and "count" in out
    assert "clipping  opacus hooks" in out
    assert " units" not in out.split("noise multiplier")[1].splitlines()[0]
    assert "rdp" in out and "prv" in out
    assert "unit count: ñ = n + N(0, 100²)" in out
