"""File conventions shared by every stage: atomic writes, private work dirs, hashes,
manifests, progress bars.

Why: a stage must never leave a half-written output that looks complete, temporary
copies of confidential text must not outlive the run (see docs/privacy.md), and
two runs must never write into one output directory at once (`lock_output_dir`).
"""
from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any, TypeVar, overload

from .errors import InputError, is_disk_error, with_path

if TYPE_CHECKING:  # tqdm is imported only for a bar on a terminal
    from tqdm import tqdm

StrPath = str | os.PathLike[str]  # a path as a string or a path object
T = TypeVar("T")

MANIFEST = "manifest.json"
# Every output directory splits into what may be shared (top level) and what stays with
# the data owner: OUT/owner/ (mode 0700, files 0600) holds input hashes, paths, exact
# counts, line numbers, seeds, logs with non-private statistics and alignments.
OWNER_DIR = "owner"
# OWNER_DIR/TRAINED_LINES of a model trained on a share of its files (--train-fraction):
# the 0-based lines it trained on, one a line (a membership audit's members)
TRAINED_LINES = "trained-lines.txt"


# What a finished training run (finetune, DP or not) leaves in OUT besides its dicts and
# BPE codes, which every run rewrites: each removed before another run writes into OUT, so
# no file outlives the run that made it (a DP run's owner manifest beside a later model
# trained without DP; a model.pt beside a DP run killed before it wrote its own).
RUN_OUTPUTS = (MANIFEST, "model.pt", "privacy.json", "train.log",
               f"{OWNER_DIR}/{MANIFEST}", f"{OWNER_DIR}/{TRAINED_LINES}")


def remove_run_outputs(out: StrPath) -> None:
    """Remove RUN_OUTPUTS from the training OUT `out` (those that exist)."""
    for name in RUN_OUTPUTS:
        path = os.path.join(out, name)
        if os.path.lexists(path):
            os.unlink(path)


def trained_lines_path(model_dir: StrPath) -> str:
    return os.path.join(model_dir, OWNER_DIR, TRAINED_LINES)


def sha256_file(path: StrPath, chunk: int = 1 << 20) -> str:
    """SHA-256 of a file's bytes (recorded in manifests instead of the text itself)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def public_name(path: StrPath | None) -> str | None:
    """The last component of `path` (a file or directory name), for reports and other
    files that get shared: an absolute path names the machine's layout (user names,
    mount points, project names), which is nobody's business. Owner-only records may
    keep full paths. None stays None."""
    if path is None:
        return None
    return os.path.basename(os.path.normpath(os.fspath(path)))


@contextlib.contextmanager
def atomic_writer(path: StrPath, mode: str = "w", encoding: str = "utf-8",
                  private: bool = False) -> Iterator[IO[Any]]:
    """Write to a temp file beside `path`, rename over it only if the block succeeds.

    `private` files keep mkstemp's mode 0600 (owner-only data)."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        if not private:
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual mode
        text = "b" not in mode  # binary files take no encoding or newline
        with os.fdopen(fd, mode, encoding=encoding if text else None,
                       newline="\n" if text else None) as f:
            yield f
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is None and is_disk_error(exc):
            raise with_path(exc, path) from exc  # a full disk names the file it hit
        raise


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_parallel(src_path: StrPath, tgt_path: StrPath,
                   pairs: Iterable[tuple[str, str]]) -> None:
    """Write (source, target) pairs as two line-aligned files, each atomically."""
    with atomic_writer(src_path) as fs, atomic_writer(tgt_path) as ft:
        for src, tgt in pairs:
            fs.write(src + "\n")
            ft.write(tgt + "\n")


def write_json(path: StrPath, obj: object, private: bool = False) -> None:
    with atomic_writer(path, private=private) as f:
        json.dump(obj, f, indent=2, ensure_ascii=False, sort_keys=False)
        f.write("\n")


def read_json(path: StrPath) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


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


