"""One name per idea, old names kept: every older spelling of an option parses exactly as
its canonical name (nmtfrag.cli.options), so scripts and notes written with it keep
working; `--help` shows both; a parse error names the spelling the user typed."""
from __future__ import annotations

import argparse

import pytest

from nmtfrag.cli import arg_types as ct
from nmtfrag.cli import build_parser, main

PARSER = build_parser()

# the options each command cannot parse without (placeholders: nothing is read)
REQUIRED = {
    "extract": ["--out", "o"],
    "finetune": ["--model", "m", "--valid-src", "v", "--valid-tgt", "w", "--out", "o"],
    "evaluate": ["--src", "s", "--ref", "r", "--out", "o"],
    "translate": ["--model", "m"],
    "vocab": ["--dp", "--sigma", "1", "--delta", "1e-5", "--out", "o"],
    "privacy": [],
    "split": ["--out", "o"],
    "stats": [],
    "opus2tsv": ["--out", "o.tsv"],
    "align-model": ["--public", "p", "--out", "o"],
    "audit reconstruct": ["--release", "r", "--src", "s", "--tgt", "t", "--out", "o"],
    "audit membership": ["--model", "m", "--members", "a", "--non-members", "b",
                         "--out", "o"],
}

# (command, older spelling, canonical name): the spellings commands had before the
# names were unified; each must keep working where it worked
OLD_SPELLINGS = [
    ("evaluate", "--tokenized", "--pretokenized"),
    ("translate", "--tokenized", "--pretokenized"),
    ("stats", "--tokenize", "--raw-text"),
    ("finetune", "--target-epsilon", "--epsilon"),
    ("privacy", "--target-epsilon", "--epsilon"),
    ("finetune", "--max-epoch", "--max-epochs"),
    ("finetune", "--max-update", "--max-updates"),
    ("opus2tsv", "--doc-prop", "--tmx-doc-prop"),
]

VALUES = {ct.epsilon: "2", ct.positive_int: "3", None: "x"}  # a valid value per type


def _command_parser(command: str) -> argparse.ArgumentParser:
    parser = PARSER
    for word in command.split():
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return parser


def _action(command: str, spelling: str) -> argparse.Action:
    parser = _command_parser(command)
    return next(a for a in parser._actions if spelling in a.option_strings)


def _parse(command: str, extra: list[str]) -> argparse.Namespace:
    return PARSER.parse_args([*command.split(), *REQUIRED[command], *extra])


def _with(action: argparse.Action, spelling: str) -> list[str]:
    if action.nargs == 0:  # a flag
        return [spelling]
    return [spelling, VALUES[action.type]]


def _aliased() -> list[tuple[str, str, str]]:
    """(command, other spelling, canonical) for every option declared with several long
    names, in every command that has one."""
    found = []
    for command in REQUIRED:
        for a in _command_parser(command)._actions:
            long_names = [o for o in a.option_strings if o.startswith("--")]
            found += [(command, o, long_names[0]) for o in long_names[1:]]
    return found


@pytest.mark.parametrize("command, old, canonical", OLD_SPELLINGS)
def test_old_spelling_is_an_alias_of_the_canonical_name(command, old, canonical):
    action = _action(command, canonical)
    assert old in action.option_strings, f"{command}: {old} no longer accepted"
    assert action.option_strings[0] == canonical


@pytest.mark.parametrize("command, old, canonical",
                         sorted(set(OLD_SPELLINGS) | set(_aliased())))
def test_alias_parses_to_the_same_namespace(command, old, canonical):
    action = _action(command, canonical)
    by_alias = _parse(command, _with(action, old))
    by_name = _parse(command, _with(action, canonical))
    assert vars(by_alias) == vars(by_name)
    assert getattr(by_name, action.dest) != action.default  # the option did reach dest
    assert vars(by_name) != vars(_parse(command, []))


def test_every_command_with_a_shared_alias_is_covered():
    assert {c for c, _, _ in OLD_SPELLINGS} <= set(REQUIRED)
    assert len(_aliased()) >= 15  # --tokenized in 8 commands, --target-epsilon in 3, …


@pytest.mark.parametrize("command, shown", [
    ("evaluate", "--pretokenized, --tokenized"), ("translate", "--pretokenized, --tokenized"),
    ("extract", "--pretokenized, --tokenized"), ("stats", "--raw-text, --tokenize"),
    ("privacy", "--epsilon EPS, --target-epsilon EPS"),
    ("finetune", "--epsilon EPS, --target-epsilon EPS"),
    ("opus2tsv", "--tmx-doc-prop NAME, --doc-prop NAME"),
])
def test_help_shows_both_spellings(command, shown):
    text = " ".join(_command_parser(command).format_help().split())
    assert shown in text


@pytest.mark.parametrize("typed, other", [("--target-epsilon", "--epsilon"),
                                          ("--epsilon", "--target-epsilon")])
def test_parse_error_names_the_spelling_typed(typed, other, capsys):
    assert main(["privacy", typed, "inf"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {typed} must be"), err
    assert f"{other} " not in err and "/" not in err.split(" must")[0]
    assert len(err.splitlines()) == 1
