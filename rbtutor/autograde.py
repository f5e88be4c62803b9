"""Judging handed-in answers in the grading process (an nbgrader preprocessor).

nbgrader executes a submission in the student's kernel; each locked test cell
only calls ``hand_in(id, value)``, which leaves the value as an output of MIME
type ``application/vnd.rbtutor.answer+json``. :class:`JudgeAnswers` runs next,
in nbgrader's own process: it reads that value, judges it with
:func:`rbtutor.judge.judge` against the reference computed by
:mod:`rbtutor.problems` from the course data, and replaces the cell's outputs
by a pass message or an error carrying the diagnosis. Nothing the student's
code did in its kernel (patched numpy, odd objects, extra outputs) takes part
in the decision, and no reference value is written into the notebook.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from nbformat.v4 import new_output
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

from .assignments import ANSWER_MIME, DATA_FILE

HAND_IN = re.compile(r"""^\s*hand_in\(\s*["'](p\d+\.[a-e]\.\w+)["']""", re.M)


@lru_cache(maxsize=4)
def _reference(data_file: str | None):
    from .problems import answer_key, load_data

    data = load_data(data_file)
    return data, answer_key(data)


def course_reference(data_file=DATA_FILE):
    """``(data, key)`` of the course: ``data_file`` (a rendered variant) if it exists, else the reference."""
    return _reference(str(data_file) if Path(data_file).exists() else None)


def handed_in(cell, answer_id: str):
    """The last payload for ``answer_id`` among the cell's outputs, or None."""
    found = None
    for output in cell.get("outputs", []):
        payload = output.get("data", {}).get(ANSWER_MIME) if output.get("output_type") in (
            "display_data", "execute_result") else None
        if isinstance(payload, dict) and payload.get("id") == answer_id:
            found = payload
    return found


class JudgeAnswers(NbGraderPreprocessor):
    """Replace the outputs of each hand-in test cell by the grader's verdict."""

    data_file = Unicode(str(DATA_FILE), help="problem data of a rendered variant; "
                        "the reference data when the file does not exist").tag(config=True)

    def preprocess_cell(self, cell, resources, cell_index):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
            return cell, resources
        match = HAND_IN.search(cell.source)
        if match is None:
            return cell, resources
        from .judge import judge

        answer_id = match.group(1)
        data, key = course_reference(self.data_file)
        payload = handed_in(cell, answer_id)
        if payload is None:
            errors = [o for o in cell.outputs if o.get("output_type") == "error"]
            note = (f"{answer_id}: no value reached the grader; the cell stopped before hand_in"
                    + (" (see the error above)." if errors else "."))
            cell.outputs = errors + [self._error(note)]
        else:
            if "text" in payload:
                submitted = payload["text"]
            elif "value" in payload:
                submitted = payload["value"]
            else:
                submitted = object()
            verdict = judge(answer_id, submitted, key=key, data=data)
            message = f"{answer_id}: {verdict.message}"
            cell.outputs = ([new_output("stream", name="stdout", text=message + "\n")] if verdict.passed
                            else [self._error(message)])
        return cell, resources

    @staticmethod
    def _error(message: str):
        return new_output("error", ename="AnswerNotAccepted", evalue=message,
                          traceback=[f"AnswerNotAccepted: {message}"])
