"""Looking at a study (`study status`, `study report`) without running it (issue 45): a
config's relative paths resolve from its own directory, the `${VAR}`s a run used are
recorded owner-only and stand in for unset ones, and another study's config is refused
instead of shown as OUT's (pending cells hiding the real ones). No model is loaded: the
model dir only has to hold its files."""
import json
import os
import stat

import pytest

from tinymodel import make_corpus, write_parallel

from nmtfrag.errors import InputError
from nmtfrag.study.config import BASELINE, read_config, read_config_for
from nmtfrag.study.record import check_and_record, check_same_study, settings_now
from nmtfrag.study.status import study_status

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CONFIG = """
title = "{title}"
[model]
dir = "${{LOOK_MODELS}}/m"
[data]
train = "${{LOOK_DATA}}/{dom}/train"
valid = "${{LOOK_DATA}}/{dom}/valid"
test = "${{LOOK_DATA}}/{dom}/test"
[[cell]]
name = "{cell}"
approach = "sentences"
"""


@pytest.fixture
def ws(tmp_path, monkeypatch):
    """Two domains' data, a model dir with its files (never loaded), a study config for
    each, and study A recorded in OUT as `study run` records it."""
    m = tmp_path / "models" / "m"
    os.makedirs(m)
    for name in ("dict.de.txt", "dict.en.txt", "bpecodes"):
        (m / name).write_text("x 1\n")
    (m / "model.pt").write_bytes(b"not loaded")
    for seed, dom in enumerate(("A", "B")):
        os.makedirs(tmp_path / "data" / dom)
        for split in ("train", "valid", "test"):
            write_parallel(make_corpus(6, seed=seed * 10 + len(split)),
                           str(tmp_path / "data" / dom / split))
    monkeypatch.setenv("LOOK_MODELS", str(tmp_path / "models"))
    monkeypatch.setenv("LOOK_DATA", str(tmp_path / "data"))
    configs = {}
    for name, dom, cell in (("a", "A", "sent"), ("b", "B", "sent"), ("c", "A", "other")):
        configs[name] = tmp_path / f"{name}.toml"
        configs[name].write_text(CONFIG.format(title=f"study {name}", dom=dom, cell=cell),
                                 encoding="utf-8")
    out = tmp_path / "OUT"
    os.makedirs(out)
    config = read_config(str(configs["a"]))
    check_and_record(config, str(out / "study.json"),
                     settings_now(config, [BASELINE, "sent"], load_model=False))
    return tmp_path, configs, out


def test_relative_paths_resolve_from_the_config_and_the_demo_parses_anywhere(tmp_path,
                                                                            monkeypatch):
    os.makedirs(tmp_path / "cfg" / "data")
    os.makedirs(tmp_path / "elsewhere" / "m")
    for split in ("train", "valid", "test"):
        write_parallel(make_corpus(4), str(tmp_path / "cfg" / "data" / split))
    (tmp_path / "cfg" / "s.toml").write_text(
        '[model]\ndir = "${LOOK_M}"\n[data]\ntrain = "data/train"\nvalid = "data/valid"\n'
        'test = "./data/../data/test"\n[[cell]]\nname = "s"\napproach = "sentences"\n',
        encoding="utf-8")
    monkeypatch.chdir(tmp_path / "elsewhere")
    monkeypatch.setenv("LOOK_M", "m")  # a ${VAR} at the start: the shell's, from cwd
    c = read_config(str(tmp_path / "cfg" / "s.toml"))
    assert c.data.train == str(tmp_path / "cfg" / "data" / "train")
    assert c.data.test == str(tmp_path / "cfg" / "data" / "test")
    assert c.model == str(tmp_path / "elsewhere" / "m")
    assert c.variables == (("LOOK_M", str(tmp_path / "elsewhere" / "m")),)
    # the shipped demo config, read from a directory that is not the repository's root
    monkeypatch.setenv("DEMO_MODEL", "m")
    demo = read_config(os.path.join(ROOT, "corpora", "demo", "study.toml"))
    assert demo.data.train == os.path.join(ROOT, "corpora", "demo", "train")
    assert demo.model == str(tmp_path / "elsewhere" / "m")


def test_a_run_records_its_variables_owner_only_and_a_look_uses_them(ws, monkeypatch):
    tmp, configs, out = ws
    rec = out / "owner" / "variables.json"
    assert json.loads(rec.read_text())["variables"] == {
        "LOOK_DATA": str(tmp / "data"), "LOOK_MODELS": str(tmp / "models")}
    assert stat.S_IMODE(os.stat(out / "owner").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(rec).st_mode) == 0o600
    assert str(tmp) not in (out / "study.json").read_text()  # the shared record: no path
    monkeypatch.delenv("LOOK_DATA")
    monkeypatch.delenv("LOOK_MODELS")
    with pytest.raises(InputError, match=r"\$\{LOOK_DATA\} is not set in the environment$"):
        read_config(str(configs["a"]))
    config = read_config_for(str(configs["a"]), str(out))
    assert config.data.test == str(tmp / "data" / "A" / "test")
    holder, rows = study_status(config, str(out))
    assert holder is None and [r["cell"] for r in rows] == [BASELINE, "sent"]
    with pytest.raises(InputError, match=r"LOOK_DATA\}.*nor recorded"):
        read_config_for(str(configs["a"]), str(tmp / "not-a-study"))
    # a variable set here wins over the recorded one (and the check below guards it)
    monkeypatch.setenv("LOOK_DATA", str(tmp / "elsewhere"))
    with pytest.raises(InputError, match="no such file"):
        read_config_for(str(configs["a"]), str(out))


@pytest.mark.parametrize("other,says", [
    ("b", "its baseline differs: data.test.de sha256: recorded"),
    ("c", "none of its cells was run there (it records sent)"),
])
def test_another_studys_config_is_refused_by_status(ws, other, says, capsys):
    from nmtfrag.cli import main

    tmp, configs, out = ws
    with pytest.raises(InputError, match="not the study in .*'study a'"):
        check_same_study(read_config(str(configs[other])), str(out))
    assert main(["study", "status", str(configs[other]), "--out", str(out)]) == 2
    cap = capsys.readouterr()
    err = [ln for ln in cap.err.splitlines() if ln.strip()]
    assert cap.out == "" and len(err) == 1 and err[0].startswith("error: "), err
    assert says in err[0]
    assert main(["study", "status", str(configs["a"]), "--out", str(out)]) == 0
    assert "sent" in capsys.readouterr().out


def test_an_edited_cell_is_named_and_an_added_one_is_pending(ws):
    tmp, configs, out = ws
    text = configs["a"].read_text()
    configs["a"].write_text(text + '[[cell]]\nname = "new"\napproach = "sentences"\n')
    _, rows = study_status(read_config(str(configs["a"])), str(out))
    assert {r["cell"]: r["state"] for r in rows}["new"] == "pending"
    configs["a"].write_text(text.replace('approach = "sentences"',
                                         'approach = "sentences"\ntraining = {lr = 0.1}'))
    with pytest.raises(InputError, match=r"cell 'sent' was recorded in .* training\.lr: "
                                         r"recorded 0\.000175, now 0\.1"):
        study_status(read_config(str(configs["a"])), str(out))


def test_status_needs_no_variables_from_the_command_line(ws, monkeypatch, capsys):
    from nmtfrag.cli import main

    tmp, configs, out = ws
    monkeypatch.delenv("LOOK_DATA")
    monkeypatch.delenv("LOOK_MODELS")
    assert main(["study", "status", str(configs["a"]), "--out", str(out)]) == 0
