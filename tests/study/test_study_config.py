"""`nmtfrag study`'s config and plan, without a model run: every bad config is one
`error:` line naming the file and the key, and runs nothing; the shipped configs parse;
a DP-release cell's training budget reads nothing private; a changed setting of a
recorded cell is refused with both values."""
import json
import os
import re

import pytest

from certfiles import write_release
from tinymodel import make_corpus, write_parallel

from nmtfrag.errors import InputError
from nmtfrag.study.config import read_config
from nmtfrag.study.plan import FINETUNE, MEMBERSHIP, Planner
from nmtfrag.study.record import differences

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

GOOD = """
title = "t"
[model]
dir = "{d}/model"
[data]
train = "{d}/data/train"
valid = "{d}/data/valid"
test = "{d}/data/test"
public_align = "{d}/public"
[[cell]]
name = "len4-tag"
approach = "phrases"
tags = true
[[cell]]
name = "sent"
approach = "sentences"
[[cell]]
name = "rel8"
approach = "dp-release"
epsilon = 8
[[cell]]
name = "dp8"
approach = "dp-sgd"
epsilon = 8
options = ["--dp-steps", "3"]
"""


@pytest.fixture
def ws(tmp_path):
    """A workspace with the files a good config names (the model dir need not load)."""
    os.makedirs(tmp_path / "model")
    os.makedirs(tmp_path / "data")
    for split, n in (("train", 20), ("valid", 5), ("test", 5)):
        write_parallel(make_corpus(n, seed=len(split)), str(tmp_path / "data" / split))
    write_parallel(make_corpus(20, seed=9), str(tmp_path / "public"))
    return tmp_path


def write(ws, text, name="study.toml"):
    path = ws / name
    path.write_text(text.replace("{d}", str(ws)), encoding="utf-8")
    return str(path)


def test_a_good_config_parses_with_defaults(ws):
    c = read_config(write(ws, GOOD))
    assert [x.name for x in c.cells] == ["len4-tag", "sent", "rel8", "dp8"]
    assert c.training.lr == 0.000175 and c.training.max_epochs == 10
    assert c.cell("len4-tag").max_len == 4 and c.cell("len4-tag").sample_rate == 0.5
    assert c.cell("dp8").options == ("--dp-steps", "3") and not c.cell("dp8").seeded
    assert c.data.train == str(ws / "data" / "train") and c.full_sentence_cell == "sent"


def test_compare_names_cells_not_their_runs(ws):
    """`compare` pairs are cells, each tested over all its runs: a run's own name
    (NAME.r2) is refused naming its cell, a pair is refused twice in either order (B − A
    is A − B with its sign turned), the pairs keep their order (A − B is reported)."""
    runs = GOOD.replace("tags = true", "tags = true\nruns = 2", 1)
    c = read_config(write(ws, 'compare = [["len4-tag", "dp8"], ["baseline", "sent"]]\n'
                          + runs))
    assert c.compare_pairs == (("len4-tag", "dp8"), ("baseline", "sent"))
    assert "len4-tag.r2" in [x.name for x in c.cells]
    with pytest.raises(InputError, match=r"compare: 'len4-tag.r2' is a run, not a cell: "
                                         r"name the cell \('len4-tag'\)"):
        read_config(write(ws, 'compare = [["len4-tag.r2", "dp8"]]\n' + runs))
    with pytest.raises(InputError, match=r"'sent4' is not a cell of this config \(cells: "
                                         r"baseline, dp8, len4-tag, rel8, sent\)"):
        read_config(write(ws, 'compare = [["sent4", "dp8"]]\n' + runs))
    for twice in ('[["sent", "dp8"], ["sent", "dp8"]]', '[["sent", "dp8"], ["dp8", "sent"]]'):
        with pytest.raises(InputError, match=r"given twice \(in either order\)"):
            read_config(write(ws, f"compare = {twice}\n" + runs))
    assert read_config(write(ws, GOOD)).compare_pairs == ()


