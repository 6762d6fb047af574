"""Fine-tune a WMT19-format model on a release (or on full sentences) with fairseq.

Kim, Bisazza & Turkmen (2021), "Using Confidential Data for Domain Adaptation of Neural
Machine Translation", §4: the translation company continues training the generic
WMT19 de→en model on the released phrase pairs as if they were sentences, with the WMT19
learning rate divided by 4 (0.000175), weight decay 0.0001, dropout 0.2, label smoothing
0.1, Adam, and early stopping on a small full-sentence validation set.

Steps (all temporary files holding client text live in OUT/.work, mode 0700, removed at
the end unless keep_work):
1. validate the model dir and read its architecture from the checkpoint;
2. text → hub tokens → fastBPE with the model's codes (`nmtfrag.bpe`); `<P>`/`</P>`
   tags stay whole tokens;
3. when the training data is tagged, append the tags to both dictionaries and grow the
   checkpoint's embedding matrices (`nmtfrag.model_dir.grow_state`) → OUT/.work/init.pt;
4. binarise with those dictionaries (fairseq-preprocess);
5. fairseq's own training (fairseq_cli.train.main through its Python API, so CPU, CUDA
   and multi-GPU via fairseq's distributed launcher all work) with `--restore-file
   init.pt` and every `--reset-*` flag; the model arguments are copied from the
   checkpoint so the model fairseq builds is the pretrained one;
6. the best checkpoint (lowest validation loss) becomes OUT/model.pt next to the
   dictionaries and bpecodes: OUT is again a model directory.

A run killed half-way is continued with resume=True from OUT/checkpoints/checkpoint_last.pt
(optimizer, scheduler, data iterator and meters restored by fairseq).
"""
import json
import logging
import os
import shutil
import sys
import time

from .errors import InputError
from .fileio import public_name
from .fileio import (MANIFEST, atomic_writer, prepare_output_dir, read_json, sha256_file,
                     tool_versions, write_json)

PAPER_DEFAULTS = {
    "lr": 0.000175, "weight_decay": 0.0001, "dropout": 0.2, "label_smoothing": 0.1,
    "adam_betas": "(0.9, 0.98)", "adam_eps": 1e-8,
}
WORK = ".work"
CKPT = "checkpoints"
logger = logging.getLogger("nmtfrag.finetune")


# --------------------------------------------------------------------------- inputs
def resolve_train(train, src_lang="de", tgt_lang="en", pretokenized=False):
    """Training files and their text mode from `--train`.

    `train` is a release directory (manifest.json of kind nmtfrag-release; its
    `params.pretokenized` says whether the text is hub-tokenised or Moses-tokenised and
    unescaped), a file prefix (PREFIX.de + PREFIX.en) or a pair of files. Plain files are
    raw text unless `pretokenized` (Moses-tokenised, unescaped).
    Returns (src_path, tgt_path, mode, info dict).
    """
    if isinstance(train, (list, tuple)):
        if len(train) == 2:
            src, tgt = train
            return src, tgt, ("moses" if pretokenized else "raw"), {"kind": "files"}
        train = train[0]
    if os.path.isdir(train):
        man_path = os.path.join(train, MANIFEST)
        files = {"src": f"phrases.{src_lang}", "tgt": f"phrases.{tgt_lang}"}
        params = {}
        if os.path.isfile(man_path):
            try:
                man = read_json(man_path)
            except (ValueError, OSError) as exc:
                raise InputError(f"{man_path}: unreadable manifest ({exc})") from None
            if man.get("kind") not in (None, "nmtfrag-release"):
                raise InputError(f"{man_path}: kind {man.get('kind')!r} is not a release")
            files.update(man.get("files") or {})
            params = man.get("params") or {}
            if params.get("src_lang", src_lang) != src_lang or \
                    params.get("tgt_lang", tgt_lang) != tgt_lang:
                raise InputError(f"{man_path}: release is {params.get('src_lang')}→"
                                 f"{params.get('tgt_lang')}, model is {src_lang}→{tgt_lang}")
        src, tgt = (os.path.join(train, files["src"]), os.path.join(train, files["tgt"]))
        pre = params.get("pretokenized")
        mode = "moses" if pre else "hub"
        if pre is None and not os.path.isfile(man_path):
            # a directory of phrase files without manifest: trust the flag
            mode = "moses" if pretokenized else "raw"
        return src, tgt, mode, {"kind": "release", "manifest": man_path
                                if os.path.isfile(man_path) else None,
                                "release_params": params}
    src, tgt = f"{train}.{src_lang}", f"{train}.{tgt_lang}"
    if not (os.path.isfile(src) and os.path.isfile(tgt)):
        raise InputError(f"--train {train}: not a release directory and no "
                         f"{src} / {tgt} pair")
    return src, tgt, ("moses" if pretokenized else "raw"), {"kind": "files"}


