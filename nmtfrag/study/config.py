"""A study's config file (TOML): read, check every key, resolve paths, before anything runs.

Why: a decision study is days of CPU; a typo found after the baseline is evaluated costs
hours. Every key is known, typed and range-checked here, and a bad one is one `error:`
line naming the file and the key (`[training] lr`, `cell 'len4-tag': max_len`). The
commented example configs in `corpora/*/study.toml` are the documentation of every key.

Paths may hold `${VAR}` (taken from the environment, so a shipped config names no path of
anyone's machine). A relative path resolves from the config file's own directory, so a
config works from wherever it is run (`train = "train"` beside corpora/demo/study.toml is
corpora/demo/train); a path that starts with `${VAR}` takes the variable's value as the
shell gave it, relative to the current directory. `read_config_for(CONFIG, OUT)` (status,
report) takes a value that study OUT recorded for a variable the environment leaves unset.
"""
from __future__ import annotations

import math
import os
import re
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import InputError
from .variables import recorded_variables

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, before it joined the standard library
    import tomli as tomllib

APPROACHES = ("phrases", "sentences", "dp-release", "dp-sgd", "dp-composed", "public")
DP_APPROACHES = ("dp-release", "dp-sgd", "dp-composed")
RELEASE_APPROACHES = ("phrases", "dp-release", "dp-composed")  # cells that make a release
# cells that make a DP release (its aligner learns on public_align, never the owner's corpus)
DP_RELEASE_APPROACHES = ("dp-release", "dp-composed")
# training rules of fixed passes, no validation, no early stop: a DP release's; a composed
# cell's warm start's (the cell itself then runs DP-SGD; its public control follows this)
FIXED_PASSES = DP_RELEASE_APPROACHES
BASELINE = "baseline"
CELL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class Training:
    """How the non-private cells train: Kim et al. (2021)'s settings, early stopping on
    the validation set under a cap (`max_epochs`, and `max_updates` when > 0)."""
    lr: float = 0.000175
    weight_decay: float = 0.0001
    dropout: float = 0.2
    label_smoothing: float = 0.1
    max_tokens: int = 2048
    patience: int = 2
    max_epochs: int = 10
    max_updates: int = 0
    validate_every: int = 0


@dataclass(frozen=True)
class Audit:
    """Which audits run on every cell they apply to, and their sizes."""
    reconstruction: bool = True
    membership: bool = True
    membership_pairs: int = 1000
    canaries: bool = True
    canary_count: int = 10
    canary_repeats: tuple[int, ...] = (1, 10, 25)
    exposure_samples: int = 1000


@dataclass(frozen=True)
class Decode:
    engine: str = "ctranslate2"
    beam: int = 5
    test_lines: int = 0          # 0: the whole test set
    compute_type: str = "float32"
    length_penalty: str = ""     # "public": every cell is also decoded with a length
    #                              penalty chosen for it on [data] public_valid
    length_penalty_lines: int = 500  # public validation lines the choice decodes


@dataclass(frozen=True)
class Machine:
    """Where cells run; never part of a cell's settings (a cell may move machines)."""
    device: str = "cpu"
    threads: int = 0             # 0: every core
    jobs: int = 1
    decode_device: str = ""      # where evaluate decodes ("": device); e.g. "cpu" on a GPU
    #                              machine without CTranslate2's CUDA libraries

    @property
    def decoder(self) -> str:
        return self.decode_device or self.device


@dataclass(frozen=True)
class Data:
    train: str
    valid: str
    test: str
    src_lang: str = "de"
    tgt_lang: str = "en"
    pretokenized: bool = False
    public_align: str = ""       # PREFIX of public parallel text (DP release's aligner)
    public_train: str = ""       # PREFIX of public parallel text trained on beside a cell's
    #                              material (`public_share`) or alone (the public control)
    public_valid: str = ""       # PREFIX of public validation text ([decode] length_penalty)

    def files(self, prefix: str) -> tuple[str, str]:
        return f"{prefix}.{self.src_lang}", f"{prefix}.{self.tgt_lang}"