# (the edit to GOOD, the key the error line must name)
BAD = [
    ("[model]\ndir", "[model]\ndirectory", "[model] directory: unknown key"),
    ('dir = "{d}/model"', 'dir = "{d}/nomodel"', "[model] dir"),
    ('train = "{d}/data/train"', 'train = "{d}/data/nope"', "[data] train"),
    ('test = "{d}/data/test"', "", "[data] test: required"),
    ('title = "t"', 'title = "t"\nseed = -1', "seed"),
    ('title = "t"', 'title = "t"\n[training]\nlr = "fast"', "[training] lr"),
    ('title = "t"', 'title = "t"\n[training]\nmax_epochs = 0', "[training] max_epochs"),
    ('title = "t"', 'title = "t"\n[decode]\nengine = "moses"', "[decode] engine"),
    ('title = "t"', 'title = "t"\n[audit]\ncanary_repeats = [1, 0]',
     "[audit] canary_repeats"),
    ('title = "t"', 'title = "t"\n[machine]\ndevice = "tpu"', "[machine] device"),
    ('approach = "sentences"', 'approach = "sentence"', "cell 'sent': approach"),
    ('name = "sent"', 'name = "baseline"', "cell 2: name"),
    ('name = "sent"', 'name = "len4-tag"', "cell 'len4-tag': two cells"),
    ("tags = true", "tags = true\nmax_len = 40", "cell 'len4-tag': max_len"),
    ("tags = true", "tags = true\nepsilon = 8", "cell 'len4-tag': epsilon: unknown key"),
    ("epsilon = 8\noptions", "options", "cell 'dp8': epsilon: required"),
    ('options = ["--dp-steps", "3"]', 'options = ["--seed", "3"]', "cell 'dp8': options"),
    ('options = ["--dp-steps", "3"]', 'options = ["--lr", "0.1"]', "cell 'dp8': options"),
    ('public_align = "{d}/public"', "", "cell 'rel8': approach"),
    ('approach = "dp-release"\nepsilon = 8', 'approach = "dp-release"\nepsilon = 8\n'
     'tuned_on = "EMEA"', "cell 'rel8': tuned_on"),
    ('dir = "{d}/model"', 'dir = "${NMTFRAG_TEST_UNSET}/model"', "${NMTFRAG_TEST_UNSET}"),
    ('title = "t"', 'title = "t', "not valid TOML"),
    ('title = "t"', 'title = "t"\n[machine]\ndecode_device = "gpu"', "decode_device"),
    ('title = "t"', 'title = "t"\ncompare = [["sent", "nope"]]',
     "compare: 'nope' is not a cell"),
    ('title = "t"', 'title = "t"\ncompare = [["sent", "sent"]]',
     "compare: a cell compared with itself"),
    ('title = "t"', 'title = "t"\ncompare = [["sent"]]', "compare: each entry is [A, B]"),
    ('title = "t"', 'title = "t"\ncompare = "sent"', "compare: expected a list"),
]