def _read_pairs(src, tgt, what):
    from .corpus import SkipLog, read_parallel, validate_parallel

    validate_parallel(src, tgt)
    skips = SkipLog()
    rows = list(read_parallel(src, tgt, skips))
    if not rows:
        raise InputError(f"{what} {src}: no usable line pairs")
    return [(s, t) for _, s, t in rows], skips, [n - 1 for n, _, _ in rows]


# --------------------------------------------------------------------------- training args
def _model_arg_names(arch):
    """Names of the model-specific options of `arch` (what the checkpoint decides)."""
    import argparse

    from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY

    p = argparse.ArgumentParser(add_help=False)
    ARCH_MODEL_REGISTRY[arch].add_args(p)
    names = {a.dest for a in p._actions}
    # plus what the architecture function derives (decoder_input_dim, …)
    ns = argparse.Namespace()
    ARCH_CONFIG_REGISTRY[arch](ns)
    names |= set(vars(ns))
    names |= {"max_source_positions", "max_target_positions"}
    return names


# an epoch interval no run reaches: turns fairseq's per-epoch validation and saving off
EPOCHS_OUT_OF_REACH = 10 ** 9


def fairseq_train_argv(bin_dir, save_dir, init_ckpt, arch, *, src_lang, tgt_lang, lr,
                       weight_decay, dropout, label_smoothing, max_tokens, update_freq,
                       max_updates, max_epochs, patience, validate_every, warmup_updates,
                       seed, device, gpus, fp16, log_interval, resume, threads_note=None):
    """The fairseq-train command line of a fine-tuning run (also used by the benchmark)."""
    argv = [
        bin_dir, "--task", "translation", "-s", src_lang, "-t", tgt_lang,
        "--arch", arch,
        "--optimizer", "adam", "--adam-betas", PAPER_DEFAULTS["adam_betas"],
        "--adam-eps", str(PAPER_DEFAULTS["adam_eps"]),
        "--lr", str(lr), "--weight-decay", str(weight_decay),
        "--lr-scheduler", "fixed", "--warmup-updates", str(warmup_updates),
        "--criterion", "label_smoothed_cross_entropy",
        "--label-smoothing", str(label_smoothing),
        "--dropout", str(dropout),
        "--max-tokens", str(max_tokens), "--update-freq", str(update_freq),
        # the fairseq forks drop the last batch unless it is a multiple of this (8 by
        # default): 7 of EMEA's 151 validation sentences would never be scored
        "--required-batch-size-multiple", "1",
        "--seed", str(seed),
        "--save-dir", save_dir, "--no-epoch-checkpoints",
        "--keep-interval-updates", "1", "--keep-last-epochs", "1",
        "--best-checkpoint-metric", "loss", "--patience", str(patience),
        "--skip-invalid-size-inputs-valid-test",
        "--log-format", "simple", "--log-interval", str(log_interval),
        "--num-workers", "0", "--no-progress-bar",
    ]
    if max_updates:
        argv += ["--max-update", str(max_updates)]
    if max_epochs:
        argv += ["--max-epoch", str(max_epochs)]
    if validate_every:
        # every N updates *only*: fairseq also validates (and saves) at every epoch end
        # unless the epoch intervals are out of reach, and early stopping counts those
        # validations too (the demo stopped at 75 of 100 updates). A run still validates
        # and saves at its last update (fairseq's should_stop).
        argv += ["--validate-interval-updates", str(validate_every),
                 "--save-interval-updates", str(validate_every),
                 "--validate-interval", str(EPOCHS_OUT_OF_REACH),
                 "--save-interval", str(EPOCHS_OUT_OF_REACH)]
    if resume:
        argv += ["--restore-file", os.path.join(save_dir, "checkpoint_last.pt")]
    else:
        argv += ["--restore-file", init_ckpt, "--reset-optimizer", "--reset-lr-scheduler",
                 "--reset-meters", "--reset-dataloader"]
    if device == "cpu":
        argv += ["--cpu"]
    else:
        argv += ["--distributed-world-size", str(max(1, gpus))]
        if fp16:
            argv += ["--fp16"]
    return argv