def owner_dir(out: str) -> str:
    """OUT/owner/: created mode 0700; what is in it must never leave the data owner."""
    path = os.path.join(out, OWNER_DIR)
    os.makedirs(path, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def owner_path(out: str, name: str) -> str:
    """Path of an owner-only file OUT/owner/NAME (the folder is created)."""
    return os.path.join(owner_dir(out), name)


def write_owner_json(out: str, obj: object, name: str = MANIFEST) -> str:
    """Write OUT/owner/NAME (mode 0600): the owner's record of a run."""
    path = owner_path(out, name)
    write_json(path, obj, private=True)
    return path


def prepare_output_dir(out: str, overwrite: bool = False, *,
                       inputs: Iterable[object] = (),
                       kind: str | None = None) -> str:
    """Create `out`, refusing to reuse a directory that holds a finished output.

    `inputs` (files or directories, None entries and nested lists allowed) and `kind`
    (the manifest "kind" this command writes) go to `check_output_dir`, which refuses,
    before anything is written, an OUT that would destroy or contaminate an input or an
    output of another kind."""
    out = os.path.abspath(out)
    if os.path.exists(out) and not os.path.isdir(out):
        raise InputError(f"{out} exists and is not a directory")
    check_output_dir(out, inputs, kind)
    _refuse_finished(out, overwrite)
    make_output_dir(out)  # created and locked: what follows is checked under the lock
    check_output_dir(out, inputs, kind)  # (a run into OUT may have finished meanwhile)
    _refuse_finished(out, overwrite)
    return out


def _refuse_finished(out: str, overwrite: bool) -> None:
    if os.path.exists(os.path.join(out, MANIFEST)) and not overwrite:
        raise InputError(f"{out} already holds a finished output "
                         f"({MANIFEST}); choose another --out or pass --overwrite")


# Output directories this process created (absolute paths, in order). Why: a run
# refused or crashed after creating OUT must not leave an empty or half-written OUT
# behind; the CLI removes these on failure (`remove_created_outputs`), never a
# directory that existed before the run.
CREATED_OUTPUTS: list[str] = []


def make_output_dir(out: str) -> str:
    """os.makedirs(out), then OUT locked for this run (`lock_output_dir`); `out` goes
    into CREATED_OUTPUTS when this call made it (os.mkdir tells: of two runs creating
    one OUT at once, only one made it)."""
    out = os.path.abspath(out)
    try:
        os.makedirs(os.path.dirname(out), exist_ok=True)
        os.mkdir(out)
        created = True
    except FileExistsError:
        if not os.path.isdir(out):
            raise InputError(f"--out {out}: cannot create the directory (a file of that "
                             f"name exists)") from None
        created = False
    except OSError as exc:
        raise InputError(f"--out {out}: cannot create the directory "
                         f"({exc.strerror or exc})") from None
    if created and out not in CREATED_OUTPUTS:
        CREATED_OUTPUTS.append(out)
    try:
        lock_output_dir(out)
    except OutputLocked:
        if created:  # another run locked it first: it is that run's OUT now
            CREATED_OUTPUTS.remove(out)
        raise
    return out


# Every run holds a lock on the OUT it writes: the kernel's flock on OUT/LOCK_NAME, taken
# when OUT is prepared and held until the command ends (`release_output_locks`, which
# also removes the file) or the process dies; the kernel drops it then, even after
# SIGKILL, so a killed run's lock never blocks (its file may stay behind: an empty,
# hidden file that nothing reads). Why: two runs into one --out both reported success,
# and the later silently replaced the other's output.
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


def remove_empty_output(out: str) -> bool:
    """Remove OUT if it holds nothing but its lock file (a run refused after creating
    it); True if removed."""
    try:
        names = os.listdir(out)
    except OSError:
        return False
    if set(names) - {LOCK_NAME}:
        return False
    release_output_lock(out)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(out, LOCK_NAME))  # a killed run's, left behind
    os.rmdir(out)
    with contextlib.suppress(ValueError):
        CREATED_OUTPUTS.remove(os.path.abspath(out))
    return True


def _holds_files(path):
    """True when the tree under `path` holds anything but directories (and OUT's lock
    file, which is no output)."""
    for d, _, files in os.walk(path):
        if any(d != path or f != LOCK_NAME for f in files):
            return True
    return False


def remove_created_outputs(user_error: bool) -> list[str]:
    """Remove the output directories this process created, after a failed run.

    After a user error (`user_error`), a created OUT without a manifest.json goes with
    everything in it: the run was refused, what is there is scaffolding or a tokenised
    copy of the input. After an internal failure or an interruption only an OUT that
    holds no file goes: a half-trained model's checkpoints are what `--resume` needs.
    A directory holding a manifest.json (a finished output) is never removed. Returns
    the paths removed."""
    removed = []
    for out in reversed(CREATED_OUTPUTS):
        if not os.path.isdir(out) or os.path.islink(out):
            continue
        if os.path.exists(os.path.join(out, MANIFEST)):
            continue
        if not user_error and _holds_files(out):
            continue
        shutil.rmtree(out, ignore_errors=True)  # the lock file too, while still locked
        if not os.path.exists(out):
            removed.append(out)
            release_output_lock(out)
    CREATED_OUTPUTS.clear()
    return removed