@pytest.mark.parametrize("old,new,named", BAD, ids=[b[2] for b in BAD])
def test_a_bad_config_is_one_error_line_naming_the_key_and_runs_nothing(ws, old, new,
                                                                        named, capsys):
    from nmtfrag.cli import main

    assert old in GOOD
    config = write(ws, GOOD.replace(old, new, 1))
    out = ws / "OUT"
    os.environ.pop("NMTFRAG_TEST_UNSET", None)
    assert main(["study", "run", config, "--out", str(out)]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith(f"error: {config}: "), err
    assert named in err[0], err[0]
    assert not out.exists()  # nothing ran, nothing was made


def test_shipped_configs_parse(ws, monkeypatch):
    """corpora/*/study.toml with their ${VARS} pointing at stand-in files."""
    models, data = ws / "models", ws / "data-root"
    os.makedirs(models / "generic-deen-medium")
    for sub in ("indomain/EMEA", "indomain/GNOME", "generic"):
        os.makedirs(data / sub, exist_ok=True)
    for split in ("train", "valid", "test"):
        for dom in ("EMEA", "GNOME"):
            write_parallel(make_corpus(3), str(data / "indomain" / dom / split))
    write_parallel(make_corpus(3), str(data / "generic" / "train"))
    write_parallel(make_corpus(3), str(data / "generic" / "valid"))
    monkeypatch.setenv("MODELS", str(models))
    monkeypatch.setenv("DATA", str(data))
    monkeypatch.setenv("DEMO_MODEL", str(models / "generic-deen-medium"))
    monkeypatch.chdir(ROOT)
    emea = read_config("corpora/EMEA/study.toml")
    assert {c.approach for c in emea.cells} == {"phrases", "sentences", "dp-release", "dp-sgd",
                                                "public", "dp-composed"}
    assert emea.cell("public-ctl").like == "len4-tag-pub"
    gnome = read_config("corpora/GNOME/study.toml")
    assert gnome.full_sentence_cell == "sent-es"  # trained to its early stop (issue 43)
    for config in (emea, gnome):  # every mixed cell is tested against a control of its own
        controlled = {c.like for c in config.cells if c.approach == "public"}
        mixed = {c.name for c in config.cells if (c.public_share or c.public_batch)
                 and not c.pack}
        assert mixed and mixed <= controlled, mixed - controlled
    # every EMEA cell on the default DP-SGD recipe (chosen on EMEA's first 500 test
    # lines) is also scored without those lines, the composed cell's DP-SGD part included
    on_recipe = {c.name for c in emea.cells if c.approach in ("dp-sgd", "dp-composed")
                 and c.tuned_on == "private" and not any(
                     o.startswith("--dp-recipe") for o in c.options)}
    assert "dp-composed-8" in on_recipe
    assert {c.name for c in emea.cells if c.chosen_on_test_lines == 500} >= on_recipe
    assert read_config("corpora/demo/study.toml").cell("dp-sgd").epsilon == 8


def test_a_dp_release_cell_budget_reads_nothing_private(ws):
    """Its fine-tuning is fixed passes over the release (the mechanism's output) with the
    last checkpoint: no validation set, no count of the private corpus. Adding one private
    sentence pair leaves its command line unchanged."""
    argv = {}
    for extra in (0, 1):
        d = ws / f"corpus{extra}"
        os.makedirs(d)
        write_parallel(make_corpus(20 + extra, seed=1), str(d / "train"))
        text = GOOD.replace('train = "{d}/data/train"', f'train = "{d}/train"')
        config = read_config(write(ws, text, f"s{extra}.toml"))
        step = Planner(config, str(ws / "OUT")).plan("rel8").step(FINETUNE)
        assert step is not None
        argv[extra] = [a.replace(str(d), "CORPUS") for a in step.argv]
    assert argv[0] == argv[1]
    assert "--no-validation" in argv[0] and "--valid-src" not in argv[0]
    assert argv[0][argv[0].index("--max-epochs") + 1] == "10"
    assert "--max-updates" not in argv[0] and "--patience" not in argv[0]
    # a non-private cell stops early on the owner's validation set (it has no ε to keep)
    sent = Planner(config, str(ws / "OUT")).plan("sent").step(FINETUNE)
    assert sent is not None and "--valid-src" in sent.argv and "--patience" in sent.argv


def test_a_dp_release_whose_passes_were_chosen_on_private_data_claims_no_epsilon(ws):
    """passes picked from the owner's data (e.g. after an earlier cell's test score) are
    outside the release's ε: the report labels the cell and shows no ε for it."""
    from nmtfrag.study.plan import Paths
    from nmtfrag.study.report import privacy_figures

    for tuned, private in (("public", True), ("private", False)):
        text = GOOD.replace('approach = "dp-release"\nepsilon = 8',
                            f'approach = "dp-release"\nepsilon = 8\ntuned_on = "{tuned}"')
        config = read_config(write(ws, text, f"{tuned}.toml"))
        write_release(ws / "OUT" / tuned / "cells" / "rel8" / "release")
        got = privacy_figures(config, Paths(str(ws / "OUT" / tuned)), "rel8")
        assert got["private"] is private
        assert got["epsilon_stated"] == pytest.approx(8.0, rel=1e-6)
        assert (got["epsilon"] is not None) is private
        assert ("passes chosen on private data: ε does not cover the choice" in
                got["privacy"]) is not private
        # what lies outside ε: the certificate's own statement (the check on the exact
        # n before it ran), the choice of passes where it read the owner's data, and
        # nothing of the run itself
        assert "whether the release was made at all depends on n" in got["outside_epsilon"][0]
        assert any("the choice of its passes" in x for x in got["outside_epsilon"]) \
            is not private
        assert got["outside_epsilon"][-1].startswith("nothing of the run itself")


def test_a_dp_sgd_cell_follows_its_plan(ws):
    config = read_config(write(ws, GOOD))
    step = Planner(config, str(ws / "OUT")).plan("dp8").step(FINETUNE)
    assert step is not None and step.resumable
    argv = list(step.argv)
    assert argv[argv.index("--epsilon") + 1] == "8" and "--dp" in argv
    assert "--patience" not in argv and "--max-epochs" not in argv and "--seed" not in argv
    assert "--no-validation" in argv and "--valid-src" not in argv  # reads none
    assert argv[-2:] == ["--dp-steps", "3"]


def test_a_cell_on_a_share_of_the_corpus_is_audited_on_the_lines_it_trained_on(ws):
    """Its membership audit's members are the lines its DP run wrote to
    owner/trained-lines.txt (the rest of the file: non-members of the same documents);
    a cell on the whole corpus takes the whole file."""
    text = GOOD.replace('name = "dp8"', 'name = "dp8"\ntrain_fraction = 0.25')
    planner = Planner(read_config(write(ws, text)), str(ws / "OUT"))
    argv = list(planner.plan("dp8").step(MEMBERSHIP).argv)
    model = argv[argv.index("--model") + 1]
    assert argv[argv.index("--member-lines") + 1] == os.path.join(
        model, "owner", "trained-lines.txt")
    # its line numbers are those of the file it trained on: the one with canaries planted
    # (left out of the attack: the exposure audit measures them)
    members = argv[argv.index("--members") + 1:argv.index("--members") + 3]
    assert tuple(members) == planner.train_files()
    assert planner.c.audit.canaries  # GOOD plants them
    assert argv[argv.index("--leave-out-canaries") + 1] == os.path.join(
        planner.p.owner_data, "canaries.json")
    whole = Planner(read_config(write(ws, GOOD)), str(ws / "OUT")).plan("dp8")
    assert "--member-lines" not in whole.step(MEMBERSHIP).argv


DP_CONTROLS = """
[[cell]]
name = "rel8-pub"
approach = "dp-release"
epsilon = 8
public_share = 0.5
[[cell]]
name = "dp8-pub"
approach = "dp-sgd"
epsilon = 8
public_batch = 50
options = ["--dp-steps", "3"]
[[cell]]
name = "comp8"
approach = "dp-composed"
epsilon = 8
release_epsilon = 4
public_share = 0.5
[[cell]]
name = "ctl-rel8"
approach = "public"
like = "rel8-pub"
[[cell]]
name = "ctl-dp8"
approach = "public"
like = "dp8-pub"
[[cell]]
name = "ctl-comp8"
approach = "public"
like = "comp8"
"""


def test_a_dp_cell_with_public_pairs_has_a_control_trained_by_its_rule(ws):
    """The control of a DP release is its fixed passes over the public pairs alone, of a
    composed cell its warm start's, of DP-SGD its planned steps with the public pairs
    alone (--dp-public-only); a DP like's release is made before the cells run (it sizes
    the public draw); a DP-SGD cell without public pairs has nothing to control for."""
    text = GOOD.replace('public_align = "{d}/public"',
                        'public_align = "{d}/public"\npublic_train = "{d}/public"')
    config = read_config(write(ws, text + DP_CONTROLS))
    planner = Planner(config, str(ws / "OUT"))
    ctl = {n: list(planner.plan(n).step(FINETUNE).argv) for n in ("ctl-rel8", "ctl-dp8",
                                                                   "ctl-comp8")}
    assert ctl["ctl-rel8"] == list(planner.plan("rel8-pub").step(FINETUNE).argv) + [
        "--public-only"]
    assert ctl["ctl-dp8"] == list(planner.plan("dp8-pub").step(FINETUNE).argv) + [
        "--dp-public-only"]
    assert ctl["ctl-comp8"] == list(planner.plan("comp8").step("warm-start").argv) + [
        "--public-only"]
    assert planner.release_cells(["ctl-rel8", "ctl-comp8", "ctl-dp8"]) == ["rel8-pub", "comp8"]
    assert planner.release_cells(["ctl-rel8", "len4-tag"]) == ["len4-tag", "rel8-pub"]
    bad = text + DP_CONTROLS.replace('like = "dp8-pub"', 'like = "dp8"')
    with pytest.raises(InputError, match="cell 'ctl-dp8': like.*public_batch"):
        read_config(write(ws, bad, "bad.toml"))
    bad = text + DP_CONTROLS.replace('"--dp-steps", "3"]\n[[cell]]\nname = "comp8"',
                                     '"--dp-steps", "3", "--dp-control"]\n[[cell]]\n'
                                     'name = "comp8"')
    assert bad != text + DP_CONTROLS
    with pytest.raises(InputError, match="cell 'ctl-dp8': like.*--dp-control"):
        read_config(write(ws, bad, "bad2.toml"))


def test_a_failed_first_phrase_release_still_makes_a_controls_dp_release(ws):
    """The first phrase cell's failed alignment breaks every phrase cell, not the DP
    releases a public control is sized by: they are still made, and only the cells
    whose release is missing are reported failed."""
    from nmtfrag.study.plan import RELEASE
    from nmtfrag.study.runner import StepFailed, _releases

    text = GOOD.replace('public_align = "{d}/public"',
                        'public_align = "{d}/public"\npublic_train = "{d}/public"')
    planner = Planner(read_config(write(ws, text + DP_CONTROLS)), str(ws / "OUT"))

    class Ex:
        def __init__(self):
            self.ran = []

        def run(self, step, threads):
            self.ran.append(step.cell)
            assert step.name == RELEASE
            if step.cell == "len4-tag":
                raise StepFailed("len4-tag: release failed")

        def progress(self, text):
            pass

    ex = Ex()
    chosen = ["len4-tag", "ctl-rel8", "ctl-comp8", "ctl-dp8"]
    assert _releases(planner, ex, chosen) == ["len4-tag"]
    assert ex.ran == ["len4-tag", "rel8-pub", "comp8"]


def test_a_gpu_machine_can_decode_on_its_cpu_and_the_report_names_it(ws):
    """--device cuda --decode-device cpu: training, exposure and membership on the GPU,
    evaluate (CTranslate2 without its CUDA libraries) on the CPU; not a cell setting."""
    from nmtfrag.cli.study import with_machine
    from nmtfrag.study.machine import machine_text, note_machine
    from nmtfrag.study.plan import EVALUATE, EXPOSURE, MEMBERSHIP, Paths

    config = read_config(write(ws, GOOD))
    gpu = with_machine(config, "cuda", "cpu")
    plan = Planner(gpu, str(ws / "OUT")).plan("sent")

    def device(step):
        argv = list(plan.step(step).argv)
        return argv[argv.index("--device") + 1]
    assert [device(s) for s in (FINETUNE, EVALUATE, EXPOSURE, MEMBERSHIP)] == [
        "cuda", "cpu", "cuda", "cuda"]
    assert Planner(with_machine(config, "cuda", None), str(ws / "OUT")).plan(
        "sent").step(EVALUATE).argv[-1] != "cpu"
    os.makedirs(ws / "OUT")
    entry = note_machine(Paths(str(ws / "OUT")), config.machine, 2, 1)
    assert machine_text(entry).startswith("cpu; ")
    entry = {**entry, "device": "cuda", "gpu": "NVIDIA H100", "decode_device": "cpu"}
    assert machine_text(entry).startswith("cuda (NVIDIA H100), decoding on cpu; ")


def test_differences_name_the_key_and_both_values():
    rec = {"approach": "phrases", "max_len": 4, "training.lr": 0.000175}
    now = {"approach": "phrases", "max_len": 7, "training.lr": 0.000175}
    assert differences(rec, now) == ["max_len: recorded 4, now 7"]
    # a key added by a later nmtfrag is accepted at its default, refused off it
    assert differences(rec, {**rec, "tags": False}) == []
    assert differences(rec, {**rec, "tags": True}) == ["tags: recorded \"(not set)\", now true"]


def test_error_lines_name_the_file(ws):
    with pytest.raises(InputError, match=re.escape(str(ws / "missing.toml"))):
        read_config(str(ws / "missing.toml"))


def test_a_failed_step_is_named_by_its_last_attempt(tmp_path):
    from nmtfrag.study.runner import _last_error

    log = tmp_path / "finetune.log"
    log.write_text("\n$ nmtfrag finetune --out a\nerror: the first attempt's\n"
                   "\n$ nmtfrag finetune --out a --resume\nsome progress\nKilled\n")
    assert _last_error(str(log)) == "Killed"
    log.write_text(log.read_text() + "\n$ nmtfrag finetune --out a --resume\n"
                   "error: a disk is full\nmore\n")
    assert _last_error(str(log)) == "error: a disk is full"


def test_status_names_the_cells_a_live_run_left_out(ws):
    """`study run --cell …` runs some cells: `status` says the others are not in it,
    instead of "waiting in its turn" for a turn that never comes."""
    from nmtfrag.outlock import lock_output_dir, release_output_lock
    from nmtfrag.study.machine import note_machine
    from nmtfrag.study.plan import Paths
    from nmtfrag.study.status import study_status

    config = read_config(write(ws, GOOD))
    out = str(ws / "OUT")
    os.makedirs(out)
    note_machine(Paths(out), config.machine, 1, 1, ["sent"])
    lock_output_dir(out)  # a live run holds OUT
    try:
        holder, rows = study_status(config, out)
    finally:
        release_output_lock(out)
    state = {r["cell"]: r["state"] for r in rows}
    assert holder is not None
    assert state["sent"] == "waiting" and state["baseline"] == "waiting"
    assert state["rel8"] == "pending (not in the live run's --cell list)"
    holder, rows = study_status(config, out)  # no live run: nothing is "left out"
    assert holder is None and {r["state"] for r in rows} == {"pending"}


def test_the_overlap_script_cuts_the_test_set_by_the_data_alone():
    """scripts/rescore_without_overlap.py: 'unseen' drops lines whose source is a
    training source, 'dedup' keeps each (source, reference) pair's first line."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "rescore_without_overlap", os.path.join(ROOT, "scripts", "rescore_without_overlap.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    src = ["a", "b", "a", "c", "a", "d"]
    ref = ["A", "B", "A", "C", "X", "D"]
    got = mod.subsets(src, ref, train_src={"b", "d", "zz"})
    assert got == {"all": [0, 1, 2, 3, 4, 5], "unseen": [0, 2, 3, 4],
                   "dedup": [0, 1, 3, 4, 5], "dedup-unseen": [0, 3, 4]}


def test_cpu_hours_are_a_lower_bound_where_fairseq_trained_longer_than_the_study_counted(ws):
    """a training attempt killed before the study saved CPU time every minute is missing
    from its count; fairseq's own training time (over every resumed run) shows it."""
    from nmtfrag.study.plan import Paths
    from nmtfrag.study.report import _cpu, training_figures
    from nmtfrag.study.state import update_state

    config = read_config(write(ws, GOOD))
    paths = Paths(str(ws / "OUT"))
    ft = paths.step("sent", "finetune")
    os.makedirs(ft)
    for counted_wall, fairseq_seconds, lower_bound in ((7200.0, 7100.0, False),
                                                       (3600.0, 7200.0, True)):
        (ws / "OUT" / "cells" / "sent" / "finetune" / "manifest.json").write_text(json.dumps(
            {"result": {"train_seconds": fairseq_seconds, "num_updates": 10}}))
        update_state(paths, "sent", lambda s: s.update(steps={"finetune": {
            "cpu_seconds": counted_wall * 0.9, "wall_seconds": counted_wall}}))
        row = training_figures(config, paths, "sent")
        assert ("training_hours_uncounted" in row) is lower_bound
        shown = _cpu(row)
        assert shown.startswith("≥") is lower_bound
        if lower_bound:
            assert row["training_hours_uncounted"] == pytest.approx(1.0)
            assert shown == "≥ 0.90 (+1.00 h wall)"


def test_a_decoding_step_added_later_is_taken_on_by_recorded_cells_and_kept():
    """[decode] length_penalty adds steps without changing what a cell recorded: a cell
    recorded without it takes it on (and records it), a changed value is then refused."""
    from nmtfrag.study.record import differences

    old = {"approach": "sentences", "decode.beam": 5}
    now = {**old, "decode.length_penalty": "public", "decode.length_penalty_lines": 500}
    assert differences(old, now) == []
    # recorded off (at its default) it is taken on as well
    off = {**old, "decode.length_penalty": "", "decode.length_penalty_lines": 500}
    assert differences(off, now) == []
    changed = {**now, "decode.length_penalty_lines": 100}
    assert differences(now, changed) == [
        "decode.length_penalty_lines: recorded 500, now 100"]


def test_a_control_recorded_before_a_key_was_added_to_its_like_cell_is_still_its_own():
    from nmtfrag.study.record import differences

    old = {"approach": "public", "like": "x", "like settings.approach": "phrases",
           "like settings.max_len": 4}
    now = {**old, "like settings.run": 1, "run": 1}
    assert differences(old, now) == []
    assert differences(old, {**now, "like settings.max_len": 7}) != []


def test_the_length_penalty_steps_open_no_owner_file(ws):
    """The choice reads the cell's model and the public validation text only: no path of
    the owner's corpus is on its command line (the evaluation with it then decodes the
    owner's test set, as every evaluation does)."""
    from nmtfrag.study.plan import EVALUATE_LP, LENPEN

    write_parallel(make_corpus(5, seed=3), str(ws / "pubvalid"))
    text = GOOD.replace('public_align = "{d}/public"',
                        'public_align = "{d}/public"\npublic_valid = "{d}/pubvalid"')
    text = text.replace('[[cell]]', '[decode]\nlength_penalty = "public"\n[[cell]]', 1)
    config = read_config(write(ws, text))
    planner = Planner(config, str(ws / "OUT"))
    owner = {os.path.abspath(str(ws / "data" / f"{split}.{lang}"))
             for split in ("train", "valid", "test") for lang in ("de", "en")}
    for name in ("baseline", "sent", "len4-tag"):
        plan = planner.plan(name)
        choose, evaluate = plan.step(LENPEN), plan.step(EVALUATE_LP)
        assert choose is not None and evaluate is not None
        assert not owner & set(choose.argv), name
        assert str(ws / "pubvalid.de") in choose.argv
        assert evaluate.argv[evaluate.argv.index("--lenpen-from") + 1] == choose.out


def test_status_says_how_near_early_stopping_a_training_run_is(ws):
    """A running cell's progress names its best validation loss and how many of the
    `patience` validations have passed without a better one (fairseq's train.log)."""
    from nmtfrag.study.plan import Paths
    from nmtfrag.study.status import training_progress

    config = read_config(write(ws, GOOD))
    paths = Paths(str(ws / "out"))
    log = ws / "out" / "cells" / "sent" / FINETUNE / "train.log"
    log.parent.mkdir(parents=True)

    def valid(epoch, loss, best, updates):
        return (f"2026-11-28 09:23:43 | INFO | valid | epoch {epoch:03d} | valid on 'valid' "
                f"subset | loss {loss} | nll_loss 3.6 | ppl 12.3 | wps 3029.9 | wpb 724.7 | "
                f"bsz 21.6 | num_updates {updates} | best_loss {best}\n")
    log.write_text(valid(1, 5.2, 5.2, 250) + valid(1, 5.0, 5.0, 500)
                   + valid(2, 5.1, 5.0, 750))
    said = training_progress(paths, "sent", config)
    assert said == ("epoch 2 of ≤ 10, 750 updates; best valid loss 5.000, 1 of 2 "
                    "validations since without a better one")
    log.write_text(valid(1, 5.2, 5.2, 250) + valid(1, 4.9, 4.9, 500))
    assert training_progress(paths, "sent", config).endswith(
        "best valid loss 4.900, 0 of 2 validations since without a better one")


def test_status_gives_a_public_control_the_cap_of_its_like_cells_rule(ws):
    """A DP release's control trains the release's fixed passes (not the config's epoch
    cap) and waits for no validation: status says so, as it does for the release."""
    from nmtfrag.study.plan import Paths
    from nmtfrag.study.status import training_progress

    text = GOOD.replace('public_align = "{d}/public"',
                        'public_align = "{d}/public"\npublic_train = "{d}/public"')
    config = read_config(write(ws, text.replace('title = "t"', 'title = "t"\n[training]\nmax_epochs = 9', 1)
                               + DP_CONTROLS))
    paths = Paths(str(ws / "out"))
    passes = {n: config.cell(n).passes for n in ("rel8-pub", "comp8")}
    assert config.cell("sent").training.max_epochs == 9 and 9 not in passes.values()
    for cell, like in (("ctl-rel8", "rel8-pub"), ("ctl-comp8", "comp8"), ("rel8-pub", None)):
        log = ws / "out" / "cells" / cell / FINETUNE / "train.log"
        log.parent.mkdir(parents=True)
        log.write_text("2026-11-29 03:52:45 | INFO | train | epoch 002 | loss 4.1 | "
                       "num_updates 186\n")
        assert training_progress(paths, cell, config) == (
            f"epoch 2 of ≤ {passes[like or cell]}, 186 updates"), cell


def test_status_says_how_a_finished_run_ended_from_its_manifest(ws):
    """A finished fairseq run's line comes from finetune's manifest, in the report's words:
    train.log's losses are rounded (a validation equal to the best at three decimals
    reads as no worse) and its last epoch is the one the run stopped inside. A DP-SGD
    run keeps its DP step count; fixed passes (a DP release's control, a composed cell's
    control) say so."""
    import json

    from nmtfrag.study.plan import Paths
    from nmtfrag.study.report import training_figures
    from nmtfrag.study.status import training_progress

    text = GOOD.replace('public_align = "{d}/public"',
                        'public_align = "{d}/public"\npublic_train = "{d}/public"')
    config = read_config(write(ws, text + DP_CONTROLS))
    paths = Paths(str(ws / "out"))

    def valid(epoch, loss, best, updates):
        return (f"2026-11-28 19:45:51 | INFO | valid | epoch {epoch:03d} | valid on 'valid' "
                f"subset | loss {loss} | nll_loss 4.7 | ppl 26.4 | wps 1535.7 | wpb 944.4 | "
                f"bsz 30.2 | num_updates {updates} | best_loss {best}\n")

    def manifest(cell, updates, epochs, best, loss, max_epochs, stopped_early):
        (ws / "out" / "cells" / cell / FINETUNE / "manifest.json").write_text(json.dumps({
            "params": {"max_epochs": max_epochs, "max_updates": 0},
            "result": {"num_updates": updates, "epochs_completed": epochs,
                       "best_checkpoint_updates": best, "valid_loss_best": loss,
                       "stopped_early": stopped_early}}))

    for cell in ("sent", "ctl-rel8", "ctl-comp8", "dp8-pub"):
        (ws / "out" / "cells" / cell / FINETUNE).mkdir(parents=True)
    (ws / "out" / "cells" / "sent" / FINETUNE / "train.log").write_text(
        valid(1, 6.098, 6.098, 250) + valid(1, 6.098, 6.098, 500) + valid(2, 6.16, 6.098, 750))
    assert training_progress(paths, "sent", config).startswith("epoch 2 of ≤ 10, 750 updates")
    manifest("sent", 750, 1, 500, 6.0975, 10, True)
    said = training_progress(paths, "sent", config)
    assert said == ("early stop (validation): 750 updates (1 epoch completed), best at 500 "
                    "(valid loss 6.098)")
    assert said.startswith(training_figures(config, paths, "sent")["ended"] + ":")
    # the caps decide, as in the report: a manifest from before fairseq's flag was right
    # for epoch-capped runs says stopped_early false for a run stopped at epoch 4 of 10
    manifest("sent", 1600, 4, 1200, 4.5, 10, False)
    assert training_progress(paths, "sent", config).startswith(
        "early stop (validation): 1,600 updates (4 epochs completed), best at 1,200")
    manifest("sent", 4000, 10, 4000, 4.5, 10, False)
    assert training_progress(paths, "sent", config).startswith(
        "at its cap: 4,000 updates (10 epochs completed), best at 4,000")
    for cell, like in (("ctl-rel8", "rel8-pub"), ("ctl-comp8", "comp8")):
        passes = config.cell(like).passes
        manifest(cell, 186, passes, 186, None, passes, False)
        assert training_progress(paths, cell, config) == (
            f"fixed plan ({passes} pass{'es' * (passes != 1)}, last checkpoint): 186 updates "
            f"({passes} epoch{'s' * (passes != 1)} completed)"), cell
    (ws / "out" / "cells" / "ctl-rel8" / FINETUNE / "manifest.json").write_text("{")
    assert training_progress(paths, "ctl-rel8", config) is None  # unreadable: no figure
    owner = ws / "out" / "cells" / "dp8-pub" / FINETUNE / "owner"
    owner.mkdir()
    (owner / "train.log").write_text("step 1\nstep 2\nstep 3\n")
    manifest("dp8-pub", 3, None, 3, None, 0, False)
    assert training_progress(paths, "dp8-pub", config).startswith("DP step 3 of ")


def test_status_says_how_long_a_dp_run_has_left_at_its_median_pace(ws):
    """A DP-SGD run's line adds the time left: its steps to go at the median wall time of
    its last 10 steps (a step stretched by a pause must not decide it)."""
    from nmtfrag.study.plan import Paths
    from nmtfrag.study.status import training_progress

    text = GOOD.replace('public_align = "{d}/public"',
                        'public_align = "{d}/public"\npublic_train = "{d}/public"')
    config = read_config(write(ws, text + DP_CONTROLS))
    paths = Paths(str(ws / "out"))
    owner = ws / "out" / "cells" / "dp8-pub" / FINETUNE / "owner"
    owner.mkdir(parents=True)
    log = paths.log("dp8-pub", FINETUNE)
    os.makedirs(os.path.dirname(log), exist_ok=True)
    with open(log, "w", encoding="utf-8") as f:
        f.write("DP-SGD: n=120 sentences, 100 noisy steps, σ=1.0\n")
    seconds = [500, 500, 120, 120, 2000, 120, 110, 130, 120, 120, 120]  # 11 steps
    (owner / "train.log").write_text("".join(
        json.dumps({"step": k + 1, "seconds": s}) + "\n" for k, s in enumerate(seconds)))
    assert training_progress(paths, "dp8-pub", config) == (
        "DP step 11 of 100, about 3.0 h left at 2.0 min a step (median of the last 10)")
    (owner / "train.log").write_text("".join(
        json.dumps({"step": k + 1, "seconds": 30}) + "\n" for k in range(98)))
    assert training_progress(paths, "dp8-pub", config).endswith(
        "DP step 98 of 100, about 1 min left at 30 s a step (median of the last 10)")
    (owner / "train.log").write_text("step 1\n")  # no timed record: no estimate
    assert training_progress(paths, "dp8-pub", config) == "DP step 1 of 100"


def test_the_demo_config_names_every_key():
    """corpora/demo/study.toml is the documentation of every key (the README and `study
    --help` say so): a key the reader accepts must appear there, set or in a comment as
    `key = …` or `key (default)`, and every table as `[table]`."""
    from nmtfrag.study import config as cfg
    text = open("corpora/demo/study.toml", encoding="utf-8").read()
    keys = cfg._MODEL_KEYS | cfg._EVERY_CELL_KEYS
    for section in (cfg.Data, cfg.Training, cfg.Audit, cfg.Decode, cfg.Machine):
        keys |= set(section.__dataclass_fields__)
    for approach_keys in cfg._CELL_KEYS.values():
        keys |= approach_keys
    missing = [k for k in sorted(keys | cfg._TOP)
               if not re.search(rf"\b{re.escape(k)} *(=|\()|\[{re.escape(k)}\]", text)]
    assert missing == []