def build_train_cfg(argv, ckpt_model_args):
    """Parse a fairseq-train command line, then copy the architecture from the checkpoint.

    fairseq builds the model from the command line, not from the restore file, so every
    model-specific option the checkpoint stored (layer count, FFN width, embedding
    sharing, …) is copied over the parsed defaults — except dropout, which fine-tuning
    sets (the paper's 0.2).
    """
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, argv)
    for name in _model_arg_names(args.arch):
        if name in ("dropout",) or name not in ckpt_model_args:
            continue
        setattr(args, name, ckpt_model_args[name])
    return convert_namespace_to_omegaconf(args)


class _LogCapture(logging.Handler):
    """Keeps fairseq's log lines in OUT/train.log (and the valid losses in memory)."""

    def __init__(self, path):
        super().__init__(logging.INFO)
        self.file = open(path, "a", encoding="utf-8")
        self.setFormatter(logging.Formatter("%(asctime)s | %(levelname)s | %(name)s | "
                                            "%(message)s", "%Y-%m-%d %H:%M:%S"))
        self.valid = []
        self.loaded = []

    def emit(self, record):
        msg = record.getMessage()
        self.file.write(self.format(record) + "\n")
        self.file.flush()
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

    def close(self):
        self.file.close()
        super().close()


class _ProgressOnly(logging.Filter):
    """fairseq's per-interval and per-epoch loss lines (its progress bar renames its
    logger to train / train_inner / valid) and warnings; not its set-up dump."""

    def filter(self, record):
        return record.levelno >= logging.WARNING or \
            record.name in ("train", "train_inner", "valid")


def _attach(handler, console_level=logging.INFO):
    """Route fairseq's loggers to `handler` (train.log) and to stderr at `console_level`
    (nothing of fairseq's reaches stdout: fairseq_cli.train points the root logger there).
    At INFO the console shows only the loss lines unless `nmtfrag -v` (nmtfrag.quiet).
    Returns what `_detach` needs to restore them."""
    from .quiet import verbose

    console = logging.StreamHandler(sys.stderr)
    console.setLevel(console_level)
    if not verbose():
        console.addFilter(_ProgressOnly())
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


def _detach(handler, attached):
    saved, console = attached
    for lg, level, propagate in saved:
        lg.removeHandler(handler)
        lg.removeHandler(console)
        lg.setLevel(level)
        lg.propagate = propagate


def _setup_console_logging(quiet):
    root = logging.getLogger()
    if not root.handlers:  # before fairseq_cli.train's basicConfig, which uses stdout
        logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                            format="%(asctime)s | %(levelname)s | %(name)s | %(message)s")


def run_fairseq_train(cfg, trained=None):
    """fairseq-train's main on a parsed cfg (spawns one process per GPU when needed).
    `trained` (a nmtfrag.trainable.TrainableSet) limits what trains; None: everything."""
    from fairseq.distributed import utils as distributed_utils

    distributed_utils.call_main(cfg, train_main_with_atomic_copies, trained=trained)


def train_main_with_atomic_copies(cfg, trained=None, **kwargs):
    """fairseq_cli.train.main, with checkpoint copies made atomic (and, with `trained`,
    only that parameter set trained: fairseq's optimizer skips frozen parameters).

    Why: fairseq saves a checkpoint once (atomically) and then `PathManager.copy`s it to
    the other names, checkpoint_last.pt included, with a plain `shutil.copyfile` that
    truncates and rewrites the file in place at every save. A run killed during that copy
    leaves a truncated checkpoint_last.pt, and `--resume` cannot continue. Module-level,
    so fairseq's spawned GPU workers import it and get the same fix.
    """
    from fairseq.file_io import PathManager
    from fairseq.tasks.translation import TranslationTask
    from fairseq_cli import train as fs_train

    plain_copy = PathManager.__dict__["copy"]
    plain_build = TranslationTask.__dict__["build_model"]
    PathManager.copy = staticmethod(atomic_copy)
    if trained is not None:
        def build_model(self, *args, **kw):
            from .trainable import apply

            model = plain_build(self, *args, **kw)
            apply(model, trained, seed=cfg.common.seed)
            return model

        TranslationTask.build_model = build_model
    try:
        return fs_train.main(cfg, **kwargs)
    finally:
        PathManager.copy = plain_copy
        TranslationTask.build_model = plain_build


