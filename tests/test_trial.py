"""`rbtutor try`: a newcomer runs the whole loop of one assignment alone, with no hub and no set-up.

Run for real (release, fetch, answer, submit, collect, grade in the sandbox, feedback), as the
documented command with nothing but a folder: the pretend student gets every autograded point,
the written parts wait for a hand grade, and the feedback page comes back to the student.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import require_sandbox

RBTUTOR = Path(sys.executable).with_name("rbtutor")
ROOT = Path(__file__).resolve().parents[1]


def test_the_whole_loop_alone(tmp_path):
    from nbgrader.api import Gradebook

    require_sandbox()
    folder = tmp_path / "first-try"
    out = subprocess.run([str(RBTUTOR), "try", "problem03", "--into", str(folder)], cwd=ROOT,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert [line.split(" ...")[0] for line in out.stdout.splitlines() if line.startswith("[")] == [
        "[1/6] the instructor releases problem03",
        f"[2/6] learner fetches it into {folder / 'students' / 'learner' / 'problem03'}",
        "[3/6] learner answers every part with the worked solution, and submits",
        "[4/6] the instructor collects it",
        "[5/6] the instructor grades it (in the grading sandbox)",
        "[6/6] the feedback goes back, and learner fetches it"]
    with Gradebook(f"sqlite:///{folder / 'course' / 'gradebook.db'}") as gradebook:
        grades = gradebook.find_submission("problem03", "learner").notebooks[0].grades
        auto = [g for g in grades if g.auto_score is not None]
        written = [g for g in grades if g.needs_manual_grade]
        assert auto
        assert all(g.auto_score == g.max_score for g in auto)  # the worked solution earns every point
        assert written
    assert f"{len(written)} written part(s) wait for a hand grade" in out.stdout
    pages = list((folder / "students" / "learner" / "problem03" / "feedback").glob("*/problem03.html"))
    assert len(pages) == 1
    assert "learner" in pages[0].read_text()


@pytest.mark.parametrize(("args", "said"), [
    (("try", "problem99"), "no assignment 'problem99'"),
    (("try", "--into", "."), "is not empty; remove it or name another folder with --into"),
])
def test_a_bad_assignment_or_a_used_folder_is_refused_before_anything_is_made(args, said):
    out = subprocess.run([str(RBTUTOR), *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert said in out.stderr
