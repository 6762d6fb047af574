"""An output directory's life: created (and locked) for one run, checked against what the
run reads and what another run wrote, refused when it holds a finished output, cleared
of an earlier training run's files, and removed when the run that made it fails.

Why: a stage must never destroy an input, mix its files into another output, or leave
an empty or half-written OUT that looks like a result.
"""
from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterable

from .errors import InputError
from .fileio import MANIFEST, OWNER_DIR, TRAINED_LINES, StrPath, read_json
from .outlock import LOCK_NAME, OutputLocked, lock_output_dir, release_output_lock


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
