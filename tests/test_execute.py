"""PromptClient (rbtutor.grading.execute): ready when the kernel is, with both channels live."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from queue import Empty

import pytest
from jupyter_client import AsyncKernelManager

from rbtutor.grading.execute import PromptClient, first


@asynccontextmanager
async def kernel(tmp_path):
    """A plain python3 kernel with a PromptClient whose channels are started; both stopped after."""
    km = AsyncKernelManager(kernel_name="python3", client_class=f"{PromptClient.__module__}.PromptClient")
    await km.start_kernel(cwd=str(tmp_path))
    kc = km.client()
    assert isinstance(kc, PromptClient)
    kc.start_channels()
    try:
        yield km, kc
    finally:
        kc.stop_channels()
        await km.shutdown_kernel(now=True)


async def output_of(kc, request: str) -> str:
    """The text the kernel printed for ``request``, read from IOPub until its idle status."""
    text = []
    while True:
        msg = await kc.get_iopub_msg(timeout=30)
        if msg["parent_header"].get("msg_id") != request:
            continue
        if msg["msg_type"] == "stream":
            text.append(msg["content"]["text"])
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return "".join(text)


def test_ready_means_both_channels_answer(tmp_path):
    async def run():
        async with kernel(tmp_path) as (_, kc):
            await kc.wait_for_ready(timeout=60)
            request = kc.execute("print('ready', 6 * 7)")  # the first request after ready
            reply = await kc.get_shell_msg(timeout=30)
            assert reply["parent_header"]["msg_id"] == request and reply["content"]["status"] == "ok"
            assert await output_of(kc, request) == "ready 42\n"  # IOPub was subscribed in time

    asyncio.run(run())


def test_a_dead_kernel_is_reported_not_waited_for(tmp_path):
    async def run():
        async with kernel(tmp_path) as (km, kc):
            await km.provisioner.kill()  # the process gone before anyone asked it anything
            await km.provisioner.wait()
            with pytest.raises(RuntimeError, match="Kernel died before replying to kernel_info"):
                await kc.wait_for_ready(timeout=60)

    asyncio.run(run())


def test_messages_before_the_wanted_one_are_set_aside(tmp_path):
    async def run():
        async with kernel(tmp_path) as (_, kc):
            await kc.wait_for_ready(timeout=60)
            other = kc.execute("pass")  # a reply that is not the one asked for comes first
            mine = kc.kernel_info()
            reply = await first(kc.shell_channel, 30.0, lambda msg: msg["parent_header"].get("msg_id") == mine)
            assert reply is not None and reply["msg_type"] == "kernel_info_reply"
            assert reply["parent_header"]["msg_id"] == mine != other
            with pytest.raises(Empty):
                await kc.get_shell_msg(timeout=0.5)  # the other reply was read and dropped
            assert await first(kc.shell_channel, 0.2, lambda msg: True) is None  # nothing more: None

    asyncio.run(run())
