"""Autograding that survives broken and hostile notebooks, and says what it saw.

Four nbgrader preprocessors and a report, all running in nbgrader's own process
(``NbGraderAPI.autograde`` or ``nbgrader autograde``):

* :class:`RestoreCells` (sanitize stage, replaces nbgrader's ``DeduplicateIds`` and
  ``OverwriteCells``): every cell the gradebook knows gets back its cell type, its
  grade/solution/locked flags and points, and (locked cells) its source; duplicated
  ids keep one cell; cells with ids the gradebook does not know lose their nbgrader
  metadata; deleted grade and locked cells are put back.
* :class:`ScanSubmission` (sanitize stage, after RestoreCells): looks for suspicious
  patterns in the code the student's kernel will run (patching numpy or the
  builtins, reading the course's folders, processes, signals, custom ``__eq__``...).
* :class:`BoundedExecute` (autograde stage, replaces ``Execute``): a time limit for
  the whole notebook on top of the per-cell timeout, survival of a dying kernel,
  and a byte guard on the outputs collected while the notebook runs.
* :class:`CapOutput` (autograde stage, right after BoundedExecute): outputs capped in
  bytes per output and per notebook; the hand-in payloads of the test cells are
  kept (unless absurdly large) so that ``JudgeAnswers`` still sees them.

Each preprocessor appends its events to ``resources["rbtutor"]["events"]`` and
stores them in ``<report_dir>/<student>/<assignment>/<notebook>.json`` (one section
per preprocessor, replaced on every run, so a re-run leaves no duplicates).
``report_dir`` defaults to ``<CourseDirectory.root>/integrity``.
:func:`write_integrity_report` gathers those files into ``integrity_report.md``
and ``integrity_report.json`` at the course root.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import tempfile
import tokenize
import uuid
from datetime import UTC, datetime
from pathlib import Path
from time import monotonic

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import NotebookNode
from nbformat.v4 import new_output
from nbgrader.api import Gradebook
from nbgrader.preprocessors import Execute, NbGraderPreprocessor, OverwriteCells
from traitlets import Bool, Enum, Float, Integer, Unicode

from .assignments import ANSWER_MIME, DATA_ID

EVENTS_DIR = "integrity"
REPORT_NAME = "integrity_report"


# --------------------------------------------------------------------------- events


class _Events:
    """Mixin: where this preprocessor's events go (resources and the integrity folder)."""

    stage = "events"

    def _report_dir(self) -> Path:
        configured = getattr(self, "report_dir", "")
        if configured:
            return Path(configured)
        root = None
        try:
            section = self.config.CourseDirectory
            root = section.root if "root" in section else None
        except AttributeError:
            root = None
        return Path(root or os.getcwd()) / EVENTS_DIR

    def _events_file(self, resources) -> Path | None:
        info = (resources or {}).get("nbgrader") or {}
        if not all(info.get(k) for k in ("student", "assignment", "notebook")):
            return None
        return self._report_dir() / info["student"] / info["assignment"] / f"{info['notebook']}.json"

    def _store(self, resources, events: list[dict], *, fresh: bool = False) -> None:
        """Put ``events`` into resources and into this stage's section of the notebook's file."""
        if resources is None:
            return
        bucket = resources.setdefault("rbtutor", {"events": []})
        bucket.setdefault("events", []).extend(events)
        path = self._events_file(resources)
        if path is None:
            return
        info = resources["nbgrader"]
        record = {"student": info["student"], "assignment": info["assignment"],
                  "notebook": info["notebook"], "stages": {}}
        if path.exists() and not fresh:
            try:
                old = json.loads(path.read_text())
                if isinstance(old, dict) and isinstance(old.get("stages"), dict):
                    record["stages"] = old["stages"]
            except (OSError, ValueError):
                pass
        record["stages"][self.stage] = events
        record["updated"] = datetime.now(UTC).isoformat(timespec="seconds")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(handle, "w") as out:
                json.dump(record, out, indent=1, default=str)
            os.replace(tmp, path)
        except OSError as exc:  # the report is secondary: never fail grading because of it
            self.log.warning("could not write the integrity events to %s: %s", path, exc)


