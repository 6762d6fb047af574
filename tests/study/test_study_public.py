"""A study's public-text cells end to end on a tiny model: a mixed cell beside its
public-only control (the same public pairs, tested against each other), a packed release,
a DP-SGD cell with public pairs in every batch at an unchanged ε, a composed cell (a DP
release and public pairs, then DP-SGD) at its total ε, and every cell decoded again with a
length penalty chosen on public validation text."""
import copy
import json
import re

import pytest

from nmtfrag.study.public_section import same_public_training

from test_study_run import _study
from tinymodel import make_corpus, write_domain, write_parallel

CONFIG = """
title = "toy public study"
seed = 3
[model]
dir = "{model}"
[data]
train = "{data}/toy/train"
valid = "{data}/toy/valid"
test = "{data}/toy/test"
public_train = "{root}/public"
public_align = "{root}/public"
public_valid = "{root}/public-valid"
[decode]
engine = "fairseq"
beam = 2
test_lines = 20
length_penalty = "public"
length_penalty_lines = 15
[training]
lr = 0.0005
max_tokens = 600
patience = 1
max_epochs = 2
[audit]
canaries = false
membership = false
[machine]
threads = 2
jobs = 2
[[cell]]
name = "len4-tag-pub"
approach = "phrases"
tags = true
public_share = 0.5
[[cell]]
name = "ctl"
approach = "public"
like = "len4-tag-pub"
[[cell]]
name = "packed"
approach = "phrases"
tags = true
pack = "public"
public_share = 0.5
[[cell]]
name = "dp8-pub"
approach = "dp-sgd"
epsilon = 8
delta = 1e-3
seeded = true
public_batch = 20
options = ["--dp-steps", "2", "--allow-few-units"]
[[cell]]
name = "composed"
approach = "dp-composed"
epsilon = 8
release_epsilon = 3
delta = 1e-3
tags = true
passes = 1
public_share = 0.5
seeded = true
options = ["--dp-steps", "2", "--allow-few-units", "--sample-rate", "0.2"]
[[cell]]
name = "dp8-ctl"
approach = "public"
like = "dp8-pub"
[[cell]]
name = "composed-ctl"
approach = "public"
like = "composed"
"""


