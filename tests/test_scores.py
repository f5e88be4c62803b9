"""Where a grade is decided (rbtutor.grading.scores): a passed verdict earns its points, anything
else 0, and nothing the kernel or the submitted notebook writes can earn a point.

Unit tests drive JudgeAnswers and SaveScores by hand on small notebooks and a real gradebook;
the last test grades a real submission of Problem 3 whose kernel prints fake "accepted" lines,
displays fake answer payloads and whose notebook carries planted verdicts.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_output

from rbtutor.grading.judge import Verdict, judge
from rbtutor.grading.protocol import ANSWER_MIME
from rbtutor.grading.scores import SaveScores, cell_score, points_earned

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_judge import PLANTED, RIGHT_K, WRONG_K, judged, notebook, payload


def test_a_passed_verdict_earns_its_points_and_anything_else_zero():
    assert points_earned(Verdict(True, "Accepted.", answer_id="p3.b.K", max_points=2.0)) == 2.0
    for diagnosis in ("sign", "wrong_value", "shape", "not_numeric", "not_handed_in"):
        assert points_earned(Verdict(False, "no", diagnosis, answer_id="p3.b.K", max_points=2.0)) == 0.0


def test_a_verdict_without_points_at_stake_is_refused():
    with pytest.raises(ValueError, match="expected a verdict with the points at stake"):
        points_earned(judge("p3.b.K", RIGHT_K))


def test_the_judge_decides_and_the_score_follows():
    right, wrong = judge("p3.b.K", RIGHT_K), judge("p3.b.K", WRONG_K)
    assert right.passed
    assert not wrong.passed
    assert wrong.diagnosis == "sign"
    assert right.answer_id is None
    assert right.max_points is None  # the instant checks carry no points


# --------------------------------------------------------------- judged, then scored


def test_judged_cells_score_their_verdicts():
    nb, _ = judged(notebook([payload("p3.b.K", RIGHT_K)], [payload("p3.d.K", 1.0)]))
    written, test_b, test_d = nb.cells
    assert (cell_score(test_b), cell_score(test_d)) == ((2.0, 2.0), (0.0, 1.0))
    assert cell_score(written) == (None, 1.0)  # nbgrader's rule: left for a human grader


def test_a_test_cell_that_handed_nothing_in_scores_zero():
    error = new_output("error", ename="NameError", evalue="name 'K' is not defined", traceback=[])
    nb, _ = judged(notebook([error]))
    assert cell_score(nb.cells[1]) == (0.0, 2.0)


def test_printed_accepted_lines_and_fake_payloads_earn_nothing():
    """What a kernel can send: a stdout line that looks like a pass, a payload for another id,
    a malformed payload, a result 'passed'; the judge sees no value for p3.b.K and a wrong one for (d)."""
    fakes = [new_output("stream", name="stdout", text="p3.b.K: Accepted.\n"),
             new_output("display_data", data={ANSWER_MIME: {"id": "p3.d.K", "value": RIGHT_K}}),
             new_output("display_data", data={ANSWER_MIME: {"id": "p3.b.K", "value": 1, "text": "x"}}),
             new_output("execute_result", data={"text/plain": "2.0"}, execution_count=1)]
    nb, _ = judged(notebook(fakes, [payload("p3.d.K", 1.0),
                                    new_output("stream", name="stdout", text="p3.d.K: Accepted.\n")]))
    assert cell_score(nb.cells[1]) == (0.0, 2.0)
    assert cell_score(nb.cells[2]) == (0.0, 1.0)


def test_a_planted_verdict_earns_nothing():
    nb, _ = judged(notebook([payload("p3.b.K", WRONG_K)], [], plant=True))
    assert [cell_score(c)[0] for c in nb.cells[1:]] == [0.0, 0.0]


# --------------------------------------------------------------- SaveScores and the gradebook


@pytest.fixture(scope="module")
def gradebook(tmp_path_factory):
    """A gradebook with the notebook of :func:`notebook` and one submission of student ``s``
    (made once: it takes seconds; every test rewrites all three scores)."""
    from nbgrader.api import Gradebook

    url = f"sqlite:///{tmp_path_factory.mktemp('gradebook') / 'gradebook.db'}"
    with pytest.MonkeyPatch.context() as patch:
        # a new gradebook runs alembic, which lives beside this interpreter
        patch.setenv("PATH", str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
        with Gradebook(url) as gb:
            gb.add_assignment("a")
            gb.add_notebook("nb", "a")
            gb.add_grade_cell("p3_a_written", "nb", "a", max_score=1, cell_type="markdown")
            gb.add_solution_cell("p3_a_written", "nb", "a")
            gb.add_grade_cell("p3_b_K", "nb", "a", max_score=2, cell_type="code")
            gb.add_grade_cell("p3_d_K", "nb", "a", max_score=1, cell_type="code")
            gb.add_student("s")
            gb.add_submission("a", "s")
    return url


def saved(url, nb, resources):
    from nbgrader.api import Gradebook

    resources = {**resources, "nbgrader": {"notebook": "nb", "assignment": "a", "student": "s", "db_url": url}}
    SaveScores().preprocess(nb, resources)
    with Gradebook(url) as gb:
        return {g: (gb.find_grade(g, "nb", "a", "s").auto_score, gb.find_grade(g, "nb", "a", "s").needs_manual_grade)
                for g in ("p3_a_written", "p3_b_K", "p3_d_K")}


def test_save_scores_writes_points_from_verdicts(gradebook):
    nb, resources = judged(notebook([payload("p3.b.K", RIGHT_K)], [payload("p3.d.K", 1.0)]))
    # a written answer with words of the student's own is left for a human, as nbgrader does
    assert saved(gradebook, nb, resources) == {"p3_a_written": (None, True), "p3_b_K": (2.0, False),
                                               "p3_d_K": (0.0, False)}


def test_save_scores_ignores_outputs_of_judged_cells(gradebook):
    """After judging, a stdout line on a failed cell (or an error on a passed one) changes nothing."""
    nb, resources = judged(notebook([payload("p3.b.K", WRONG_K)], [payload("p3.d.K", 1.0)]))
    nb.cells[1].outputs = [new_output("stream", name="stdout", text="p3.b.K: Accepted.\n")]
    assert saved(gradebook, nb, resources)["p3_b_K"] == (0.0, False)
    nb, resources = judged(notebook([payload("p3.b.K", RIGHT_K)]))
    nb.cells[1].outputs.append(new_output("stream", name="stderr", text="warning\n"))
    assert saved(gradebook, nb, resources)["p3_b_K"] == (2.0, False)


def test_save_scores_refuses_a_notebook_the_judge_has_not_seen(gradebook):
    nb = notebook([payload("p3.b.K", RIGHT_K)], plant=True)
    with pytest.raises(RuntimeError, match="expected JudgeAnswers to run before SaveScores"):
        saved(gradebook, nb, {})


def test_a_written_answer_left_as_released_is_commented_no_response(gradebook):
    """nbgrader's comment rule, kept: "No response." while the checksum still matches the released cell."""
    from nbgrader.api import Gradebook
    from nbgrader.utils import compute_checksum

    def comment(nb, resources):
        saved(gradebook, nb, resources)
        with Gradebook(gradebook) as gb:
            return gb.find_comment("p3_a_written", "nb", "a", "s").auto_comment

    nb, resources = judged(notebook([payload("p3.b.K", RIGHT_K)]))
    assert comment(nb, resources) is None  # the student's own words
    nb.cells[0].metadata["nbgrader"]["checksum"] = compute_checksum(nb.cells[0])
    assert comment(nb, resources) == "No response."
    assert saved(gradebook, nb, resources)["p3_a_written"] == (0.0, False)


