"""ragen2's progress lines: shown on stderr once show_progress() ran, and a logger the user configured is kept."""

import logging

from ragen2.progress import show_progress


def test_show_progress_prints_ragen2_info_lines_once(monkeypatch, capsys):
    log = logging.getLogger("ragen2")
    monkeypatch.setattr(log, "handlers", [])
    monkeypatch.setattr(log, "level", logging.NOTSET)
    show_progress()
    show_progress()
    assert len(log.handlers) == 1 and log.level == logging.INFO
    logging.getLogger("ragen2.warmstart").info("warm start step %d/%d", 50, 600)
    assert capsys.readouterr().err.rstrip().endswith("warm start step 50/600")


def test_a_configured_logger_is_left_as_it_is(monkeypatch):
    log = logging.getLogger("ragen2")
    mine = logging.NullHandler()
    monkeypatch.setattr(log, "handlers", [mine])
    monkeypatch.setattr(log, "level", logging.WARNING)
    show_progress()
    assert log.handlers == [mine] and log.level == logging.WARNING