def atomic_copy(src_path, dst_path, overwrite=False):
    """Copy to a temp file beside `dst_path`, then rename: a reader (or a kill) sees the
    old file or the new one, never half of it. Signature of fairseq's PathManager.copy."""
    if os.path.exists(dst_path) and not overwrite:
        return False
    with open(src_path, "rb") as src, atomic_writer(dst_path, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    return True


def validation_loss(bin_dir, ckpt, *, src_lang, tgt_lang, max_tokens, device,
                    label_smoothing):
    """Label-smoothed validation loss (base 2, fairseq's) of a checkpoint: fairseq-validate."""
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq_cli import validate as fs_validate

    argv = [bin_dir, "--path", ckpt, "--task", "translation", "-s", src_lang, "-t",
            tgt_lang, "--valid-subset", "valid", "--max-tokens", str(max_tokens),
            "--required-batch-size-multiple", "1",
            "--criterion", "label_smoothed_cross_entropy", "--label-smoothing",
            str(label_smoothing), "--log-format", "simple", "--no-progress-bar",
            "--skip-invalid-size-inputs-valid-test", "--num-workers", "0"]
    if device == "cpu":
        argv.append("--cpu")
    parser = options.get_validation_parser()
    args = options.parse_args_and_arch(parser, argv)
    override = options.parse_args_and_arch(options.get_validation_parser(), argv,
                                           suppress_defaults=True)
    handler = _LogCapture(os.devnull)
    attached = _attach(handler, logging.WARNING)
    try:
        fs_validate.main(convert_namespace_to_omegaconf(args), override)
    finally:
        _detach(handler, attached)
        handler.close()
    return handler.valid[-1]["loss"] if handler.valid else None


def worse_than_before(before, best):
    """True when even the kept (best) checkpoint has a higher validation loss than the
    model had before fine-tuning; None when either loss was not measured."""
    if before is None or best is None:
        return None
    return best > before


def loss_note(result):
    """The line that says a fine-tuning run made the validation loss worse (else None):
    the model written to OUT is then worse on the validation set than the one it started
    from, which a JSON summary alone does not make obvious."""
    if not result.get("worse_than_before"):
        return None
    return (f"note: fine-tuning did not lower the validation loss: the best checkpoint's "
            f"{result['valid_loss_best']:.3f} is worse than {result['valid_loss_before']:.3f} "
            f"before fine-tuning (the model in OUT is that best checkpoint; consider a "
            f"lower --lr, fewer updates, or keeping the base model)")


# --------------------------------------------------------------------------- main entry
def finetune(model, train, out, *, valid_src, valid_tgt, src_lang="de", tgt_lang="en",
             pretokenized=False, checkpoint=None,
             lr=PAPER_DEFAULTS["lr"], weight_decay=PAPER_DEFAULTS["weight_decay"],
             dropout=PAPER_DEFAULTS["dropout"],
             label_smoothing=PAPER_DEFAULTS["label_smoothing"],
             max_tokens=4096, update_freq=1, max_updates=None, max_epochs=None,
             patience=5, validate_every=None, warmup_updates=0, seed=1,
             device="cpu", gpus=1, fp16=False, threads=None, log_interval=50,
             resume=False, overwrite=False, keep_work=False, keep_checkpoints=False,
             measure_before=True, quiet=False, tags=None, trained=None):
    """Fine-tune `model` (a model dir) on `train`; write a model dir to `out`.

    Returns the manifest (also written to OUT/manifest.json). Raises InputError for
    anything the user can fix.
    """
    os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    from .bpe import BPE, TAGS
    from .model_dir import (grow_state, load_state, member_to_adapt, save_state,
                            validate_model_dir, write_dict_with, write_model_dir)

    if not (max_updates or max_epochs):
        raise InputError("give a training budget: --max-updates and/or --max-epochs")
    if trained is not None and trained.kind == "all" and not trained.freeze_embeddings:
        trained = None  # fairseq's default: everything trains
    if device not in ("cpu", "cuda"):
        raise InputError(f"--device {device}: expected cpu or cuda")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise InputError("--device cuda but torch sees no CUDA device")
    md, note = member_to_adapt(validate_model_dir(model, src_lang, tgt_lang, checkpoint),
                               checkpoint)
    if note:
        print(f"note: {note}", file=sys.stderr)
    src_path, tgt_path, mode, train_info = resolve_train(train, src_lang, tgt_lang,
                                                         pretokenized)
    valid_mode = "moses" if pretokenized else "raw"
    inputs = {"model": md.checkpoints[0], "train_src": src_path, "train_tgt": tgt_path,
              "valid_src": valid_src, "valid_tgt": valid_tgt}
    for p in list(inputs.values())[1:]:
        if not os.path.isfile(p):
            raise InputError(f"{p}: no such file")

    out = os.path.abspath(out)
    work = os.path.join(out, WORK)
    save_dir = os.path.join(out, CKPT)
    last = os.path.join(save_dir, "checkpoint_last.pt")
    prep_json = os.path.join(work, "prepared.json")
    if resume:
        if os.path.isfile(os.path.join(out, MANIFEST)):
            raise InputError(f"{out}: run already finished (manifest.json); nothing to resume")
        if not (os.path.isfile(prep_json) and os.path.isfile(last)):
            raise InputError(f"{out}: no interrupted run to resume (needs {WORK}/ and "
                             f"{CKPT}/checkpoint_last.pt)")
    else:
        if os.path.isdir(save_dir) and os.listdir(save_dir) and not overwrite and \
                not os.path.isfile(os.path.join(out, MANIFEST)):
            raise InputError(f"{out} holds an interrupted run: pass --resume to continue "
                             f"it or --overwrite to start again")
        out = prepare_output_dir(out, overwrite, kind="nmtfrag-finetuned-model", inputs=[
            md.path, train, src_path, tgt_path, valid_src, valid_tgt])
        for d in (work, save_dir):
            shutil.rmtree(d, ignore_errors=True)
        for f in (MANIFEST, "train.log", "model.pt"):
            if os.path.exists(os.path.join(out, f)):
                os.unlink(os.path.join(out, f))

    if threads:
        import torch

        torch.set_num_threads(threads)
    _setup_console_logging(quiet)
    t0 = time.time()
    hashes = {k: sha256_file(v) for k, v in inputs.items()}
    bin_dir = os.path.join(work, "bin")
    init_ckpt = os.path.join(work, "init.pt")

    if resume:
        prep = read_json(prep_json)
        if prep["inputs_sha256"] != hashes:
            raise InputError(f"{out}: --resume with different inputs than the interrupted "
                             f"run (model, train or valid files changed)")
    else:
        os.makedirs(work, mode=0o700)
        os.chmod(work, 0o700)
        prep = _prepare(md, src_path, tgt_path, mode, valid_src, valid_tgt, valid_mode,
                        work, bin_dir, init_ckpt, src_lang, tgt_lang, seed,
                        BPE, TAGS, load_state, grow_state, save_state, write_dict_with,
                        tags=tags)
        prep.pop("train_lines")
        prep["inputs_sha256"] = hashes
        write_json(prep_json, prep)

    before = None
    if measure_before and not resume:
        before = validation_loss(bin_dir, init_ckpt, src_lang=src_lang, tgt_lang=tgt_lang,
                                 max_tokens=max_tokens, device=device,
                                 label_smoothing=label_smoothing)
        prep["valid_loss_before"] = before
        write_json(prep_json, prep)
    else:
        before = prep.get("valid_loss_before")

    argv = fairseq_train_argv(
        bin_dir, save_dir, init_ckpt, md.arch.get("arch") or "transformer",
        src_lang=src_lang, tgt_lang=tgt_lang, lr=lr, weight_decay=weight_decay,
        dropout=dropout, label_smoothing=label_smoothing, max_tokens=max_tokens,
        update_freq=update_freq, max_updates=max_updates, max_epochs=max_epochs,
        patience=patience, validate_every=validate_every, warmup_updates=warmup_updates,
        seed=seed, device=device, gpus=gpus, fp16=fp16, log_interval=log_interval,
        resume=resume)
    cfg = build_train_cfg(argv, md.arch)
    os.makedirs(save_dir, exist_ok=True)
    handler = _LogCapture(os.path.join(out, "train.log"))
    attached = _attach(handler, logging.WARNING if quiet else logging.INFO)
    t_train = time.time()
    try:
        run_fairseq_train(cfg, trained)
    finally:
        _detach(handler, attached)
        handler.close()
    train_seconds = time.time() - t_train

    best = os.path.join(save_dir, "checkpoint_best.pt")
    chosen = best if os.path.isfile(best) else last
    if not os.path.isfile(chosen):
        raise RuntimeError(f"fairseq training wrote no checkpoint in {save_dir}")
    state = load_state(chosen)
    if trained is not None and trained.kind == "lora":
        from .lora import merge_state

        state["model"] = merge_state(state["model"], trained.lora_scaling)
    last_state = load_state(last) if chosen != last else state
    num_updates_last = last_state["optimizer_history"][-1]["num_updates"]
    num_updates_best = state["optimizer_history"][-1]["num_updates"]
    extra = last_state.get("extra_state") or {}
    best_loss = extra.get("best")
    if hasattr(best_loss, "item"):
        best_loss = best_loss.item()
    del last_state
    write_model_dir(out, state, os.path.join(bin_dir, f"dict.{src_lang}.txt"),
                    os.path.join(bin_dir, f"dict.{tgt_lang}.txt"), md.bpecodes,
                    src_lang, tgt_lang)
    del state
    if not keep_checkpoints:
        shutil.rmtree(save_dir, ignore_errors=True)
    if not keep_work:
        shutil.rmtree(work, ignore_errors=True)

    manifest = {
        "kind": "nmtfrag-finetuned-model",
        "model_files": ["model.pt", f"dict.{src_lang}.txt", f"dict.{tgt_lang}.txt",
                        "bpecodes"],
        "params": {
            "base_model": public_name(md.path), "checkpoint": os.path.basename(md.checkpoints[0]),
            "base_ensemble_members": md.ensemble_members,
            "train": (public_name(train) if isinstance(train, str)
                      else [public_name(t) for t in train]),
            "train_kind": train_info["kind"], "train_text_mode": mode,
            "valid_src": public_name(valid_src), "valid_tgt": public_name(valid_tgt),
            "valid_text_mode": valid_mode, "src_lang": src_lang, "tgt_lang": tgt_lang,
            "lr": lr, "lr_scheduler": "fixed", "warmup_updates": warmup_updates,
            "weight_decay": weight_decay, "dropout": dropout,
            "label_smoothing": label_smoothing, "optimizer": "adam",
            "adam_betas": PAPER_DEFAULTS["adam_betas"], "max_tokens": max_tokens,
            "update_freq": update_freq, "max_updates": max_updates, "max_epochs": max_epochs,
            "patience": patience, "validate_every": validate_every, "seed": seed,
            "trained_parameters": (trained.public_record() if trained is not None
                                   else {"kind": "all"}),
            "device": device, "gpus": gpus if device == "cuda" else 0, "fp16": fp16,
            "release_params": train_info.get("release_params"),
        },
        "architecture": {k: md.arch.get(k) for k in (
            "arch", "encoder_layers", "decoder_layers", "encoder_embed_dim",
            "encoder_ffn_embed_dim", "decoder_ffn_embed_dim", "encoder_attention_heads",
            "share_all_embeddings", "share_decoder_input_output_embed")},
        "counts": prep["counts"],
        "tags": prep["tags"],
        "result": {
            "valid_loss_before": before, "valid_loss_best": best_loss,
            "num_updates": num_updates_last, "best_checkpoint_updates": num_updates_best,
            "stopped_early": bool(max_updates and num_updates_last < max_updates
                                  and not max_epochs),
            "resumed": bool(resume), "train_seconds_this_run": round(train_seconds, 1),
            "wall_seconds_this_run": round(time.time() - t0, 1),
            "validations_this_run": handler.valid,
            "worse_than_before": worse_than_before(before, best_loss),
        },
        "fairseq_train_argv": argv,
        "inputs_sha256": hashes,
        "tool_versions": tool_versions("fairseq-fixed", "torch", "fastbpe", "sacremoses"),
    }
    write_json(os.path.join(out, MANIFEST), manifest)
    return manifest


def _prepare(md, src_path, tgt_path, mode, valid_src, valid_tgt, valid_mode, work,
             bin_dir, init_ckpt, src_lang, tgt_lang, seed, BPE, TAGS, load_state,
             grow_state, save_state, write_dict_with, tags=None, dedup=False):
    """Steps 2–4: subword text, dictionaries (+tags), grown init checkpoint, binaries.

    `tags` None adds <P>/</P> to the dictionaries when the training data holds them;
    True/False decides by a public flag instead (under DP the model's shape must not
    depend on the data). `dedup` keeps one copy of each distinct training pair.
    The result's "train_lines" gives the 0-based corpus line of each binarised training
    example (owner-only information: pop it before writing the result anywhere).
    """
    from .binarize import binarize

    bpe = BPE(md.bpecodes)
    counts = {}
    prefixes = {}
    n_tagged = 0
    for split, (s, t, m) in {"train": (src_path, tgt_path, mode),
                             "valid": (valid_src, valid_tgt, valid_mode)}.items():
        pairs, skips, lines = _read_pairs(s, t, f"{split}")
        duplicates = 0
        if split == "train" and dedup:
            first = {}
            for pair, line in zip(pairs, lines):
                first.setdefault(pair, line)
            duplicates, pairs, lines = (len(pairs) - len(first), list(first),
                                        list(first.values()))
        src_sub, ts = bpe.encode_lines((p[0] for p in pairs), src_lang, m)
        tgt_sub, tt = bpe.encode_lines((p[1] for p in pairs), tgt_lang, m)
        if split == "train":
            n_tagged = ts + tt
        # a pair whose side became empty after tokenisation cannot be trained on
        kept = [k for k, (a, b) in enumerate(zip(src_sub, tgt_sub))
                if a.strip() and b.strip()]
        keep = [(src_sub[k], tgt_sub[k]) for k in kept]
        if split == "train":
            train_lines = [lines[k] for k in kept]
        prefix = os.path.join(work, split)
        for lang, side in ((src_lang, 0), (tgt_lang, 1)):
            with open(f"{prefix}.{lang}", "w", encoding="utf-8") as f:
                f.writelines(p[side] + "\n" for p in keep)
        prefixes[split] = prefix
        counts[split] = {"pairs": len(keep), "skipped": skips.to_json(),
                         "empty_after_bpe": len(pairs) - len(keep),
                         "tagged_lines": ts + tt, "duplicates_removed": duplicates}
    src_dict = os.path.join(work, f"dict.{src_lang}.txt")
    tgt_dict = os.path.join(work, f"dict.{tgt_lang}.txt")
    if tags is False and n_tagged:
        raise InputError(f"the training data holds {n_tagged} <P>/</P> tag tokens but "
                         "--tags was not given: under --dp the vocabulary is decided by "
                         "flags only, so pass --tags (or remove the tags)")
    new = list(TAGS) if (n_tagged if tags is None else tags) else []
    added_src = write_dict_with(md.src_dict, src_dict, new)
    added_tgt = write_dict_with(md.tgt_dict, tgt_dict, new)
    state = load_state(md.checkpoints[0])
    grow_state(state, len(added_src), len(added_tgt), seed=seed)
    save_state(state, init_ckpt)
    del state
    stats = binarize(prefixes, bin_dir, src_dict, tgt_dict, src_lang, tgt_lang)
    for split in counts:
        counts[split].update(stats.get(split, {}))
    return {"counts": counts, "tags": {"tagged_training_lines": n_tagged,
                                       "added_to_src_dict": added_src,
                                       "added_to_tgt_dict": added_tgt,
                                       "init": "mean of pretrained rows + 0.01·std noise"},
            "text_modes": {"train": mode, "valid": valid_mode},
            "train_lines": train_lines}


def read_manifest(out):
    with open(os.path.join(out, MANIFEST), encoding="utf-8") as f:
        return json.load(f)
