"""The notebook stages' kernel client reads its sockets in short waits: a reply whose wake-up was missed is found at
the next slice, and the caller's timeout still holds."""

from __future__ import annotations

import asyncio
import time
from queue import Empty

import pytest
from jupyter_client.channels import AsyncZMQSocketChannel

from ragen2.repro import kernel_client
from ragen2.repro.kernel_client import SlicedPollChannel, SlicedPollKernelClient, SlicedPollKernelManager


def _channel(monkeypatch, ready_after_s: float) -> tuple[SlicedPollChannel, list[float]]:
    """A channel whose socket has a message from ``ready_after_s`` on, whose waits never wake early (a missed
    wake-up: each wait runs its full length before the final check finds the message)."""
    waits: list[float] = []
    start = time.monotonic()

    async def get_msg(self, timeout=None):
        waits.append(timeout)
        await asyncio.sleep(timeout)
        if time.monotonic() - start >= ready_after_s:
            return {"msg_type": "execute_reply"}
        raise Empty

    monkeypatch.setattr(AsyncZMQSocketChannel, "get_msg", get_msg)
    monkeypatch.setattr(kernel_client, "POLL_SLICE_S", 0.05)
    return SlicedPollChannel.__new__(SlicedPollChannel), waits


def test_a_missed_wake_up_costs_one_slice_not_the_whole_timeout(monkeypatch):
    channel, waits = _channel(monkeypatch, ready_after_s=0.12)
    t0 = time.monotonic()
    assert asyncio.run(channel.get_msg(timeout=30.0)) == {"msg_type": "execute_reply"}
    assert time.monotonic() - t0 < 1.0 and max(waits) <= 0.05 and 2 <= len(waits) <= 5


def test_the_callers_timeout_still_holds(monkeypatch):
    channel, waits = _channel(monkeypatch, ready_after_s=10.0)
    t0 = time.monotonic()
    with pytest.raises(Empty):
        asyncio.run(channel.get_msg(timeout=0.2))
    assert 0.2 <= time.monotonic() - t0 < 1.0 and sum(waits) == pytest.approx(0.2, abs=0.02)


def test_the_manager_hands_out_the_sliced_client():
    manager = SlicedPollKernelManager()
    assert manager.client_factory is SlicedPollKernelClient
    assert SlicedPollKernelClient.shell_channel_class.default_value is SlicedPollChannel
    assert SlicedPollKernelClient.iopub_channel_class.default_value is SlicedPollChannel
