"""Translation with CTranslate2: a faster CPU decoder for the same model directory.

Only the decoding differs from fairseq (`nmtfrag.translate.fairseq_engine.Translator`, the reference):
`CT2Translator` inherits the BPE encoding, the dictionary ids and source truncation,
fairseq's own batching and the decoding back to text from `translator.BaseTranslator`, and
hands each fairseq batch to `ctranslate2.Translator.translate_batch` with fairseq's
search settings:

- beam size and length penalty as given; hypotheses are scored with the end token
  counted in the length (`return_end_token=True`), as fairseq normalises by
  (tokens + 1)^lenpen;
- the maximum output length of a batch is fairseq's, max_len = int(a × padded source
  length + b) (capped by the decoder's positions), computed from the same batch.
  fairseq forces the end token after max_len tokens; CTranslate2 cannot, so it decodes
  max_len steps and its hypotheses cut there are rescored with the end token appended
  (`score_batch`), the best of them filling the n-best up to the beam size as fairseq's
  forced ones do;
- fairseq masks the end token at the first step (min_len 1) and padding *after* its
  log-softmax; CTranslate2 would mask them before its softmax, which renormalises and
  shifts every score (enough to flip 1 of 500 tiny-model outputs). So nothing is masked,
  and empty or padded hypotheses are dropped from CTranslate2's n-best (a sentence left
  with none is decoded again with CTranslate2's own masking);
- fairseq stops a sentence when `beam` hypotheses are finished and picks the best of
  those; CTranslate2 does the same but counts the hypotheses fairseq would not have
  (empty, padded, cut) and ranks cut ones without their end token, so its n-best can
  miss one of fairseq's. A sentence whose n-best holds such a hypothesis is searched
  again with patience 2 (the same search, stopped later, twice the n-best), and fairseq's
  set is rebuilt from it: the first `beam` finished hypotheses by step, then by score;
- CTranslate2's own source truncation is off (ours already applied, as for fairseq).

On the tiny test model (500 lines; beams 1, 2, 5, 8, 12; length penalties 0.6, 1, 1.5;
short and default length limits) and on 200 EMEA lines with generic-deen-medium, the
float32 output is identical to fairseq's, line for line. What is left is numerics:
CTranslate2's float32 kernels are not torch's, so a near-tie between hypotheses can
break the other way.

Conversion: `ctranslate2.converters.FairseqConverter` turns one checkpoint and the
dictionaries into a CTranslate2 model directory, once. It is kept in a cache: by default
the user's, $XDG_CACHE_HOME/nmtfrag/ct2 (else ~/.cache/nmtfrag/ct2, made mode 0700: it
holds model weights), or the directory the user names (--ct2-cache); never inside the
model directory, which is an input (it may be shared or read-only). The key hashes the
checkpoint, both dictionaries, the language pair and the CTranslate2 version (all the
conversion reads), so two different models or checkpoints never share an entry and a
changed checkpoint is converted again; the compute type (float32, int8) is chosen when
the converted model is loaded, so one conversion serves both. A conversion is written
into a temporary directory beside its final place and renamed into it when complete:
a killed run never leaves a half-written cache entry that would be used. In the default
cache, converting removes the entries whose checkpoint file (recorded by path) has
changed since or is gone.

Ensembles are not supported by CTranslate2: a model dir with several checkpoints is
refused unless --checkpoint picks one. CTranslate2 is an optional dependency
(`pip install 'nmtfrag[ct2]'`); without it, asking for this engine is a usage error.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from types import ModuleType

from ..errors import InputError
from ..fileio import read_json, sha256_file, write_json
from ..model_dir import ModelDir
from .translator import MAX_LEN_A, MAX_LEN_B, BaseTranslator

CT2_VERSION = "4.8.5"  # the version setup.py's `ct2` extra pins and the tests ran with
COMPUTE_TYPES = ("float32", "int8")
CACHE_INFO = "nmtfrag-ct2.json"  # written last: a cache entry with it is complete


def import_ctranslate2() -> ModuleType:
    """The ctranslate2 module, or an InputError saying how to install it."""
    try:
        import ctranslate2
    except ImportError:
        raise InputError(f"--engine ctranslate2 needs the ctranslate2 package, which is "
                         f"not installed: pip install 'nmtfrag[ct2]' (or pip install "
                         f"ctranslate2=={CT2_VERSION})") from None
    return ctranslate2


def cache_key(md: ModelDir, ct2_version: str) -> tuple[str, dict]:
    """(key, info) of the conversion of `md`'s single checkpoint."""
    info = {"kind": "nmtfrag-ct2-cache",
            "checkpoint": os.path.basename(md.checkpoints[0]),
            "checkpoint_sha256": sha256_file(md.checkpoints[0]),
            "src_dict_sha256": sha256_file(md.src_dict),
            "tgt_dict_sha256": sha256_file(md.tgt_dict),
            "src_lang": md.src_lang, "tgt_lang": md.tgt_lang,
            "ctranslate2": ct2_version}
    blob = json.dumps({k: v for k, v in info.items() if k != "checkpoint"},
                      sort_keys=True).encode()
    key = f"{info['checkpoint_sha256'][:16]}-{hashlib.sha256(blob).hexdigest()[:16]}"
    return key, info


