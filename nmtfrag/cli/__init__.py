"""The `nmtfrag` command: parses arguments and calls the stage functions.

Each subcommand lives in `nmtfrag/cli/<name>.py` with `HELP`, `add_arguments(parser)`
and `run(args)`. Command modules import heavy libraries (torch, fairseq) inside `run`,
so `nmtfrag --help` stays fast. Exit codes: 0 success, 2 bad usage or input (one
`error:` line naming the option or file), 1 internal failure (one `error: internal
error:` line; `--debug` shows the traceback instead). An output directory that a failed
run created is removed (see `outdir.remove_created_outputs`). A run holds a lock on its
output directory until it ends (`outlock.lock_output_dir`).
"""
from __future__ import annotations

import argparse
import importlib
import os
import re
import signal
import sys
from typing import Any, Iterable, NoReturn, Optional, Sequence

from .. import __version__
from ..errors import InputError, ToolFailed, interruption_note, is_disk_error

# (subcommand, module) in the order `nmtfrag --help` lists them.
COMMANDS = [
    ("extract", "nmtfrag.cli.extract"),
    ("align-model", "nmtfrag.cli.align_model"),
    ("finetune", "nmtfrag.cli.finetune"),
    ("evaluate", "nmtfrag.cli.evaluate"),
    ("translate", "nmtfrag.cli.translate"),
    ("length-penalty", "nmtfrag.cli.length_penalty"),
    ("vocab", "nmtfrag.cli.vocab"),
    ("privacy", "nmtfrag.cli.privacy"),
    ("split", "nmtfrag.cli.split"),
    ("stats", "nmtfrag.cli.stats"),
    ("opus2tsv", "nmtfrag.cli.opus2tsv"),
    ("audit", "nmtfrag.cli.audit"),
    ("study", "nmtfrag.cli.study"),
]


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on bad usage already; keep its message to one `error:` line,
    naming an option by the spelling the user typed (an option may have an older
    alias, nmtfrag.cli.options)."""

    def parse_known_args(self, args: Iterable[str] | None = None,
                         namespace: Any = None) -> tuple[Any, list[str]]:
        args = list(sys.argv[1:] if args is None else args)
        self._typed = args
        ns, extras = super().parse_known_args(args, namespace)
        if extras and not hasattr(ns, _EXTRAS_PROG):  # the innermost parser with extras
            setattr(ns, _EXTRAS_PROG, self.prog)      # returns first: its name is kept
        return ns, extras

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: Any = None) -> Any:
        """argparse's, with an unrecognised option's hint naming the (sub)command that
        met it: `nmtfrag extract --help`, not `nmtfrag --help`."""
        ns, extras = self.parse_known_args(args, namespace)
        prog = vars(ns).pop(_EXTRAS_PROG, self.prog)
        if extras:
            self._usage_error(f"unrecognized arguments: {' '.join(extras)}", prog)
        return ns

    def error(self, message: str) -> NoReturn:
        self._usage_error(message, self.prog)

    def _usage_error(self, message: str, prog: str) -> NoReturn:
        message = _option_message(message, getattr(self, "_typed", ()))
        self.exit(2, f"error: {one_line(message)} (see `{prog} --help`)\n")


# the Namespace attribute that names the parser which met unrecognised arguments
_EXTRAS_PROG = "_nmtfrag_extras_prog"


def _option_message(message: str, typed: Sequence[str] = ()) -> str:
    """argparse's "argument --beam: must be ≥ 1, got 0" as "--beam must be ≥ 1, got 0":
    the option named once, by the spelling among its aliases ("--epsilon/--target-epsilon")
    that the user typed (`typed`: the command line), else by the first, canonical one."""
    m = re.match(r"argument (\S+?(?:/\S+)*): (.*)", message, re.S)
    if not m:
        return message
    spellings, rest = m.group(1).split("/"), m.group(2)
    opt = _typed_spelling(spellings, typed) or spellings[0]
    return f"{opt} {rest}" if rest.startswith("must") else f"{opt}: {rest}"


def _typed_spelling(spellings: Sequence[str], typed: Sequence[str]) -> str | None:
    """Which of an option's spellings the command line used: exactly, as `--opt=value`,
    or abbreviated (argparse accepts an unambiguous prefix); None if none."""
    words = [a.split("=", 1)[0] for a in typed if a.startswith("-")]
    for match in (lambda o, w: o == w, lambda o, w: len(w) > 2 and o.startswith(w)):
        found = [o for o in spellings if any(match(o, w) for w in words)]
        if found:
            return found[0]
    return None


def one_line(text: object, limit: int = 500) -> str:
    """`text` on one line (whitespace runs collapsed), cut at `limit` characters: an
    error report is one line, whatever a library put in its message."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="nmtfrag",
        description="Adapt neural machine translation to confidential data: release "
                    "phrase pairs instead of sentences, fine-tune on them, train with "
                    "differential privacy, and audit what leaks.",
        epilog="Run `nmtfrag COMMAND --help` for the options of each command.",
    )
    parser.add_argument("--version", action="version", version=f"nmtfrag {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="on an internal error, show the Python traceback instead of "
                             "one line (may also follow the command's own options)")
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
    _refuse_empty_paths(parser)
    return parser


