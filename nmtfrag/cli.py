"""The `nmtfrag` command: parses arguments and calls the stage functions.

Each subcommand lives in `nmtfrag/commands/<name>.py` with `HELP`, `add_arguments(parser)`
and `run(args)`. Command modules import heavy libraries (torch, fairseq) inside `run`,
so `nmtfrag --help` stays fast. Exit codes: 0 success, 2 bad usage or input (one
`error:` line), 1 internal failure.
"""
import argparse
import importlib
import os
import signal
import sys

from . import __version__
from .errors import InputError

# (subcommand, module) in the order `nmtfrag --help` lists them.
COMMANDS = [
    ("extract", "nmtfrag.commands.extract"),
    ("align-model", "nmtfrag.commands.align_model"),
    ("finetune", "nmtfrag.commands.finetune"),
    ("evaluate", "nmtfrag.commands.evaluate"),
    ("translate", "nmtfrag.commands.translate"),
    ("vocab", "nmtfrag.commands.vocab"),
    ("privacy", "nmtfrag.commands.privacy"),
    ("split", "nmtfrag.commands.split"),
    ("stats", "nmtfrag.commands.stats"),
    ("opus2tsv", "nmtfrag.commands.opus2tsv"),
    ("audit", "nmtfrag.commands.audit"),
]


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on bad usage already; keep its message to one `error:` line."""

    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(2, f"error: {message}\n")


def build_parser():
    parser = _Parser(
        prog="nmtfrag",
        description="Adapt neural machine translation to confidential data: release "
                    "phrase pairs instead of sentences, fine-tune on them, train with "
                    "differential privacy, and audit what leaks.",
        epilog="Run `nmtfrag COMMAND --help` for the options of each command.",
    )
    parser.add_argument("--version", action="version", version=f"nmtfrag {__version__}")
    parser.add_argument("-v", "--verbose", dest="show_third_party", action="store_true",
                        help="also show the warnings and INFO lines of fairseq, hydra, "
                             "torch and opacus (hidden by default)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name, module_name in COMMANDS:
        module = importlib.import_module(module_name)
        doc = (module.__doc__ or "").strip()
        p = sub.add_parser(name, help=module.HELP, description=doc or module.HELP,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def _exit_on_sigterm(signum, frame):
    sys.exit(128 + signum)


def main(argv=None):
    # fairseq calls torch.load without weights_only=False; torch >= 2.6 then refuses
    # every fairseq checkpoint. The flag is read at call time, so setting it here
    # covers all our commands without touching the user's shell.
    os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    args = build_parser().parse_args(argv)
    from .quiet import install

    # before any command imports fairseq: its import-time logging set-up then does nothing
    install(verbose=args.show_third_party or getattr(args, "verbose", False))
    # Turn `kill` (SIGTERM) into a normal exit so `finally` blocks run: private work dirs
    # holding confidential text are removed and no half-written file is renamed into place.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    # SIGKILL skips every `finally`: remove what killed runs left in private work dirs.
    from .fileio import sweep_stale_workdirs

    sweep_stale_workdirs((getattr(args, "work_dir", None),))
    try:
        code = args._run(args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `nmtfrag stats ... | head` closed the pipe early
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes
        return 1
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
