"""The options several commands share, each declared once, with one name per idea.

Why: the same option declared again in every command drifted apart (three spellings
for "the input is already Moses-tokenised", `--epsilon` here and `--target-epsilon`
there). Here each shared option is one small function; a command passes only what is
its own (mostly the help text, which says what the option means *for that command*).

Canonical names, with the older spellings kept as aliases (same `dest`, so every
script, README example and test written with them still works):

  --pretokenized   the input is already Moses-tokenised (old: --tokenized, in
                   evaluate and translate); `stats --raw-text` is the opposite
                   (old: --tokenize)
  --epsilon        the ε of a guarantee (old: --target-epsilon, in finetune --dp and
                   privacy: the noise is calibrated to reach it)
  --max-epochs, --max-updates   (old: --max-epoch, --max-update, fairseq's spellings)
  --tmx-doc-prop   (old: --doc-prop, in opus2tsv)

An error while parsing names the spelling the user typed (nmtfrag.cli). Light
imports only: `nmtfrag --help` must not import torch or fairseq.
"""
from __future__ import annotations

import argparse
from typing import Any, Protocol

from . import arg_types as ct
from ..translate.ct2_engine import COMPUTE_TYPES
from ..translate.fairseq_engine import ENGINES
from ..limits import MAX_BEAM
from ..translate.translator import MAX_LEN_A, MAX_LEN_B

DEFAULT_SRC_LANG, DEFAULT_TGT_LANG = "de", "en"  # the WMT19 model's direction
# why --beam has an upper bound (nmtfrag.limits: the measurements)
BEAM_WHY = "memory grows with beam × sentences per batch"


class OptionGroup(Protocol):
    """An argparse parser or argument group: what the functions below add options to."""

    def add_argument(self, *name_or_flags: str, **kwargs: Any) -> argparse.Action: ...


def also_spelled(alias: str, note: str) -> str:
    """The note an option's help carries about its other spelling (which still works)."""
    return f" (also {alias}: {note})"


# --- files and directories ------------------------------------------------------------

def add_parallel_files(g: OptionGroup, src_help: str, tgt_help: str, *,
                       required: bool = False) -> None:
    """--src FILE and --tgt FILE: the two sides of a line-aligned parallel corpus."""
    g.add_argument("--src", required=required, metavar="FILE", help=src_help)
    g.add_argument("--tgt", required=required, metavar="FILE", help=tgt_help)


def add_out(g: OptionGroup, help: str, *, required: bool = True,
            metavar: str = "DIR") -> None:
    """--out: where the command writes (refused when it holds a finished run, and when
    empty: "" is the current directory)."""
    g.add_argument("--out", required=required, type=ct.path, metavar=metavar, help=help)


def add_overwrite(g: OptionGroup, help: str = "replace a finished OUT") -> None:
    """--overwrite: without it a finished output is never replaced."""
    g.add_argument("--overwrite", action="store_true", help=help)


def add_model(g: OptionGroup, help: str, *, required: bool = True) -> None:
    """--model DIR: a model directory in the WMT19 release layout."""
    g.add_argument("--model", required=required, metavar="DIR", help=help)


def add_checkpoint(g: OptionGroup, help: str, *, metavar: str = "NAME") -> None:
    """--checkpoint: which checkpoint file(s) of --model."""
    g.add_argument("--checkpoint", default=None, metavar=metavar, help=help)


def add_tmx(g: OptionGroup, docs_help: str, *, instead_of: str = "--src/--tgt",
            doc_prop_dest: str = "tmx_doc_prop") -> None:
    """--tmx FILE and --tmx-doc-prop NAME (old: --doc-prop): a corpus read from a
    translation memory, and the property naming each unit's document."""
    g.add_argument("--tmx", metavar="FILE",
                   help=f"read the corpus from a translation memory (.tmx or .tmx.gz) "
                        f"instead of {instead_of}: the <tuv>s of --src-lang/--tgt-lang "
                        f"(xml:lang variants such as de-DE match), inline codes dropped "
                        f"(nmtfrag.data.tmx)")
    g.add_argument("--tmx-doc-prop", "--doc-prop", dest=doc_prop_dest, metavar="NAME",
                   help=f"with --tmx: the <prop type=\"NAME\"> (or <tu> attribute) that "
                        f"names each unit's document ({docs_help})"
                        + also_spelled("--doc-prop", "its older name in opus2tsv"))


