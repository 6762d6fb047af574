"""fairseq's log during a training or validation run: every line kept in OUT/train.log,
the validation losses and checkpoint saves read from it as they pass, and the console
shown only the loss lines (all of it with `nmtfrag -v`).

Why: fairseq logs through the root logger to stdout, which a pipeline's output must not
hold, and its set-up dump buries the lines a user watches.
"""
from __future__ import annotations

import logging
import re
import sys

from ..errors import is_disk_error, with_path


class LogCapture(logging.Handler):
    """Keeps fairseq's log lines in OUT/train.log (and the valid losses in memory)."""

    def __init__(self, path: str) -> None:
        super().__init__(logging.INFO)
        self.file = open(path, "a", encoding="utf-8")
        self.setFormatter(logging.Formatter("%(asctime)s | %(levelname)s | %(name)s | "
                                            "%(message)s", "%Y-%m-%d %H:%M:%S"))
        self.valid: list[dict[str, float | None]] = []
        self.loaded: list[str] = []
        self.saved: str | None = None  # "epoch E, U updates" of fairseq's last save

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        try:
            self.file.write(self.format(record) + "\n")
            self.file.flush()
        except OSError as exc:  # a full disk: the error line names train.log
            if not is_disk_error(exc):
                raise
            raise with_path(exc, self.file.name) from exc
        if "valid" in msg and "| loss " in msg:
            try:
                loss = float(msg.split("| loss ")[1].split()[0])
                upd = msg.split("| num_updates ")[1].split()[0] \
                    if "| num_updates " in msg else None
                self.valid.append({"num_updates": int(upd) if upd else None, "loss": loss})
            except (IndexError, ValueError):
                pass
        if msg.startswith("Loaded checkpoint"):
            self.loaded.append(msg)
        saved = re.match(r"Saved checkpoint .*\(epoch (\d+) @ (\d+) updates", msg)
        if saved:  # logged once the checkpoint and its copies are written
            self.saved = f"epoch {saved.group(1)}, {saved.group(2)} updates"

    def close(self) -> None:
        self.file.close()
        super().close()


class ProgressOnly(logging.Filter):
    """fairseq's per-interval and per-epoch loss lines (its progress bar renames its
    logger to train / train_inner / valid) and warnings; not its set-up dump."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith("Traceback (most recent call last)"):
            return False  # e.g. a failed checkpoint save: train.log keeps it, the error
            # line says what failed (one `error:` line, no traceback, on the console)
        return record.levelno >= logging.WARNING or \
            record.name in ("train", "train_inner", "valid")


def attach_logs(handler, console_level=logging.INFO):
    """Route fairseq's loggers to `handler` (train.log) and to stderr at `console_level`
    (nothing of fairseq's reaches stdout: fairseq_cli.train points the root logger there).
    At INFO the console shows only the loss lines unless `nmtfrag -v` (nmtfrag.quiet).
    Returns what `detach_logs` needs to restore them."""
    from ..quiet import verbose

    console = logging.StreamHandler(sys.stderr)
    console.setLevel(console_level)
    if not verbose():
        console.addFilter(ProgressOnly())
    console.setFormatter(handler.formatter)
    saved = []
    for n in ("fairseq", "fairseq_cli"):
        lg = logging.getLogger(n)
        saved.append((lg, lg.level, lg.propagate))
        lg.addHandler(handler)
        lg.addHandler(console)
        lg.setLevel(logging.INFO)
        lg.propagate = False
    return saved, console


def detach_logs(handler, attached):
    saved, console = attached
    for lg, level, propagate in saved:
        lg.removeHandler(handler)
        lg.removeHandler(console)
        lg.setLevel(level)
        lg.propagate = propagate


def setup_console_logging(quiet):
    root = logging.getLogger()
    if not root.handlers:  # before fairseq_cli.train's basicConfig, which uses stdout
        logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                            format="%(asctime)s | %(levelname)s | %(name)s | %(message)s")
