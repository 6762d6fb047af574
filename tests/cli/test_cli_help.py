"""Every option of every command says what it does and, when it has one, its default;
options a command cannot run without are marked required by argparse, so `--help` and
the usage line show them without brackets."""
import argparse

import pytest

from nmtfrag.cli import build_parser


def _parsers(parser, name="nmtfrag"):
    """(command name, parser) for the top-level parser and every (nested) subcommand."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, p in action.choices.items():
                yield from _parsers(p, f"{name} {sub}")


PARSERS = dict(_parsers(build_parser()))
SILENT_DEFAULTS = (None, False, [], argparse.SUPPRESS)


def _options(parser):
    return [a for a in parser._actions if a.option_strings
            and not isinstance(a, (argparse._HelpAction, argparse._VersionAction))]


def test_walk_finds_every_command():
    # the top level, 10 commands, `audit` and its 5 audits, `audit canaries insert`
    assert {"nmtfrag extract", "nmtfrag finetune", "nmtfrag vocab",
            "nmtfrag audit membership", "nmtfrag audit compare"} <= set(PARSERS)
    assert sum(len(_options(p)) for p in PARSERS.values()) > 150


@pytest.mark.parametrize("command", sorted(PARSERS))
def test_every_option_has_help_and_its_default(command):
    parser = PARSERS[command]
    assert parser.format_help()  # every %(default)s / %% in the help texts expands
    for a in _options(parser):
        opt = a.option_strings[-1]
        assert a.help and a.help.strip() and a.help != argparse.SUPPRESS, \
            f"{command} {opt}: no help text"
        if a.default in SILENT_DEFAULTS or isinstance(a, argparse._StoreConstAction):
            continue
        shown = parser._get_formatter()._expand_help(a)  # %(default)s filled in
        spellings = {str(a.default)} | ({f"{a.default:g}"} if isinstance(
            a.default, float) else set())
        assert "default" in shown.lower() and any(x in shown for x in spellings), \
            f"{command} {opt}: default {a.default!r} not in its help: {shown!r}"


def test_required_options_show_as_required():
    usage = PARSERS["nmtfrag vocab"].format_usage()
    for opt in ("--dp", "--delta", "--sigma", "--out"):
        assert f" {opt}" in usage and f"[{opt}" not in usage, usage
    with pytest.raises(SystemExit) as e:
        PARSERS["nmtfrag"].parse_args(["vocab", "--src", "a", "--tgt", "b", "--sigma", "1",
                                       "--out", "o", "--dp"])
    assert e.value.code == 2  # no --delta: refused by argparse before anything runs
