"""Model directories in the fairseq WMT19 release layout: validate, read, grow, write.

A model directory holds `model.pt` (or `model1.pt`, `model2.pt`, … for an ensemble),
`dict.<src>.txt`, `dict.<tgt>.txt` and `bpecodes`, and loads with
`TransformerModel.from_pretrained(dir, checkpoint_file="model.pt", data_name_or_path=".",
tokenizer="moses", bpe="fastbpe", source_lang="de", target_lang="en")`. Fine-tuned
outputs use the same layout, so they can be evaluated or fine-tuned again.

The architecture is read from the checkpoint's stored args (WMT19 de→en is
`transformer_wmt_en_de_big` with an 8192-wide encoder FFN and tied decoder
embeddings; the small shared model shares all embeddings), never assumed. Every defect
a user can fix — missing file, unreadable checkpoint, dictionary size that does not
match the embedding matrix — is an InputError naming the file.

Adding symbols (the `<P>`/`</P>` tags of a tagged release) appends them to both
dictionaries and grows every vocabulary-sized matrix of the checkpoint by the same rows
(`grow_state`), so the pretrained weights of the existing symbols are unchanged and
tied matrices stay identical.
"""
from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import InputError
from .fileio import atomic_writer

# Parameters whose first dimension is a vocabulary: (key, side).
VOCAB_MATRICES = (
    ("encoder.embed_tokens.weight", "src"),
    ("decoder.embed_tokens.weight", "tgt"),
    ("decoder.output_projection.weight", "tgt"),
    ("decoder.embed_out", "tgt"),  # untied output matrix in older checkpoints
)
N_SPECIAL = 4  # fairseq Dictionary: <s>, <pad>, </s>, <unk> precede the file's entries
_CKPT_RE = re.compile(r"^model(\d*)\.pt$")


@dataclass
class ModelDir:
    path: str
    checkpoints: list          # absolute paths, ensemble order
    src_lang: str
    tgt_lang: str
    src_dict: str
    tgt_dict: str
    bpecodes: str
    arch: dict = field(default_factory=dict)  # model args read from the first checkpoint
    ensemble_members: list = field(default_factory=list)  # names, set by member_to_adapt

    @property
    def checkpoint_file(self) -> str:
        """The `checkpoint_file` argument of fairseq's from_pretrained (`a.pt:b.pt`)."""
        return ":".join(os.path.basename(c) for c in self.checkpoints)

    @property
    def shared_all(self) -> bool:
        return bool(self.arch.get("share_all_embeddings"))


def allow_full_checkpoint_load() -> None:
    """Let torch >= 2.6 load fairseq checkpoints: it refuses them (weights-only loading)
    unless this variable is set; torch reads it at call time, so set it here, not in the
    user's shell."""
    os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")


def find_checkpoints(path: str, checkpoint: str | None = None) -> list[str]:
    """`model.pt`, else `model1.pt`, `model2.pt`, … (or the ones named in `checkpoint`,
    colon-separated)."""
    if checkpoint:
        names = checkpoint.split(":")
        for n in names:
            if not os.path.isfile(os.path.join(path, n)):
                raise InputError(f"{os.path.join(path, n)}: no such checkpoint")
        return [os.path.join(path, n) for n in names]
    if os.path.isfile(os.path.join(path, "model.pt")):
        return [os.path.join(path, "model.pt")]
    numbered = sorted((int(m.group(1)), f) for f in os.listdir(path)
                      if (m := _CKPT_RE.match(f)) and m.group(1))
    if not numbered:
        raise InputError(f"{path}: no model.pt or model1.pt in the model directory")
    return [os.path.join(path, f) for _, f in numbered]


def load_state(ckpt_path: str) -> dict[str, Any]:
    """A checkpoint as fairseq stores it, on CPU; InputError if it is not one."""
    allow_full_checkpoint_load()
    import torch

    try:
        state = torch.load(ckpt_path, map_location="cpu", weights_only=False)
    except Exception as exc:  # pickle, zip, EOF … errors: the file is not a checkpoint
        raise InputError(f"{ckpt_path}: not a readable fairseq checkpoint "
                         f"({type(exc).__name__})") from None
    if not isinstance(state, dict) or "model" not in state:
        raise InputError(f"{ckpt_path}: not a fairseq checkpoint (no 'model' entry)")
    return state


def _as_dict(obj):
    if obj is None:
        return {}
    if isinstance(obj, dict):
        return dict(obj)
    try:
        from omegaconf import OmegaConf

        if OmegaConf.is_config(obj):
            return OmegaConf.to_container(obj, resolve=True)
    except ImportError:
        pass
    return dict(vars(obj))


