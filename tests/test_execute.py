"""PromptClient (rbtutor.grading.execute): ready when the kernel is, with both channels live."""

from __future__ import annotations

import asyncio
from queue import Empty

import pytest
from jupyter_client import AsyncKernelManager

from rbtutor.grading.execute import PromptClient

CLIENT = f"{PromptClient.__module__}.PromptClient"


async def started(tmp_path):
    km = AsyncKernelManager(kernel_name="python3", client_class=CLIENT)
    await km.start_kernel(cwd=str(tmp_path))
    kc = km.client()
    assert isinstance(kc, PromptClient)
    kc.start_channels()
    return km, kc


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
        km, kc = await started(tmp_path)
        try:
            await kc.wait_for_ready(timeout=60)
            request = kc.execute("print('ready', 6 * 7)")  # the first request after ready
            reply = await kc.get_shell_msg(timeout=30)
            assert reply["parent_header"]["msg_id"] == request and reply["content"]["status"] == "ok"
            assert await output_of(kc, request) == "ready 42\n"  # IOPub was subscribed in time
        finally:
            kc.stop_channels()
            await km.shutdown_kernel(now=True)

    asyncio.run(run())


def test_a_dead_kernel_is_reported_not_waited_for(tmp_path):
    async def run():
        km, kc = await started(tmp_path)
        try:
            await km.provisioner.kill()  # the process gone before anyone asked it anything
            await km.provisioner.wait()
            with pytest.raises(RuntimeError, match="Kernel died before replying to kernel_info"):
                await kc.wait_for_ready(timeout=60)
        finally:
            kc.stop_channels()
            await km.shutdown_kernel(now=True)

    asyncio.run(run())


def test_replies_to_other_requests_are_not_taken_for_its_own(tmp_path):
    async def run():
        km, kc = await started(tmp_path)
        try:
            await kc.wait_for_ready(timeout=60)
            other = kc.execute("pass")  # a reply that is not the one asked for comes first
            mine = kc.kernel_info()
            reply = await PromptClient._reply_to(mine, kc.shell_channel, 30.0)
            assert reply is not None and reply["msg_type"] == "kernel_info_reply"
            assert reply["parent_header"]["msg_id"] == mine != other
            with pytest.raises(Empty):
                await kc.get_shell_msg(timeout=0.5)  # the other reply was read and set aside
        finally:
            kc.stop_channels()
            await km.shutdown_kernel(now=True)

    asyncio.run(run())
