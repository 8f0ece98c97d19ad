"""Wall-clock time per phase of a training step: ``with timer.phase("rollout"): ...``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class PhaseTimer:
    """Seconds spent in named phases since the last :meth:`reset` (a phase may be entered several times).

    >>> timer = PhaseTimer(("rollout", "update"))
    >>> with timer.phase("rollout"):
    ...     pass
    >>> sorted(timer.seconds)
    ['rollout', 'update']
    """

    def __init__(self, always: tuple[str, ...] = ()):
        self.always = always
        """Phases reported even when they did not run this step (as 0.0)."""
        self.seconds: dict[str, float] = {}
        self.reset()

    def reset(self) -> None:
        self.seconds = {name: 0.0 for name in self.always}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