def add_keep_work(g: OptionGroup, help: str) -> None:
    """--keep-work: keep the private work files (they hold confidential text)."""
    g.add_argument("--keep-work", action="store_true", help=help)


def add_verbose(g: OptionGroup, help: str) -> None:
    """-v/--verbose after the command: more progress from the tool it runs."""
    g.add_argument("-v", "--verbose", action="store_true", help=help)


# --- text -----------------------------------------------------------------------------

def add_languages(g: OptionGroup, used_for: str | None = None) -> None:
    """--src-lang and --tgt-lang (default de → en, the WMT19 model's direction)."""
    use = f"; {used_for}" if used_for else ""
    g.add_argument("--src-lang", default=DEFAULT_SRC_LANG, metavar="LANG",
                   help=f"source language code{use} (default %(default)s)")
    g.add_argument("--tgt-lang", default=DEFAULT_TGT_LANG, metavar="LANG",
                   help="target language code (default %(default)s)")


def add_pretokenized(g: OptionGroup, help: str, *, default: bool | None = False,
                     dest: str = "pretokenized") -> None:
    """--pretokenized (old: --tokenized): the input is already Moses-tokenised."""
    g.add_argument("--pretokenized", "--tokenized", dest=dest, action="store_true",
                   default=default,
                   help=help + also_spelled("--tokenized", "its older name in evaluate "
                                                           "and translate"))


def add_raw_text(g: OptionGroup, help: str, *, dest: str = "tokenize") -> None:
    """--raw-text (old: --tokenize), the opposite of --pretokenized, for a command
    that by default takes its input as already tokenised."""
    g.add_argument("--raw-text", "--tokenize", dest=dest, action="store_true",
                   help=help + " (the opposite of other commands' --pretokenized; also "
                                 "--tokenize, its older name)")


# --- randomness and hardware ----------------------------------------------------------

def add_seed(g: OptionGroup, help: str, *, default: int | None = None) -> None:
    """--seed N (an integer in [0, 2^63)): reproducible, and so never private."""
    g.add_argument("--seed", type=ct.seed, default=default, metavar="N", help=help)


def add_device(g: OptionGroup, help: str = "default: cuda if available, else cpu", *,
               default: str | None = None) -> None:
    """--device cpu|cuda."""
    g.add_argument("--device", choices=("cpu", "cuda"), default=default, help=help)


def add_threads(g: OptionGroup,
                help: str = "torch CPU threads (default: torch's choice)") -> None:
    """--threads N: CPU threads."""
    g.add_argument("--threads", type=ct.positive_int, default=None, metavar="N", help=help)


def add_decoding(g: OptionGroup) -> None:
    """Beam search, batches, hardware and engine of `evaluate` and `translate`."""
    g.add_argument("--beam", type=ct.int_between(1, MAX_BEAM, BEAM_WHY), default=5,
                   help=f"beam size (default %(default)s; at most {MAX_BEAM}: memory grows "
                        f"with beam × sentences per batch, so give a large beam a small "
                        f"--batch-size)")
    g.add_argument("--max-tokens", type=ct.positive_int, default=4000,
                   help="source tokens per batch (default %(default)s)")
    g.add_argument("--batch-size", type=ct.positive_int, default=None,
                   help="sentences per batch")
    add_device(g)
    g.add_argument("--fp16", action="store_true", help="fairseq on cuda: half precision")
    add_threads(g, "CPU threads (torch; and ctranslate2's, default torch's count)")
    add_length_limits(g)
    g.add_argument("--lenpen", type=ct.positive_float, default=1.0, metavar="P",
                   help="length penalty of beam search, as fairseq's --lenpen and "
                        "CTranslate2's length_penalty: finished hypotheses are ranked by "
                        "log-probability / length^P, so P > 1 favours longer output "
                        "(default %(default)s). `nmtfrag length-penalty` chooses one on "
                        "public text")
    add_engine(g)


