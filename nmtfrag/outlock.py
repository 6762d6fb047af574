"""One run at a time writes an output directory (`lock_output_dir`), until the command
ends or its process dies. Importing this module registers the hooks that release the
locks at exit and drop them in a forked child.

Why: two runs into one --out both reported success, and the later silently replaced the
other's output.
"""
from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import sys
import time

from .errors import InputError


# Every run holds a lock on the OUT it writes: the kernel's flock on OUT/LOCK_NAME, taken
# when OUT is prepared and held until the command ends (`release_output_locks`, which
# also removes the file) or the process dies; the kernel drops it then, even after
# SIGKILL, so a killed run's lock never blocks (its file may stay behind: an empty,
# hidden file that nothing reads).
LOCK_NAME = ".nmtfrag.lock"
# realpath(OUT) -> (the lock file's fd, the pid that locked it); module-level, so the fds
# stay open, and the locks held, for as long as the run.
_OUTPUT_LOCKS: dict[str, tuple[int, int]] = {}


class OutputLocked(InputError):
    """OUT is locked by another live run."""


def lock_output_dir(out: str, wait: bool = False) -> None:
    """Lock the existing directory `out` for this run, or refuse (InputError, one line
    naming the pid of the run that holds it); with `wait`, say so on stderr and wait for
    that run to end instead (a queue of runs into one OUT, e.g. `study run --wait`).
    Locking an OUT this process holds already does nothing (a stage that prepares OUT
    twice, a resumed run in the same process). On a file system without flock, a
    warning says that nothing is locked."""
    real = os.path.realpath(out)
    path = os.path.join(real, LOCK_NAME)
    held = _OUTPUT_LOCKS.get(real)
    if held is not None:
        if held[1] == os.getpid() and _same_file(held[0], path):
            return
        _release_lock(real)  # OUT was removed and made again since: lock the new one
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise InputError(f"--out {out}: cannot create its lock file {LOCK_NAME} "
                             f"({exc.strerror or exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            busy = (f"--out {out} is being written by another nmtfrag run "
                    f"(pid {_lock_holder(fd)})")
            if not wait:
                os.close(fd)
                raise OutputLocked(f"{busy}: wait for it to end, or choose another "
                                   f"--out") from None
            print(f"{busy}: waiting for it to end", file=sys.stderr, flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)  # blocks; a killed holder's lock dies with it
        except OSError as exc:  # e.g. ENOLCK: a network file system without locks
            os.close(fd)
            print(f"warning: --out {out}: cannot lock it ({exc.strerror or exc}); a "
                  f"second run into it at the same time would not be refused",
                  file=sys.stderr)
            return
        if _same_file(fd, path):
            break
        # the run that held it removed the file as it ended, after we opened it (or
        # while we waited): a third run may lock the new file, so this one must too
        os.close(fd)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    _OUTPUT_LOCKS[real] = (fd, os.getpid())


def output_lock_holder(out: str) -> int | None:
    """The pid of the live run that holds OUT's lock, or None (`status`-style questions:
    asks without taking it)."""
    path = os.path.join(os.path.realpath(out), LOCK_NAME)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return None
    except BlockingIOError:
        holder = _lock_holder(fd)
        return int(holder) if holder.isdigit() else -1
    except OSError:  # no flock on this file system: nothing is known to hold it
        return None
    finally:
        os.close(fd)


def _same_file(fd: int, path: str) -> bool:
    """Whether the open file `fd` is the file at `path` (not one removed since)."""
    try:
        a, b = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _lock_holder(fd: int) -> str:
    """The pid written in a lock file (it follows the lock by microseconds)."""
    for _ in range(50):
        text = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
        if text.isdigit():
            return text
        time.sleep(0.01)
    return "unknown"


def _release_lock(real: str) -> None:
    """Drop the lock on OUT `real` (a realpath) that this process holds: its file is
    removed first, while still locked, then the fd closed."""
    fd, pid = _OUTPUT_LOCKS.pop(real)
    if pid != os.getpid():
        return  # not ours (see _forget_locks_in_child)
    path = os.path.join(real, LOCK_NAME)
    if _same_file(fd, path):
        with contextlib.suppress(OSError):
            os.unlink(path)
    with contextlib.suppress(OSError):
        os.close(fd)


def release_output_lock(out: str) -> None:
    """Unlock OUT now (nothing if this process holds no lock on it)."""
    real = os.path.realpath(out)
    if real in _OUTPUT_LOCKS:
        _release_lock(real)


def release_output_locks() -> None:
    """Unlock every OUT this process locked and remove the lock files: the run is over
    (the CLI calls it when a command ends; also at exit, for library use)."""
    for real in list(_OUTPUT_LOCKS):
        _release_lock(real)


def _forget_locks_in_child() -> None:
    """A forked child (a data loader worker, multiprocessing) is not the run: it closes
    its copies of the lock fds (the lock lasts exactly as long as the run's process) and
    never removes a lock file. Spawned and exec'd children never get them (O_CLOEXEC)."""
    for fd, _ in _OUTPUT_LOCKS.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    _OUTPUT_LOCKS.clear()


atexit.register(release_output_locks)
os.register_at_fork(after_in_child=_forget_locks_in_child)
