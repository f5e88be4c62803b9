"""PromptClient (rbtutor.grading.execute): ready when the kernel is, with both channels live."""

from __future__ import annotations

import asyncio
import gc
import time
from contextlib import asynccontextmanager
from queue import Empty

import pytest
import zmq
from jupyter_client import AsyncKernelManager

from rbtutor.grading.execute import RECONNECT_SECONDS, BoundedExecute, PromptClient, PromptKernelManager, first


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
            assert reply["parent_header"]["msg_id"] == request
            assert reply["content"]["status"] == "ok"
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
            assert reply is not None
            assert reply["msg_type"] == "kernel_info_reply"
            assert reply["parent_header"]["msg_id"] == mine != other
            with pytest.raises(Empty):
                await kc.get_shell_msg(timeout=0.5)  # the other reply was read and dropped
            assert await first(kc.shell_channel, 0.2, lambda msg: True) is None  # nothing more: None

    asyncio.run(run())


# --------------------------------------------------------------------------- messages: whose fault

def run_bounded(tmp_path, sources: list[str], **options):
    """The cells through BoundedExecute in a plain python3 kernel; return (notebook, event kinds, events)."""
    from nbformat.v4 import new_code_cell, new_notebook

    from rbtutor.grading.execute import BoundedExecute

    nb = new_notebook(cells=[new_code_cell(s) for s in sources])
    resources = {"nbgrader": {"student": "s", "assignment": "a", "notebook": "n"}}
    options = {"timeout": 30, **options}
    runner = BoundedExecute(kernel_name="python3", report_dir=str(tmp_path), seed_key="", **options)
    try:
        nb, resources = runner.preprocess(nb, resources)
    finally:
        # the kernel's manager and sockets finalised now: CPython 3.11.7 raises "AST constructor recursion
        # depth mismatch" when such finalisers run in the middle of a later ast.parse (pytest's rewriting)
        del runner
        gc.collect()
    events = resources["rbtutor"]["events"]
    return nb, [e["kind"] for e in events], events


# a message signed with the kernel's own key, whose content frame is replaced by CONTENT
FORGED = """
kernel = get_ipython().kernel
session = kernel.session
nested = []
for _ in range(500):
    nested = [nested]
frames = session.serialize(session.msg("stream", content={{"name": "stdout", "text": "x"}}))
frames[5] = {content}
frames[1] = session.sign(frames[2:6])
kernel.iopub_socket.send_multipart(frames)
import time
time.sleep(1)
"""


@pytest.mark.parametrize(("content", "why"), [
    ('b"[" * 100_000 + b"]" * 100_000', "nested more than"),  # 100 000 deep: refused before it is parsed
    ('b"{not json"', "does not decode"),
    ("session.pack({'name': 'stdout', 'text': 5})", "'text'"),  # decodes, wrong type
    ("session.pack({'name': 'stdout', 'text': 'x', 'deep': nested})", "nested more than"),
])
def test_a_message_that_does_not_decode_is_the_kernels_fault(tmp_path, content, why):
    """message_malformed: the parts before it are kept, the cells after it are not run."""
    nb, kinds, events = run_bounded(tmp_path, ["print('before')", FORGED.format(content=content), "print('after')"])
    assert nb.cells[0].outputs[0].text == "before\n"
    assert "could not read" in nb.cells[1].outputs[-1].evalue
    assert nb.cells[2].outputs[0].ename == "NotRun"
    assert kinds == ["message_malformed", "cells_not_run"], events
    assert why in events[0]["error"], events[0]


def test_output_the_grader_is_slow_to_read_is_not_the_kernels_fault(tmp_path):
    """The reply comes before the grader has read a large output: the output has until the cell's deadline
    (CI, 2026-12-07: a 50 MB print took the loaded grader over nbclient's 4 s after the reply, and the
    cells after it were not run). With no grace at all, only the cell's 30 s are left to read it."""
    nb, kinds, events = run_bounded(tmp_path, ["print('x' * 20_000_000)", "print('after')"], output_grace=0.0)
    assert nb.cells[1].outputs[0].text == "after\n", nb.cells[1].outputs
    assert kinds == ["output_cut"], events


