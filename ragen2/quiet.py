"""Library progress bars and loading chatter on a terminal only, never in a notebook's outputs.

transformers 5 draws a "Loading weights" tqdm bar in every ``from_pretrained`` and a "Writing model
shards" bar in every ``save_pretrained``, and logs loading reports. On a terminal they show that
something is happening; in a Jupyter kernel or under papermill (stderr is not a TTY) they end up as
noise in the executed notebooks' outputs, several per notebook. :func:`quiet_unless_terminal` wraps
such calls: when stderr is not a terminal it turns transformers' (and huggingface_hub's) progress bars
off and its logging down to errors for the duration of the block, then restores what was set before.

>>> with quiet_unless_terminal():                                    # doctest: +SKIP
...     model = AutoModelForCausalLM.from_pretrained(path)
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager


def on_terminal(stream=None) -> bool:
    """Whether ``stream`` (default: the current ``sys.stderr``) is an interactive terminal.

    A Jupyter kernel's and papermill's streams, pipes, files and pytest's capture are not.
    """
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (ValueError, OSError):  # a closed or detached stream
        return False


@contextmanager
def quiet_unless_terminal(quiet: bool | None = None) -> Iterator[None]:
    """Silence transformers' progress bars and info/warning logging inside the block.

    Args:
        quiet: True = always silence, False = never, None (default) = silence unless
            :func:`on_terminal`.
    """
    if quiet is None:
        quiet = not on_terminal()
    if not quiet:
        yield
        return
    from huggingface_hub import utils as hub_utils
    from transformers.utils import logging as hf_logging

    bars_on = hf_logging.is_progress_bar_enabled()
    hub_bars_off = hub_utils.are_progress_bars_disabled()
    verbosity = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()  # also turns huggingface_hub's bars off
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        with warnings.catch_warnings():  # hub's enable warns when HF_HUB_DISABLE_PROGRESS_BARS pins it off
            warnings.simplefilter("ignore")
            if bars_on:
                hf_logging.enable_progress_bar()
            if hub_bars_off:
                hub_utils.disable_progress_bars()
            else:
                hub_utils.enable_progress_bars()