def default_cache_root() -> str:
    """The user's cache for conversions: $XDG_CACHE_HOME/nmtfrag/ct2, else
    ~/.cache/nmtfrag/ct2 (a relative XDG_CACHE_HOME is ignored, as the XDG base
    directory specification says)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
        if not os.path.isabs(base):  # no home directory to expand ~ to
            raise InputError("--engine ctranslate2 found no cache directory (neither "
                             "XDG_CACHE_HOME nor HOME is set): name one with "
                             "--ct2-cache DIR")
    return os.path.join(base, "nmtfrag", "ct2")


def ensure_converted(md: ModelDir, cache_dir: str | None = None,
                     ct2: ModuleType | None = None) -> tuple[str, bool]:
    """Path of the CTranslate2 conversion of `md` (converted now if not cached) and
    whether it was converted by this call. Nothing is written into `md`'s directory."""
    ct2 = ct2 or import_ctranslate2()
    default = not cache_dir
    root = os.path.abspath(cache_dir) if cache_dir else default_cache_root()
    if os.path.exists(root) and not os.path.isdir(root):
        raise InputError(f"--ct2-cache {root}: exists and is not a directory" if cache_dir
                         else f"{root} (the CTranslate2 cache) exists and is not a "
                              f"directory: name another with --ct2-cache DIR")
    key, info = cache_key(md, ct2.__version__)
    path = os.path.join(root, key)
    if os.path.isfile(os.path.join(path, CACHE_INFO)):
        return path, False
    hint = ("name a writable directory with --ct2-cache DIR" if default
            else "choose a writable --ct2-cache DIR")
    # which file this entry converted, to find it stale later (the key holds no path)
    info["source"] = _source_record(md.checkpoints[0])
    try:
        if default and not os.path.isdir(root):
            os.makedirs(os.path.dirname(root), exist_ok=True)
            with contextlib.suppress(FileExistsError):  # another run made it meanwhile
                os.mkdir(root, 0o700)  # conversions hold model weights: the user's only
        os.makedirs(root, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".tmp-convert-", dir=root)
    except OSError as exc:
        raise InputError(f"cannot write the CTranslate2 conversion of {md.path} into "
                         f"{root} ({exc.strerror or exc}): {hint}") from None
    try:
        _convert(md, tmp, ct2)
        write_json(os.path.join(tmp, CACHE_INFO), info)
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp made it 0700
        try:
            os.rename(tmp, path)
        except OSError:
            if not os.path.isfile(os.path.join(path, CACHE_INFO)):
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # another run converted it first
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if default:
        _remove_stale(root, key, info["source"])
    return path, True


def _source_record(checkpoint: str) -> dict:
    """The checkpoint file a conversion was made from: its real path, size and time."""
    st = os.stat(checkpoint)
    return {"path": os.path.realpath(checkpoint), "size": st.st_size,
            "mtime_ns": st.st_mtime_ns}


def _convert(md, out, ct2):
    from ..train.binarize import fairseq_log_level
    from ..model_dir import allow_full_checkpoint_load

    allow_full_checkpoint_load()
    from ctranslate2.converters import FairseqConverter

    conv = FairseqConverter(md.checkpoints[0], md.path, source_lang=md.src_lang,
                            target_lang=md.tgt_lang, unsafe_deserialization=True)
    try:
        with fairseq_log_level():
            conv.convert(out, force=True)
    except (ValueError, NotImplementedError) as exc:  # unsupported architecture/options
        raise InputError(f"{md.checkpoints[0]}: CTranslate2 cannot convert this model: "
                         f"{exc}") from None


