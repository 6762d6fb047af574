"""`nmtfrag study` end to end on a tiny model: every approach in one report with its
labels, the first report before any training, two cells at once, a changed setting
refused before anything runs, and a study killed mid-training that, rerun, ends with the
same report as an uninterrupted one."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from test_output_guard import tree as snapshot
from tinymodel import make_corpus, write_domain, write_parallel

CONFIG = """
title = "toy study"
seed = 3
[model]
dir = "{model}"
[data]
train = "{data}/toy/train"
valid = "{data}/toy/valid"
test = "{data}/toy/test"
public_align = "{public}"
[decode]
engine = "fairseq"
beam = 2
test_lines = 20
[training]
lr = 0.0005
max_tokens = 600
patience = 1
max_epochs = 3
[audit]
canary_count = 1
canary_repeats = [1, 5]
exposure_samples = 30
membership_pairs = 40
[machine]
threads = 2
jobs = 2
[[cell]]
name = "sent"
approach = "sentences"
[[cell]]
name = "len4-tag"
approach = "phrases"
tags = true
[[cell]]
name = "rel8"
approach = "dp-release"
epsilon = 8
delta = 1e-3
passes = 2
tags = true
[[cell]]
name = "dp8"
approach = "dp-sgd"
epsilon = 8
delta = 1e-3
seeded = true
options = ["--dp-steps", "3", "--allow-few-units"]
"""


def _study(*args, env=None, **kw):
    return subprocess.run([sys.executable, "-m", "nmtfrag", "study", *args],
                          capture_output=True, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1", **(env or {})), **kw)


@pytest.fixture(scope="module")
def study(tiny_model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("study")
    data = write_domain(root / "data", "toy", (200, 20, 30), seed=10)
    write_parallel(make_corpus(300, seed=99), str(root / "public"))
    config = root / "study.toml"
    config.write_text(CONFIG.format(model=tiny_model_dir, data=data,
                                    public=root / "public"), encoding="utf-8")
    out = root / "out"
    proc = _study("run", str(config), "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((out / "report" / "report.json").read_text())
    return config, out, proc.stderr, {r["name"]: r for r in report["rows"]}


def test_every_cell_is_in_the_report_with_its_labels(study):
    _, out, _, rows = study
    assert list(rows) == ["baseline", "sent", "len4-tag", "rel8", "dp8"]
    for name, r in rows.items():
        assert r["bleu"] is not None and r["test_lines"] == 20, name
        assert (r["p_bleu"] is None) == (name == "baseline")
        assert (r["p_bleu_vs_full"] is None) == (name == "sent"), name
        assert "1" in r["exposure"] and "5" in r["exposure"]
        assert (r.get("membership") is None) == (name == "baseline")
    for name in ("len4-tag", "rel8"):
        assert rows[name]["reconstruction"]["max_len"] == 4
    # a seeded DP-SGD cell is never shown as private: its ε is a label, not a figure
    assert "seeded: not private" in rows["dp8"]["privacy"] and rows["dp8"]["epsilon"] is None
    assert rows["dp8"]["epsilon_stated"] == pytest.approx(8, rel=0.02)
    assert rows["dp8"]["updates"] == 3 and rows["dp8"]["ended"] == "its DP plan"
    assert rows["rel8"]["privacy"].startswith("(ε = 8, δ = 0.001) of the release")
    assert rows["rel8"]["epsilon"] == pytest.approx(8, rel=1e-3)
    assert rows["rel8"]["ended"].startswith("fixed plan (2 passes")
    from nmtfrag.audit.exposure_stats import ROW_KEYS  # per-canary figures stay in memory

    assert not [k for r in rows.values() for k in ROW_KEYS if k in r]
    md = (out / "report" / "report.md").read_text()
    assert "seeded: not private" in md and "(ε = 8, δ = 0.001) of the release" in md
    # non-private cells: early stopped on validation or at their cap, with their figures
    for name in ("sent", "len4-tag"):
        r = rows[name]
        assert r["ended"] in ("early stop (validation)", "at its cap")
        assert r["updates"] > 0 and r["tokens_seen"] > 0 and 0 < r["passes"] <= 3
        assert r["privacy"].startswith("none")
    ft = json.loads((out / "cells" / "rel8" / "finetune" / "manifest.json").read_text())
    assert ft["params"]["validate"] is False and ft["params"]["valid_src"] is None


def test_the_report_counts_the_canary_secrets_each_release_holds(study):
    """against a brute-force count: a secret is leaked when its tokens occur, in order and
    whole, in one released target phrase; beside its record when that pair's source holds
    the canary's record number"""
    _, out, _, rows = study
    key = json.loads((out / "owner" / "data" / "canaries.json").read_text())["canaries"]
    for name in ("len4-tag", "rel8"):
        rel = out / "cells" / name / "release"
        pairs = list(zip((rel / "phrases.de").read_text().splitlines(),
                         (rel / "phrases.en").read_text().splitlines()))
        want: dict[str, list[int]] = {}
        for c in key:
            s = c["secret"].split()
            hits = [src.split() for src, tgt in pairs for t in [tgt.split()]
                    if any(t[i:i + len(s)] == s for i in range(len(t)))]
            counts = want.setdefault(str(c["repeats"]), [0, 0, 0])
            counts[0] += bool(hits)
            counts[1] += 1
            counts[2] += any(c["record"] in src for src in hits)
        got = {r: [v["secret"], v["canaries"], v["with_record"]]
               for r, v in rows[name]["release_secrets"].items()}
        assert got == want, name
    assert "release_secrets" not in rows["sent"] and "release_secrets" not in rows["dp8"]
    md = (out / "report" / "report.md").read_text()
    assert "## Canary secrets in each release" in md and "| len4-tag | " in md


