"""DP-SGD across 2 CPU processes (torch.distributed, gloo): the same parameters and the
same privacy history as one process with the same seed and samples; with secret
randomness both processes still draw the same sample and noise (rank 0's seed is
broadcast), so they stay identical."""
import copy
import os

import pytest
import torch

from nmtfrag.dp import sgd
from nmtfrag.dp.workers import leave_process_group
from test_dp_sgd import tiny, tiny_dir  # noqa: F401 (fixtures)

STEPS, RATE = 3, 0.5


def _rate(step):
    return RATE


def _train_kwargs(seed):
    return dict(steps=STEPS, rate_of_step=_rate, noise_multiplier=0.8, max_grad_norm=0.05,
                physical_batch=3, lr=1e-3, seed=seed, label_smoothing=0.1)


def _worker(rank, world, init_file, model, ds, out_dir, seed, units):
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world)
    # spawn hands CPU tensors over in shared memory: without a private copy both
    # processes would update one set of weights
    model = copy.deepcopy(model)
    try:
        records, history, _ = sgd.train_dp(model, ds, units=units, **_train_kwargs(seed))
        torch.save({"params": {n: p.detach().clone() for n, p in model.named_parameters()},
                    "records": records, "history": history},
                   os.path.join(out_dir, f"rank{rank}.pt"))
    except BaseException:
        dist.destroy_process_group()
        raise
    leave_process_group()


def _run_two_processes(tmp_path, model, ds, seed, units=None):
    import torch.multiprocessing as mp

    mp.spawn(_worker, args=(2, str(tmp_path / "init"), model, ds, str(tmp_path), seed, units),
             nprocs=2, join=True)
    return [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in (0, 1)]


@pytest.mark.parametrize("units", [None, [[0, 5, 7], [1], [2, 3, 4, 8], [6, 9], [10, 11]]])
def test_two_processes_equal_one_process_with_the_same_seed(tiny, tmp_path, units):
    model, ds = tiny
    model = copy.deepcopy(model).train()
    single = copy.deepcopy(model)
    records, history, _ = sgd.train_dp(single, ds, units=units, **_train_kwargs(seed=3))
    r0, r1 = _run_two_processes(tmp_path, model, ds, seed=3, units=units)
    assert r0["history"] == history == [(0.8, RATE, STEPS)]  # the same accounting
    assert [r["examples"] for r in r0["records"]] == [r["examples"] for r in records]
    assert [r["units"] for r in r0["records"]] == [r["units"] for r in records]
    moved = 0
    for name, p in single.named_parameters():
        assert torch.allclose(r0["params"][name], p.detach(), rtol=1e-4, atol=1e-6), name
        assert torch.equal(r0["params"][name], r1["params"][name]), name
        moved += not torch.equal(p.detach(), model.state_dict()[name])
    assert moved  # training did change the parameters


def test_secret_randomness_is_shared_by_the_processes(tiny, tmp_path):
    model = copy.deepcopy(tiny[0]).train()
    r0, r1 = _run_two_processes(tmp_path, model, tiny[1], seed=None)
    for name in r0["params"]:
        assert torch.equal(r0["params"][name], r1["params"][name]), name
    # and it is not the seeded run's randomness
    single = copy.deepcopy(model)
    sgd.train_dp(single, tiny[1], **_train_kwargs(seed=3))
    assert any(not torch.allclose(r0["params"][n], p.detach(), atol=1e-6)
               for n, p in single.named_parameters())


def test_finetune_dp_in_two_processes_from_the_command_line(tiny_dir, capsys):
    """`nmtfrag finetune --dp --world-size 2` (gloo): the same ε and certificate as one
    process, a loadable model, and one train.log line per step."""
    import json

    from nmtfrag.cli import main
    from test_dp_sgd import _argv

    root, base = tiny_dir
    common = ["--noise-multiplier", "1.0", "--delta", "1e-3", "--sample-rate", "0.25",
              "--physical-batch", "8", "--dp-steps", "2", "--dp-params", "lora",
              "--lora-rank", "2"]
    assert main(_argv(root, base, "dp1", *common)) == 0
    # ghost clipping in each process (hooks in the single one: the same mechanism)
    assert main(_argv(root, base, "dp2", *common, "--world-size", "2",
                      "--dp-clipping", "ghost")) == 0
    t1 = json.loads((root / "dp1" / "privacy.json").read_text())["training"]
    t2 = json.loads((root / "dp2" / "privacy.json").read_text())["training"]
    assert t2["processes"] == 2 and t1["processes"] == 1
    assert t2["clipping"].startswith("opacus ghost") and t1["clipping"].startswith("opacus hooks")
    assert t2["epsilon"] == pytest.approx(t1["epsilon"]) and t2["history"] == t1["history"]
    assert len((root / "dp2" / "owner" / "train.log").read_text().splitlines()) == 2
    from nmtfrag.model_dir import load_state
    s1 = load_state(str(root / "dp1" / "model.pt"))["model"]
    s2 = load_state(str(root / "dp2" / "model.pt"))["model"]
    assert set(s1) == set(s2) and not any("lora_" in k for k in s2)
    base_state = load_state(f"{base}/model.pt")["model"]
    assert any(not torch.equal(s2[k].float(), base_state[k].float()) for k in s2)
