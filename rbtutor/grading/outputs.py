"""Step: output budget. One implementation of the byte caps on what a kernel sent back.

The grading process keeps what the student's kernel printed and displayed, so the
amount is bounded twice: while a notebook runs (:class:`OutputBudget`, used by
:class:`rbtutor.grading.execute.BoundedExecute`, drops what arrives past the
per-cell and per-notebook budgets) and after it ran (:class:`CapOutput`, an
nbgrader preprocessor, trims each output and the notebook's total, keeping the
hand-in payloads that the judge needs).
"""

from __future__ import annotations

import json

from nbformat.v4 import new_output
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Integer, Unicode

from .config import GRADING
from .protocol import ANSWER_MIME
from .report import Events, event, grading_meta

# --------------------------------------------------------------------------- sizes


def size_of(value) -> int:
    """Bytes of an output field (str, list of str, or JSON)."""
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return sum(size_of(v) for v in value)
    try:
        return len(json.dumps(value, default=str).encode("utf-8"))
    except (TypeError, ValueError):
        return 0


def text_of(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def cut(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` bytes of UTF-8 (never inside a character)."""
    return text.encode("utf-8", "surrogatepass")[:max(limit, 0)].decode("utf-8", "ignore")


def output_size(output) -> int:
    kind = output.get("output_type")
    if kind == "stream":
        return size_of(output.get("text", ""))
    if kind == "error":
        return size_of(output.get("evalue", "")) + size_of(output.get("traceback", []))
    return size_of(output.get("data", {}))


def note(text: str):
    return new_output("stream", name="stdout", text=text if text.endswith("\n") else text + "\n")


class CapOutput(Events, NbGraderPreprocessor):
    """Outputs capped in bytes, per output and per notebook; hand-in payloads kept.

    Stream text and error text above ``max_output_bytes`` are cut (with a note);
    rich outputs (images, HTML...) above it are dropped (with a note); once the
    notebook's outputs reach ``max_notebook_bytes``, later outputs are dropped. The
    answer payload (``application/vnd.rbtutor.answer+json``) is kept untouched unless
    it alone is above ``max_answer_bytes``, in which case it is dropped so the grader
    sees no value. Place it right after the execution, before JudgeAnswers.
    """

    stage = "output"

    max_output_bytes = Integer(GRADING.outputs_max_output_bytes, help="bytes of one output").tag(config=True)
    max_notebook_bytes = Integer(GRADING.outputs_max_notebook_bytes,
                                 help="bytes of all outputs of the notebook").tag(config=True)
    max_answer_bytes = Integer(GRADING.outputs_max_answer_bytes,
                               help="a hand-in payload above this is dropped").tag(config=True)
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
        grade_id = grading_meta(cell).get("grade_id")
        kept = []
        for output in cell.outputs:
            kept.extend(self._cap(output, index, grade_id))
        cell.outputs = kept
        return cell, resources

    def _record(self, kind, message, index, grade_id, **evidence):
        self._events_seen.append(event(kind, message, cell=index, grade_id=grade_id, **evidence))

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
                output["text"] = cut(text_of(output.get("text", "")), limit) + (
                    f"\n… output cut at {limit} bytes ({size} bytes in all)\n")
            else:
                output["evalue"] = cut(text_of(output.get("evalue", "")), limit // 4)
                output["traceback"] = [cut(text_of(output.get("traceback", [])), limit // 2),
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
            size = size_of(data[mime])
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
            return [note(n) for n in notes]
        return [output] + [note(n) for n in notes]


