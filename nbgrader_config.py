"""nbgrader configuration of the rbtutor course (read by every nbgrader command run here).

Sources are in exercises/ (one assignment per problem, problem01 ... problem10);
the exchange is the folder exchange/ of the course unless RBTUTOR_EXCHANGE names
another. Autograding runs the student's notebook in the kernel
rbtutor.student_kernel (confined by bubblewrap: no network, course files hidden,
memory and processes bounded; no rbtutor; AUTOGRADING set) and then judges the
handed-in values in this process with rbtutor.autograde.JudgeAnswers.
"""

import os
from pathlib import Path

from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    ClearOutput,
    IgnorePattern,
    LimitOutput,
    OverwriteKernelspec,
    SaveAutoGrades,
)

from rbtutor import student_kernel
from rbtutor.autograde import JudgeAnswers
from rbtutor.harness import BoundedExecute, CapOutput, RestoreCells, ScanSubmission

c = get_config()  # noqa: F821 - provided by nbgrader when it loads this file

ROOT = Path(__file__).resolve().parent
c.CourseDirectory.root = str(ROOT)
c.CourseDirectory.course_id = "rbtutor"
c.CourseDirectory.source_directory = "exercises"
# Several grading processes write to the gradebook at once (make grade): wait for the lock.
c.CourseDirectory.db_url = os.environ.get("RBTUTOR_GRADEBOOK", f"sqlite:///{ROOT / 'gradebook.db'}?timeout=120")
c.Exchange.root = os.environ.get("RBTUTOR_EXCHANGE", str(ROOT / "exchange"))

c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

c.JudgeAnswers.data_file = str(ROOT / "exercises" / "problem_data.yaml")
c.Execute.kernel_name = student_kernel.install()
# The kernel is confined by bubblewrap (rbtutor/student_kernel.py): no network, so the
# kernel talks to nbgrader over IPC sockets in a private folder instead of TCP.
c.KernelManager.transport = "ipc"
c.KernelManager.ip = student_kernel.ipc_prefix()
# Before execution: every cell the gradebook knows gets back its type, flags, points and
# (locked cells) source; deleted test cells come back; duplicates are defused; then the
# submission is scanned for suspicious code (rbtutor/harness.py, integrity/ and the report).
c.Autograde.sanitize_preprocessors = [
    ClearOutput,
    OverwriteKernelspec,
    RestoreCells,
    ScanSubmission,
    CheckCellMetadata,
]
# Execution bounded per cell (Execute.timeout) and per notebook, surviving a dead kernel;
# output capped in bytes; then the handed-in values are judged here, not in the kernel.
c.Autograde.autograde_preprocessors = [
    BoundedExecute,
    CapOutput,
    JudgeAnswers,
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    SaveAutoGrades,
    AssignLatePenalties,
    CheckCellMetadata,
]
c.Execute.timeout = 120
c.BoundedExecute.notebook_timeout = 300