def _refuse_empty_paths(parser: argparse.ArgumentParser) -> None:
    """Every option (of every subcommand) whose metavar names a path and that has no
    `type` gets `arg_types.path`: "" is refused while parsing, before anything is
    written. Why: `extract --out ""` wrote its release into the current directory."""
    from .arg_types import PATH_METAVARS, path

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                _refuse_empty_paths(sub)
            continue
        metavar = action.metavar
        names = metavar if isinstance(metavar, tuple) else (metavar,)
        if action.type is None and action.nargs != 0 and \
                any(n in PATH_METAVARS for n in names):
            action.type = path


def _exit_on_sigterm(signum, frame):
    sys.exit(128 + signum)


def _split_debug(argv):
    """(argv without --debug, whether it was there): --debug is accepted anywhere before
    a `--`, so it can follow a subcommand's options too."""
    argv = list(sys.argv[1:] if argv is None else argv)
    end = argv.index("--") if "--" in argv else len(argv)
    debug = "--debug" in argv[:end]
    return [a for k, a in enumerate(argv) if k >= end or a != "--debug"], debug


def _os_error_line(exc):
    """One line for an OSError about a path (unreadable input, unwritable output, disk
    full): the path and the system's reason."""
    where = exc.filename if exc.filename is not None else ""
    if getattr(exc, "filename2", None):
        where = f"{where} -> {exc.filename2}"
    reason = exc.strerror or exc.__class__.__name__
    return f"error: {where}: {reason}" if where else f"error: {reason}"


def _interrupted(exc):
    """The one line of a run stopped by SIGINT or SIGTERM: what it kept and how to go on,
    where the command said (nmtfrag.errors.note_interruption)."""
    note = interruption_note(exc)
    return one_line(f"error: interrupted: {note}" if note else "error: interrupted")


def _fail(message, user_error):
    """Print the one error line and remove any output directory this run created."""
    from ..outdir import remove_created_outputs

    remove_created_outputs(user_error)
    print(one_line(message), file=sys.stderr)


def main(argv: Optional[Sequence[str]] = None) -> int:
    # fairseq calls torch.load without weights_only=False; torch >= 2.6 then refuses
    # every fairseq checkpoint. The flag is read at call time, so setting it here
    # covers all our commands without touching the user's shell.
    os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    argv, debug = _split_debug(argv)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # a usage error: its one line is printed, return its code
        if exc.code == 2:      # (--help and --version still exit, with code 0)
            return 2
        raise
    debug = debug or args.debug
    from ..quiet import install

    # before any command imports fairseq: its import-time logging set-up then does nothing
    install(verbose=args.show_third_party or getattr(args, "verbose", False))
    # Turn `kill` (SIGTERM) into a normal exit so `finally` blocks run: private work dirs
    # holding confidential text are removed and no half-written file is renamed into place.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    # SIGKILL skips every `finally`: remove what killed runs left in private work dirs.
    from ..outdir import CREATED_OUTPUTS
    from ..outlock import release_output_locks
    from ..workdir import sweep_stale_workdirs

    CREATED_OUTPUTS.clear()
    work_dir = getattr(args, "work_dir", None)
    sweep_stale_workdirs((work_dir,) if work_dir else ())
    try:
        code = args._run(args)
    except InputError as exc:
        _fail(f"error: {exc}", user_error=True)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C: a resumable run says what it kept
        _fail(_interrupted(exc), user_error=False)
        return 130
    except BrokenPipeError:  # e.g. `nmtfrag stats ... | head` closed the pipe early
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes
        return 1
    except ToolFailed as exc:  # an external tool's output missing or short
        if debug:
            raise
        _fail(f"error: {exc}", user_error=True)  # nothing of the run is a result
        return 1
    except OSError as exc:
        if exc.filename is None and is_disk_error(exc) and not debug:
            # a full disk where no stage named the file (fileio and workdir name theirs)
            _fail(f"error: {exc.strerror or exc} (a write failed; its file is not "
                  f"known: run with --debug for where)", user_error=True)
            return 2
        if exc.filename is None or debug:  # no path: not something the user named
            if debug:
                raise
            _fail(f"error: internal error: {type(exc).__name__}: {exc} (run with --debug "
                  f"for the traceback)", user_error=False)
            return 1
        if interruption_note(exc):  # a resumable run stopped by a full disk: what it
            _fail(f"{_os_error_line(exc)}; {interruption_note(exc)}",  # kept, and why
                  user_error=False)
            return 2
        _fail(_os_error_line(exc), user_error=True)  # unreadable input, unwritable out
        return 2
    except SystemExit as exc:
        if exc.code not in (0, None):  # SIGTERM, or a library's own exit
            from ..outdir import remove_created_outputs

            if interruption_note(exc):  # a resumable run stopped by SIGTERM
                print(_interrupted(exc), file=sys.stderr)
            remove_created_outputs(user_error=False)
        raise
    except Exception as exc:
        if debug:
            raise
        _fail(f"error: internal error: {type(exc).__name__}: {exc} (run with --debug for "
              f"the traceback)", user_error=False)
        return 1
    finally:
        release_output_locks()  # the run is over: another may write into its OUT now
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
