"""Runs of a cell end to end on a tiny model: each run a cell of its own with a new
training seed, a new release draw and new (seeded here) DP noise; a seeded study's runs
are reproducible; the report puts the runs together and tests with run-to-run variance."""
import json

import pytest

from nmtfrag.fileio import sha256_file
from nmtfrag.study.config import base_name
from test_study_run import _study
from tinymodel import write_domain

CONFIG = """
title = "toy runs"
seed = 3
compare = [["len4-tag", "dp8"], ["sent", "len4-tag"], ["len4-tag", "absent"]]
[model]
dir = "{model}"
[data]
train = "{data}/toy/train"
valid = "{data}/toy/valid"
test = "{data}/toy/test"
[decode]
engine = "fairseq"
beam = 2
test_lines = 20
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
name = "sent"
approach = "sentences"
runs = 2
[[cell]]
name = "len4-tag"
approach = "phrases"
tags = true
runs = 2
[[cell]]
name = "dp8"
approach = "dp-sgd"
epsilon = 8
delta = 1e-3
seeded = true
runs = 2
options = ["--dp-steps", "2", "--allow-few-units"]
[[cell]]
name = "absent"
approach = "sentences"
"""


# "absent" is never run: a comparison with a cell not evaluated says so
CELLS = ("sent", "sent.r2", "len4-tag", "len4-tag.r2", "dp8", "dp8.r2")
# the second study runs only the runs whose reproducibility is checked: a run's seed,
# release draw and noise must not depend on which other cells the study runs
REPEATED = ("len4-tag.r2", "dp8.r2")