def add_length_limits(g: OptionGroup) -> None:
    """--max-len-a/--max-len-b: fairseq's output length limit, fairseq's defaults."""
    g.add_argument("--max-len-a", type=ct.nonnegative_float, default=MAX_LEN_A, metavar="A",
                   help=f"an output may have int(A × source tokens + B) subword tokens "
                        f"(default {MAX_LEN_A:g}, as fairseq-generate and the hub)")
    g.add_argument("--max-len-b", type=ct.nonnegative_int, default=MAX_LEN_B, metavar="B",
                   help=f"see --max-len-a (default {MAX_LEN_B}, as fairseq-generate and "
                        f"the hub)")


def add_engine(g: OptionGroup) -> None:
    """--engine, --compute-type, --ct2-cache: which decoder runs the beam search."""
    g.add_argument("--engine", choices=ENGINES, default="fairseq",
                   help="decoder: fairseq (default; the reference) or ctranslate2 (faster "
                        "on CPU, needs `pip install 'nmtfrag[ct2]'`; one checkpoint, no "
                        "ensembles). Tokenisation, BPE, batches, beam search settings, "
                        "length limits and detokenisation are the same code for both; in "
                        "float32 the output matches fairseq's")
    g.add_argument("--compute-type", choices=COMPUTE_TYPES, default=None,
                   help="ctranslate2 only: float32 (default) or int8 (weights quantised "
                        "when the model is loaded: faster, output can differ slightly)")
    g.add_argument("--ct2-cache", metavar="DIR", default=None,
                   help="ctranslate2 only: where the converted model is kept (default: "
                        "the user's cache, $XDG_CACHE_HOME/nmtfrag/ct2, else "
                        "~/.cache/nmtfrag/ct2; the model directory is never written "
                        "to). Converted once per checkpoint: a changed checkpoint (by "
                        "its SHA-256) is converted again")


# --- differential privacy -------------------------------------------------------------

def add_dp(g: OptionGroup, help: str, *, required: bool = False) -> None:
    """--dp: the command's differentially private mode."""
    g.add_argument("--dp", action="store_true", required=required, help=help)


def add_epsilon(g: OptionGroup, help: str, *, dest: str = "epsilon") -> None:
    """--epsilon (old: --target-epsilon): the ε of the guarantee, at most
    cli_types.MAX_EPSILON."""
    g.add_argument("--epsilon", "--target-epsilon", dest=dest, type=ct.epsilon,
                   default=None, metavar="EPS",
                   help=help + also_spelled("--target-epsilon", "its older name in "
                                                                "finetune --dp and privacy"))


def add_delta(g: OptionGroup, help: str, *, required: bool = False) -> None:
    """--delta: the δ of the guarantee, in (0, 1)."""
    g.add_argument("--delta", type=ct.probability, default=None, required=required,
                   metavar="DELTA", help=help)


def add_noise_multiplier(g: OptionGroup, help: str) -> None:
    """--noise-multiplier σ: noise std / clipping norm of each DP-SGD step."""
    g.add_argument("--noise-multiplier", type=ct.positive_float, default=None,
                   metavar="SIGMA", help=help)


def add_sampling_rate(g: OptionGroup, help: str) -> None:
    """--sample-rate Q: the Poisson sampling rate of each DP-SGD step, in (0, 1]."""
    g.add_argument("--sample-rate", type=ct.rate, default=None, metavar="Q", help=help)


def add_batch_schedule(g: OptionGroup, help: str) -> None:
    """--batch-schedule "SIZE:FROM_STEP,...": increasing logical batch sizes."""
    g.add_argument("--batch-schedule", default=None, metavar="SCHED", help=help)


def add_accountant(g: OptionGroup, help: str, default: str | None = "prv") -> None:
    """--accountant rdp|prv (default prv: nmtfrag.dp.accounting.DEFAULT_ACCOUNTANT;
    None: left out, for a caller that tells a choice from a default)."""
    g.add_argument("--accountant", choices=("rdp", "prv"), default=default, help=help)


def add_privacy_unit(g: OptionGroup, unit_help: str, documents_help: str) -> None:
    """--privacy-unit sentence|document and --documents FILE (its document ids)."""
    g.add_argument("--privacy-unit", choices=("sentence", "document"), default="sentence",
                   help=unit_help)
    g.add_argument("--documents", metavar="FILE", default=None, help=documents_help)


def add_dedup(g: OptionGroup, help: str) -> None:
    """--dedup: each distinct sentence pair counts once (the unit: one distinct pair)."""
    g.add_argument("--dedup", action="store_true", help=help)