@pytest.fixture(scope="module")
def study(tiny_model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("pubstudy")
    data = write_domain(root / "data", "toy", (150, 20, 30), seed=10)
    write_parallel(make_corpus(800, seed=99, min_len=5, max_len=12), str(root / "public"))
    write_parallel(make_corpus(30, seed=98), str(root / "public-valid"))
    config = root / "study.toml"
    config.write_text(CONFIG.format(model=tiny_model_dir, data=data, root=root),
                      encoding="utf-8")
    out = root / "out"
    proc = _study("run", str(config), "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((out / "report" / "report.json").read_text())
    return out, {r["name"]: r for r in report["rows"]}


def _train_pairs(out, cell):
    man = json.loads((out / "cells" / cell / "finetune" / "manifest.json").read_text())
    return man


def test_a_mixed_cell_and_its_control_train_on_the_same_public_pairs(study):
    out, rows = study
    mixed, ctl = _train_pairs(out, "len4-tag-pub"), _train_pairs(out, "ctl")
    assert abs(mixed["params"]["public_train"]["share"] - 0.5) <= 0.01
    assert ctl["params"]["public_train"]["only"] is True
    assert ctl["params"]["public_train"]["pairs"] == mixed["params"]["public_train"]["pairs"]
    assert ctl["counts"]["train"]["pairs"] == ctl["params"]["public_train"]["pairs"]
    r = rows["len4-tag-pub"]
    assert r["control"]["name"] == "ctl" and r["control"]["p_value"] is not None
    assert r["control"]["other_bleu"] == pytest.approx(rows["ctl"]["bleu"], abs=0.01)
    md = (out / "report" / "report.md").read_text()
    assert "## Public text beside the owner's material" in md
    assert "public pairs alone (the control of len4-tag-pub)" in md


def test_a_packed_cell_packs_its_release_and_says_the_guarantee_is_unchanged(study):
    out, rows = study
    pack = _train_pairs(out, "packed")["params"]["pack"]
    assert pack["lengths_from"] == "public" and pack["examples"] < pack["fragments"]
    assert rows["packed"]["pack"]["examples"] == pack["examples"]


def test_a_packed_cell_on_the_same_public_draw_is_tested_against_that_control(study):
    # the control is declared for len4-tag-pub (like); the packed cell drew the same
    # public pairs under the same training rule, so its records make it its control too
    out, rows = study
    r = rows["packed"]
    assert r["control"]["name"] == "ctl" and r["control"]["by_records"] is True
    assert r["control"]["other_bleu"] == pytest.approx(rows["ctl"]["bleu"], abs=0.01)
    assert rows["len4-tag-pub"]["control"]["by_records"] is False
    md = (out / "report" / "report.md").read_text()
    assert "| ctl (by records) |" in md and "the control of len4-tag-pub, packed" in md
    assert "By records (packed)" in md


def _perturbed(man, *path, value):
    man = copy.deepcopy(man)
    d = man
    for k in path[:-1]:
        d = d[k]
    d[path[-1]] = value
    return man


def test_a_control_is_found_by_records_only_for_the_same_draw_and_training_rule(study):
    out, _ = study
    mixed, ctl = _train_pairs(out, "len4-tag-pub"), _train_pairs(out, "ctl")
    assert same_public_training(mixed, ctl)
    # the owner's material and its shaping may differ: that is what the control leaves out
    assert same_public_training(_perturbed(mixed, "params", "pack", value={"examples": 3}),
                                ctl)
    assert same_public_training(_perturbed(mixed, "params", "train", value="other"), ctl)
    # anything else is another run, not this cell's control
    for path, value in [(("params", "lr"), 0.001), (("params", "seed"), 77),
                        (("params", "patience"), 9), (("params", "validate_every"), 13),
                        (("params", "public_train", "pairs"), 1),
                        (("params", "public_train", "min_words"), 15),
                        (("inputs_sha256", "public_src"), "0" * 64),
                        (("inputs_sha256", "model"), "0" * 64)]:
        assert not same_public_training(_perturbed(mixed, *path, value=value), ctl), path
    assert not same_public_training(ctl, ctl)  # a control is no mixed cell
    assert not same_public_training(mixed, mixed)  # a mixed cell is no control


def test_dp_sgd_with_public_pairs_keeps_its_epsilon_and_names_them(study):
    out, rows = study
    priv = json.loads((out / "cells" / "dp8-pub" / "finetune" / "privacy.json").read_text())
    assert priv["training"]["public_data"]["pairs_per_step"] == 20
    assert rows["dp8-pub"]["epsilon_stated"] == pytest.approx(8, rel=0.02)


def test_every_cell_is_decoded_again_with_a_penalty_chosen_on_public_text(study):
    out, rows = study
    for name, r in rows.items():
        chosen = json.loads((out / "cells" / name / "lenpen" / "manifest.json").read_text())
        assert chosen["params"]["lines"] == 15 and chosen["params"]["src"].startswith(
            "public-valid")
        assert r["lp"]["lenpen"] == chosen["lenpen"] and r["lp"]["bleu"] is not None
        argv = (out / "cells" / name / "logs" / "evaluate-lp.log").read_text()
        assert "--lenpen-from" in argv
    md = (out / "report" / "report.md").read_text()
    assert "## With a length penalty chosen on public text" in md


def test_a_composed_cell_spends_its_total_epsilon_over_release_and_training(study):
    out, rows = study
    cell = out / "cells" / "composed"
    release = json.loads((cell / "release" / "privacy.json").read_text())
    warm = json.loads((cell / "warm-start" / "privacy.json").read_text())
    dp = json.loads((cell / "finetune" / "privacy.json").read_text())
    assert release["release"]["epsilon"] == pytest.approx(3, rel=1e-3)
    assert warm["released_from"] == [release["release"]]
    assert dp["earlier_releases"] == [release["release"]]
    assert dp["total"]["epsilon"] == pytest.approx(8, rel=0.02)
    assert dp["total"]["delta"] == pytest.approx(1e-3)
    assert rows["composed"]["epsilon_stated"] == pytest.approx(8, rel=0.02)
    assert "then DP-SGD" in rows["composed"]["approach"]
    assert rows["composed"]["reconstruction"]["max_len"] == 4


def test_dp_cells_with_public_pairs_are_tested_against_their_public_only_controls(study):
    """DP-SGD's control runs its planned steps on the public pairs alone (no owner pair,
    no noise, no certificate); the composed cell's is its warm start on the public pairs
    alone; both are tested against their cell on the same test lines."""
    out, rows = study
    ctl = _train_pairs(out, "dp8-ctl")
    assert ctl["not_private"]["not_private"] == "public-only control: not private"
    log = (out / "cells" / "dp8-ctl" / "finetune" / "owner" / "train.log").read_text()
    steps = [json.loads(ln) for ln in log.splitlines() if ln.strip()]
    assert len(steps) == 2 and all(s["signal_norm"] == 0 and s["noise_norm"] == 0
                                   for s in steps)
    assert not (out / "cells" / "dp8-ctl" / "finetune" / "privacy.json").exists()
    comp = _train_pairs(out, "composed-ctl")["params"]["public_train"]
    warm = json.loads((out / "cells" / "composed" / "warm-start" / "manifest.json").read_text())
    assert comp["only"] is True and comp["pairs"] == warm["params"]["public_train"]["pairs"]
    for cell, control in (("dp8-pub", "dp8-ctl"), ("composed", "composed-ctl")):
        assert rows[cell]["control"]["name"] == control
        assert rows[cell]["control"]["p_value"] is not None
    md = (out / "report" / "report.md").read_text()
    assert "| dp8-pub | – | 20 a step |" in md
    assert "run for DP-SGD's plan" in rows["dp8-ctl"]["privacy"]
    assert rows["dp8-ctl"]["ended"] == "its DP plan" and rows["dp8-ctl"]["updates"] == 2
    assert rows["dp8-ctl"].get("passes") is None  # no owner pair: no pass over them
    # its public pairs are its warm start's (half its target tokens, to the pair)
    assert re.search(r"\| composed \| (49\.[5-9]|50\.[0-4])% \| [1-9]", md)
    assert rows["composed-ctl"]["ended"].startswith("fixed plan (1 pass")