def test_the_first_report_comes_before_any_training(study):
    _, _, stderr, _ = study
    lines = stderr.splitlines()
    first_report = next(k for k, ln in enumerate(lines) if "report: 1 cell(s)" in ln)
    first_training = next(k for k, ln in enumerate(lines) if ": finetune" in ln)
    assert first_report < first_training
    assert "baseline: evaluate" in "\n".join(lines[:first_report])


def test_two_cells_run_at_once(study):
    _, out, _, _ = study
    spans = []
    for cell in os.listdir(out / "cells"):
        state = json.loads((out / "cells" / cell / "state.json").read_text())
        spans += [(cell, s["last_started"], s["last_ended"]) for s in state["steps"].values()]
    overlapping = [(a, b) for a in spans for b in spans
                   if a[0] != b[0] and a[1] < b[2] and b[1] < a[2]]
    assert overlapping, spans


def test_status_lists_every_cell_done(study):
    config, out, _, _ = study
    proc = _study("status", str(config), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "not running" in lines[0]
    for cell in ("baseline", "sent", "len4-tag", "rel8", "dp8"):
        line = next(ln for ln in lines if ln.split()[0] == cell)
        assert "done" in line and "CPU h" in line


def test_a_changed_setting_is_refused_before_anything_runs(study, tmp_path):
    config, out, _, _ = study
    changed = tmp_path / "changed.toml"
    changed.write_text(config.read_text().replace("tags = true\n[[cell]]\nname = \"rel8\"",
                                                  "tags = true\nmax_len = 5\n[[cell]]\n"
                                                  "name = \"rel8\""), encoding="utf-8")
    before = snapshot(str(out))
    proc = _study("run", str(changed), "--out", str(out))
    assert proc.returncode == 2
    err = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(err) == 1 and "cell 'len4-tag'" in err[0], err
    assert "max_len: recorded 4, now 5" in err[0]
    assert snapshot(str(out)) == before


RESUME_CONFIG = """
title = "resume"
seed = 5
[model]
dir = "{model}"
[data]
train = "{data}/toy/train"
valid = "{data}/toy/valid"
test = "{data}/toy/test"
[decode]
engine = "fairseq"
beam = 2
[training]
lr = 0.0005
max_tokens = 400
patience = -1
max_epochs = 6
[audit]
canaries = false
membership = false
[machine]
threads = 1
[[cell]]
name = "sent"
approach = "sentences"
"""


def test_a_killed_study_resumes_to_the_uninterrupted_report(tiny_model_dir, tmp_path):
    data = write_domain(tmp_path / "data", "toy", (1200, 20, 30), seed=20)
    config = tmp_path / "study.toml"
    config.write_text(RESUME_CONFIG.format(model=tiny_model_dir, data=data), encoding="utf-8")
    whole = _study("run", str(config), "--out", str(tmp_path / "whole"))
    assert whole.returncode == 0, whole.stderr[-2000:]

    out = tmp_path / "killed"
    argv = [sys.executable, "-m", "nmtfrag", "study", "run", str(config), "--out", str(out)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))
    last = out / "cells" / "sent" / "finetune" / "checkpoints" / "checkpoint_last.pt"
    deadline = time.time() + 300
    while not last.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)  # no handler sees it: the step dies with the study
    proc.wait()
    assert last.exists() and not (out / "cells" / "sent" / "finetune" / "manifest.json").exists()
    time.sleep(2)  # the training step's own SIGTERM exit
    status = _study("status", str(config), "--out", str(out))
    sent = next(ln for ln in status.stdout.splitlines() if ln.split()[0] == "sent")
    assert "not running" in status.stdout and "interrupted: finetune resumes" in sent, status.stdout

    again = _study("run", str(config), "--out", str(out))  # no stale lock after the kill
    assert again.returncode == 0, again.stderr[-2000:]
    assert "sent: finetune (resumed)" in again.stderr

    def figures(d):
        rows = json.loads((d / "report" / "report.json").read_text())["rows"]
        keep = ("name", "bleu", "chrf", "length_ratio", "updates", "tokens_seen", "passes",
                "ended", "p_bleu", "share_of_gain")
        return [{k: r.get(k) for k in keep} for r in rows]
    assert figures(out) == figures(tmp_path / "whole")
    assert (out / "cells" / "sent" / "evaluate" / "hyp.txt").read_text() == \
        (tmp_path / "whole" / "cells" / "sent" / "evaluate" / "hyp.txt").read_text()


