"""The Jupyter kernel client the notebook stages execute through: it asks the kernel's sockets for messages in short
slices instead of one wait as long as the cell's timeout.

Why: papermill (nbclient) waits for a cell's ``execute_reply`` with a single ``poll`` as long as the cell timeout. Here
that wait now and then misses the reply's wake-up (measured: notebook 01's widget cell, 4 of 25 executions on a
loaded 2-core machine), so the reply sits unread until the poll gives up, and the cell looks stalled for the whole
timeout (30 minutes, :data:`ragen2.repro.notebook_stages.CELL_TIMEOUT_S`) before the stage carries on. Every slice ends
with a check of the socket, so a missed wake-up now costs at most :data:`POLL_SLICE_S`; the overall timeout is
unchanged.
"""

from __future__ import annotations

import time
from queue import Empty
from typing import Any

from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.manager import AsyncKernelManager
from traitlets import DottedObjectName, Type

POLL_SLICE_S = 1.0
"""Longest single wait on a kernel socket."""


class SlicedPollChannel(AsyncZMQSocketChannel):
    """A kernel socket read in waits of at most :data:`POLL_SLICE_S`, up to the caller's ``timeout``."""

    async def get_msg(self, timeout: float | None = None) -> dict[str, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            wait = POLL_SLICE_S if left is None else min(POLL_SLICE_S, left)
            try:
                return await super().get_msg(timeout=wait)
            except Empty:
                if left is not None and left <= POLL_SLICE_S:
                    raise


class SlicedPollKernelClient(AsyncKernelClient):
    """An asynchronous kernel client whose shell and IOPub channels are :class:`SlicedPollChannel`."""

    shell_channel_class = Type(SlicedPollChannel)
    iopub_channel_class = Type(SlicedPollChannel)


class SlicedPollKernelManager(AsyncKernelManager):
    """The kernel manager that hands out :class:`SlicedPollKernelClient` (papermill's ``kernel_manager_class``)."""

    client_class = DottedObjectName("ragen2.repro.kernel_client.SlicedPollKernelClient")
    client_factory = Type(SlicedPollKernelClient, klass=AsyncKernelClient)
