"""How a cell's fairseq run ended, in the words the report and `study status` share.

Why one function: both read finetune's manifest; deciding "at its cap" or "early stop"
twice (once from the stored flag, once by the caps) let them disagree on older manifests.
"""
from __future__ import annotations

from typing import Any

from ..train.finetune import ended_at_cap
from .config import FIXED_PASSES, Cell


def passes_text(n: int) -> str:
    return f"{n} pass" if n == 1 else f"{n} passes"


def how_training_ended(rule: Cell, manifest: dict[str, Any]) -> str | None:
    """'fixed plan (2 passes, last checkpoint)', 'at its cap', 'early stop (validation)',
    or None for a run with no update count. `rule` is the cell whose training rule the
    run followed (StudyConfig.training_rule); caps are the run's own (its params)."""
    result, params = manifest.get("result") or {}, manifest.get("params") or {}
    updates, epochs = result.get("num_updates"), result.get("epochs_completed")
    if rule.approach in FIXED_PASSES:
        return f"fixed plan ({passes_text(rule.passes)}, last checkpoint)"
    if ended_at_cap(updates, epochs, params.get("max_updates"), params.get("max_epochs")):
        return "at its cap"
    return "early stop (validation)" if updates is not None else None