def test_printed_text_is_kept_up_to_the_cell_and_notebook_budgets(tmp_path):
    """Each cell keeps the first max_cell_output_bytes it prints, the notebook the first
    max_notebook_output_bytes; the rest is dropped on arrival, counted, and said in a note."""
    sources = ["print('a' * 600); print('b' * 600)", "print('c' * 1500)", "print('d' * 1000)", "print('e')"]
    nb, kinds, events = run_bounded(tmp_path, sources, max_cell_output_bytes=1000, max_notebook_output_bytes=2500)
    printed = ["".join(o.text for o in cell.outputs[:-1]) for cell in nb.cells]
    assert printed == [("a" * 600 + "\n" + "b" * 600 + "\n")[:1000], "c" * 1000, "d" * 500, ""]
    assert [e["dropped_bytes"] for e in events] == [202, 501, 501, 2], events
    assert kinds == ["output_cut"] * 4
    assert all("output cut while running" in cell.outputs[-1].text for cell in nb.cells)


def test_output_held_back_past_the_deadline_ends_the_notebook(tmp_path):
    """A kernel that replies but never says it is idle keeps the cell open until its deadline and the grace,
    not longer: the kernel is then unresponsive and the cells after it are not run."""
    hold_back = ("kernel = get_ipython().kernel\n"
                 "kernel._publish_status_and_flush = lambda *args, **kwargs: None\n"
                 "kernel._publish_status = lambda *args, **kwargs: None")
    start = time.monotonic()
    nb, kinds, events = run_bounded(tmp_path, [hold_back, "print('after')"], timeout=6, output_grace=0.5)
    seconds = time.monotonic() - start
    assert "within the cell's time limit" in nb.cells[0].outputs[-1].evalue, nb.cells[0].outputs
    assert nb.cells[1].outputs[0].ename == "NotRun"
    assert kinds == ["kernel_unresponsive", "cells_not_run"], events
    assert seconds >= 6.5, "the output had the cell's deadline and the grace, not the grace alone"
    assert seconds < 60, "and no more than that, with the kernel's start and stop"


def test_a_bug_of_the_grader_is_not_the_students_fault(tmp_path, monkeypatch):
    """An exception of the grader's own code while a cell runs is raised (the submission is then NOT
    GRADED, with the traceback in nbgrader's log), never turned into message_malformed."""
    from rbtutor.grading.execute import preprocessor as execute

    def broken(output):
        raise KeyError("a bug in the grader")

    monkeypatch.setattr(execute, "output_size", broken)
    with pytest.raises(KeyError, match="a bug in the grader"):
        run_bounded(tmp_path, ["print('before')", "print('after')"])
    stored = (tmp_path / "s" / "a" / "n.json").read_text()
    assert "message_malformed" not in stored


def test_a_later_update_of_a_handed_in_display_is_ignored(tmp_path):
    from rbtutor.grading.protocol import ANSWER_MIME

    nb, kinds, events = run_bounded(tmp_path, [
        "from IPython.display import display, update_display\n"
        f"display({{{ANSWER_MIME!r}: {{'value': 1}}, 'text/plain': 'one'}}, raw=True, display_id='answer')\n"
        f"update_display({{{ANSWER_MIME!r}: {{'value': 2}}, 'text/plain': 'two'}}, raw=True, display_id='answer')",
        "update_display({'text/plain': 'three'}, raw=True, display_id='answer')"])
    outputs = nb.cells[0].outputs
    assert len(outputs) == 1, outputs
    assert outputs[0].data[ANSWER_MIME] == {"value": 1}, outputs
    assert outputs[0].data["text/plain"] == "one"
    assert kinds == ["display_update_ignored"], events


@pytest.mark.parametrize(("message", "wrong"), [
    ([], "a message"),
    ({"header": {}, "parent_header": {}, "metadata": {}, "content": {}}, "msg_type"),
    ({"header": {"msg_type": "stream", "msg_id": "1"}, "msg_type": "stream", "parent_header": {},
      "metadata": {}, "content": {"name": "stdout"}}, "'text'"),
    ({"header": {"msg_type": "error", "msg_id": "1"}, "msg_type": "error", "parent_header": {}, "metadata": {},
      "content": {"ename": "E", "evalue": "v", "traceback": [1]}}, "'traceback'"),
    ({"header": {"msg_type": "display_data", "msg_id": "1"}, "msg_type": "display_data", "parent_header": {},
      "metadata": {}, "content": {"data": {"text/plain": 3}}}, "'data'"),
    ({"header": {"msg_type": "execute_result", "msg_id": "1"}, "msg_type": "execute_result",
      "parent_header": {}, "metadata": {}, "content": {"data": {}, "execution_count": "7"}}, "execution_count"),
    ({"header": {"msg_type": "status", "msg_id": "1"}, "msg_type": "status", "parent_header": {"msg_id": 5},
      "metadata": {}, "content": {"execution_state": "idle"}}, "parent header"),
])
def test_check_message_names_the_wrong_field(message, wrong):
    from rbtutor.grading.execute import MalformedMessage, check_message

    with pytest.raises(MalformedMessage, match=wrong):
        check_message(message)