MODEL_DIR = "a model directory"


def dir_kind(path: str) -> str | None | bool:
    """What a directory holds: its manifest's "kind" (None when the manifest has none),
    MODEL_DIR for a model dir without one (model*.pt, checkpoint*.pt, dict.*.txt), or
    False when it is no finished output (missing, empty, a half-written run)."""
    man = os.path.join(path, MANIFEST)
    if os.path.isfile(man):
        try:
            data = read_json(man)
        except (OSError, ValueError):
            return None
        return data.get("kind") if isinstance(data, dict) else None
    try:
        names = os.listdir(path)
    except OSError:
        return False
    for name in names:
        if (name.endswith(".pt") and name.startswith(("model", "checkpoint"))) or \
                (name.startswith("dict.") and name.endswith(".txt")):
            return MODEL_DIR
    return False


def _is_within(path, root):
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _flat_paths(inputs):
    for p in inputs or ():
        if p is None:
            continue
        if isinstance(p, (list, tuple, set)):
            yield from _flat_paths(p)
        else:
            yield os.fspath(p)


def _describe(kind):
    if kind is False:
        return "nothing"
    if kind == MODEL_DIR:
        return kind
    return f"an output of kind {kind!r}" if kind else "an output of unknown kind"


def check_output_dir(out: str, inputs: Iterable[object] = (),
                     kind: str | None = None) -> None:
    """Refuse an OUT that would destroy or contaminate what the run reads or what
    another run wrote (InputError, one line; nothing is touched).

    Why: `finetune --out M --model M` deleted the base model.pt, and
    `audit reconstruct --out RELEASE --overwrite` put the corpus hash into a shareable
    release's manifest. So OUT may not be, contain or lie inside an input directory, may
    not be or contain an input file, may not lie inside a finished output or a model
    dir (what is written there would ship with it), and --overwrite replaces only an
    output of the same `kind`."""
    real = os.path.realpath(out)
    for p in _flat_paths(inputs):
        if not os.path.exists(p):
            continue
        rp = os.path.realpath(p)
        if os.path.isdir(rp):
            if _is_within(real, rp) or _is_within(rp, real):
                rel = ("is" if real == rp else "lies inside" if _is_within(real, rp)
                       else "contains")
                raise InputError(f"--out {out} {rel} the input directory {p}: outputs may "
                                 f"not be, contain or lie inside an input; choose another "
                                 f"--out")
        elif _is_within(rp, real):
            raise InputError(f"--out {out} contains the input file {p}: choose an --out "
                             f"that holds no input")
    parent = os.path.dirname(real)
    while True:
        pk = dir_kind(parent)
        if pk is not False and (pk == MODEL_DIR or str(pk).startswith("nmtfrag-")):
            raise InputError(f"--out {out} lies inside {parent}, which holds "
                             f"{_describe(pk)}: what is written there would become part "
                             f"of it; choose an --out outside it")
        up = os.path.dirname(parent)
        if up == parent:
            break
        parent = up
    have = dir_kind(real)
    if have is not False and have != kind:
        raise InputError(f"--out {out} holds {_describe(have)}, not {_describe(kind)}: "
                         f"--overwrite replaces only an output of the same kind; choose "
                         f"another --out")


def check_not_input(path: str, inputs: Iterable[str | None]) -> None:
    """Refuse to write an output file over one of the inputs."""
    real = os.path.realpath(path)
    for p in inputs:
        if p and os.path.exists(p) and os.path.realpath(p) == real:
            raise InputError(f"refusing to overwrite input file {p}")


def tool_versions(*distributions: str) -> dict[str, str | None]:
    """Versions of Python and the named installed distributions, for manifests."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in distributions:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


@overload
def progress(iterable: None = None, **kwargs: Any) -> tqdm: ...
@overload
def progress(iterable: Iterable[T], **kwargs: Any) -> Iterable[T]: ...


def progress(iterable: Iterable[T] | None = None, **kwargs: Any) -> Iterable[T] | tqdm:
    """A tqdm progress bar on a terminal, silent otherwise (pipelines, CI, logs).

    A silent bar over an iterable is the iterable itself: importing tqdm costs more
    than a short command's work."""
    kwargs.setdefault("disable", not sys.stderr.isatty())
    if kwargs["disable"] and iterable is not None:
        return iterable
    from tqdm import tqdm

    kwargs.setdefault("leave", False)
    kwargs.setdefault("dynamic_ncols", True)
    return tqdm(iterable, **kwargs)
