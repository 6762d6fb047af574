"""File conventions shared by every stage: atomic writes, JSON, hashes, the owner-only
folder of an output, tool versions for manifests, progress bars.

Why: a stage must never leave a half-written output that looks complete.
Output directories: outdir.py (their lock: outlock.py); private work dirs: workdir.py.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import platform
import sys
import tempfile
from collections.abc import Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any, TypeVar, overload

from .errors import is_disk_error, with_path

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