def _event(kind: str, message: str, *, cell=None, grade_id=None, **evidence) -> dict:
    event = {"kind": kind, "message": message}
    if cell is not None:
        event["cell"] = cell
    if grade_id:
        event["grade_id"] = grade_id
    event.update({k: v for k, v in evidence.items() if v is not None})
    return event


def _meta(cell) -> dict:
    meta = cell.get("metadata", {}).get("nbgrader")
    return meta if isinstance(meta, dict) else {}


# --------------------------------------------------------------------------- sizes


def _size(value) -> int:
    """Bytes of an output field (str, list of str, or JSON)."""
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return sum(_size(v) for v in value)
    try:
        return len(json.dumps(value, default=str).encode("utf-8"))
    except (TypeError, ValueError):
        return 0


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _cut(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` bytes of UTF-8 (never inside a character)."""
    return text.encode("utf-8", "surrogatepass")[:max(limit, 0)].decode("utf-8", "ignore")


def output_size(output) -> int:
    kind = output.get("output_type")
    if kind == "stream":
        return _size(output.get("text", ""))
    if kind == "error":
        return _size(output.get("evalue", "")) + _size(output.get("traceback", []))
    return _size(output.get("data", {}))


def _note(text: str):
    return new_output("stream", name="stdout", text=text if text.endswith("\n") else text + "\n")


def _not_run(message: str):
    return new_output("error", ename="NotRun", evalue=message, traceback=[f"NotRun: {message}"])


# --------------------------------------------------------------------------- execution


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


class BoundedExecute(_Events, Execute):
    """nbgrader's Execute with a time limit for the whole notebook and survival of kernel death.

    Before each cell: if the notebook's time (counted from the moment its kernel is
    ready) is up, or its kernel has died, the cell is not run and gets an error
    output saying why. A cell's own timeout is ``min(timeout, time left)``. Outputs
    collected while running are guarded in bytes (``max_cell_output_bytes``) so a
    flood of output cannot exhaust the grader's memory; CapOutput trims further.
    """

    stage = "execute"

    notebook_timeout = Float(240.0, help="time limit in seconds for the whole notebook "
                             "(cells after it are not run); <= 0 means no limit").tag(config=True)
    max_cell_output_bytes = Integer(1_000_000, help="outputs kept per cell while it runs; "
                                    "the rest is dropped on arrival").tag(config=True)
    max_notebook_output_bytes = Integer(20_000_000, help="outputs kept for the whole notebook while "
                                        "it runs").tag(config=True)
    max_answer_bytes = Integer(1_000_000, help="a hand-in payload above this is dropped").tag(config=True)
    report_dir = Unicode("", help="folder of the integrity events (default: "
                         "<CourseDirectory.root>/integrity)").tag(config=True)
    # A graded kernel is thrown away: killing it at once saves the ~0.2 s a polite
    # shutdown takes (the sandbox goes with it: bwrap's pid namespace ends with it).
    shutdown_kernel = Enum(["graceful", "immediate"], default_value="immediate",
                           help="how the kernel is stopped after the notebook").tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        from nbclient.client import NotebookClient

        NotebookClient.__init__(self, nb, km)
        self.reset_execution_trackers()
        self._check_assign_resources(resources)
        self._events_seen: list[dict] = []
        self._deadline = None
        self._stopped = None  # the reason later cells are not run
        self._not_run: list[int] = []
        self._nb_bytes = 0
        try:
            with self.setup_kernel():
                info_msg = self.wait_for_reply(self.kc.kernel_info())
                self.nb.metadata["language_info"] = info_msg["content"]["language_info"]
                if self.notebook_timeout and self.notebook_timeout > 0:
                    self._deadline = monotonic() + self.notebook_timeout
                for index, cell in enumerate(self.nb.cells):
                    self.preprocess_cell(cell, resources, index)
            self.set_widgets_metadata()
        finally:
            if self._not_run:
                self._events_seen.append(_event(
                    "cells_not_run", f"{len(self._not_run)} cells were not run: {self._stopped}",
                    cells=self._not_run))
            self._store(self.resources, self._events_seen)
        return self.nb, self.resources

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
        return f"not run: the notebook's time limit of {self.notebook_timeout:g} s was reached"

    def _skip(self, cell, index):
        if cell.cell_type == "code" and cell.source.strip():
            cell.outputs = [_not_run(self._stopped)]
            cell.execution_count = None
            self._not_run.append(index)

    def preprocess_cell(self, cell, resources, index):
        self._check_assign_resources(resources)
        if cell.cell_type != "code" or not cell.source.strip():
            return cell, self.resources
        left = self._time_left()
        if self._stopped is None and left is not None and left <= 0:
            self._stopped = self._limit_message()
            self._events_seen.append(_event("time_limit", f"the notebook's time limit of "
                                            f"{self.notebook_timeout:g} s was reached before cell {index}",
                                            cell=index))
        if self._stopped is not None:
            self._skip(cell, index)
            return cell, self.resources
        self._cell_bytes, self._cell_dropped, self._cell_answer_bytes = 0, 0, 0
        grade_id = _meta(cell).get("grade_id")
        try:
            cell = self.execute_cell(cell, index, store_history=True)
        except DeadKernelError:
            reason = _death_reason(self.km)
            self._stopped = f"not run: the kernel died ({reason})"
            cell.outputs = list(cell.get("outputs", [])) + [_not_run(f"the kernel died while running "
                                                                      f"this cell ({reason})")]
            self._events_seen.append(_event("kernel_died", f"the kernel died in cell {index} ({reason})",
                                            cell=index, grade_id=grade_id, reason=reason))
        except CellTimeoutError as exc:
            # the kernel ignored the interrupt: record it and go on; the notebook's time
            # limit bounds what the following cells can cost
            cell.outputs = list(cell.get("outputs", [])) + [_not_run(
                f"the cell did not finish and ignored the interrupt ({str(exc).splitlines()[0]})")]
            self._events_seen.append(_event("cell_timeout", f"cell {index} timed out and did not stop "
                                            "when interrupted", cell=index, grade_id=grade_id))
            left = self._time_left()
            if left is not None and left <= 0:
                self._stopped = self._limit_message()
                self._events_seen.append(_event("time_limit", f"the notebook's time limit of "
                                                f"{self.notebook_timeout:g} s was reached in cell {index}",
                                                cell=index, grade_id=grade_id))
        else:
            timed_out = any(o.get("output_type") == "error" and o.get("ename") == "CellTimeoutError"
                            for o in cell.get("outputs", []))
            left = self._time_left()
            if timed_out and left is not None and left <= 0:
                self._stopped = self._limit_message()
                cell.outputs.append(_not_run(f"stopped: the notebook's time limit of "
                                             f"{self.notebook_timeout:g} s was reached in this cell"))
                self._events_seen.append(_event("time_limit", f"the notebook's time limit of "
                                                f"{self.notebook_timeout:g} s was reached in cell {index}",
                                                cell=index, grade_id=grade_id))
            elif timed_out:
                self._events_seen.append(_event("cell_timeout", f"cell {index} reached the per-cell "
                                                f"timeout of {self.timeout} s", cell=index, grade_id=grade_id))
        if getattr(self, "_cell_dropped", 0):
            cell.outputs.append(_note(f"… output cut while running: {self._cell_dropped} bytes dropped "
                                      f"(at most {self.max_cell_output_bytes} bytes are kept per cell)"))
            self._events_seen.append(_event("output_cut", f"cell {index}: {self._cell_dropped} bytes of "
                                            f"output dropped while running (at most "
                                            f"{self.max_cell_output_bytes} bytes kept per cell)", cell=index,
                                            grade_id=grade_id, dropped_bytes=self._cell_dropped))
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error" and output.get("ename") == "MemoryError":
                self._events_seen.append(_event("memory_error", f"cell {index} ran out of memory",
                                                cell=index, grade_id=grade_id))
        return cell, self.resources

    # --- byte guard on outputs as they arrive -------------------------------------

    def output(self, outs, msg, display_id, cell_index):
        out = super().output(outs, msg, display_id, cell_index)
        if out is None or not hasattr(self, "_cell_bytes"):
            return out
        self._guard(outs, out)
        return out

    def _guard(self, outs, out):
        data = out.get("data") if isinstance(out.get("data"), dict) else None
        if data is not None and ANSWER_MIME in data:
            size = _size(data[ANSWER_MIME])
            if self._cell_answer_bytes + size > self.max_answer_bytes:
                self._cell_dropped += _size(data.pop(ANSWER_MIME))
            else:
                self._cell_answer_bytes += size
                return
        size = output_size(out)
        room = min(self.max_cell_output_bytes - self._cell_bytes,
                   self.max_notebook_output_bytes - self._nb_bytes)
        if size <= room:
            self._cell_bytes += size
            self._nb_bytes += size
            return
        room = max(room, 0)
        if out.get("output_type") == "stream" and room > 0:
            out["text"] = _cut(_text(out.get("text", "")), room)
            kept = room
        elif out.get("output_type") == "error":
            out["evalue"] = _cut(_text(out.get("evalue", "")), 2000)
            out["traceback"] = [_cut(_text(out.get("traceback", [])), 4000)]
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
        if isinstance(data, dict) and _size(data) > self.max_cell_output_bytes:
            msg["content"]["data"] = {"text/plain": f"… display update dropped ({_size(data)} bytes)"}
        return super()._update_display_id(display_id, msg)


class CapOutput(_Events, NbGraderPreprocessor):
    """Outputs capped in bytes, per output and per notebook; hand-in payloads kept.

    Stream text and error text above ``max_output_bytes`` are cut (with a note);
    rich outputs (images, HTML...) above it are dropped (with a note); once the
    notebook's outputs reach ``max_notebook_bytes``, later outputs are dropped. The
    answer payload (``application/vnd.rbtutor.answer+json``) is kept untouched unless
    it alone is above ``max_answer_bytes``, in which case it is dropped so the grader
    sees no value. Place it right after the execution, before JudgeAnswers.
    """

    stage = "output"

    max_output_bytes = Integer(100_000, help="bytes of one output").tag(config=True)
    max_notebook_bytes = Integer(1_000_000, help="bytes of all outputs of the notebook").tag(config=True)
    max_answer_bytes = Integer(1_000_000, help="a hand-in payload above this is dropped").tag(config=True)
    report_dir = Unicode("", help="folder of the integrity events").tag(config=True)

    def preprocess(self, nb, resources):
        self._total = 0
        self._events_seen = []
        nb, resources = super().preprocess(nb, resources)
        self._store(resources, self._events_seen)
        return nb, resources

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or not cell.get("outputs"):
            return cell, resources
        grade_id = _meta(cell).get("grade_id")
        kept = []
        for output in cell.outputs:
            kept.extend(self._cap(output, index, grade_id))
        cell.outputs = kept
        return cell, resources

    def _record(self, kind, message, index, grade_id, **evidence):
        self._events_seen.append(_event(kind, message, cell=index, grade_id=grade_id, **evidence))

    def _cap(self, output, index, grade_id):
        kind = output.get("output_type")
        room = max(self.max_notebook_bytes - self._total, 0)
        if kind in ("stream", "error"):
            size = output_size(output)
            limit = min(self.max_output_bytes, room) if kind == "stream" else self.max_output_bytes
            if size <= limit:
                self._total += size
                return [output]
            if kind == "stream":
                output["text"] = _cut(_text(output.get("text", "")), limit) + (
                    f"\n… output cut at {limit} bytes ({size} bytes in all)\n")
            else:
                output["evalue"] = _cut(_text(output.get("evalue", "")), limit // 4)
                output["traceback"] = [_cut(_text(output.get("traceback", [])), limit // 2),
                                       f"… traceback cut at {limit} bytes ({size} bytes in all)"]
            self._total += min(size, limit)
            self._record("output_cut", f"cell {index}: {kind} output of {size} bytes cut at {limit} bytes",
                         index, grade_id, bytes=size, limit=limit)
            return [output]
        data = output.get("data")
        if not isinstance(data, dict):
            return [output]
        notes = []
        for mime in list(data):
            size = _size(data[mime])
            if mime == ANSWER_MIME:
                if size > self.max_answer_bytes:
                    del data[mime]
                    notes.append(f"… hand-in payload of {size} bytes dropped (limit {self.max_answer_bytes})")
                    self._record("answer_dropped", notes[-1], index, grade_id, bytes=size)
                continue
            if size > min(self.max_output_bytes, room):
                del data[mime]
                notes.append(f"… {mime} output of {size} bytes dropped "
                             f"(limit {min(self.max_output_bytes, room)} bytes)")
                self._record("output_dropped", f"cell {index}: {notes[-1][2:]}", index, grade_id,
                             mime=mime, bytes=size)
            else:
                self._total += size
                room -= size
        if not data:
            return [_note(n) for n in notes]
        return [output] + [_note(n) for n in notes]


# --------------------------------------------------------------------------- sanitize


class RestoreCells(_Events, OverwriteCells):
    """Every cell the gradebook knows gets its type, flags, points and (locked) source back.

    Replaces DeduplicateIds and OverwriteCells in ``Autograde.sanitize_preprocessors``.
    A duplicated id keeps one cell: the first for a solution cell, the copy with the
    original source (else the last) for a locked cell; the other copies become plain
    cells. A cell with an id the gradebook does not know loses its nbgrader metadata.
    Deleted grade and locked cells are put back after the cell that preceded them in
    the source; a deleted written answer comes back blank (so it scores 0 by checksum).
    """

    stage = "restore"

    add_missing_cells = Bool(True, help="put deleted grade and locked cells back").tag(config=True)
    report_dir = Unicode("", help="folder of the integrity events").tag(config=True)

    def preprocess(self, nb, resources):
        self.notebook_id = resources["nbgrader"]["notebook"]
        self.assignment_id = resources["nbgrader"]["assignment"]
        self.db_url = resources["nbgrader"]["db_url"]
        fresh = "rbtutor" not in resources
        events: list[dict] = []
        with Gradebook(self.db_url) as gradebook:
            self.gradebook = gradebook
            source_nb = gradebook.find_notebook(self.notebook_id, self.assignment_id)
            order = [c.name for c in source_nb.source_cells]
            source = {c.name: c for c in source_nb.source_cells}
            points = {c.name: float(c.max_score) for c in source_nb.grade_cells}
            solutions = {c.name for c in source_nb.solution_cells}
            tasks = {c.name for c in source_nb.task_cells}
            keep = self._keepers(nb, source, solutions, events)
            for index, cell in enumerate(nb.cells):
                meta = cell.get("metadata", {}).get("nbgrader")
                if meta is None:
                    continue
                gid = meta.get("grade_id") if isinstance(meta, dict) else None
                if gid in source and keep.get(gid) is cell:
                    self._restore(cell, index, source[gid], points.get(gid), gid in solutions,
                                  gid in tasks, events)
                    continue
                if gid in source:
                    message = f"cell {index} is a duplicate of '{gid}'; it was made a plain cell"
                    events.append(_event("duplicated", message, cell=index, grade_id=gid,
                                         changed_source=cell.source != source[gid].source))
                elif _meta(cell).get("grade") or _meta(cell).get("solution") or _meta(cell).get("locked") \
                        or gid is not None or not isinstance(meta, dict):
                    events.append(_event("unknown_cell", f"cell {index} carries nbgrader metadata with an "
                                         f"id the gradebook does not know ({gid!r}); it was removed",
                                         cell=index, grade_id=gid if isinstance(gid, str) else None))
                del cell.metadata["nbgrader"]
                cell.metadata.pop("editable", None)
                cell.metadata.pop("deletable", None)
            if self.add_missing_cells:
                self._add_missing(nb, order, source, points, solutions, tasks, events)
        self.gradebook = None
        self._store(resources, events, fresh=fresh)
        return nb, resources

    def _keepers(self, nb, source, solutions, events):
        """For each known id, the one cell that keeps it."""
        found: dict[str, list] = {}
        for cell in nb.cells:
            gid = _meta(cell).get("grade_id")
            if isinstance(gid, str) and gid in source:
                found.setdefault(gid, []).append(cell)
        keep = {}
        for gid, cells in found.items():
            if len(cells) == 1 or gid in solutions:
                keep[gid] = cells[0]
            else:
                intact = [c for c in cells if c.source == source[gid].source]
                keep[gid] = intact[0] if intact else cells[-1]
        return keep

    def _restore(self, cell, index, src, max_score, is_solution, is_task, events):
        meta = _meta(cell)
        gid = src.name
        changes = []
        if cell.cell_type != src.cell_type:
            changes.append(("cell_type", cell.cell_type, src.cell_type))
            self.update_cell_type(cell, src.cell_type)
        want = {"grade": max_score is not None and not is_task, "solution": is_solution,
                "locked": bool(src.locked), "task": is_task}
        for key, value in want.items():
            if bool(meta.get(key, False)) != value:
                changes.append((key, bool(meta.get(key, False)), value))
        if max_score is not None:
            try:
                old = float(meta.get("points"))
            except (TypeError, ValueError):
                old = meta.get("points")
            if old != max_score:
                changes.append(("points", old, max_score))
        if src.locked and cell.source != src.source:
            changes.append(("source", _cut(cell.source, 300), "the original source"))
            cell.source = src.source
        claimed = meta.get("checksum")
        if (src.locked or max_score is not None) and claimed and claimed != src.checksum:
            changes.append(("checksum", claimed, src.checksum))
        new = {"grade_id": gid, "schema_version": 3, **want, "checksum": src.checksum}
        if max_score is not None:
            new["points"] = max_score
        cell.metadata["nbgrader"] = NotebookNode(new)
        if src.locked:
            cell.metadata["editable"] = False
            cell.metadata["deletable"] = False
        if changes:
            kinds = {"cell_type": "retyped", "grade": "reflagged", "solution": "reflagged",
                     "locked": "reflagged", "task": "reflagged", "points": "points_changed",
                     "source": "locked_edited", "checksum": "checksum_forged"}
            for key, old, value in changes:
                self.report_change(gid, key, value, old)
                events.append(_event(kinds[key], f"'{gid}': {key} was {old!r}, restored to {value!r}",
                                     cell=index, grade_id=gid, field=key, submitted=old, restored=value))
        return cell

    def _add_missing(self, nb, order, source, points, solutions, tasks, events):
        present = {_meta(c).get("grade_id") for c in nb.cells if _meta(c).get("grade_id")}
        for position, gid in enumerate(order):
            if gid in present or gid in tasks:
                continue
            src = source[gid]
            if gid not in points and not src.locked:
                continue  # a deleted answer cell: the answer is simply missing
            if gid in points and gid not in solutions:
                cell = self.missing_cell_transform(src, points[gid])
            else:
                cell = self._copy_of(src, points.get(gid), gid in solutions)
            anchor = -1
            for previous in reversed(order[:position]):
                indices = [i for i, c in enumerate(nb.cells) if _meta(c).get("grade_id") == previous]
                if indices:
                    anchor = indices[0]
                    break
            if nb.get("nbformat", 4) >= 4 and nb.get("nbformat_minor", 0) >= 5 and "id" not in cell:
                cell["id"] = uuid.uuid4().hex[:8]
            nb.cells.insert(anchor + 1, cell)
            present.add(gid)
            events.append(_event("deleted", f"'{gid}' was missing from the submission; it was put back",
                                 cell=anchor + 1, grade_id=gid))
        if tasks:
            self.add_missing_task_cells(nb, None)

    @staticmethod
    def _copy_of(src, max_score, is_solution):
        from nbgrader.nbgraderformat import MetadataValidator

        meta = {"grade": max_score is not None, "grade_id": src.name, "locked": bool(src.locked),
                "solution": is_solution, "task": False, "schema_version": 3, "checksum": src.checksum}
        if max_score is not None:
            meta["points"] = max_score
        cell = {"cell_type": src.cell_type, "source": src.source, "metadata": {"nbgrader": meta}}
        if src.locked:
            cell["metadata"].update(editable=False, deletable=False)
        if src.cell_type == "code":
            cell.update(outputs=[], execution_count=None)
        return MetadataValidator().upgrade_cell_metadata(NotebookNode(cell))


# --------------------------------------------------------------------------- scan


_MODULES = r"(?:np|numpy|math|builtins|scipy|sympy|linalg|nbgrader|rbtutor|IPython|json|os|sys)"
PATTERNS = [
    ("patching", re.compile(rf"\b{_MODULES}(?:\.\w+)+\s*(?:=(?!=)|\+=)")),
    ("patching", re.compile(r"\bbuiltins\b|__builtins__")),
    ("patching", re.compile(rf"\b(?:setattr|delattr)\s*\(\s*{_MODULES}\b")),
    ("patching", re.compile(r"\bsys\.modules\b|\bimportlib\b|\b__import__\b|\bglobals\s*\(\s*\)\s*\[")),
    ("custom_comparison", re.compile(r"\bdef\s+__(?:eq|ne|lt|le|gt|ge|bool|array|array_ufunc|float|"
                                     r"abs|hash|instancecheck|getattr|getattribute)__\b")),
    ("process", re.compile(r"\b(?:socket|subprocess|ctypes|cffi|multiprocessing|pty|urllib|requests|"
                           r"http\.client|shutil)\b")),
    ("process", re.compile(r"\bos\s*\.\s*(?:system|popen|fork|forkpty|_exit|kill|killpg|exec\w*|spawn\w*|"
                           r"remove|unlink|rmdir|chmod|rename|setsid)\b")),
    ("process", re.compile(r"\bsys\s*\.\s*exit\b|(?<![\w.])(?:exit|quit)\s*\(|\bimport\s+signal\b|"
                           r"\bfrom\s+signal\b|\bsignal\s*\.\s*\w+|\.kill\s*\(|\bresource\s*\.\s*setrlimit")),
    ("dynamic_code", re.compile(r"(?<![\w.])(?:exec|eval|compile)\s*\(|\bget_ipython\s*\(")),
]
FORBIDDEN_PATH = re.compile(r"exercises|gradebook|submitted|autograded|solutions|release|feedback|"
                            r"exchange|nbgrader|answer_key|(?:^|[/\\])\.\.(?:[/\\]|$)|^~|^/")


_LITERAL = re.compile(r"""^[a-zA-Z]*('''|\"\"\"|'|\")(.*)\1$""", re.S)
_FOLDERS = {"exercises", "gradebook.db", "gradebook", "submitted", "autograded", "solutions", "release",
            "feedback", "exchange", "..", "~"}


def _strings_and_code(source: str):
    """(code without comments and strings, [string literals]) of Python source; a fallback if it does not tokenize."""
    code, strings = [], []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.STRING:
                strings.append(token.string)
                code.append('""')
            elif token.type == tokenize.COMMENT:
                continue
            else:
                code.append(token.string)
                code.append(" " if token.type in (tokenize.NAME, tokenize.NUMBER, tokenize.OP) else "")
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return source, re.findall(r"""(['"]).*?\1""", source)
    return "".join(code).replace(" . ", ".").replace(" .", ".").replace(". ", "."), strings


def assigned_names(source: str) -> set[str]:
    """Names that a cell binds at top level or anywhere (assignment, del, for, with, import...)."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return names


def scan_source(source: str) -> list[tuple[str, str]]:
    """Suspicious (category, evidence) found in one cell of student code."""
    if source.lstrip().startswith(("%", "!")) or "\n!" in source or "\n%" in source:
        shell = [line for line in source.splitlines() if line.lstrip().startswith(("!", "%"))]
        found = [("shell", line.strip()[:120]) for line in shell]
    else:
        found = []
    code, strings = _strings_and_code(source)
    for category, pattern in PATTERNS:
        for match in pattern.finditer(code):
            found.append((category, match.group(0).strip()[:120]))
    for literal in strings:
        match = _LITERAL.match(literal)
        text = match.group(2) if match else literal
        pathlike = ("/" in text or "\\" in text or text.strip() in _FOLDERS
                    or text.strip().endswith((".db", ".ipynb", ".yaml", ".json", ".csv", ".py")))
        if pathlike and FORBIDDEN_PATH.search(text.strip()):
            found.append(("forbidden_path", literal[:120]))
    seen, unique = set(), []
    for item in found:
        if item not in seen:
            seen.add(item)
            unique.append(item)
    return unique


class ScanSubmission(_Events, NbGraderPreprocessor):
    """Flag suspicious code in the cells the student's kernel will run.

    Put it in the sanitize stage after RestoreCells: locked cells then carry their
    original source (RestoreCells has recorded any change), so only student code
    (answer cells, added cells, demoted duplicates) is scanned.
    """

    stage = "scan"

    report_dir = Unicode("", help="folder of the integrity events").tag(config=True)

    def preprocess(self, nb, resources):
        fresh = "rbtutor" not in resources
        events = []
        data_names = set()
        for cell in nb.cells:
            if _meta(cell).get("grade_id") == DATA_ID:
                data_names |= assigned_names(cell.source)
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code" or _meta(cell).get("locked"):
                continue
            found = scan_source(cell.source)
            found += [("data_reassigned", name) for name in sorted(assigned_names(cell.source) & data_names)]
            for category, evidence in found:
                events.append(_event(category, f"cell {index}: {category.replace('_', ' ')}: {evidence}",
                                     cell=index, grade_id=_meta(cell).get("grade_id"), pattern=evidence))
        self._store(resources, events, fresh=fresh)
        return nb, resources


# --------------------------------------------------------------------------- report


def _gather(folder: Path) -> list[dict]:
    records = []
    for path in sorted(folder.glob("*/*/*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and "student" in record:
            records.append(record)
    return records


def write_integrity_report(course_root, events=None, report_dir=None) -> Path:
    """Write ``integrity_report.md`` and ``.json`` at ``course_root``; return the markdown path.

    ``events``: records as the preprocessors store them (``{"student", "assignment",
    "notebook", "stages": {stage: [event, ...]}}``); by default every file under
    ``report_dir`` (``<course_root>/integrity``). Submissions found in ``submitted/``
    without a record are listed as not scanned.
    """
    root = Path(course_root)
    folder = Path(report_dir) if report_dir else root / EVENTS_DIR
    records = list(events) if events is not None else _gather(folder)
    submissions: dict[tuple[str, str], dict] = {}
    for record in records:
        key = (str(record["student"]), str(record["assignment"]))
        entry = submissions.setdefault(key, {"student": key[0], "assignment": key[1], "scanned": True,
                                             "events": []})
        for stage, stage_events in sorted((record.get("stages") or {}).items()):
            for event in stage_events or []:
                entry["events"].append({"notebook": record.get("notebook"), "stage": stage, **event})
    submitted = root / "submitted"
    if submitted.is_dir():
        for folder_ in sorted(p for p in submitted.glob("*/*") if p.is_dir()):
            key = (folder_.parent.name, folder_.name)
            submissions.setdefault(key, {"student": key[0], "assignment": key[1], "scanned": False,
                                         "events": []})
    ordered = [submissions[k] for k in sorted(submissions)]
    for entry in ordered:
        entry["suspicious"] = bool(entry["events"])
    (root / f"{REPORT_NAME}.json").write_text(json.dumps(ordered, indent=1, default=str))
    flagged = [e for e in ordered if e["suspicious"]]
    lines = ["# Integrity report", "",
             f"{len(ordered)} submissions, {len(flagged)} with something suspicious "
             f"(generated {datetime.now(UTC).isoformat(timespec='seconds')}).", ""]
    for entry in ordered:
        lines.append(f"## {entry['student']} / {entry['assignment']}")
        lines.append("")
        if not entry["scanned"]:
            lines.append("not scanned (not autograded with the integrity preprocessors)")
        elif not entry["events"]:
            lines.append("nothing suspicious")
        else:
            lines.append("| notebook | cell | grade id | kind | what was seen |")
            lines.append("| --- | --- | --- | --- | --- |")
            for event in entry["events"]:
                message = str(event.get("message", "")).replace("|", "\\|").replace("\n", " ")
                lines.append(f"| {event.get('notebook', '')} | {event.get('cell', '')} | "
                             f"{event.get('grade_id', '') or ''} | {event['kind']} | {message} |")
        lines.append("")
    path = root / f"{REPORT_NAME}.md"
    path.write_text("\n".join(lines))
    return path