def _remove_stale(root, key, source):
    """Drop the conversions, other than `key`'s, of a checkpoint file that has changed
    since (`source`'s file, or another whose size or time differ) or is gone. Other
    models' entries stay: each records the file it was made from."""
    for name in os.listdir(root):
        entry = os.path.join(root, name)
        if name == key or name.startswith("."):
            continue
        try:
            made_from = read_json(os.path.join(entry, CACHE_INFO)).get("source")
            path = made_from["path"]
        except (OSError, ValueError, AttributeError, KeyError, TypeError):
            continue  # incomplete, or not ours: left alone
        try:
            now = _source_record(path)
        except OSError:
            now = None  # the checkpoint is gone
        if path == source["path"] or now is None or \
                (now["size"], now["mtime_ns"]) != (made_from.get("size"),
                                                   made_from.get("mtime_ns")):
            shutil.rmtree(entry, ignore_errors=True)


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


class CT2Translator(BaseTranslator):
    """A model dir (one checkpoint) converted to and decoded with CTranslate2."""

    engine = "ctranslate2"

    def __init__(self, model_dir: str, src_lang: str = "de", tgt_lang: str = "en",
                 checkpoint: str | None = None, device: str = "cpu", fp16: bool = False,
                 beam: int = 5, lenpen: float = 1.0, max_len_a: float = MAX_LEN_A,
                 max_len_b: int = MAX_LEN_B, max_tokens: int = 4000,
                 batch_size: int | None = None, compute_type: str = "float32",
                 cache_dir: str | None = None, threads: int | None = None) -> None:
        ct2 = import_ctranslate2()
        if fp16:
            raise InputError("--fp16 applies to --engine fairseq; with --engine "
                             "ctranslate2 choose --compute-type")
        if compute_type not in COMPUTE_TYPES:
            raise InputError(f"--compute-type {compute_type}: choose from "
                             f"{', '.join(COMPUTE_TYPES)}")
        if device == "cuda" and ct2.get_cuda_device_count() == 0:
            raise InputError("--device cuda but CTranslate2 sees no CUDA device")
        import torch
        from fairseq import utils
        from fairseq.tasks.translation import TranslationConfig, TranslationTask

        from ..model_dir import validate_model_dir

        md = validate_model_dir(model_dir, src_lang, tgt_lang, checkpoint)
        if len(md.checkpoints) > 1:
            names = ", ".join(os.path.basename(c) for c in md.checkpoints)
            raise InputError(f"{md.path}: --engine ctranslate2 cannot decode an ensemble "
                             f"({names}); pick one checkpoint with --checkpoint "
                             f"{os.path.basename(md.checkpoints[0])}, or use --engine "
                             f"fairseq")
        # What fairseq's path takes from the loaded models: positions from the model args.
        max_src = int(md.arch.get("max_source_positions") or 1024)
        max_tgt = int(md.arch.get("max_target_positions") or 1024)
        cfg = TranslationConfig(data=md.path, source_lang=src_lang, target_lang=tgt_lang,
                                max_source_positions=max_src, max_target_positions=max_tgt)
        task = TranslationTask(cfg, TranslationTask.load_dictionary(md.src_dict),
                               TranslationTask.load_dictionary(md.tgt_dict))
        self._init_pipeline(md, task, utils.resolve_max_positions(
            task.max_positions(), (max_src, max_tgt)), max_tokens, batch_size)
        self.model_path, self.converted = ensure_converted(md, cache_dir, ct2)
        self.threads = int(threads or torch.get_num_threads())
        self.translator = ct2.Translator(self.model_path, device=device,
                                         compute_type=compute_type, inter_threads=1,
                                         intra_threads=self.threads)
        self.beam, self.lenpen = beam, lenpen
        self.max_len_a, self.max_len_b = max_len_a, max_len_b
        self.max_decoder_len = max_tgt  # fairseq's SequenceGenerator max_len
        self._bos = self.tgt_dict[self.tgt_dict.bos()]
        self._eos = self.tgt_dict[self.tgt_dict.eos()]
        self.settings = {"engine": self.engine, "compute_type": compute_type,
                         "beam": beam, "lenpen": lenpen, "max_len_a": max_len_a,
                         "max_len_b": max_len_b, "max_tokens": max_tokens,
                         "batch_size": batch_size, "device": device, "fp16": False,
                         "threads": self.threads,
                         "checkpoints": [os.path.basename(md.checkpoints[0])],
                         # the cache entry by its key: the cache's path names the
                         # user's home, and reports are shared (fileio.public_name)
                         "ctranslate2_model": os.path.basename(self.model_path),
                         "ctranslate2_version": ct2.__version__}

    def _symbol(self, d, i):
        s = d[i]
        return "<blank>" if i == d.pad() else s  # the converter's name for padding

    def _generate(self, sample):
        net = sample["net_input"]
        src, lengths = net["src_tokens"], net["src_lengths"].tolist()
        src_len = src.size(1)  # padded length with </s>: fairseq's max_len uses it
        max_len = min(int(self.max_len_a * src_len + self.max_len_b),
                      self.max_decoder_len - 1)
        batch = []
        pad = self.src_dict.pad()
        for row, n in zip(src.tolist(), lengths):
            # build_dataset_for_inference pads on the left (LanguagePairDataset default)
            ids = row[len(row) - n:] if row[0] == pad else row[:n]
            batch.append([self._symbol(self.src_dict, i) for i in ids[:-1]])  # no </s>
        return self._search(batch, max_len)

    def _nbest(self, batch, max_len, patience=1):
        # CTranslate2 disables tokens before its softmax (renormalising what is left);
        # fairseq masks them after it. So nothing is disabled here, and what fairseq
        # would never produce (an empty output, padding) is dropped afterwards.
        return self.translator.translate_batch(
            batch, beam_size=self.beam, patience=patience,
            num_hypotheses=round(self.beam * patience), length_penalty=self.lenpen,
            max_decoding_length=max_len, min_decoding_length=0, return_end_token=True,
            max_input_length=0, return_scores=True)

    def _search(self, batch, max_len):
        """fairseq's beam search result for each source token list (see module doc)."""
        tr, eos, lp = self.translator, self._eos, self.lenpen
        results = self._nbest(batch, max_len)
        # A sentence whose n-best holds a hypothesis fairseq would not have finished
        # (cut at max_len: CTranslate2 ranks it without </s>, so it may have pushed out
        # finished ones; empty or with padding: it took a place in the n-best, so the
        # search stopped one hypothesis early): search it again with patience 2,
        # keeping twice as many. The search is the same; it only stops later.
        redo = [i for i, r in enumerate(results)
                if any(len(h) < 2 or h[-1] != eos or "<blank>" in h
                       for h in r.hypotheses)]
        if redo:
            for i, r in zip(redo, self._nbest([batch[i] for i in redo], max_len, 2)):
                results[i] = r
        cands = [[] for _ in batch]
        cut, forced = [], [[] for _ in batch]  # hypotheses stopped by max_len, no </s>
        for i, r in enumerate(results):
            done = []
            for hyp, score in zip(r.hypotheses, r.scores):
                if "<blank>" in hyp:
                    continue
                if hyp and hyp[-1] == eos:
                    if len(hyp) > 1:
                        done.append((score, hyp))
                else:
                    cut.append((i, hyp))
            # fairseq keeps the first `beam` finished hypotheses: by step (length),
            # then by total score (candidate order)
            done.sort(key=lambda x: (len(x[1]), -x[0] * len(x[1]) ** lp))
            cands[i] = [(score, hyp[:-1]) for score, hyp in done[:self.beam]]
        if cut:
            # fairseq appends </s> to these at max_len: score them as it does
            scored = tr.score_batch([batch[i] for i, _ in cut], [h for _, h in cut],
                                    max_input_length=0)
            for (i, hyp), sc in zip(cut, scored):
                forced[i].append((sum(sc.log_probs), hyp))  # with the appended </s>
            for i, f in enumerate(forced):
                # ... best total first, while fewer than `beam` are finished
                f.sort(key=lambda x: -x[0])
                for total, hyp in f[:max(0, self.beam - len(cands[i]))]:
                    cands[i].append((total / (len(hyp) + 1) ** lp, hyp))
        outs = []
        for i, c in enumerate(cands):
            if not c:  # only an empty or padded output: decode as fairseq constrains it
                r = tr.translate_batch(
                    [batch[i]], beam_size=self.beam, length_penalty=lp,
                    max_decoding_length=max_len, min_decoding_length=1,
                    max_input_length=0, suppress_sequences=[["<blank>"]])[0]
                c = [(0.0, r.hypotheses[0])]
            best = max(c, key=lambda x: x[0])[1]  # first of equals: CTranslate2's order
            # as fairseq's Dictionary.string: <s>/</s> are not printed
            outs.append(" ".join(t for t in best if t not in (eos, self._bos)))
        return outs
