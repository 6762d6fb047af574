"""Every `nmtfrag` command that README.md and docs/ show in a fenced block runs as shown,
unless a rule below says why it cannot run here (issue 45: pasted examples failed).

The rule. A command is a line of a fenced block without an info string (```; blocks marked
```python, ```text (help output), ```yaml … are not commands), joined over trailing
backslashes, whose first word after `VAR=value` assignments or an `echo … |` is `nmtfrag`
(set-up steps such as `sudo apt-get`, `bash scripts/…` and `pytest` are not checked here).
It runs unless a SKIP pattern matches it; each pattern names why: it trains, it needs a
trained model, public text, an earlier example's output or a study run, or it holds a
placeholder (`…`, `[--option]`). Every pattern must skip something (no dead rules) and at
least MIN_RUN commands must run. The commands that run are the cheap ones: `privacy`
plans, `extract`, `vocab --dp`, `audit canaries insert` on the demo corpus.

Each runs through bash in a temporary directory that holds `corpora/demo/` and the demo's
train/valid/test.{de,en} under the plain names the guides use (train.de, …), with
`nmtfrag` on PATH as this tree's `python -m nmtfrag`; a failure names the page, line and
command. `nmtfrag study run CONFIG` is not run (it trains) but is checked to set every
`${VAR}` its CONFIG uses, so that it pastes.
"""
import os
import re
import shutil
import subprocess
import sys

import pytest

from test_docs_links import ROOT, doc_files

FENCE = re.compile(r"^ {0,3}(```+|~~~+)\s*(\S*)")
LEAD = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(?:echo\s+(?:\"[^\"]*\"|\S+)\s*\|\s*)?"
                  r"nmtfrag\s")
MIN_RUN = 6
TIMEOUT_S = 300

# (pattern, why a matching command is not run here)
SKIP = [
    (r"\bstudy run\b", "trains every cell (minutes to days); the variables its config "
                       "needs are checked below"),
    (r"\bstudy (status|report|import)\b", "needs a study directory made by `study run`"),
    (r"--model\b|--extend\b", "needs a trained model directory"),
    (r"…|\.\.\.|\[--", "holds a placeholder (… or [--option]) to fill in"),
    (r"\sgeneric/", "needs public text (generic/), which does not ship with nmtfrag"),
    (r"--release release/|nmtfrag privacy (dp-release|dp_model)/",
     "reads an earlier example's output"),
    (r"--runs runs\.yaml", "reads a runs file the user writes"),
]


def fenced_commands():
    """(page, line, command) of every command (see the module docstring)."""
    found = []
    for page in doc_files():
        with open(os.path.join(ROOT, page), encoding="utf-8") as f:
            lines = f.read().split("\n")
        fence = info = None
        pending, start = "", 0
        for i, line in enumerate(lines, 1):
            m = FENCE.match(line)
            if fence is None:
                if m:
                    fence, info = m.group(1), m.group(2)
                continue
            if line.strip().startswith(fence):
                fence = None
                continue
            if info:
                continue
            if not pending:
                start = i
            pending += line.rstrip()
            if pending.endswith("\\"):
                pending = pending[:-1] + " "
                continue
            command, pending = " ".join(pending.split()), ""
            if LEAD.match(command + " "):
                found.append((page, start, command))
    return found


def skip_reason(command):
    shown = command.split(" # ")[0]
    return next((why for pattern, why in SKIP if re.search(pattern, shown)), None)


COMMANDS = fenced_commands()


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory):
    """`nmtfrag` on PATH: this tree's, whatever is installed."""
    d = tmp_path_factory.mktemp("bin")
    exe = d / "nmtfrag"
    exe.write_text(f"#!/bin/sh\nexec {sys.executable} -m nmtfrag \"$@\"\n")
    exe.chmod(0o755)
    return str(d)


@pytest.mark.parametrize("page,line,command", COMMANDS,
                         ids=[f"{p}:{n}" for p, n, _ in COMMANDS])
def test_a_documented_command_runs_as_shown(page, line, command, bin_dir, tmp_path):
    why = skip_reason(command)
    if why:
        pytest.skip(f"{page}:{line}: {why}")
    demo = os.path.join(ROOT, "corpora", "demo")
    shutil.copytree(demo, tmp_path / "corpora" / "demo")
    for split in ("train", "valid", "test"):
        for lang in ("de", "en"):
            shutil.copy(os.path.join(demo, f"{split}.{lang}"), tmp_path / f"{split}.{lang}")
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""),
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OMP_NUM_THREADS="1")
    proc = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, (f"{page}:{line}: `{command}` exited {proc.returncode}:\n"
                                  f"{proc.stderr[-2000:]}")


def test_the_rule_runs_enough_and_every_skip_pattern_skips_something():
    shown = [c.split(" # ")[0] for _, _, c in COMMANDS]
    dead = [p for p, _ in SKIP if not any(re.search(p, c) for c in shown)]
    assert dead == []
    ran = [c for _, _, c in COMMANDS if skip_reason(c) is None]
    assert len(ran) >= MIN_RUN, ran


def test_a_documented_study_run_sets_every_variable_of_its_config():
    checked = 0
    for page, line, command in COMMANDS:
        m = re.search(r"nmtfrag study run (\S+)", command)
        if not m or not os.path.isfile(os.path.join(ROOT, m.group(1))):
            continue
        with open(os.path.join(ROOT, m.group(1)), encoding="utf-8") as f:
            needed = set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}",
                                    re.sub(r"#.*", "", f.read())))
        given = set(re.findall(r"(?:^|\s)([A-Za-z_][A-Za-z0-9_]*)=", command[:m.start()]))
        assert needed <= given, (f"{page}:{line}: `{command}` does not set "
                                 f"{', '.join(sorted(needed - given))}")
        checked += 1
    assert checked