def model_args(state: dict[str, Any]) -> dict[str, Any]:
    """Flat model args of a checkpoint (`encoder_embed_dim`, `share_all_embeddings`, …).

    Newer checkpoints keep them in cfg['model'] (a Namespace for legacy archs such as
    the WMT19 ones, or a dict with nested encoder/decoder groups); older ones in 'args'.
    """
    cfg = _as_dict(state.get("cfg"))
    margs = _as_dict(cfg.get("model")) if cfg.get("model") is not None else {}
    if not margs:
        margs = _as_dict(state.get("args"))
    flat = {}
    for k, v in margs.items():
        if k in ("encoder", "decoder") and isinstance(v, dict):
            for kk, vv in v.items():
                flat[f"{k}_{kk}"] = vv
        else:
            flat[k] = v
    if "arch" not in flat and "_name" in flat:
        flat["arch"] = flat["_name"]
    task = _as_dict(cfg.get("task"))
    for k in ("source_lang", "target_lang"):
        if k not in flat and task.get(k):
            flat[k] = task[k]
    return flat


def dict_symbols(path: str) -> list[str]:
    """Symbols of a fairseq dict file, in order; InputError on a malformed line."""
    symbols = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            parts = line.rstrip("\n").rsplit(" ", 1)
            if len(parts) == 2 and parts[1] == "#fairseq:overwrite":
                parts = parts[0].rsplit(" ", 1)
            if len(parts) != 2 or not parts[0] or not parts[1].lstrip("-").isdigit():
                raise InputError(f"{path} line {n}: expected '<symbol> <count>'")
            symbols.append(parts[0])
    return symbols


def check_model_files(path: str, src_lang: str = "de", tgt_lang: str = "en",
                      checkpoint: str | None = None, flag: str | None = None
                      ) -> tuple[str, str, str, str, list[str]]:
    """The cheap half of `validate_model_dir`: the directory and its files exist (no
    checkpoint is loaded). Returns (abs path, src dict, tgt dict, bpecodes, checkpoints).

    Why: commands call it before they create OUT or read a corpus, so a mistyped
    --model is refused at once; `flag` (e.g. "--model") names the option in the error."""
    where = f"{flag} {path}" if flag else path
    if not os.path.exists(path):
        raise InputError(f"{where}: model directory does not exist")
    if not os.path.isdir(path):
        raise InputError(f"{where}: not a directory (expected a model directory: "
                         f"model.pt, dict.{src_lang}.txt, dict.{tgt_lang}.txt, bpecodes)")
    path = os.path.abspath(path)
    src_dict = os.path.join(path, f"dict.{src_lang}.txt")
    tgt_dict = os.path.join(path, f"dict.{tgt_lang}.txt")
    codes = os.path.join(path, "bpecodes")
    for f in (src_dict, tgt_dict, codes):
        if not os.path.isfile(f):
            raise InputError(f"{f}: missing from the model directory (expected model.pt, "
                             f"dict.{src_lang}.txt, dict.{tgt_lang}.txt, bpecodes)")
        if os.path.getsize(f) == 0:
            raise InputError(f"{f}: file is empty")
    return path, src_dict, tgt_dict, codes, find_checkpoints(path, checkpoint)


def validate_model_dir(path: str, src_lang: str = "de", tgt_lang: str = "en",
                       checkpoint: str | None = None) -> ModelDir:
    """Check a model directory and read its architecture; return a ModelDir.

    Refused (InputError): missing directory, checkpoint, dictionary or bpecodes; a
    checkpoint that does not load; a dictionary whose size (+4 specials) differs from the
    checkpoint's embedding rows; different dictionaries with shared all embeddings;
    ensemble members of different architectures.
    """
    path, src_dict, tgt_dict, codes, ckpts = check_model_files(path, src_lang, tgt_lang,
                                                                checkpoint)
    n_src = len(dict_symbols(src_dict)) + N_SPECIAL
    n_tgt = len(dict_symbols(tgt_dict)) + N_SPECIAL
    arch = None
    for ck in ckpts:
        state = load_state(ck)
        a = model_args(state)
        for key, side in VOCAB_MATRICES:
            w = state["model"].get(key)
            if w is None:
                continue
            want = n_src if side == "src" else n_tgt
            if w.shape[0] != want:
                d = src_dict if side == "src" else tgt_dict
                raise InputError(f"{ck}: {key} has {w.shape[0]} rows but {d} gives "
                                 f"{want} symbols: dictionary and checkpoint do not match")
        if "encoder.embed_tokens.weight" not in state["model"]:
            raise InputError(f"{ck}: no encoder.embed_tokens.weight: not a fairseq "
                             f"translation Transformer")
        if arch is None:
            arch = a
        elif any(a.get(k) != arch.get(k) for k in ("arch", "encoder_embed_dim",
                                                    "encoder_layers", "decoder_layers")):
            raise InputError(f"{ck}: ensemble members have different architectures")
        for k, lang in (("source_lang", src_lang), ("target_lang", tgt_lang)):
            if a.get(k) and a[k] != lang:
                raise InputError(f"{ck}: trained for {a.get('source_lang')}→"
                                 f"{a.get('target_lang')}, not {src_lang}→{tgt_lang}")
        del state
    assert arch is not None  # find_checkpoints returns at least one checkpoint
    if arch.get("share_all_embeddings"):
        if dict_symbols(src_dict) != dict_symbols(tgt_dict):
            raise InputError(f"{path}: the checkpoint shares all embeddings but "
                             f"dict.{src_lang}.txt and dict.{tgt_lang}.txt differ")
    return ModelDir(path=path, checkpoints=ckpts, src_lang=src_lang, tgt_lang=tgt_lang,
                    src_dict=src_dict, tgt_dict=tgt_dict, bpecodes=codes, arch=arch)