@dataclass(frozen=True)
class Cell:
    """One approach with its options; `settings()` is what the study records for it."""
    name: str
    approach: str
    max_len: int = 4
    tags: bool = False
    sample_rate: float = 0.5
    epsilon: float = 0.0
    delta: float = 1e-5
    unit_cap: int = 16
    passes: int = 10             # dp-release: fixed passes over the release
    options: tuple[str, ...] = ()  # dp-sgd: `nmtfrag finetune --dp` options (default: recipe)
    seeded: bool = False         # DP cells: seeded randomness (reproducible, NOT private)
    tuned_on: str = "public"     # DP cells: where their hyperparameters (dp-sgd's options,
    #                              a dp-release's passes) were chosen
    adopt: str = ""              # sentences, dp-sgd: a finished finetune output to adopt
    public_share: float = 0.0    # phrases, sentences, dp-release: public pairs' share of the
    #                              training target tokens ([data] public_train; 0: none)
    public_min_words: int = 0    # only public pairs whose target has ≥ this many words
    pack: str = ""               # phrases, dp-release: "" (no packing), "public" or a number
    #                              of target words: fragments packed to sentence length
    pack_tags: bool = True       # packed fragments keep their <P> … </P>
    like: str = ""               # public: the mixed cell whose public pairs it trains on alone
    public_batch: int = 0        # dp-sgd: public pairs in every logical batch (unclipped,
    public_weight: float = 1.0   # noise-free, ε unchanged) and the weight of each
    release_epsilon: float = 0.0  # dp-composed: the DP release's share of the total ε
    train_fraction: float = 1.0  # dp-sgd: train on this random share of the owner's pairs
    run: int = 1                 # which run of the cell (config key `runs`: NAME.rK)
    chosen_on_test_lines: int = 0  # its settings were chosen on the test set's first N
    #                              lines: the report also scores it without them
    training: Training = field(default_factory=Training)

    @property
    def private(self) -> bool:
        return self.approach in DP_APPROACHES