def test_a_model_trained_with_the_same_settings_is_adopted_and_another_refused(study,
                                                                              tmp_path):
    config, out, _, rows = study
    text = config.read_text()
    head = text[:text.index("[[cell]]")]
    source = out / "cells" / "sent" / "finetune"
    same = tmp_path / "same.toml"
    same.write_text(head + f'[[cell]]\nname = "sent"\napproach = "sentences"\n'
                           f'adopt = "{source}"\n', encoding="utf-8")
    proc = _study("run", str(same), "--out", str(tmp_path / "adopted"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "sent: finetune adopted (settings checked)" in proc.stderr
    assert "sent: finetune …" not in proc.stderr  # nothing trained
    report = json.loads((tmp_path / "adopted" / "report" / "report.json").read_text())
    adopted = {r["name"]: r for r in report["rows"]}["sent"]
    assert adopted["bleu"] == rows["sent"]["bleu"]
    assert (source / "manifest.json").exists()  # the source is read, never moved

    other = tmp_path / "other.toml"  # another learning rate: not the same run
    other.write_text(head.replace("lr = 0.0005", "lr = 0.0001")
                     + f'[[cell]]\nname = "sent"\napproach = "sentences"\n'
                       f'adopt = "{source}"\n', encoding="utf-8")
    proc = _study("run", str(other), "--out", str(tmp_path / "refused"))
    assert proc.returncode == 1
    assert "cannot adopt" in proc.stderr and "params.lr: 0.0005 there, 0.0001 here" \
        in proc.stderr
    assert not (tmp_path / "refused" / "cells" / "sent" / "finetune").exists()


def test_finished_cells_of_another_study_import_with_their_machine(study, tmp_path):
    """`study import`: a cell run elsewhere (e.g. a lent GPU) joins this study's report,
    marked with the machine it ran on, only if it means the same thing here."""
    import shutil

    from nmtfrag.errors import InputError
    from nmtfrag.study.config import read_config
    from nmtfrag.study.report import write_report
    from nmtfrag.study.transfer import import_cells

    config_path, src, _, rows = study
    config = read_config(str(config_path))
    out = tmp_path / "here"  # a study that has run its baseline only
    (out / "cells").mkdir(parents=True)
    shutil.copy(src / "study.json", out / "study.json")
    shutil.copytree(src / "cells" / "baseline", out / "cells" / "baseline")
    (out / "cells" / "len4-tag" / "release").mkdir(parents=True)  # an unfinished step
    before = snapshot(str(out))

    def refused(cells, match, source=src):
        with pytest.raises(InputError, match=match):
            import_cells(config, str(out), str(source), cells)
        assert snapshot(str(out)) == before  # checked before anything is copied

    refused(["baseline"], "its own baseline")
    refused(["nope"], "no such cell")
    other = tmp_path / "other"  # the same cell, recorded with another setting
    shutil.copytree(src, other, ignore=shutil.ignore_patterns("*.pt"))
    rec = json.loads((other / "study.json").read_text())
    rec["cells"]["len4-tag"]["settings"]["max_len"] = 5
    (other / "study.json").write_text(json.dumps(rec))
    refused(["len4-tag"], "max_len: recorded 5, now 4", other)
    rec["cells"]["len4-tag"]["settings"]["max_len"] = 4
    beam = rec["cells"]["baseline"]["settings"]["decode.beam"]
    rec["cells"]["baseline"]["settings"]["decode.beam"] = beam + 1  # decoded otherwise
    (other / "study.json").write_text(json.dumps(rec))
    refused(["len4-tag"], f"cell 'baseline' .*decode.beam: recorded {beam + 1}", other)
    rec["cells"]["baseline"]["settings"]["decode.beam"] = beam
    (other / "study.json").write_text(json.dumps(rec))
    os.remove(other / "cells" / "rel8" / "evaluate" / "manifest.json")
    refused(["rel8"], "not finished there", other)
    with open(other / "cells" / "baseline" / "evaluate" / "hyp.txt", "a") as f:
        f.write("another line\n")
    refused(["len4-tag"], "baseline's test output differs", other)

    said = import_cells(config, str(out), str(src), ["len4-tag", "rel8"])
    assert said[0].startswith("len4-tag: imported from") and "discarded its unfinished steps here: release" in said[0]
    assert "(ran on cpu; " in said[1]
    refused_again = snapshot(str(out))
    with pytest.raises(InputError, match="finished here already"):
        import_cells(config, str(out), str(src), ["rel8"])
    assert snapshot(str(out)) == refused_again
    got = {r["name"]: r for r in write_report(config, str(out))}
    assert list(got) == ["baseline", "len4-tag", "rel8"]
    for name in ("len4-tag", "rel8"):
        assert got[name]["bleu"] == rows[name]["bleu"]
        assert got[name]["p_bleu"] == rows[name]["p_bleu"]
        assert got[name]["ran_on"][0].startswith("cpu; ")
    assert "ran_on" not in got["baseline"]
    md = (out / "report" / "report.md").read_text()
    assert "| len4-tag† |" in md and "† len4-tag, rel8: imported from another study" in md
    assert not [p for p in os.listdir(out / "cells") if p.startswith(".tmp")]
    from nmtfrag.study.status import render, study_status

    _, status = study_status(config, str(out))
    shown = render(str(out), None, status)
    assert "done (imported; ran on cpu)" in shown
    here = sum(r["cpu_hours"] for r in status if not r["imported"])
    elsewhere = sum(r["cpu_hours"] for r in status if r["imported"])
    assert f"total {here:.2f} CPU h here (imported cells: {elsewhere:.2f} " in shown
    # a step of an imported cell rerun here after the import (e.g. an audit made
    # stricter) is this machine's CPU, and the report's footnote names it
    state_file = out / "cells" / "len4-tag" / "state.json"
    state = json.loads(state_file.read_text())
    there = state["steps"]["evaluate"]["cpu_seconds"]
    assert state["imported"]["cpu_seconds"]["evaluate"] == there  # the import's record
    state["steps"]["evaluate"]["cpu_seconds"] = there + 3600.0  # the runner adds a rerun's
    state_file.write_text(json.dumps(state))
    _, status = study_status(config, str(out))
    moved = next(r for r in status if r["cell"] == "len4-tag")
    assert moved["cpu_hours_elsewhere"] == pytest.approx(moved["cpu_hours"] - 1.0)
    assert f"total {here + 1.0:.2f} CPU h here (imported cells: {elsewhere:.2f} " in \
        render(str(out), None, status)
    write_report(config, str(out))
    assert "plus steps rerun here: len4-tag's evaluate." in \
        (out / "report" / "report.md").read_text()


def test_cells_exported_run_elsewhere_without_redoing_the_baseline_and_import_back(
        study, tmp_path):
    """`study export`: the new study directory another machine runs a cell in holds this
    study's record, the owner's shared inputs, the finished baseline and the release the
    cell starts from, so only the cell's own steps run there; imported back it reports
    what the same cell run here reported (a seeded study)."""
    import shutil

    from nmtfrag.errors import InputError
    from nmtfrag.study.config import read_config
    from nmtfrag.study.report import write_report
    from nmtfrag.study.transfer import export_seed, import_cells

    config_path, src, _, rows = study
    config = read_config(str(config_path))
    here = tmp_path / "here"  # this machine: the baseline done, len4-tag's release made
    (here / "cells" / "len4-tag" / "logs").mkdir(parents=True)
    for part in ("study.json", "owner", "cells/baseline", "cells/len4-tag/release",
                 "cells/len4-tag/logs/release.log", "cells/len4-tag/state.json"):
        (shutil.copytree if (src / part).is_dir() else shutil.copy)(src / part, here / part)
    before = snapshot(str(here))

    def refused(cells, match, to=tmp_path / "seed", out=here):
        with pytest.raises(InputError, match=match):
            export_seed(config, str(out), str(to), cells)
        assert snapshot(str(here)) == before and not (tmp_path / "seed").exists()

    refused(["nope"], "no such cell")
    changed = tmp_path / "changed.toml"  # another cell's setting changed since it ran
    changed.write_text(config_path.read_text().replace("passes = 2", "passes = 3"))
    with pytest.raises(InputError, match="'rel8' was recorded .* passes"):
        export_seed(read_config(str(changed)), str(here), str(tmp_path / "seed"),
                    ["len4-tag"])
    refused(["baseline"], "its own baseline")
    refused(["len4-tag"], "finished here", out=src)
    refused(["len4-tag"], "exists already", to=here / "cells")
    refused(["len4-tag"], "inside the study directory", to=here / "seed")
    unfinished = tmp_path / "unfinished"
    shutil.copytree(here, unfinished)
    os.remove(unfinished / "cells" / "baseline" / "evaluate" / "manifest.json")
    refused(["len4-tag"], "baseline is not finished", out=unfinished)

    said = export_seed(config, str(here), str(tmp_path / "seed"), ["len4-tag"])
    assert "1 finished release(s) (len4-tag)" in said[0] and "canaries" in said[0]
    assert "owner holds the owner's training pairs" in said[1]
    assert "model and data files" in said[1]
    assert said[3].endswith(f"--from {tmp_path / 'seed'} --cell len4-tag")
    seed = tmp_path / "seed"
    assert snapshot(str(here)) == before  # read only
    assert sorted(os.listdir(seed)) == ["cells", "owner", "study.json"]
    assert sorted(os.listdir(seed / "cells")) == ["baseline", "len4-tag"]
    assert sorted(os.listdir(seed / "cells" / "len4-tag")) == ["logs", "release", "state.json"]
    assert os.stat(seed / "owner").st_mode & 0o077 == 0
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".tmp")]
    for part in ("cells/baseline/evaluate/hyp.txt", "owner/data/train.de",
                 "cells/len4-tag/release/phrases.en"):
        assert (seed / part).read_bytes() == (src / part).read_bytes(), part
    assert list(json.loads((seed / "cells/len4-tag/state.json").read_text())["steps"]) \
        == ["release"]  # here its state records every step: only the release travels
    kept = {p: (seed / p).read_bytes() for p in
            ("cells/baseline/state.json", "cells/len4-tag/state.json")}

    proc = _study("run", str(config_path), "--out", str(seed), "--cell", "len4-tag",
                  "--jobs", "1", "--threads", "1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "baseline: evaluate" not in proc.stderr and "len4-tag: release" not in proc.stderr
    assert (seed / "cells/baseline/state.json").read_bytes() == kept["cells/baseline/state.json"]
    ran = json.loads((seed / "cells/len4-tag/state.json").read_text())["steps"]
    assert ran["release"] == json.loads(kept["cells/len4-tag/state.json"])["steps"]["release"]
    assert "finetune" in ran and "evaluate" in ran

    said = import_cells(config, str(here), str(seed), ["len4-tag"])[0]
    assert said.startswith("len4-tag: imported from") and "discarded" not in said
    got = {r["name"]: r for r in write_report(config, str(here))}
    for key in ("bleu", "chrf", "p_bleu"):
        assert got["len4-tag"][key] == rows["len4-tag"][key], key
    # the release made here stays this machine's CPU (not the other's, not a rerun)
    from nmtfrag.study.status import study_status
    from nmtfrag.study.transfer import steps_run_here

    state = json.loads((here / "cells/len4-tag/state.json").read_text())
    assert steps_run_here(state) == []
    row = next(r for r in study_status(config, str(here))[1] if r["cell"] == "len4-tag")
    assert row["cpu_hours_elsewhere"] == pytest.approx(
        row["cpu_hours"] - ran["release"]["cpu_seconds"] / 3600)