def member_to_adapt(md: ModelDir, checkpoint: str | None = None
                    ) -> tuple[ModelDir, str | None]:
    """The one checkpoint fine-tuning adapts, as a ModelDir of that member, and a note.

    Training adapts one network: an ensemble directory (model1.pt … modelN.pt) is
    adapted member by member. Without `checkpoint` the first member is adapted and the
    note says so (and how to pick another); naming several members is refused, since one
    run cannot train several networks. Returns (ModelDir, note or None).
    """
    names = [os.path.basename(c) for c in md.checkpoints]
    if checkpoint and len(names) > 1:
        raise InputError(f"--checkpoint {checkpoint}: fine-tuning adapts one checkpoint; "
                         f"run it once per member (--checkpoint {names[0]}, then "
                         f"{names[1]}, …) into separate output dirs")
    note = None
    if len(names) > 1:
        note = (f"{md.path} is an ensemble of {len(names)} members ({', '.join(names)}): "
                f"adapting {names[0]} only; --checkpoint {names[1]} adapts another")
    try:  # what the directory holds, whichever member was named
        members = [os.path.basename(c) for c in find_checkpoints(md.path)]
    except InputError:  # only custom-named checkpoints
        members = names
    return replace(md, checkpoints=md.checkpoints[:1], ensemble_members=members), note


def write_dict_with(src_path: str, dst_path: str, new_symbols: Iterable[str]) -> list[str]:
    """Copy a dict file, appending `new_symbols` missing from it (count 1 each).

    fairseq assigns file entries indices 4, 5, … in order, so appended symbols take the
    indices just past the pretrained rows. Returns the symbols actually appended.
    """
    existing = set(dict_symbols(src_path))
    added = [s for s in new_symbols if s not in existing]
    with open(src_path, encoding="utf-8") as f:
        text = f.read()
    if text and not text.endswith("\n"):
        text += "\n"
    text += "".join(f"{s} 1\n" for s in added)
    with atomic_writer(dst_path) as f:
        f.write(text)
    return added


def grow_state(state: dict[str, Any], n_src_new: int, n_tgt_new: int, seed: int = 0,
               noise: float = 0.01) -> dict[str, Any]:
    """Append rows for new symbols to every vocabulary matrix of a checkpoint (in place).

    Initialisation: the mean of the pretrained rows of ordinary symbols (indices ≥ 4)
    plus Gaussian noise of `noise` × their per-dimension std, drawn from a generator
    seeded by (`seed`, row): the new symbols start as an "average word" (neither a
    logit outlier in the tied output layer nor a copy of any existing word), and
    matrices that are tied (the same values) get the same rows, so they stay tied.
    """
    import torch

    for key, side in VOCAB_MATRICES:
        w = state["model"].get(key)
        n_new = n_src_new if side == "src" else n_tgt_new
        if w is None or n_new == 0:
            continue
        base = w[N_SPECIAL:].float()
        mean, std = base.mean(0), base.std(0)
        rows = []
        for i in range(n_new):
            g = torch.Generator().manual_seed(seed * 1000003 + w.shape[0] + i)
            rows.append(mean + noise * std * torch.randn(w.shape[1], generator=g))
        state["model"][key] = torch.cat([w, torch.stack(rows).to(w.dtype)], 0)
    return state


def save_state(state: dict[str, Any], path: str) -> None:
    """Save a checkpoint atomically (without optimizer state: a release model)."""
    import torch

    state = dict(state)
    state.pop("last_optimizer_state", None)
    with atomic_writer(path, "wb") as f:
        try:
            torch.save(state, f)
        except RuntimeError:  # torch's zip writer hides a failed write's OSError
            probe_write(f)    # a full disk raises it here (atomic_writer names `path`)
            raise


def probe_write(f: Any, size: int = 1 << 20) -> None:
    """Write `size` zero bytes at the end of the open file `f` (a temporary file about
    to be discarded): on a full disk, a quota or a file size limit this raises the
    OSError (ENOSPC, EDQUOT, EFBIG) that a library turned into a RuntimeError."""
    fd = f.fileno()
    os.lseek(fd, 0, os.SEEK_END)
    left = size
    while left > 0:
        left -= os.write(fd, b"\0" * min(left, 1 << 16))


def write_model_dir(out: str, state: dict[str, Any], src_dict: str, tgt_dict: str,
                    bpecodes: str, src_lang: str = "de", tgt_lang: str = "en") -> str:
    """Write a model directory in the WMT19 layout: model.pt + dicts + bpecodes."""
    os.makedirs(out, exist_ok=True)
    save_state(state, os.path.join(out, "model.pt"))
    for src, name in ((src_dict, f"dict.{src_lang}.txt"), (tgt_dict, f"dict.{tgt_lang}.txt"),
                      (bpecodes, "bpecodes")):
        dst = os.path.join(out, name)
        if os.path.abspath(src) != os.path.abspath(dst):
            shutil.copyfile(src, dst)
    return out
