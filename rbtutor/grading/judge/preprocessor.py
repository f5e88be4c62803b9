"""Step: judge, in nbgrader. The preprocessor that judges each handed-in answer of a notebook
and records the verdict on its test cell."""

from __future__ import annotations

import dataclasses

from nbformat.v4 import new_output
from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

from ...problems.variants import MAX_CLASS, per_student, problem_of, student_key
from ..protocol import HAND_IN, handed_in
from ..report import Events, event
from .class_keys import cached_reference, course_reference, problem_key, stored_class_keys, variants_on
from .verdicts import VERDICT_KEY, Verdict, judge

# --------------------------------------------------------------------------- in the grading process
# JudgeAnswers runs as an nbgrader preprocessor right after the notebook was executed: it reads
# each test cell's hand-in payload (rbtutor.grading.protocol), judges it with judge() against
# the course's key, and replaces the cell's outputs by the verdict. Nothing the student's code
# did in its kernel takes part in the decision; no reference value is written into the notebook.

def recorded_verdict(cell) -> Verdict | None:
    """The verdict :class:`JudgeAnswers` recorded on ``cell``, or None for a cell it did not judge."""
    record = ((cell.get("metadata") or {}).get("rbtutor") or {}).get(VERDICT_KEY)
    return None if record is None else Verdict.from_record(record)


def forget_verdict(cell) -> None:
    """Remove a verdict recorded on ``cell`` (one a submitted notebook carries in is not the grader's)."""
    meta = (cell.get("metadata") or {}).get("rbtutor")
    if isinstance(meta, dict):
        meta.pop(VERDICT_KEY, None)
    elif meta is not None:
        del cell.metadata["rbtutor"]


