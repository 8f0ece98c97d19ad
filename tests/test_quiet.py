"""Loading chatter (transformers' progress bars) on a terminal only: never in captured, non-TTY stderr."""

from __future__ import annotations

import io

import pytest
from transformers.utils import logging as hf_logging

from ragen2 import quiet
from ragen2.config import PolicyConfig
from ragen2.policy import load_policy, make_tiny_policy
from tests.rollout._fake_env import NAME, registered

SMALL = PolicyConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_positions=512,
                     tokenizer_vocab_size=300)


class _Stream(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_on_terminal_reads_the_stream():
    assert quiet.on_terminal(_Stream(True)) and not quiet.on_terminal(_Stream(False))
    assert not quiet.on_terminal(io.StringIO())
    closed = io.StringIO()
    closed.close()  # isatty() on a closed stream raises ValueError
    assert not quiet.on_terminal(closed)
    assert not quiet.on_terminal(object())  # no isatty at all


def test_quiet_block_restores_the_previous_settings():
    bars, verbosity = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    with quiet.quiet_unless_terminal(True):
        assert not hf_logging.is_progress_bar_enabled()
        assert hf_logging.get_verbosity() == hf_logging.ERROR
    assert hf_logging.is_progress_bar_enabled() == bars and hf_logging.get_verbosity() == verbosity
    with quiet.quiet_unless_terminal(False):
        assert hf_logging.is_progress_bar_enabled() == bars


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory):
    with registered():
        return make_tiny_policy(SMALL, [NAME], tmp_path_factory.mktemp("tiny"))


def test_save_and_load_are_silent_off_a_terminal(tmp_path, capsys):
    """pytest's capture is not a TTY, like a Jupyter kernel's or papermill's stderr."""
    with registered():
        make_tiny_policy(SMALL, [NAME], tmp_path / "p")
    load_policy(tmp_path / "p", device="cpu")
    err = capsys.readouterr().err
    assert "Writing model shards" not in err and "Loading weights" not in err and "%|" not in err


def test_load_shows_its_bar_on_a_terminal(policy_dir, capsys, monkeypatch):
    """The control: the bar the test above looks for does exist, and stays on a terminal."""
    monkeypatch.setattr(quiet, "on_terminal", lambda stream=None: True)
    if not hf_logging.is_progress_bar_enabled():
        pytest.skip("transformers' progress bars are turned off in this environment")
    load_policy(policy_dir, device="cpu")
    assert "Loading weights" in capsys.readouterr().err