def test_check_message_takes_a_well_formed_message():
    from rbtutor.grading.execute import check_message

    message = {"header": {"msg_type": "display_data", "msg_id": "1"}, "msg_type": "display_data",
               "parent_header": {"msg_id": "0"}, "metadata": {},
               "content": {"data": {"text/plain": "x", "application/json": {"a": [1, 2]}}, "metadata": {},
                           "transient": {"display_id": "d"}}}
    assert check_message(message) is message


def test_a_killed_kernel_s_end_is_seen_within_milliseconds(monkeypatch):
    """jupyter_client looks every 0.1 s whether a killed kernel has ended; the grader's manager every
    5 ms, so no graded notebook waits a whole 0.1 s after its kernel is killed."""
    assert BoundedExecute().kernel_manager_class is PromptKernelManager  # nbgrader's Execute passes its own
    km = PromptKernelManager()
    alive = iter([True, True, True, False])
    slept = []

    async def is_alive():
        return next(alive)

    async def sleep(seconds):
        slept.append(seconds)

    monkeypatch.setattr(km, "_async_is_alive", is_alive)
    monkeypatch.setattr(asyncio, "sleep", sleep)
    asyncio.run(km._async_wait())  # as jupyter_client's _async_kill_kernel calls it
    assert slept == [0.005] * 3


def test_the_client_s_sockets_try_again_to_reach_a_starting_kernel_within_milliseconds(tmp_path):
    """The client connects before the kernel has bound its sockets; ZeroMQ's own wait before trying
    again (0.1 s) was paid at every kernel start."""
    async def run():
        async with kernel(tmp_path) as (_, kc):
            for channel in (kc.shell_channel, kc.iopub_channel, kc.stdin_channel, kc.control_channel):
                assert channel.socket.getsockopt(zmq.RECONNECT_IVL) == round(RECONNECT_SECONDS * 1000) == 5
            await kc.wait_for_ready(timeout=60)

    asyncio.run(run())


def test_what_is_left_for_a_killed_kernel_is_dropped_not_lingered_over(tmp_path, monkeypatch):
    """jupyter_client interrupts a kernel before it kills it; a message still queued for the dead
    kernel held the end of the manager's context for the control socket's linger (0.1 s)."""
    lingers = []
    close = PromptKernelManager._close_control_socket

    def closing(km):
        if km._control_socket is not None:
            lingers.append(km._control_socket.linger)
        close(km)

    monkeypatch.setattr(PromptKernelManager, "_close_control_socket", closing)

    async def run():
        km = PromptKernelManager(kernel_name="python3")
        await km.start_kernel(cwd=str(tmp_path))
        await km.shutdown_kernel(now=True)  # interrupt_request on the control socket, then the kill

    asyncio.run(run())
    assert lingers == [0]


# --------------------------------------------------------------------------- the kernel's seed

PRINT_SEED = "import os\nprint('SEED', os.environ.get('RBTUTOR_KERNEL_SEED'))"


def seed_in_kernel(root, salt: str, student: str = "s") -> int:
    """The seed a student can print in their kernel, graded in course ``root`` whose data has ``salt``."""
    from nbformat.v4 import new_code_cell, new_notebook
    from traitlets.config import Config

    data = root / "problem_data.yaml"
    data.write_text(f"variants: {{per_student: true, salt: '{salt}'}}\n")
    config = Config()
    config.CourseDirectory.root = str(root)
    config.JudgeAnswers.data_file = str(data)
    nb = new_notebook(cells=[new_code_cell(PRINT_SEED)])
    resources = {"nbgrader": {"student": student, "assignment": "a", "notebook": "n"}}
    runner = BoundedExecute(kernel_name="python3", report_dir=str(root / "integrity"), timeout=30, config=config)
    try:
        nb, _ = runner.preprocess(nb, resources)
    finally:
        del runner
        gc.collect()
    text = "".join(o.get("text", "") for o in nb.cells[0].outputs)
    return int(text.split("SEED ")[1].split()[0])