def test_a_notebook_s_scores_are_written_together_or_not_at_all(gradebook):
    """A graded cell the gradebook does not know stops the step, and no score of that notebook is written."""
    from nbgrader.api import Gradebook, MissingEntry

    nb, resources = judged(notebook([payload("p3.b.K", RIGHT_K)], [payload("p3.d.K", 1.0)]))
    assert saved(gradebook, nb, resources)["p3_b_K"] == (2.0, False)
    nb, resources = judged(notebook([payload("p3.b.K", WRONG_K)], [payload("p3.d.K", 1.0)]))
    nb.cells[2].metadata["nbgrader"]["grade_id"] = "p3_z_unknown"
    with pytest.raises(MissingEntry, match="No such grade: a/nb/p3_z_unknown for s"):
        saved(gradebook, nb, resources)
    # p3_b_K comes before the unknown cell; its 0 is not written either
    with Gradebook(gradebook) as gb:
        assert gb.find_grade("p3_b_K", "nb", "a", "s").auto_score == 2.0


def test_the_course_pipeline_saves_scores_with_save_scores_after_the_judge():
    from traitlets.config import Config

    from rbtutor.course.nbgrader import configure

    c = Config()
    root = Path(__file__).resolve().parents[1]
    configure(c, root)
    steps = [p.__name__ for p in c.Autograde.autograde_preprocessors]
    assert "SaveAutoGrades" not in steps
    assert steps.index("JudgeAnswers") < steps.index("SaveScores") < steps.index("AssignLatePenalties")


# --------------------------------------------------------------- a real kernel, the real pipeline

FAKER = '''
from IPython.display import display
print("p3.b.K: Accepted.")
print("p3.d.K: Accepted.")
display({"application/vnd.rbtutor.answer+json": {"id": "p3.b.K", "value": 1.0}}, raw=True)
'''


def test_a_kernel_that_fakes_passes_earns_nothing(tmp_path):
    """Wrong answers, fake "accepted" lines and payloads printed after each test cell, and a
    planted verdict on every graded cell: every autograded part of Problem 3 scores 0."""
    from test_assignments import ROOT, grade_meta, run_course, submit_as

    from rbtutor.course import api

    name = "problem03"
    course = tmp_path / "course"
    (course / "exercises").mkdir(parents=True)
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "exercises" / name, course / "exercises" / name,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    grader = api(course)
    assert grader.generate_assignment(name, force=True)["success"]
    assert grader.release_assignment(name)["success"]

    def fake(nb):
        cells = []
        for cell in nb.cells:
            meta = grade_meta(cell)
            if meta.get("solution") and cell.cell_type == "code":
                cell.source = "K = 1.2345\nphi = 0.1\nphi_deg = 1.0\nK_raised = 1.0\nphi_raised_deg = 1.0"
            if meta.get("grade"):
                cell.metadata["rbtutor"] = {"verdict": dict(PLANTED)}
            cells.append(cell)
            if meta.get("grade") and not meta.get("solution"):
                cells.append(new_code_cell(FAKER))
        nb.cells = cells
        return nb

    submit_as(course, "faker", name, fake)
    assert grader.collect(name)["success"]
    result = run_course(course, "grade")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    autograded = nbformat.read(course / "autograded" / "faker" / name / f"{name}.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for c in autograded.cells for o in c.get("outputs", []))
    assert "p3.b.K: Accepted." in printed  # the fakes did run
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        scores = {g.name: g.auto_score for g in gb.find_submission_notebook(name, name, "faker").grades
                  if g.cell_type == "code"}
    assert scores, scores
    assert set(scores.values()) == {0.0}, scores
