"""The decoding-engine options shared by `evaluate` and `translate`."""
from __future__ import annotations

from typing import Any, Protocol

from .. import cli_types as ct
from ..ct2_engine import COMPUTE_TYPES  # light modules: no torch, fairseq or ctranslate2
from ..generate import ENGINES
from ..translator import MAX_LEN_A, MAX_LEN_B


class ArgumentGroup(Protocol):
    """An argparse parser or argument group: what these options are added to."""

    def add_argument(self, *names: str, **settings: Any) -> object: ...


def add_length_arguments(g: ArgumentGroup) -> None:
    """--max-len-a/--max-len-b: fairseq's output length limit, fairseq's defaults."""
    g.add_argument("--max-len-a", type=ct.nonnegative_float, default=MAX_LEN_A, metavar="A",
                   help=f"an output may have int(A × source tokens + B) subword tokens "
                        f"(default {MAX_LEN_A:g}, as fairseq-generate and the hub)")
    g.add_argument("--max-len-b", type=ct.nonnegative_int, default=MAX_LEN_B, metavar="B",
                   help=f"see --max-len-a (default {MAX_LEN_B}, as fairseq-generate and "
                        f"the hub)")


def add_engine_arguments(g: ArgumentGroup) -> None:
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
                        "MODEL/.ct2-cache/; needed when the model directory is not "
                        "writable). Converted once per checkpoint: a changed checkpoint "
                        "(by its SHA-256) is converted again")