@dataclass(frozen=True)
class StudyConfig:
    path: str
    title: str
    seed: int
    model: str
    checkpoint: str
    data: Data
    decode: Decode
    training: Training
    audit: Audit
    machine: Machine
    cells: tuple[Cell, ...]

    def cell(self, name: str) -> Cell:
        for c in self.cells:
            if c.name == name:
                return c
        raise KeyError(name)

    def training_rule(self, name: str) -> Cell:
        """The cell whose training rule `name` follows: a public control trains by its
        like-cell's (study.plan's _control; a composed cell's: its warm start), every
        other cell by its own."""
        cell = self.cell(name)
        return self.cell(cell.like) if cell.approach == "public" else cell

    reference: str = ""   # the full-sentence cell every share is of (default: the first)
    # the base model was trained on the owner's data ([model] owner_data): every ε's
    # "outside" names it (the demo's toy model is)
    model_on_owner_data: bool = False

    @property
    def full_sentence_cell(self) -> str | None:
        """The reference of every share: `reference`, else the first sentences cell."""
        if self.reference:
            return self.reference
        return next((c.name for c in self.cells if c.approach == "sentences"), None)

    # the ${VAR}s its paths used, with the values they took (nmtfrag.study.variables)
    variables: tuple[tuple[str, str], ...] = ()
    # pairs of cells (A, B) whose difference the owner's pick rests on: the report tests
    # A − B with run-to-run variance (nmtfrag.study.runs_section); a report-only key
    compare_pairs: tuple[tuple[str, str], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------- reading
_TOP = {"title", "seed", "model", "data", "decode", "training", "audit", "machine", "cell",
        "reference", "compare"}
_MODEL_KEYS = {"dir", "checkpoint", "owner_data"}
_EVERY_CELL_KEYS = {"name", "approach", "runs"}  # a cell's keys whatever its approach
_PUBLIC_KEYS = {"public_share", "public_min_words"}
_PACK_KEYS = {"pack", "pack_tags"}
_CELL_KEYS = {
    "phrases": {"max_len", "tags", "sample_rate", "training"} | _PUBLIC_KEYS | _PACK_KEYS,
    "sentences": {"training", "adopt"} | _PUBLIC_KEYS,
    "dp-release": {"epsilon", "delta", "max_len", "tags", "unit_cap", "passes", "seeded",
                   "tuned_on"} | _PUBLIC_KEYS | _PACK_KEYS,
    "dp-sgd": {"epsilon", "delta", "options", "seeded", "tuned_on", "adopt", "public_batch",
               "public_weight", "train_fraction", "chosen_on_test_lines"},
    # a DP release (release_epsilon, δ/2) and public pairs fine-tune the model for fixed
    # passes, then DP-SGD continues from it; epsilon and delta are the composed total
    "dp-composed": {"epsilon", "delta", "release_epsilon", "max_len", "tags", "unit_cap",
                    "passes", "seeded", "tuned_on", "options", "chosen_on_test_lines"}
    | _PUBLIC_KEYS,
    "public": {"like"},
}


class _Where:
    """Names a key in error messages (`study.toml: [training] lr: …`); resolves paths from
    the config's directory and `${VAR}`s from the environment, else from `recorded`."""

    def __init__(self, path: str, recorded: dict[str, str] | None = None):
        self.path = path
        self.base = os.path.dirname(os.path.abspath(path))
        self.recorded = recorded
        self.used: dict[str, str] = {}

    def error(self, key: str, message: str) -> InputError:
        return InputError(f"{self.path}: {key}: {message}")

    def variable(self, key: str, name: str) -> str:
        if name in os.environ:
            return os.environ[name]
        if self.recorded is None:
            raise self.error(key, f"${{{name}}} is not set in the environment")
        if name not in self.recorded:
            raise self.error(key, f"${{{name}}} is not set in the environment, nor recorded "
                             f"by the study's last run (set it)")
        return self.recorded[name]


def read_config(path: str, recorded: dict[str, str] | None = None) -> StudyConfig:
    """The checked config (InputError naming the file and key on the first bad one);
    `recorded`: values for the `${VAR}`s the environment leaves unset."""
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such config file")
    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: not valid TOML ({exc})") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    return parse_config(raw, path, recorded)


def read_config_for(path: str, out: str) -> StudyConfig:
    """The config as study OUT reads it (`study status`, `study report`): a `${VAR}` unset
    here takes the value OUT's last `study run` used, so looking at a study needs no
    MODELS=… DATA=… (nmtfrag.study.variables)."""
    return read_config(path, recorded_variables(out))


def parse_config(raw: dict[str, Any], path: str,
                 recorded: dict[str, str] | None = None) -> StudyConfig:
    w = _Where(path, recorded)
    _unknown(w, "", raw, _TOP)
    model = _table(w, raw, "model")
    _unknown(w, "[model] ", model, _MODEL_KEYS)
    data_t = _table(w, raw, "data")
    _unknown(w, "[data] ", data_t, {f.name for f in Data.__dataclass_fields__.values()})
    for key in ("train", "valid", "test"):
        if key not in data_t:
            raise w.error(f"[data] {key}", "required (a file prefix: PREFIX.SRC, PREFIX.TGT)")
    data = Data(**{k: _typed(w, f"[data] {k}", data_t[k], Data.__dataclass_fields__[k].type)
                   for k in data_t})
    data = _resolve_data(w, data)
    model_dir = _path(w, "[model] dir", model.get("dir"), required=True)
    if not os.path.isdir(model_dir):
        raise w.error("[model] dir", f"{model_dir} is not a directory")
    checkpoint = _typed(w, "[model] checkpoint", model.get("checkpoint", ""), "str")
    if checkpoint and not os.path.isfile(os.path.join(model_dir, checkpoint)):
        raise w.error("[model] checkpoint", f"{checkpoint} is not in {model_dir}")
    training = _section(w, raw, "training", Training)
    _check_training(w, "[training] ", training)
    audit = _section(w, raw, "audit", Audit)
    decode = _section(w, raw, "decode", Decode)
    machine = _section(w, raw, "machine", Machine)
    _check_rest(w, audit, decode, machine)
    if decode.length_penalty and not data.public_valid:
        raise w.error("[decode] length_penalty", "needs [data] public_valid (public "
                      "validation text: the owner's would make the choice private)")
    seed = _typed(w, "seed", raw.get("seed", 1), "int")
    if not 0 <= seed < 2 ** 31:
        raise w.error("seed", f"must be in 0..2^31-1, got {seed}")
    cells_raw = raw.get("cell", [])
    if not isinstance(cells_raw, list) or not cells_raw:
        raise w.error("[[cell]]", "give at least one cell (the baseline is always run)")
    cells = tuple(run for i, c in enumerate(cells_raw, 1)
                  for run in _runs(w, _cell(w, i, c, training, data), c))
    names = [c.name for c in cells]
    for n in names:
        if names.count(n) > 1:
            raise w.error(f"cell {n!r}", "two cells have this name")
    for c in cells:
        if c.approach == "public":
            _check_control(w, c, cells)
    reference = _typed(w, "reference", raw.get("reference", ""), "str")
    if reference and not any(c.name == reference and c.approach == "sentences"
                             for c in cells):
        raise w.error("reference", f"the name of a sentences cell, got {reference!r}")
    compare_pairs = _compare_pairs(w, raw.get("compare", []), cells)
    return StudyConfig(path=path, title=_typed(w, "title", raw.get("title", "study"), "str"),
                       seed=seed, model=model_dir, checkpoint=checkpoint, data=data,
                       decode=decode, training=training, audit=audit, machine=machine,
                       cells=cells, reference=reference,
                       model_on_owner_data=_typed(w, "[model] owner_data",
                                                  model.get("owner_data", False), "bool"),
                       variables=tuple(sorted(w.used.items())),
                       compare_pairs=compare_pairs)


RUN_MARK = ".r"  # run k > 1 of cell NAME is the cell NAME.rK
MAX_RUNS = 20


def run_name(name: str, run: int) -> str:
    return name if run == 1 else f"{name}{RUN_MARK}{run}"


def base_name(name: str) -> str:
    """The cell a run belongs to: "sent" for "sent.r3" (and for "sent")."""
    head, sep, tail = name.rpartition(RUN_MARK)
    return head if sep and tail.isdigit() and int(tail) > 1 else name


def _compare_pairs(w: _Where, raw: Any, cells: tuple[Cell, ...]) -> tuple[tuple[str, str], ...]:
    """`compare = [["A", "B"], …]` (a top-level key): each pair two different cells of
    this config, by their names (a comparison is of a cell's runs together, so a run's
    NAME.rK is refused), and no pair twice in either order (B − A is A − B's sign)."""
    names = {BASELINE} | {c.name for c in cells if base_name(c.name) == c.name}
    if not isinstance(raw, list):
        raise w.error("compare", f"expected a list of [A, B] pairs, got {raw!r}")
    pairs: list[tuple[str, str]] = []
    for pair in raw:
        if not (isinstance(pair, list) and len(pair) == 2
                and all(isinstance(n, str) for n in pair)):
            raise w.error("compare", f"each entry is [A, B], two cell names; got {pair!r}")
        for n in pair:
            if n in names:
                continue
            if base_name(n) in names:
                raise w.error("compare", f"{n!r} is a run, not a cell: name the cell "
                              f"({base_name(n)!r}); its runs are compared together")
            raise w.error("compare", f"{n!r} is not a cell of this config (cells: "
                          f"{', '.join(sorted(names))})")
        if pair[0] == pair[1]:
            raise w.error("compare", f"a cell compared with itself: {pair!r}")
        if {pair[0], pair[1]} in [set(p) for p in pairs]:
            raise w.error("compare", f"{pair!r} given twice (in either order)")
        pairs.append((pair[0], pair[1]))
    return tuple(pairs)


def _runs(w: _Where, cell: Cell, raw: dict) -> list[Cell]:
    """A cell with `runs = N`: itself (run 1, its settings as they were) and N − 1 runs
    of its own, NAME.r2 …, each with a new training seed, a new release draw and new DP
    noise (Planner.run_seed); every run resumes, reports and runs in parallel as a cell."""
    from dataclasses import replace

    n = raw.get("runs", 1)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_RUNS:
        raise w.error(f"cell {cell.name!r}: runs", f"an integer in 1..{MAX_RUNS}, got {n!r}")
    like = cell.like
    return [replace(cell, name=run_name(cell.name, k), run=k,
                    like=run_name(like, k) if like and k > 1 else like)
            for k in range(1, n + 1)]


def _cell(w: _Where, i: int, raw: Any, training: Training, data: Data) -> Cell:
    if not isinstance(raw, dict):
        raise w.error(f"cell {i}", "must be a table ([[cell]])")
    name = raw.get("name")
    if not isinstance(name, str) or not CELL_NAME.match(name) or name == BASELINE:
        raise w.error(f"cell {i}: name", "required: letters, digits, '.', '_', '-' (not "
                      f"'{BASELINE}': the baseline is always run), got {name!r}")
    where = f"cell {name!r}: "
    if base_name(name) != name:
        raise w.error(where + "name", f"a name ending in {RUN_MARK}N is a run's (give the "
                      f"cell `runs = N` instead)")
    approach = raw.get("approach")
    if approach not in APPROACHES:
        raise w.error(where + "approach", f"one of {', '.join(APPROACHES)}, got {approach!r}")
    _unknown(w, where, raw, _EVERY_CELL_KEYS | _CELL_KEYS[approach])
    kw: dict[str, Any] = {}
    for key, value in raw.items():
        if key in _EVERY_CELL_KEYS:
            continue
        if key == "training":
            if not isinstance(value, dict):
                raise w.error(where + "training", "must be a table of [training] keys")
            _unknown(w, where + "training.", value, set(Training.__dataclass_fields__))
            merged = {**asdict(training), **{k: _typed(
                w, f"{where}training.{k}", v, Training.__dataclass_fields__[k].type)
                for k, v in value.items()}}
            kw["training"] = Training(**merged)
            _check_training(w, where + "training.", kw["training"])
        elif key == "options":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise w.error(where + "options", "a list of strings (finetune --dp options)")
            kw["options"] = tuple(value)
        elif key == "pack" and isinstance(value, int) and not isinstance(value, bool):
            kw[key] = str(value)  # a number of target words, written as a number
        elif key == "adopt":
            kw[key] = _path(w, where + key, value, required=True)
            if not os.path.isfile(os.path.join(kw[key], "manifest.json")):
                raise w.error(where + key, f"{kw[key]} is not a finished `nmtfrag finetune` "
                              f"output (no manifest.json)")
        else:
            kw[key] = _typed(w, where + key, value, Cell.__dataclass_fields__[key].type)
    kw.setdefault("training", training)  # dp-sgd cells ignore it (they follow their plan)
    cell = Cell(name=name, approach=approach, **kw)
    _check_cell(w, where, cell, raw, data)
    return cell


# options of `finetune --dp` a dp-sgd cell may not set: the study sets them, or they would
# break the footing (another model, data or test) or the ε the row prints
_STUDY_OWNS = ("--model", "--train", "--out", "--valid-src", "--valid-tgt", "--delta",
               "--dp-public-train", "--dp-public-batch", "--dp-public-weight",
               "--train-fraction",
               "--epsilon", "--target-epsilon", "--seed", "--overwrite", "--resume",
               "--threads", "--device", "--pretokenized", "--src-lang", "--tgt-lang",
               "--checkpoint", "--dp", "--documents", "--tmx", "-q", "--quiet")


def _check_cell(w: _Where, where: str, c: Cell, raw: dict, data: Data) -> None:
    if c.approach in RELEASE_APPROACHES and not 1 <= c.max_len <= 10:
        raise w.error(where + "max_len", f"must be 1..10 (the paper: 4 or 7), got {c.max_len}")
    if not 0 < c.sample_rate <= 1:
        raise w.error(where + "sample_rate", f"must be in (0, 1], got {c.sample_rate}")
    if c.private:
        if "epsilon" not in raw:
            raise w.error(where + "epsilon", "required for a DP cell")
        if not (math.isfinite(c.epsilon) and 0 < c.epsilon <= 100):
            raise w.error(where + "epsilon", f"must be in (0, 100], got {c.epsilon}")
        if not 0 < c.delta < 0.01:
            raise w.error(where + "delta", f"must be in (0, 0.01), got {c.delta}")
    _check_public(w, where, c, data)
    if c.public_batch < 0 or not c.public_weight > 0:
        raise w.error(where + ("public_batch" if c.public_batch < 0 else "public_weight"),
                      "public_batch must be ≥ 0 and public_weight > 0")
    if c.public_batch and not data.public_train:
        raise w.error(where + "public_batch", "needs [data] public_train (public parallel "
                      "text)")
    if c.chosen_on_test_lines < 0:
        raise w.error(where + "chosen_on_test_lines", f"must be ≥ 0, got "
                      f"{c.chosen_on_test_lines}")
    if not 0 < c.train_fraction <= 1:
        raise w.error(where + "train_fraction", f"must be in (0, 1], got {c.train_fraction}")
    if c.approach == "dp-composed" and not 0 < c.release_epsilon < c.epsilon:
        raise w.error(where + "release_epsilon", f"the release's share of the total ε: in "
                      f"(0, epsilon), got {c.release_epsilon}")
    if c.approach in DP_RELEASE_APPROACHES:
        if not data.public_align:
            raise w.error(where + "approach", "a DP release cell needs [data] public_align "
                          "(public parallel text for its aligner: an alignment learned on "
                          "the owner's corpus would void the release's guarantee)")
        if c.passes < 1 or c.unit_cap < 1:
            raise w.error(where + ("passes" if c.passes < 1 else "unit_cap"), "must be ≥ 1")
    if c.approach in DP_APPROACHES and c.tuned_on not in ("public", "private"):
        raise w.error(where + "tuned_on", f"'public' (the default, or chosen on a public "
                      f"proxy corpus) or 'private' (chosen on the owner's data, e.g. by a "
                      f"sweep or from an earlier cell's test scores), got {c.tuned_on!r}")
    if c.approach in ("dp-sgd", "dp-composed"):
        for opt in c.options:
            if opt.split("=", 1)[0] in _STUDY_OWNS:
                raise w.error(where + "options", f"{opt} is set by the study (use the cell's "
                              f"own keys, e.g. epsilon, delta, seeded)")
            if opt.split("=", 1)[0] in ("--lr", "--patience", "--validate-every"):
                raise w.error(where + "options", f"{opt} is fairseq's, not DP-SGD's (a DP "
                              f"cell follows its plan; see `nmtfrag finetune --help`)")


def _check_public(w: _Where, where: str, c: Cell, data: Data) -> None:
    """A cell's public pairs and packing: in range, with the public text they need."""
    if not 0 <= c.public_share < 1:
        raise w.error(where + "public_share", f"must be in [0, 1), got {c.public_share}")
    if c.public_min_words < 0:
        raise w.error(where + "public_min_words", f"must be ≥ 0, got {c.public_min_words}")
    if c.public_min_words and not c.public_share:
        raise w.error(where + "public_min_words", "needs public_share")
    if c.pack and c.pack != "public" and not (c.pack.isdigit() and 1 <= int(c.pack) <= 500):
        raise w.error(where + "pack", f"'public' or a number of target words (1..500), "
                      f"got {c.pack!r}")
    if not c.pack and not c.pack_tags:
        raise w.error(where + "pack_tags", "needs pack")
    if (c.public_share or c.pack == "public") and not data.public_train:
        raise w.error(where + ("public_share" if c.public_share else "pack"),
                      "needs [data] public_train (public parallel text)")


def _check_control(w: _Where, c: Cell, cells: tuple[Cell, ...]) -> None:
    """A public control names the mixed cell whose public pairs it trains on alone: by
    its training rule (early stopping, a DP release's fixed passes, a composed cell's warm
    start) or, beside DP-SGD, its planned steps' public pairs (nmtfrag.study.plan)."""
    where = f"cell {c.name!r}: like"
    like = next((x for x in cells if x.name == c.like), None)
    if like is None:
        raise w.error(where, f"the name of a mixed cell of this config, got {c.like!r}")
    mixed = (like.public_batch if like.approach == "dp-sgd" else like.public_share)
    if not mixed:
        raise w.error(where, f"cell {c.like!r} trains on no public pairs (public_share, or "
                      f"public_batch for dp-sgd): nothing to control for")
    other = [o for o in like.options if o in ("--dp-control", "--dp-simulate-batch")]
    if other:
        raise w.error(where, f"cell {c.like!r} is a control or simulation itself "
                      f"({other[0]}): its public-only control would be neither")


def _check_training(w: _Where, where: str, t: Training) -> None:
    checks = [("lr", t.lr > 0), ("weight_decay", t.weight_decay >= 0),
              ("dropout", 0 <= t.dropout < 1), ("label_smoothing", 0 <= t.label_smoothing < 1),
              ("max_tokens", t.max_tokens >= 1), ("patience", t.patience >= -1),
              ("max_epochs", t.max_epochs >= 1), ("max_updates", t.max_updates >= 0),
              ("validate_every", t.validate_every >= 0)]
    for key, ok in checks:
        if not ok:
            raise w.error(where + key, f"out of range: {getattr(t, key)}")


def _check_rest(w: _Where, a: Audit, d: Decode, m: Machine) -> None:
    if a.membership_pairs < 10:
        raise w.error("[audit] membership_pairs", f"must be ≥ 10, got {a.membership_pairs}")
    if not 1 <= a.canary_count <= 1000:
        raise w.error("[audit] canary_count", f"must be 1..1000, got {a.canary_count}")
    if not a.canary_repeats or any(not 1 <= r <= 1000 for r in a.canary_repeats):
        raise w.error("[audit] canary_repeats", "a non-empty list of counts in 1..1000")
    if a.exposure_samples < 10:
        raise w.error("[audit] exposure_samples", f"must be ≥ 10, got {a.exposure_samples}")
    if d.engine not in ("fairseq", "ctranslate2"):
        raise w.error("[decode] engine", f"fairseq or ctranslate2, got {d.engine!r}")
    if not 1 <= d.beam <= 100:
        raise w.error("[decode] beam", f"must be 1..100, got {d.beam}")
    if d.length_penalty not in ("", "public"):
        raise w.error("[decode] length_penalty", f"'public' (chosen on [data] public_valid) "
                      f"or left out, got {d.length_penalty!r}")
    if d.length_penalty_lines < 10:
        raise w.error("[decode] length_penalty_lines", f"must be ≥ 10, got "
                      f"{d.length_penalty_lines}")
    if d.test_lines < 0:
        raise w.error("[decode] test_lines", f"must be ≥ 0 (0: all), got {d.test_lines}")
    if m.device not in ("cpu", "cuda"):
        raise w.error("[machine] device", f"cpu or cuda, got {m.device!r}")
    if m.decode_device not in ("", "cpu", "cuda"):
        raise w.error("[machine] decode_device", f"cpu or cuda, got {m.decode_device!r}")
    if m.threads < 0 or not 1 <= m.jobs <= 64:
        raise w.error("[machine] " + ("threads" if m.threads < 0 else "jobs"),
                      "out of range")


# --------------------------------------------------------------------------- helpers
def _unknown(w: _Where, where: str, table: dict, known: set[str]) -> None:
    for key in table:
        if key not in known:
            raise w.error(f"{where}{key}", f"unknown key (known: {', '.join(sorted(known))})")


def _table(w: _Where, raw: dict, name: str) -> dict:
    t = raw.get(name)
    if not isinstance(t, dict):
        raise w.error(f"[{name}]", "required table" if t is None else "must be a table")
    return t


def _section(w: _Where, raw: dict, name: str, cls: Any) -> Any:
    t = raw.get(name, {})
    if not isinstance(t, dict):
        raise w.error(f"[{name}]", "must be a table")
    fields = cls.__dataclass_fields__
    _unknown(w, f"[{name}] ", t, set(fields))
    return cls(**{k: _typed(w, f"[{name}] {k}", v, fields[k].type) for k, v in t.items()})


def _typed(w: _Where, key: str, value: Any, kind: Any) -> Any:
    """`value` checked against a dataclass field's type (given as a string annotation)."""
    kind = str(kind)
    if kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == "float":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif kind == "str":
        ok = isinstance(value, str)
    elif kind.startswith("tuple[int"):
        ok = isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool)
                                             for v in value)
        value = tuple(value) if ok else value
    else:
        ok = True
    if not ok:
        raise w.error(key, f"expected {kind.replace('tuple[int, ...]', 'a list of integers')}"
                      f", got {value!r}")
    return value


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _path(w: _Where, key: str, value: Any, required: bool = False) -> str:
    if value in (None, ""):
        if required:
            raise w.error(key, "required")
        return ""
    value = _typed(w, key, value, "str")

    def var(m: re.Match) -> str:
        got = w.variable(key, m.group(1))
        if m.start() == 0:  # a path of the shell's: from the current directory
            got = os.path.abspath(os.path.expanduser(got))
        w.used[m.group(1)] = got
        return got
    return os.path.normpath(os.path.join(w.base, os.path.expanduser(_VAR.sub(var, value))))


def _resolve_data(w: _Where, d: Data) -> Data:
    paths = {k: _path(w, f"[data] {k}", getattr(d, k))
             for k in ("train", "valid", "test", "public_align", "public_train",
                       "public_valid")}
    for key, prefix in paths.items():
        if not prefix:
            continue
        for f in d.files(prefix):
            if not os.path.isfile(f):
                raise w.error(f"[data] {key}", f"{f}: no such file")
    for key in ("src_lang", "tgt_lang"):
        if not re.match(r"^[a-z]{2,3}$", getattr(d, key)):
            raise w.error(f"[data] {key}", f"a language code like 'de', got {getattr(d, key)!r}")
    return Data(**{**d.__dict__, **paths})
