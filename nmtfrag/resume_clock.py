"""When a long training run saves its resume point: every few minutes, unless saving is dear.

Why: a study's runs span sessions, and a session can end with SIGKILL, which no handler
sees: everything trained since the last resume point is lost. A fixed 15 minutes lost
about 7 minutes of every killed run on average. A DP-SGD state of LoRA parameters (7 MB)
saves in a fraction of a second and a 22.5M-parameter fairseq checkpoint in about a
second, so a point every MIN_SECONDS costs nothing there, while a large model's state of
several gigabytes would take a real share of the training time. So a point is due once
MIN_SECONDS have passed and COST_FACTOR times the last timed save's duration: saving then
takes at most 1/COST_FACTOR of the time. Saving changes nothing a run computes (every
state a resumed run needs is in the point), so how often it happens is not part of a
run's identity.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

MIN_SECONDS = 120.0
COST_FACTOR = 50.0


class ResumeClock:
    """Says when the next resume point is due. `saved()` for a save made elsewhere (it
    restarts the clock); `timing()` around a save of one's own (it also learns its cost)."""

    def __init__(self, min_seconds: float = MIN_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.min_seconds, self.clock = min_seconds, clock
        self.last = clock()
        self.cost = 0.0  # seconds the last timed save took

    def interval(self) -> float:
        return max(self.min_seconds, COST_FACTOR * self.cost)

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
