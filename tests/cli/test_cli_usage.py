"""Usage errors caught while parsing (issue 45): an empty path is refused by every
option that takes one, before anything is written (`extract --out ""` wrote its release
into the current directory), and an unknown option's hint names the command that met
it (`nmtfrag extract --help`, not `nmtfrag --help`)."""
import argparse
import os

import pytest

from nmtfrag.cli import arg_types, build_parser, main
from test_output_guard import tree
from tinymodel import make_corpus, write_parallel


def _path_options():
    """(command words, option or positional name, nargs) of every option whose metavar
    names a path, in every (sub)command."""
    found = []

    def walk(parser, words):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, words + [name])
                continue
            names = action.metavar if isinstance(action.metavar, tuple) else (action.metavar,)
            if any(n in arg_types.PATH_METAVARS for n in names):
                found.append((words, action, action.nargs))

    walk(build_parser(), [])
    return found


PATH_OPTIONS = _path_options()


def test_every_command_has_its_path_options_checked():
    commands = {" ".join(w) for w, _, _ in PATH_OPTIONS}
    assert {"extract", "finetune", "evaluate", "study run", "audit reconstruct",
            "opus2tsv", "privacy"} <= commands
    assert all(a.type is arg_types.path for _, a, _ in PATH_OPTIONS)


@pytest.mark.parametrize("words,action,nargs", PATH_OPTIONS,
                         ids=[" ".join(w) + " " + (a.option_strings or [a.dest])[0]
                              for w, a, _ in PATH_OPTIONS])
def test_an_empty_path_is_one_error_line_naming_the_option(words, action, nargs, capsys,
                                                           tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    values = ["", "x"] if nargs == 2 else [""]
    argv = words + ([action.option_strings[0]] if action.option_strings else []) + values
    code = main(argv)
    captured = capsys.readouterr()
    # the output goes into the message: a rare failure under load (an exit code not 2,
    # once, in a full run beside a training) left nothing to tell its cause by
    assert code == 2, (code, captured.err[-2000:], captured.out[-500:])
    err = [ln for ln in captured.err.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("error: "), err
    name = action.option_strings[0] if action.option_strings else action.metavar
    assert f"{name} must be a path, got an empty string" in err[0], err[0]
    assert f"(see `nmtfrag {' '.join(words)} --help`)" in err[0]
    assert os.listdir(tmp_path) == []


def test_extract_out_empty_writes_nothing_into_the_current_directory(tmp_path, capsys,
                                                                     monkeypatch):
    data, cwd = tmp_path / "data", tmp_path / "cwd"
    os.makedirs(data)
    os.makedirs(cwd)
    src, tgt = write_parallel(make_corpus(20), str(data / "train"))
    before = tree(data)
    monkeypatch.chdir(cwd)
    assert main(["extract", "--src", src, "--tgt", tgt, "--out", "", "--pretokenized",
                 "--seed", "1"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert err == ["error: --out must be a path, got an empty string "
                   "(see `nmtfrag extract --help`)"]
    assert os.listdir(cwd) == [] and tree(data) == before


@pytest.mark.parametrize("argv,prog", [
    (["extract", "--src", "a", "--tgt", "b", "--out", "o", "--bogus"], "nmtfrag extract"),
    (["evaluate", "--src", "a", "--ref", "b", "--out", "o", "--bogus", "3"],
     "nmtfrag evaluate"),
    (["study", "run", "c.toml", "--out", "o", "--bogus"], "nmtfrag study run"),
    (["audit", "canaries", "insert", "--src", "a", "--tgt", "b", "--out", "o", "--zz"],
     "nmtfrag audit canaries insert"),
    (["--bogus", "stats", "--src", "a"], "nmtfrag"),  # before any command: the top one
])
def test_an_unknown_option_points_to_the_help_of_the_command_that_met_it(argv, prog,
                                                                         capsys):
    assert main(argv) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("error: unrecognized arguments: "), err
    assert err[0].endswith(f"(see `{prog} --help`)"), err[0]


def test_a_command_line_parses_as_before():
    """The namespace carries no trace of the hint's bookkeeping."""
    args = build_parser().parse_args(["extract", "--src", "a", "--tgt", "b", "--out", "o"])
    assert args.out == "o" and not any(k.startswith("_nmtfrag") for k in vars(args))