def test_the_seed_a_student_can_print_says_nothing_about_the_salt(tmp_path):
    """The seed follows from the student, the assignment and the grader's random key alone: two salts
    give the same seed (it cannot confirm a salt guess), a new key gives another, a re-grade the same."""
    import stat

    from rbtutor.grading.execute import SEED_KEY_FILE, kernel_seed, seed_key

    one = seed_in_kernel(tmp_path, "4c1f0e9a7d2b5e8f6a3c")
    other_salt = seed_in_kernel(tmp_path, "9e2d7b4a1f6c3e8d0b5a")
    key_file = tmp_path / SEED_KEY_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
    assert one == other_salt == kernel_seed(seed_key(key_file), "s", "a")
    assert seed_in_kernel(tmp_path, "4c1f0e9a7d2b5e8f6a3c", student="t") != one
    key_file.unlink()
    assert seed_in_kernel(tmp_path, "4c1f0e9a7d2b5e8f6a3c") != one  # another key, another seed


def test_the_seed_key_is_made_once_and_must_be_private(tmp_path):
    from rbtutor.grading.execute import seed_key

    path = tmp_path / ".grading" / "kernel_seed.key"
    key = seed_key(path)
    assert len(key) == 32
    assert seed_key(path) == key  # made once, then read
    assert seed_key(tmp_path / ".grading" / "other.key") != key  # random, not derived from anything
    path.chmod(0o644)
    with pytest.raises(ValueError, match="private"):
        seed_key(path)
    path.chmod(0o600)
    path.write_text("not a key\n")
    with pytest.raises(ValueError, match="64 hexadecimal digits"):
        seed_key(path)
    path.unlink()
    (tmp_path / "elsewhere").write_text("0" * 64)
    (tmp_path / "elsewhere").chmod(0o600)  # a good key, but behind a link
    path.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError, match="symbolic links"):  # O_NOFOLLOW: a link is never read (ELOOP)
        seed_key(path)


# --------------------------------------------------------------------------- nbclient's helper tasks

LEFT_BEHIND = """
import asyncio, gc, sys, tempfile
from nbformat.v4 import new_code_cell, new_notebook
from jupyter_core.utils import ensure_event_loop
from rbtutor.grading.execute import BoundedExecute

cells = [new_code_cell(source) for source in sys.argv[1:]]
runner = BoundedExecute(kernel_name="python3", report_dir=tempfile.mkdtemp(), timeout=30, seed_key="")
nb, resources = runner.preprocess(new_notebook(cells=cells), {"nbgrader": {"student": "s", "assignment": "a"}})
print("EVENTS", *[e["kind"] for e in resources["rbtutor"]["events"]])
loop = ensure_event_loop()
print("LEFT", len([t for t in asyncio.all_tasks(loop) if not t.done()]))
loop.run_until_complete(asyncio.sleep(1.5))  # as when the same worker grades its next notebook
del runner
gc.collect()
"""


def test_no_task_of_a_cell_outlives_it():
    """A cell ended by a malformed message left nbclient's kernel-alive poller running in the worker's
    event loop; it failed at the next notebook (``assert self.kc is not None``) and asyncio printed
    "Task exception was never retrieved" into the grading run's output."""
    import subprocess
    import sys

    cells = ["print('before')", FORGED.format(content='b"{not json"'), "print('after')"]
    done = subprocess.run([sys.executable, "-c", LEFT_BEHIND, *cells], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "EVENTS message_malformed" in done.stdout, done.stdout + done.stderr
    assert "LEFT 0" in done.stdout, done.stdout
    assert "never retrieved" not in done.stderr, done.stderr
    assert "was destroyed" not in done.stderr, done.stderr


def test_the_memory_bound_is_said_once_though_each_kernel_words_it_its_own_way(capsys):
    """Where no cgroup can be made, each kernel's launcher gives the reason with its own group's name:
    the grader says how memory is bounded once per process, not once per kernel."""
    import logging

    from rbtutor.grading.execute import preprocessor

    preprocessor._said.discard("memory")
    bounded = preprocessor.BoundedExecute()
    bounded.log = logging.getLogger("test-memory-once")
    for pid in (101, 102, 103):
        bounded._report_kernel({"memory": f"per process only (RLIMIT_AS): no cgroup could be made: "
                                          f"mkdir rbtutor-kernel-{pid}: Permission denied"})
    err = capsys.readouterr().err
    assert err.count("kernels' memory is bounded per process only") == 1, err
    assert "rbtutor-kernel-101" in err
