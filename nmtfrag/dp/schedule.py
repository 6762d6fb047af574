"""Increasing batch-size schedules for DP-SGD (Anil et al. 2021, "Large-Scale
Differentially Private BERT", §5.2.2).

Why: small logical batches early give many cheap steps while the gradient signal is
strong; larger batches later raise the gradient signal-to-noise ratio. Each segment has
its own Poisson sampling rate q = batch / n, and the accountant composes the steps
segment by segment.

Format: "SIZE:FROM_STEP,SIZE:FROM_STEP,…", e.g. "262144:0,524288:2000" — logical batch
262144 from step 0, 524288 from step 2000. Sizes are expected examples per step (here:
sentence pairs), steps are 0-based noisy-step indices; the first segment starts at 0.
"""
from __future__ import annotations

from collections.abc import Sequence

from ..errors import InputError

Segment = tuple[int, int]  # (first 0-based noisy step, logical batch from that step on)


def parse_schedule(text: str) -> list[Segment]:
    """"B0:0,B1:S1,…" → [(from_step, batch), …] sorted, validated."""
    segments: list[Segment] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        try:
            size_text, start_text = part.split(":")
            size, start = int(size_text), int(start_text)
        except ValueError:
            raise InputError(f"--batch-schedule: cannot parse {part!r}; expected "
                             "SIZE:FROM_STEP, e.g. 256:0,1024:200") from None
        if size < 1 or start < 0:
            raise InputError(f"--batch-schedule: {part!r} needs SIZE ≥ 1 and FROM_STEP ≥ 0")
        segments.append((start, size))
    if not segments:
        raise InputError("--batch-schedule is empty")
    segments.sort()
    starts = [s for s, _ in segments]
    if starts[0] != 0:
        raise InputError("--batch-schedule must start at step 0 (e.g. 256:0,…)")
    if len(set(starts)) != len(starts):
        raise InputError("--batch-schedule gives two sizes for the same step")
    return segments


def batch_at(segments: Sequence[Segment], step: int) -> int:
    """Logical batch size in effect at 0-based noisy step `step`."""
    size = segments[0][1]
    for start, s in segments:
        if start <= step:
            size = s
        else:
            break
    return size


def rate_segments(segments: Sequence[Segment], total_steps: int,
                  n_examples: float) -> list[tuple[float, int]]:
    """[(sample_rate, steps), …] for `total_steps` noisy steps over `n_examples`."""
    if n_examples < 1:
        raise InputError("no training examples")
    out = []
    for i, (start, size) in enumerate(segments):
        if start >= total_steps:
            break
        end = segments[i + 1][0] if i + 1 < len(segments) else total_steps
        end = min(end, total_steps)
        if size > n_examples:
            raise InputError(f"logical batch {size} exceeds the {n_examples} training "
                             "examples (sampling rate would be > 1)")
        out.append((size / n_examples, end - start))
    return out
