"""Private work dirs: where temporary copies of confidential text live while a run needs
them (mode 0700), removed when the block ends and, after a run that was killed, by the
next run (each records its owner process).

Why: a tokenised corpus must not outlive its run (docs/privacy.md).
"""
from __future__ import annotations

import contextlib
import os
import platform
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator

from .errors import is_disk_error, with_path
from .fileio import read_json, write_json


# A private work dir holds this marker: who made it (PID + process start time + boot id,
# so a reused PID is not taken for the owner). A later run removes the dirs whose owner
# is dead (killed with SIGKILL, or the machine went down) and nothing without a marker.
WORK_MARKER = ".nmtfrag-owner"
WORK_MARKER_KIND = "nmtfrag-private-workdir"
WORK_PREFIX = "nmtfrag-"


def _proc_stat(pid):
    """(state, start time in clock ticks since boot) of `pid` from /proc, or None where
    /proc is absent or the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # the name may hold spaces and ')'
    return fields[0], int(fields[19])  # state (field 3), starttime (field 22)


def _boot_id():
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return None


def _owner_record(pid=None):
    pid = os.getpid() if pid is None else pid
    stat = _proc_stat(pid)
    return {"kind": WORK_MARKER_KIND, "pid": pid, "start": stat[1] if stat else None,
            "boot_id": _boot_id(), "host": platform.node()}


def _owner_alive(rec):
    """False only when the owner is certainly dead; anything unsure counts as alive
    (another host, no /proc to tell a reused PID apart: keep the dir)."""
    if rec.get("host") != platform.node():
        return True
    boot = _boot_id()
    if rec.get("boot_id") and boot and rec["boot_id"] != boot:
        return False  # rebooted since: every process of that boot is gone
    pid = rec.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # a process of another user: that PID was reused, but be safe below
    stat = _proc_stat(pid)
    if stat is None:
        return True  # no /proc: the PID exists, it may be the owner
    if stat[0] in ("Z", "X"):
        return False  # killed, not yet reaped: it runs no more code
    return rec.get("start") is None or stat[1] == rec["start"]


def _read_marker(path):
    """The owner record of a work dir of ours, or None (not ours, or unreadable)."""
    try:
        st = os.lstat(path)
        if not os.path.isdir(path) or os.path.islink(path) or st.st_uid != os.getuid():
            return None
        rec = read_json(os.path.join(path, WORK_MARKER))
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) and rec.get("kind") == WORK_MARKER_KIND else None


def sweep_stale_workdirs(bases: Iterable[str] = (), quiet: bool = False) -> int:
    """Remove the private work dirs (nmtfrag-*) in the system temp dir and in `bases`
    whose owner process is dead; say once on stderr how many. Returns that number.

    Why: `finally` cannot run after SIGKILL or a power cut, so a killed run's tokenised
    corpus would otherwise stay on disk for good."""
    removed = 0
    seen = set()
    for base in (tempfile.gettempdir(),) + tuple(b for b in bases if b):
        base = os.path.realpath(base)
        if base in seen:
            continue
        seen.add(base)
        try:
            entries = list(os.scandir(base))
        except OSError:
            continue
        for entry in entries:
            if not entry.name.startswith(WORK_PREFIX):
                continue
            rec = _read_marker(entry.path)
            if rec is None or rec.get("keep") or _owner_alive(rec):
                continue
            shutil.rmtree(entry.path, ignore_errors=True)
            removed += not os.path.exists(entry.path)
    if removed and not quiet:
        print(f"nmtfrag: removed {removed} work dir(s) left by runs that were killed",
              file=sys.stderr)
    return removed


@contextlib.contextmanager
def private_workdir(base: str | None = None, keep: bool = False,
                    prefix: str = WORK_PREFIX) -> Iterator[str]:
    """A mode-0700 directory for temporary files that may hold confidential text.

    Removed when the block ends (also on error) unless `keep` is true, in which case
    its path is printed so the user can inspect and delete it. It records its owner
    (WORK_MARKER), so if this process is killed a later run removes it; stale dirs of
    killed runs in the same places are removed first.
    """
    if not prefix.startswith(WORK_PREFIX):
        raise ValueError(f"work dir prefix must start with {WORK_PREFIX!r}")
    if base is not None:
        os.makedirs(base, exist_ok=True)
    sweep_stale_workdirs((base,) if base else ())
    path = tempfile.mkdtemp(prefix=prefix, dir=base)  # mkdtemp creates it 0700
    os.chmod(path, 0o700)
    try:
        write_json(os.path.join(path, WORK_MARKER), dict(_owner_record(), keep=bool(keep)),
                   private=True)
        yield path
    except OSError as exc:  # a write in here through a file object names no file
        if exc.filename is None and is_disk_error(exc):
            raise with_path(exc, path) from exc
        raise
    finally:
        if keep:
            print(f"nmtfrag: kept work dir {path} (it may hold confidential text)",
                  file=sys.stderr)
        else:
            shutil.rmtree(path, ignore_errors=True)
