"""Step: execute. Run a submitted notebook in the confined kernel, bounded in time and output.

:class:`BoundedExecute` replaces nbgrader's ``Execute`` in the autograde stage: a
time limit for the whole notebook on top of the per-cell timeout, survival of a
dying kernel (the parts judged before it keep their points), a malformed or
oversized kernel message treated like a dead kernel, and the output budget of
:mod:`rbtutor.grading.outputs` applied while messages arrive. Its kernel client,
:class:`PromptClient`, starts work as soon as the kernel answers on both channels.

Whose fault: every kernel message is decoded and checked where it arrives
(:class:`CheckedChannel`, :func:`check_message`); only what fails there is the kernel's
(``message_malformed``). Any other exception is the grader's own and is raised, so that the
submission is NOT GRADED with the traceback rather than scored. Each kernel gets the
submission's seed (:func:`kernel_seed`); after it ends, what its launcher recorded is named:
output written outside the notebook (``kernel_output``), processes stopped over the memory
limit of its process tree (``memory_limit``). A hand-in display changed after it was handed in
keeps its first value (``display_update_ignored``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from time import monotonic

import zmq
import zmq.asyncio
from jupyter_core.utils import run_sync
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute
from traitlets import Enum, Float, Integer, Unicode

from ..config import GRADING
from ..outputs import cut, note, output_size, size_of, text_of
from ..protocol import ANSWER_MIME
from ..report import Events, event, grading_meta
from ..sandbox import OUTPUT_KEEP, kernel_record, memory_kills, remove_group
from .folders import throwaway_folder
from .kernel import SEED_KEY_FILE, PromptClient, PromptKernelManager, kernel_seed, seed_key
from .messages import MalformedMessage


def _not_run(message: str):
    return new_output("error", ename="NotRun", evalue=message, traceback=[f"NotRun: {message}"])


# --------------------------------------------------------------------------- execution


async def end_tasks(tasks) -> list:
    """Cancel those of ``tasks`` still running and wait for all of them; return what each ended with
    (a result, or the exception it raised, retrieved so that asyncio does not report it as lost)."""
    for task in tasks:
        if not task.done():
            task.cancel()
    return await asyncio.gather(*tasks, return_exceptions=True)


_said: set[str] = set()  # what this process has already said about how its kernels start


def _say_once(log, text: str, topic: str | None = None) -> None:
    """``text`` (the grader's own words) in the log and on this process's stderr, the first time only.

    ``topic``: say only the first text of that topic, when the texts differ from kernel to kernel (a
    reason that names each kernel's own cgroup) but say the same thing."""
    key = topic or text
    if key not in _said:
        _said.add(key)
        log.warning(text)
        print(text, file=sys.stderr, flush=True)


def _death_reason(km) -> str:
    """Why the kernel process ended, from its exit status."""
    process = getattr(getattr(km, "provisioner", None), "process", None)
    code = None
    if process is not None:
        try:
            code = process.poll()
        except Exception:  # noqa: BLE001 - only for the message
            code = getattr(process, "returncode", None)
    if code is None:
        return "it stopped answering"
    if code < 0 or code > 128:
        number = -code if code < 0 else code - 128
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        hint = {"SIGKILL": ", e.g. out of memory", "SIGSEGV": ", a crash"}.get(name, "")
        return f"killed by {name}{hint}"
    return f"it exited with status {code}"


class BoundedExecute(Events, Execute):
    """nbgrader's Execute with a time limit for the whole notebook and survival of kernel death.

    Before each cell: if the notebook's time (counted from the moment its kernel is
    ready) is up, or its kernel has died, the cell is not run and gets an error
    output saying why. A cell's own timeout is ``min(timeout, time left)``. Outputs
    collected while running are guarded in bytes (``max_cell_output_bytes``) so a
    flood of output cannot exhaust the grader's memory; CapOutput trims further.
    """

    stage = "execute"

    notebook_timeout = Float(GRADING.execute_notebook_timeout, help="time limit in seconds for the whole notebook "
                             "(cells after it are not run); <= 0 means no limit").tag(config=True)
    max_cell_output_bytes = Integer(GRADING.execute_max_cell_output_bytes, help="outputs kept per cell while it runs; "
                                    "the rest is dropped on arrival").tag(config=True)
    max_notebook_output_bytes = Integer(GRADING.execute_max_notebook_output_bytes,
                                        help="outputs kept for the whole notebook while it runs").tag(config=True)
    max_answer_bytes = Integer(GRADING.outputs_max_answer_bytes,
                               help="a hand-in payload above this is dropped").tag(config=True)
    max_message_bytes = Integer(GRADING.execute_max_message_bytes, help="a kernel message above this many "
                                "bytes is dropped by zmq before it reaches the grader").tag(config=True)
    report_dir = Unicode("", help="folder of the integrity events (default: "
                         "<CourseDirectory.root>/integrity)").tag(config=True)
    seed_key = Unicode(GRADING.execute_seed_key, allow_none=True, help="the key of the kernels' seeds "
                       "(kernel_seed), as text; by default the grader's random key in <CourseDirectory.root>/"
                       f"{SEED_KEY_FILE} (seed_key), never the course's variants salt").tag(config=True)
    # A graded kernel is thrown away: killing it at once saves the ~0.2 s a polite
    # shutdown takes (the sandbox goes with it: bwrap's pid namespace ends with it).
    shutdown_kernel = Enum(["graceful", "immediate"], default_value=GRADING.execute_shutdown_kernel,
                           help="how the kernel is stopped after the notebook").tag(config=True)
    output_grace = Float(GRADING.execute_output_grace, help="after a cell's reply, the time its remaining output "
                         "has beyond the cell's deadline (nbclient's iopub_timeout)").tag(config=True)

    _cell_deadline: float | None = None  # when the running cell's timeout ends (monotonic clock)

    def __init__(self, *args, **kwargs):
        # nbgrader's Execute passes jupyter_client's AsyncKernelManager; ours notices a killed kernel's end sooner
        kwargs.setdefault("kernel_manager_class", PromptKernelManager)
        super().__init__(*args, **kwargs)

    def preprocess(self, nb, resources=None, km=None):
        # deferred: nbclient.client takes 1940 ms to import (-X importtime, 2026-12-06); only executing needs it
        from nbclient.client import NotebookClient

        NotebookClient.__init__(self, nb, km)
        self.reset_execution_trackers()
        self._check_assign_resources(resources)
        self._events_seen: list[dict] = []
        self._deadline = None
        self._stopped = None  # the reason later cells are not run
        self._not_run: list[int] = []
        self._nb_bytes = 0
        self._kills_named = 0
        self._updates_ignored: set[str] = set()
        metadata = self.resources.setdefault("metadata", {})
        original = metadata.get("path")
        try:
            # The kernel works in a throwaway copy of the notebook's folder and talks to us
            # through a socket folder of its own; both are removed when it ends, so nothing
            # it leaves there (links, sockets, files) is ever opened by the grader.
            with throwaway_folder("rbtutor-work-", copy_from=original) as work, \
                    throwaway_folder("rbtutor-ipc-") as ipc:
                metadata["path"] = str(work)
                self._ipc = ipc
                with self.setup_kernel():
                    info_msg = self.wait_for_reply(self.kc.kernel_info())
                    self.nb.metadata["language_info"] = info_msg["content"]["language_info"]
                    if self.notebook_timeout and self.notebook_timeout > 0:
                        self._deadline = monotonic() + self.notebook_timeout
                    for index, cell in enumerate(self.nb.cells):
                        self.preprocess_cell(cell, resources, index)
                    self._memory_kills(self._record_of_kernel(), live=True)
                self._report_kernel(self._record_of_kernel())
                self.set_widgets_metadata()
        finally:
            metadata["path"] = original
            if self._not_run:
                self._events_seen.append(event(
                    "cells_not_run", f"{len(self._not_run)} cells were not run: {self._stopped}",
                    cells=self._not_run))
            self._store(self.resources, self._events_seen)
        return self.nb, self.resources

    def create_kernel_manager(self):
        """The kernel manager, with its connection file and IPC sockets in this notebook's own folder."""
        km = super().create_kernel_manager()
        km.client_class = f"{PromptClient.__module__}.PromptClient"
        km.transport = "ipc"
        km.ip = str(self._ipc / "kernel")
        km.connection_file = str(self._ipc / "connection.json")
        # zmq drops a message above this size instead of handing it to us (the grader's memory is
        # bounded whatever the kernel sends); the cell then times out and the event says why

        make_client, limit = km.client, self.max_message_bytes

        def client(**kwargs):
            kc = make_client(**kwargs)
            kc.context.setsockopt(zmq.MAXMSGSIZE, limit)  # before its channels make their sockets
            return kc

        km.client = client
        return km

    async def async_start_new_kernel(self, **kwargs):
        env = dict(kwargs.get("env") or os.environ)
        # The sandbox hides the course; the kernel's folder is outside it, so name it.
        root = self._course_root()
        if root:
            hidden = [p for p in env.get("RBTUTOR_COURSE_ROOT", "").split(os.pathsep) if p]
            env["RBTUTOR_COURSE_ROOT"] = os.pathsep.join(dict.fromkeys([*hidden, str(root)]))
        seed = self._seed()
        if seed is None:  # the sandbox then gives the kernel a random seed of its own
            env.pop("RBTUTOR_KERNEL_SEED", None)
        else:
            env["RBTUTOR_KERNEL_SEED"] = str(seed)
        kwargs["env"] = env
        return await super().async_start_new_kernel(**kwargs)

    # nbclient binds its synchronous start_new_kernel to its own coroutine: bound again to this one
    start_new_kernel = run_sync(async_start_new_kernel)

    # nbclient runs each cell with two helper tasks (one reads IOPub, one looks every second whether
    # the kernel lives) and ends them only on the paths it expects. When a cell ends otherwise (a
    # malformed message, an exception in output handling, a flood cut off) a helper outlives the
    # cell in this process's event loop; once the kernel is cleaned up, the next run of the loop (the
    # worker's next notebook) makes it fail (``assert self.kc is not None``) and asyncio prints "Task
    # exception was never retrieved" to stderr. So each cell's helpers are ended and awaited here,
    # however the cell ended; what they raised is retrieved, and the cell's own outcome stands.

    async def _async_poll_for_reply(self, msg_id, cell, timeout, task_poll_output_msg, task_poll_kernel_alive):
        self._cell_helpers = (task_poll_output_msg, task_poll_kernel_alive)
        self._cell_deadline = None if timeout is None else monotonic() + timeout
        return await super()._async_poll_for_reply(msg_id, cell, timeout, task_poll_output_msg,
                                                   task_poll_kernel_alive)

    async def async_execute_cell(self, *args, **kwargs):
        self._cell_helpers = ()
        try:
            return await super().async_execute_cell(*args, **kwargs)
        finally:
            await end_tasks(self._cell_helpers)

    execute_cell = run_sync(async_execute_cell)

    # Once a cell's reply is in, nbclient gives the output still queued ``iopub_timeout`` seconds
    # (4 s) to arrive, then fails the cell. A kernel that printed 50 MB in time may still be in
    # the grader's hands after 4 s on a busy machine, and that is not the kernel's fault. So the
    # output may take until the cell's own deadline plus ``output_grace``: the grace is the time a
    # kernel interrupted at the deadline has to send its traceback and go idle.

    @property
    def iopub_timeout(self) -> float:
        left = 0.0 if self._cell_deadline is None else self._cell_deadline - monotonic()
        return max(left, 0.0) + self.output_grace

    def _seed(self) -> int | None:
        """This submission's seed (:func:`kernel_seed`) under the configured or the grader's key; None
        (a random seed, said once) when neither a key is configured nor a course root is known."""
        info = self.resources.get("nbgrader") or {}
        if self.seed_key is not None:
            key = self.seed_key.encode("utf-8")
        elif self._course_root():
            key = seed_key(Path(self._course_root()) / SEED_KEY_FILE)
        else:
            _say_once(self.log, "rbtutor: no course root and no BoundedExecute.seed_key: each kernel gets "
                      "a random seed, not the same on a re-grade")
            return None
        return kernel_seed(key, str(info.get("student", "")), str(info.get("assignment", "")))

    def _record_of_kernel(self) -> dict:
        return kernel_record(self._ipc, "connection")

    def _memory_kills(self, record: dict, live: bool = False, index=None) -> int:
        """Processes of the kernel's tree killed over its memory limit since last named; each new one is
        a ``memory_limit`` event. ``live``: read the kernel's cgroup now, else the launcher's last count."""

        kills = memory_kills(record.get("cgroup")) if live else record.get("memory_kills", 0)
        if kills > self._kills_named:
            limit = record.get("tree_limit")
            self._events_seen.append(event(
                "memory_limit", f"{kills - self._kills_named} process(es) of the kernel were stopped: the kernel "
                f"and its processes went over their memory limit of {limit} bytes", cell=index,
                killed=kills - self._kills_named, limit=limit))
            self._kills_named = kills
        return kills

    def _report_kernel(self, record: dict) -> None:
        """Name what the kernel wrote to its own stdout and stderr (never shown to the grader's terminal),
        and say once per process how kernels start and how their memory is bounded."""
        if record.get("cgroup"):  # its launcher, killed with the kernel, could not remove it

            remove_group(Path(record["cgroup"]), wait=2.0)
        written = record.get("output_bytes", 0)
        if written:
            self._events_seen.append(event(
                "kernel_output", f"the kernel wrote {written} bytes to its stdout/stderr outside the notebook "
                f"(the first {min(written, OUTPUT_KEEP)} kept for the grader)", bytes=written,
                output=cut(record.get("output", ""), 2000)))
        for notice in record.get("notices", []):
            _say_once(self.log, f"rbtutor: kernels start from nothing in this process from now on: {notice}")
            os.environ.pop("RBTUTOR_ZYGOTE", None)
        if record.get("memory", "").startswith("per process"):
            _say_once(self.log, f"rbtutor: kernels' memory is bounded {record['memory']}", topic="memory")

    def _course_root(self) -> str | None:
        try:
            section = self.config.CourseDirectory
            return section.root if "root" in section else None
        except AttributeError:
            return None

    def _time_left(self):
        return None if self._deadline is None else self._deadline - monotonic()

    def _get_timeout(self, cell):
        timeout = super()._get_timeout(cell)
        left = self._time_left()
        if cell is None or left is None:
            return timeout
        left = max(left, 0.1)
        return left if timeout is None else min(timeout, left)

    def _limit_message(self):
        return f"the notebook's time limit of {self.notebook_timeout:g} s was reached"

    def _skip(self, cell, index):
        if cell.cell_type == "code" and cell.source.strip():
            cell.outputs = [_not_run(f"not run: {self._stopped}")]
            cell.execution_count = None
            self._not_run.append(index)

    def preprocess_cell(self, cell, resources, index):
        self._check_assign_resources(resources)
        if cell.cell_type != "code" or not cell.source.strip():
            return cell, self.resources
        left = self._time_left()
        if self._stopped is None and left is not None and left <= 0:
            self._stopped = self._limit_message()
            self._events_seen.append(event("time_limit", f"the notebook's time limit of "
                                            f"{self.notebook_timeout:g} s was reached before cell {index}",
                                            cell=index))
        if self._stopped is not None:
            self._skip(cell, index)
            return cell, self.resources
        self._cell_bytes, self._cell_dropped, self._cell_answer_bytes = 0, 0, 0
        grade_id = grading_meta(cell).get("grade_id")
        try:
            cell = self.execute_cell(cell, index, store_history=True)
        except DeadKernelError:
            reason = _death_reason(self.km)
            if self._memory_kills(self._record_of_kernel(), index=index):
                reason = "stopped: the kernel and its processes went over their memory limit"
            self._stopped = f"the kernel died ({reason})"
            cell.outputs = list(cell.get("outputs", [])) + [_not_run(f"the kernel died while running "
                                                                      f"this cell ({reason})")]
            self._events_seen.append(event("kernel_died", f"the kernel died in cell {index} ({reason})",
                                            cell=index, grade_id=grade_id, reason=reason))
        except MalformedMessage as exc:
            reason = "the kernel sent a message the grader could not read"
            self._stopped = reason
            cell.outputs = list(cell.get("outputs", [])) + [_not_run(f"this cell ended: {reason}")]
            self._events_seen.append(event("message_malformed", f"the kernel sent a malformed message in cell "
                                           f"{index}; the notebook was stopped there", cell=index,
                                           grade_id=grade_id, error=cut(str(exc), 300)))
        except CellTimeoutError:
            # No reply even after the interrupt (the kernel ignores interrupts, or it sent a message
            # above max_message_bytes, which zmq dropped and so broke the channel), or a reply whose
            # output did not end by the cell's deadline and output_grace. Either way the kernel no
            # longer answers: the notebook ends here, as with a dead kernel.
            reason = (f"the kernel stopped answering (it ignored the interrupt, its output did not end "
                      f"within the cell's time limit, or it sent a message above {self.max_message_bytes} "
                      f"bytes, which was dropped)")
            self._stopped = reason
            cell.outputs = list(cell.get("outputs", [])) + [_not_run(f"this cell ended: {reason}")]
            self._events_seen.append(event("kernel_unresponsive", f"cell {index}: the kernel stopped answering; the "
                                           "notebook was stopped there", cell=index, grade_id=grade_id))
        else:
            timed_out = any(o.get("output_type") == "error" and o.get("ename") == "CellTimeoutError"
                            for o in cell.get("outputs", []))
            left = self._time_left()
            if timed_out and left is not None and left <= 0:
                self._stopped = self._limit_message()
                cell.outputs.append(_not_run(f"stopped: the notebook's time limit of "
                                             f"{self.notebook_timeout:g} s was reached in this cell"))
                self._events_seen.append(event("time_limit", f"the notebook's time limit of "
                                                f"{self.notebook_timeout:g} s was reached in cell {index}",
                                                cell=index, grade_id=grade_id))
            elif timed_out:
                self._events_seen.append(event("cell_timeout", f"cell {index} reached the per-cell "
                                                f"timeout of {self.timeout} s", cell=index, grade_id=grade_id))
        if getattr(self, "_cell_dropped", 0):
            cell.outputs.append(note(f"… output cut while running: {self._cell_dropped} bytes dropped "
                                      f"(at most {self.max_cell_output_bytes} bytes are kept per cell)"))
            self._events_seen.append(event("output_cut", f"cell {index}: {self._cell_dropped} bytes of "
                                            f"output dropped while running (at most "
                                            f"{self.max_cell_output_bytes} bytes kept per cell)", cell=index,
                                            grade_id=grade_id, dropped_bytes=self._cell_dropped))
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error" and output.get("ename") == "MemoryError":
                self._events_seen.append(event("memory_error", f"cell {index} ran out of memory",
                                                cell=index, grade_id=grade_id))
        return cell, self.resources

    # --- byte guard on outputs as they arrive -------------------------------------

    def output(self, outs, msg, display_id, cell_index):
        guarded = hasattr(self, "_cell_bytes")
        if guarded and msg.get("msg_type") == "stream" and not self._fit_stream(msg["content"]):
            return None
        out = super().output(outs, msg, display_id, cell_index)
        if out is None or not guarded:
            return out
        self._guard(outs, out)
        return out

    def _room(self) -> int:
        return max(min(self.max_cell_output_bytes - self._cell_bytes,
                       self.max_notebook_output_bytes - self._nb_bytes), 0)

    def _fit_stream(self, content) -> bool:
        """Cut a stream message's text to the room left before nbclient makes an output of it: nbformat
        checks each new output against its schema, 0.27 s for a 50 MB line. False: no room at all."""
        size = size_of(content["text"])  # a str: check_message saw to it
        room = self._room()
        if size <= room:
            return True
        self._cell_dropped += size - room
        content["text"] = cut(content["text"], room)
        return room > 0

    def _guard(self, outs, out):
        data = out.get("data") if isinstance(out.get("data"), dict) else None
        if data is not None and ANSWER_MIME in data:
            size = size_of(data[ANSWER_MIME])
            if self._cell_answer_bytes + size > self.max_answer_bytes:
                self._cell_dropped += size_of(data.pop(ANSWER_MIME))
            else:
                self._cell_answer_bytes += size
                return
        size = output_size(out)
        room = self._room()
        if size <= room:
            self._cell_bytes += size
            self._nb_bytes += size
            return
        if out.get("output_type") == "error":  # (a stream was fitted before it became an output)
            out["evalue"] = cut(text_of(out.get("evalue", "")), 2000)
            out["traceback"] = [cut(text_of(out.get("traceback", [])), 4000)]
            kept = output_size(out)
        else:
            if outs and outs[-1] is out:
                outs.pop()
            kept = 0
        self._cell_dropped += max(size - kept, 0)
        self._cell_bytes += kept
        self._nb_bytes += kept

    def _update_display_id(self, display_id, msg):
        data = msg.get("content", {}).get("data")
        targets = [self.nb.cells[c].outputs[k] for c, ks in self._display_id_map.get(display_id, {}).items()
                   for k in ks if k < len(self.nb.cells[c].outputs)]
        if targets and (ANSWER_MIME in data or any(ANSWER_MIME in (t.get("data") or {}) for t in targets)):
            # the value judged is the one handed in: a later change of that display is not taken
            if display_id not in self._updates_ignored:
                self._updates_ignored.add(display_id)
                self._events_seen.append(event(
                    "display_update_ignored", "a hand-in display was changed after it was handed in; "
                    "the value handed in first is judged", display_id=cut(display_id, 100)))
            return None
        if isinstance(data, dict) and size_of(data) > self.max_cell_output_bytes:
            msg["content"]["data"] = {"text/plain": f"… display update dropped ({size_of(data)} bytes)"}
        return super()._update_display_id(display_id, msg)