class JudgeAnswers(Events, NbGraderPreprocessor):
    """Replace the outputs of each hand-in test cell by the grader's verdict.

    When the course data switches per-student variants on
    (``variants: {per_student: true}``, see :mod:`rbtutor.problems.variants`), each
    answer is judged against the key of the submitting student's own variant
    (``resources["nbgrader"]["student"]``). A failed answer that the key of another
    student of the class (the gradebook's students) or the course's own data (and the
    reference data the book prints) would accept is reported as an integrity event,
    ``fits_other_student`` or ``fits_reference``, naming whose numbers it fits. The
    classmates' keys come from the store ``class_keys`` (:func:`write_class_keys`, once per run);
    a classmate missing there has their key worked out here.

    Each judged test cell gets two things: its outputs replaced by the verdict's message (a
    stdout line for a pass, an ``AnswerNotAccepted`` error otherwise), which the student's
    feedback page shows, and the :class:`Verdict` with its answer id and points recorded in
    ``cell.metadata["rbtutor"]["verdict"]``, from which :mod:`rbtutor.grading.scores` writes the
    scores. Verdicts found in the notebook before judging are removed first.
    """

    stage = "judge"

    data_file = Unicode("", help="problem data of a rendered variant (exercises/problem_data.yaml); "
                        "the reference data when empty or when the file does not exist").tag(config=True)
    report_dir = Unicode("", help="folder of the integrity events").tag(config=True)
    class_keys = Unicode("", help="folder of the class's keys (write_class_keys, before the run); a "
                         "classmate whose key is not there has it worked out here").tag(config=True)

    def preprocess(self, nb, resources):
        # who is graded, and where the class is listed; events of this stage
        info = resources.get("nbgrader") or {}
        self._student = info.get("student")
        self._db_url = info.get("db_url")
        self._classmates = None
        self._events = []
        for cell in nb.cells:  # a verdict the submission brings along is not the grader's
            forget_verdict(cell)
        nb, resources = super().preprocess(nb, resources)
        resources.setdefault("rbtutor", {"events": []})["judged"] = True
        if self._student is not None:
            self._store(resources, self._events)
        return nb, resources

    def _key_for(self, answer_id: str):
        """``(data, key)`` the answer is judged with: the course's, or the student's own variant's
        (from the class's store when it holds it, else worked out here)."""

        data, key = course_reference(self.data_file)
        student = getattr(self, "_student", None)
        if student is None or not per_student(data):
            return data, key
        problem = problem_of(answer_id)
        stored = stored_class_keys(self.class_keys, data, problem).get(student) if self.class_keys else None
        return data, stored if stored is not None else student_key(data, student, [problem])

    def _classmates_of(self) -> list[str]:
        """The other students of the gradebook (read once per notebook, only when an answer fails)."""
        if self._classmates is None:
            self._classmates = []
            if self._db_url:
                with Gradebook(self._db_url) as gradebook:
                    self._classmates = sorted(s.id for s in gradebook.students if s.id != self._student)
        return self._classmates

    def _fits_others(self, answer_id: str, submitted, data) -> list[dict]:
        """Integrity events for a failed answer that another student's or the reference key accepts."""

        problem = problem_of(answer_id)
        found = []
        references = [("the course data", problem_key(data, problem))]
        book = cached_reference(None)
        if data != book[0]:
            references.append(("the reference data of the book", problem_key(book[0], problem)))
        for whose, other in references:
            if answer_id in other and judge(answer_id, submitted, key=other, diagnose=False).passed:
                found.append(event("fits_reference", f"{answer_id}: the answer is wrong for this student's "
                                   f"data but right for {whose}", grade_id=answer_id, whose=whose))
                break
        stored = stored_class_keys(self.class_keys, data, problem) if self.class_keys else {}
        for classmate in self._classmates_of()[:MAX_CLASS]:
            other = stored.get(classmate) or student_key(data, classmate, [problem])
            if answer_id in other and judge(answer_id, submitted, key=other, diagnose=False).passed:
                found.append(event("fits_other_student", f"{answer_id}: the answer is wrong for this student's "
                                   f"data but right for the data of {classmate}", grade_id=answer_id,
                                   whose=classmate))
        return found

    def preprocess_cell(self, cell, resources, cell_index):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
            return cell, resources
        match = HAND_IN.search(cell.source)
        if match is None:
            if "hand_in(" in cell.source:  # an answer cell whose id the grader cannot read earns nothing
                return self._unreadable_id(cell, float(meta["points"])), resources
            return cell, resources
        answer_id = match.group(1)
        data, key = self._key_for(answer_id)  # the student's own key when switched on
        payload = handed_in(cell, answer_id)
        max_points = float(meta["points"])
        if payload is None:
            errors = [o for o in cell.outputs if o.get("output_type") == "error"]
            note = (f"{answer_id}: no value reached the grader; the cell stopped before hand_in"
                    + (" (see the error above)." if errors else "."))
            cell.outputs = errors + [self._error(note)]
            verdict = Verdict(False, note, "not_handed_in")
        else:
            if "text" in payload:
                submitted = payload["text"]
            elif "value" in payload:
                submitted = payload["value"]
            else:
                submitted = object()
            verdict = judge(answer_id, submitted, key=key, data=data)
            # a wrong answer that fits someone else's numbers goes to the integrity report
            if (not verdict.passed and getattr(self, "_student", None) is not None
                    and verdict.diagnosis not in ("not_numeric", "not_text", "not_finite", "shape")
                    and variants_on(data)):
                for found in self._fits_others(answer_id, submitted, data):
                    self._events.append({**found, "cell": cell_index})
            message = f"{answer_id}: {verdict.message}"
            # the student's feedback page shows these outputs; the points come from the verdict
            cell.outputs = ([new_output("stream", name="stdout", text=message + "\n")] if verdict.passed
                            else [self._error(message)])
        verdict = dataclasses.replace(verdict, answer_id=answer_id, max_points=max_points)
        cell.metadata.setdefault("rbtutor", {})[VERDICT_KEY] = verdict.record()
        return cell, resources

    def _unreadable_id(self, cell, max_points: float):
        """A graded cell that hands in under an id not of the form ``p3.b.K``: 0 points, said why."""
        note = "the grader cannot read the answer id of this cell's hand_in (expected the form p3.b.K)"
        cell.outputs = [self._error(note)]
        verdict = Verdict(False, note, "not_handed_in", None, max_points)
        cell.metadata.setdefault("rbtutor", {})[VERDICT_KEY] = verdict.record()
        return cell

    @staticmethod
    def _error(message: str):
        return new_output("error", ename="AnswerNotAccepted", evalue=message,
                          traceback=[f"AnswerNotAccepted: {message}"])

