"""When a long training run saves its resume point: every few minutes, less often where
saving is slow.

Why: a study's runs span sessions, and a session can end with SIGKILL, which no handler
sees: everything trained since the last resume point is lost. A fixed 15 minutes lost
about 7 minutes of every killed run on average. A DP-SGD state of LoRA parameters (7 MB)
saves in a fraction of a second and a 22.5M-parameter fairseq checkpoint in about a
second, so a point every MIN_SECONDS costs nothing there, while a large model's state of
several gigabytes would take a real share of the training time. So a point is due once
MIN_SECONDS have passed and COST_FACTOR times the last timed save's duration (saving then
takes about 1/COST_FACTOR of the time), but never more than MAX_SECONDS apart: one stalled
save must not space the points further than they ever were. The clock runs on wall time
from the run's start or its last save, validation included; points fall only between
updates (or noisy steps), so a kill loses up to the interval plus the update under way.
Saving changes nothing a run computes (every state a resumed run needs is in the point),
so how often it happens is not part of a run's identity.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

MIN_SECONDS = 120.0
MAX_SECONDS = 900.0  # the interval a slow save can stretch to (the old fixed one)
COST_FACTOR = 50.0


class ResumeClock:
    """Says when the next resume point is due. `saved()` for a save made elsewhere (it
    restarts the clock); `timing()` around a save of one's own (it also learns its cost).
    The floor is MIN_SECONDS as it stands when the clock is made (tests set it)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.min_seconds, self.clock = MIN_SECONDS, clock
        self.last = clock()
        self.cost = 0.0  # seconds the last timed save took

    def interval(self) -> float:
        return max(self.min_seconds, min(MAX_SECONDS, COST_FACTOR * self.cost))

    def due(self) -> bool:
        return self.clock() - self.last >= self.interval()

    def saved(self) -> None:
        self.last = self.clock()

    @contextmanager
    def timing(self) -> Iterator[None]:
        start = self.clock()
        yield
        self.last = self.clock()
        self.cost = self.last - start