def _run(root, model, name, cells):
    data = write_domain(root / "data", "toy", (120, 20, 30), seed=10)
    config = root / f"{name}.toml"
    config.write_text(CONFIG.format(model=model, data=data), encoding="utf-8")
    out = root / name
    proc = _study("run", str(config), "--out", str(out),
                  *[a for c in cells for a in ("--cell", c)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def studies(tiny_model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return (_run(root, tiny_model_dir, "a", CELLS),
            _run(root, tiny_model_dir, "b", REPEATED))


def _hash(out, cell, step, name):
    return sha256_file(str(out / "cells" / cell / step / name))


def test_two_runs_differ_in_seed_release_draw_and_noise(studies):
    a, _ = studies
    assert _hash(a, "len4-tag", "release", "phrases.en") != \
        _hash(a, "len4-tag.r2", "release", "phrases.en")
    seeds = [json.loads((a / "cells" / c / "finetune" / "manifest.json").read_text())
             ["params"]["seed"] for c in ("sent", "sent.r2")]
    assert seeds[0] != seeds[1]
    assert _hash(a, "dp8", "finetune", "model.pt") != _hash(a, "dp8.r2", "finetune", "model.pt")


def test_a_seeded_studys_runs_are_reproducible(studies):
    a, b = studies
    # only the selected runs trained (len4-tag.r2's release is drawn from len4-tag's)
    assert sorted(p.name for p in (b / "cells").iterdir()
                  if (p / "finetune").exists()) == sorted(REPEATED)
    for cell in REPEATED:
        step, name = ("release", "phrases.en") if cell.startswith("len4") else \
            ("finetune", "model.pt")
        assert _hash(a, cell, step, name) == _hash(b, cell, step, name)


def test_the_report_puts_runs_together_and_tests_across_them(studies):
    a, _ = studies
    md = (a / "report" / "report.md").read_text()
    assert "## Runs" in md and "| len4-tag | 2 |" in md
    report = json.loads((a / "report" / "report.json").read_text())
    cells = report["runs"]["cells"]
    assert set(cells) == {"sent", "len4-tag", "dp8"}
    fig = cells["len4-tag"]["BLEU"]
    assert fig["vs_baseline"]["low"] <= fig["vs_baseline"]["estimate"] <= \
        fig["vs_baseline"]["high"]
    assert "runs and lines" in report["runs"]["method"]


def test_the_configs_comparisons_are_tested_across_both_cells_runs(studies):
    """A − B of a `compare` pair is the difference of the two cells' run means (the same
    means as each cell's own figures), inside its interval, in every metric; a pair with
    a cell not evaluated says why."""
    a, _ = studies
    report = json.loads((a / "report" / "report.json").read_text())
    cells = report["runs"]["cells"]
    first, second, absent = report["runs"]["pairs"]
    assert (first["a"], first["b"], first["runs"]) == ("len4-tag", "dp8", [2, 2])
    for pair in (first, second):
        for metric in ("BLEU", "BLEU / BP", "chrF"):
            fig = pair[metric]
            assert fig["estimate"] == pytest.approx(
                cells[pair["a"]][metric]["mean"] - cells[pair["b"]][metric]["mean"],
                abs=1e-9)
            assert fig["low"] <= fig["estimate"] <= fig["high"] and 0 <= fig["p_value"] <= 1
    # and those means are the rows' BLEU (rounded to 2 decimals by evaluate)
    rows = {}
    for r in report["rows"]:
        rows.setdefault(base_name(r["name"]), []).append(r["bleu"])
    assert cells["len4-tag"]["BLEU"]["mean"] == pytest.approx(
        sum(rows["len4-tag"]) / 2, abs=0.006)
    assert absent == {"a": "len4-tag", "b": "absent", "why": "absent not evaluated yet"}
    md = (a / "report" / "report.md").read_text()
    assert "### The comparisons the owner's pick rests on" in md
    assert "| len4-tag − absent | – | – | – | – | not tested: absent not evaluated yet |" in md


def _fig(estimate, p, half=1.0):
    return {"estimate": estimate, "low": estimate - half, "high": estimate + half,
            "p_value": p}


def test_a_comparison_is_called_only_in_the_metrics_that_hold_across_runs():
    from nmtfrag.study import runs_section
    rows = [{"name": n, "bleu": 20.0} for n in ("a", "a.r2", "b", "b.r2", "c")]
    comp = {"method": "m", "cells": {}, "pairs": [
        {"a": "a", "b": "b", "runs": [2, 2], "runs_configured": [2, 2],
         "BLEU": _fig(1.5, 0.01), "BLEU / BP": _fig(0.2, 0.6),
         "chrF": _fig(-0.9, 0.03, half=0.8)},
        {"a": "b", "b": "a", "runs": [2, 2], "runs_configured": [2, 2],
         "BLEU": _fig(-1.5, 0.2), "BLEU / BP": _fig(-0.2, 0.6), "chrF": _fig(0.9, 0.051)},
        {"a": "a", "b": "c", "runs": [2, 1], "runs_configured": [2, 3],
         "BLEU": _fig(2.0, 0.001, half=0.5), "BLEU / BP": _fig(1.0, 0.04, half=0.9),
         "chrF": _fig(1.2, 0.002, half=0.5)}]}
    md = "\n".join(runs_section.render(rows, comp, "sent"))
    assert "| a − b | 2 / 2 | +1.50* [+0.50, +2.50] | +0.20 [-0.80, +1.20] | " \
           "-0.90* [-1.70, -0.10] | mixed: a ahead in BLEU; b ahead in chrF |" in md
    assert "| b − a | 2 / 2 |" in md and md.count("| within run-to-run noise |") == 1
    assert "| a − c | 2 / 1 of 3 |" in md and "| holds: a ahead in BLEU, BLEU/BP, chrF |" in md


def test_configured_comparisons_say_why_they_are_not_tested_before_a_second_run():
    """Before any cell has two evaluated runs there is no run-to-run spread: the pairs
    are listed, each saying why, not left out."""
    from types import SimpleNamespace

    from nmtfrag.study import runs_section
    # what comparisons() reads of a config before it can test: its pairs and cells
    config = SimpleNamespace(compare_pairs=(("a", "b"), ("a", "z")),
                             cells=[SimpleNamespace(name=n) for n in "abz"])
    rows = [{"name": n, "bleu": 20.0} for n in ("baseline", "a", "b")]
    comp = runs_section.comparisons(config, "unused", rows)
    assert comp == {"pairs": [
        {"a": "a", "b": "b", "runs": [1, 1], "runs_configured": [1, 1],
         "why": "no cell has two evaluated runs yet (no run-to-run spread to test with)"},
        {"a": "a", "b": "z", "why": "z not evaluated yet"}]}
    md = "\n".join(runs_section.render(rows, comp, "sent"))
    assert md.startswith("## Runs") and "| a − b | – | – | – | – | not tested: no cell " in md
    assert runs_section.comparisons(config, "unused", rows[1:])["pairs"][0]["why"] == \
        "the baseline is not evaluated yet"


def test_the_runs_table_puts_the_audits_headline_figures_over_runs():
    from nmtfrag.study import runs_section
    exp = [{"0": {"exposure_mean": 1.4}, "25": {"exposure_mean": e25},
            "100": {"exposure_mean": e100}} for e25, e100 in ((2.0, 6.0), (3.0, 8.0))]
    rows = [{"name": "len4", "bleu": 20.0, "reconstruction": {"pairs_rebuilt_share": 0.02},
             "exposure": exp[0], "membership": {"auc": 0.60}},
            {"name": "len4.r2", "bleu": 21.0, "reconstruction": {"pairs_rebuilt_share": 0.04},
             "exposure": exp[1], "membership": {"auc": 0.62}},
            {"name": "len4.r3", "bleu": 21.0, "reconstruction": {"pairs_rebuilt_share": 0.03}}]
    md = "\n".join(runs_section.render(rows, {}, "sent"))
    assert ("| pairs rebuilt 3.00% ± 1.00%; exposure at r = 25 (bits): 2.50 ± 0.71 (2 of 3 "
            "runs); exposure at r = 100 (bits): 7.00 ± 1.41 (2 of 3 runs); MI AUC 0.610 ± "
            "0.014 (2 of 3 runs) |") in md
    rows[0]["membership"]["members_left_out"] = False  # audited under the old rule
    assert "MI AUC 0.610 ± 0.014 (2 of 3 runs)‡ |" in "\n".join(
        runs_section.render(rows, {}, "sent"))
    assert "| – |" in "\n".join(runs_section.render(
        [{"name": "x", "bleu": 1.0}, {"name": "x.r2", "bleu": 2.0}], {}, "sent"))


def test_the_runs_table_names_the_reference_its_shares_are_of():
    """A study whose reference is not called "sent" (GNOME's sent-es) must not be
    reported as "run 1's sent"."""
    from nmtfrag.study import runs_section
    rows = [{"name": n, "bleu": b, "chrf": 40.0, "length_ratio": 0.9, "share_of_gain": s}
            for n, b, s in (("sent-es", 30.0, 1.0), ("sent-es.r2", 29.0, 1.0),
                            ("len4-tag", 16.0, 0.1), ("len4-tag.r2", 17.0, 0.2))]
    md = "\n".join(runs_section.render(rows, {}, "sent-es"))
    assert "share of full gain (run 1 of sent-es)" in md and "sent's" not in md
    assert "| len4-tag | 2 | 16.50 ± 0.71 |" in md
