"""Runs one `nmtfrag` command for a study, ending with the study that started it.

Why: a study's steps are child processes; if the study is killed (even with SIGKILL, which
no handler sees), a training step left running would go on writing into a cell that the
next `nmtfrag study run` resumes. Linux's parent-death signal turns the study's death
into a SIGTERM for the step, which `nmtfrag` handles like any `kill`: its private work
dirs are removed and a resumable run keeps its last saved state.

    python -m nmtfrag.study.child PARENT_PID nmtfrag-arguments...
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """SIGTERM when the parent dies (Linux; elsewhere nothing); exit at once if it
    already has."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        sys.exit(143)


def main() -> int:
    die_with_parent(int(sys.argv[1]))
    # the command itself, in this same process: the parent-death signal survives exec
    # (it is cleared only for set-user-ID binaries), and the study waits on this pid
    os.execv(sys.executable, [sys.executable, "-m", "nmtfrag", *sys.argv[2:]])
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
