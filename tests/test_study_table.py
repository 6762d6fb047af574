"""The study table's reading of cell records, on hand-written records: completed passes
from fairseq's iterator state (or its log, for older runs), and which ε a cell shows."""
import json

from nmtfrag.dp import study_table
from nmtfrag.finetune import epochs_completed


def test_completed_passes_from_fairseqs_iterator_state():
    # fairseq's iterator counts epochs from 1 and moves on at an epoch's end
    assert epochs_completed({"extra_state": {"train_iterator": {
        "epoch": 4, "iterations_in_epoch": 0}}}) == 3
    assert epochs_completed({"extra_state": {"train_iterator": {
        "epoch": 4, "iterations_in_epoch": 17}}}) == 3  # mid-epoch 4: three whole passes
    assert epochs_completed({"extra_state": {}}) is None


def _write(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


def _cell(root, name, bleu, manifest, privacy=None):
    _write(root / f"eval-{name}" / "report.json", {"scores": {"bleu": bleu}})
    _write(root / f"ft-{name}" / "manifest.json", manifest)
    if privacy:
        _write(root / f"ft-{name}" / "privacy.json", privacy)


def test_older_runs_read_passes_from_the_log_and_a_release_cell_shows_its_epsilon(tmp_path):
    root = tmp_path / "EMEA"
    _cell(root, "baseline", 10.0, {})
    # an older run: no epochs_completed; fairseq validated 3 of a 10-epoch cap
    _cell(root, "ref", 20.0, {"params": {"max_epochs": 10}, "result": {"num_updates": 90}})
    (root / "ft-ref" / "train.log").write_text("".join(
        f"2026 | INFO | valid | epoch {e:03d} | valid on 'valid' subset | loss 3\n"
        for e in (1, 2, 3)))
    release = {"train_kind": "release", "release_params": {"dp": {"epsilon": 8}},
               "max_epochs": 10}
    _cell(root, "rel", 12.0, {"params": release, "counts": {"train": {"pairs": 1234}},
                              "result": {"num_updates": 40, "epochs_completed": 2}})
    _write(root / "rel-rel" / "privacy.json", {"total": {"epsilon": 8.0, "delta": 1e-5}})
    (root / "cells").write_text("ref --lr 1\nrel --release-epsilon 8\n")
    rows, md = study_table.table(str(root), "ref")
    by = {r["name"]: r for r in rows}
    assert by["ref"]["epochs"] == 3 and by["rel"]["epochs"] == 2  # not the cap of 10
    assert by["rel"]["mode"] == "release" and by["rel"]["epsilon_release"] == 8.0
    assert by["rel"]["share_of_gain"] == 0.2
    assert "| rel | all on 1,234 released pairs | – | 8.00 (release) |" in md
    # a cell with its own DP-SGD certificate shows that ε, never only the release's
    training = {"epsilon_all_accountants": {"rdp": 3.0, "prv": 2.5},
                "noise_multiplier": 1.0, "steps": 5}
    _write(root / "ft-rel" / "privacy.json", {"training": training})
    row = study_table.cell_row(str(root), "rel")
    assert row["mode"] == "private" and row["epsilon_rdp"] == 3.0
