"""Where ragen2's progress lines go: the ``ragen2`` logger at INFO on stderr.

The library logs its long phases (warm-start building and SFT steps, greedy evaluation, a run resumed and from
which step, evaluation by sampling seed) to loggers under ``ragen2`` and prints nothing by itself; the command line
and the examples call :func:`show_progress` so a user sees them. In your own program, configure the ``ragen2``
logger as you would any other (``logging.getLogger("ragen2").setLevel(logging.INFO)`` and a handler).
"""

from __future__ import annotations

import logging


def show_progress() -> None:
    """Print the ``ragen2`` logger's INFO lines on stderr, time-stamped (once per process; a configured logger
    is left as it is)."""
    log = logging.getLogger("ragen2")
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
