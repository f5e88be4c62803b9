"""THE hostile-submission suite: autograding survives broken and hostile notebooks (rbtutor.grading).

One scratch course (Problem 3 only) that uses the course's real nbgrader_config.py
as it is, with short time limits (``Execute.timeout`` per cell, ``BoundedExecute.
notebook_timeout`` per notebook), and ONE ``python -m rbtutor.course grade`` run over
a class of honest, broken and hostile students (table ``CASES`` below: what each
does, the points each autograded part of Problem 3 must get, and whether the
integrity report must name it). Everyone answers the code parts only (written
parts left blank), so no submission may be left "needs manual grade". Honest
students (plain, other valid forms, wrong answers, stderr) are graded on their
answers and are not in the report; broken ones (NaN, inf, empty, wrong shape) get
what their answers earn and are not in the report either (a mistake is not an
integrity matter); every hostile one gets exactly what its real answers earn and is
named in the report. Fast unit tests cover the output caps, the scanner, the report
and kernel deaths by signal.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_assignments import (
    ROOT,
    grade_meta,
    grade_of,
    reference_hits,
    reference_strings,
    run_course,
    submit_as,
)
from test_feedback import formgrader_page
from test_feedback_browser import browser, screenshot, visit  # noqa: F401 - browser is a fixture

from rbtutor.course.trial import own_work
from rbtutor.grading.execute import BoundedExecute
from rbtutor.grading.outputs import CapOutput
from rbtutor.grading.protocol import ANSWER_MIME
from rbtutor.grading.report import write_integrity_report
from rbtutor.grading.scan import scan_source

NAME = "problem03"
AUTOGRADED = {"p3_b_K": 2.0, "p3_c_phi_rad": 1.0, "p3_c_phi_deg": 1.0, "p3_d_K": 1.0, "p3_d_phi_deg": 1.0}
CELL_LIMIT = 10  # s, c.Execute.timeout
NOTEBOOK_LIMIT = 20  # s, c.BoundedExecute.notebook_timeout
# A safety net for the whole run, not the thing tested (that is the per-submission bound in
# test_wall_time_is_bounded: no submission holds a worker past the notebook limit plus 25 s, the
# kernel's start and stop and the feedback, with room for a machine busy with other work).
WALL_LIMIT = 900  # s

# The real course configuration as it is, plus short time limits only.
TEST_LIMITS = f"""

# --- short time limits, added by tests/test_harness.py ---
c.Execute.timeout = {CELL_LIMIT}
c.BoundedExecute.notebook_timeout = {NOTEBOOK_LIMIT}
"""


def source_nb():
    return nbformat.read(ROOT / "exercises" / NAME / f"{NAME}.ipynb", as_version=4)


def code_answered(nb, course=None):
    """The released notebook with the code answers of the reference solution; written parts blank."""
    solutions = {grade_meta(c)["grade_id"]: c.source for c in source_nb().cells if grade_meta(c).get("solution")}
    for cell in nb.cells:
        meta = grade_meta(cell)
        if meta.get("solution") and cell.cell_type == "code":
            lines = [line for line in solutions[meta["grade_id"]].splitlines()
                     if "### BEGIN" not in line and "### END" not in line]
            cell.source = own_work("\n".join(lines))
    return nb


def index_of(nb, grade_id):
    return next(i for i, c in enumerate(nb.cells) if grade_meta(c).get("grade_id") == grade_id)


# --------------------------------------------------------------- how a case answers
# Each builder returns answer(nb, course) -> nb, applied to the released notebook.


def honest():
    return code_answered


def append_to(grade_id, code, base=code_answered):
    """Answer cell ``grade_id`` of the reference answers with ``code`` appended."""
    def answer(nb, course):
        nb = base(nb, course)
        nb.cells[index_of(nb, grade_id)].source += "\n" + code.format(course=course)
        return nb
    return answer


def replace(grade_id, code, base=code_answered):
    """Answer cell ``grade_id`` replaced by ``code``."""
    def answer(nb, course):
        nb = base(nb, course)
        nb.cells[index_of(nb, grade_id)].source = code.format(course=course)
        return nb
    return answer


def insert_after(grade_id, *sources, base=code_answered):
    """New code cells after the cell ``grade_id``."""
    def answer(nb, course):
        nb = base(nb, course)
        at = index_of(nb, grade_id) + 1
        nb.cells[at:at] = [new_code_cell(s.format(course=course)) for s in sources]
        return nb
    return answer


def in_form(template):
    """Every handed-in variable converted by ``template`` just before its test cell, restored after."""
    def answer(nb, course):
        nb = code_answered(nb)
        out = []
        for cell in nb.cells:
            match = re.search(r"""^hand_in\(\s*["'][\w.]+["']\s*,\s*(\w+)\s*\)""", cell.source, re.M)
            if match and grade_meta(cell).get("grade"):
                var = match.group(1)
                out += [new_code_cell(f"_kept = {var}\n{var} = {template.format(v=var)}"), cell,
                        new_code_cell(f"{var} = _kept")]
            else:
                out.append(cell)
        nb.cells = out
        return nb
    return answer


def tamper(change, wrong=True):
    """Part (d)'s test cell changed by ``change(nb, cell)``, with K_raised wrong (or right)."""
    def answer(nb, course):
        nb = code_answered(nb)
        if wrong:
            nb.cells[index_of(nb, "p3_d_answer")].source += "\nK_raised = 1.0"
        change(nb, nb.cells[index_of(nb, "p3_d_K")])
        return nb
    return answer


def delete(nb, cell):
    nb.cells.remove(cell)


def duplicate_and_edit(nb, cell):
    copy = nbformat.from_dict(json.loads(json.dumps(cell)))
    copy.source = "pass"
    nb.cells.insert(index_of(nb, "p3_d_K") + 1, copy)


def to_markdown(nb, cell):
    cell.cell_type = "markdown"
    cell.pop("outputs", None)
    cell.pop("execution_count", None)


def flip_grade(nb, cell):
    cell.metadata.nbgrader["grade"] = False
    cell.metadata.nbgrader.pop("points", None)


def raise_points(nb, cell):
    cell.metadata.nbgrader["points"] = 100


def edit_to_pass(nb, cell):
    cell.source = "pass"


def forge_checksum(nb, cell):
    from nbgrader.utils import compute_checksum

    cell.source = "pass"
    cell.metadata.nbgrader["locked"] = False
    cell.metadata.nbgrader["checksum"] = compute_checksum(cell)


PATCHED = """
import builtins, math
np.isclose = lambda *a, **k: True
np.allclose = lambda *a, **k: True
math.isclose = lambda *a, **k: True
builtins.abs = lambda x: 0
K = 1.0
"""

ALWAYS_EQUAL = """
class AlwaysEqual(float):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = float.__hash__

K = AlwaysEqual(1.0)
"""

SILENCED = """
import sys
from IPython import get_ipython

sys.excepthook = lambda *a: None
shell = get_ipython()
shell.showtraceback = lambda *a, **k: None
shell.set_custom_exc((BaseException,), lambda *a, **k: None)
u, r = nu_turn[0], nu_turn[5]
K = "no idea"
"""

SNOOP = """
import socket

seen = {{}}
for what, path in [("exercises", "{course}/exercises/problem03/problem03.ipynb"),
                   ("classmate", "{course}/submitted/honest/problem03/problem03.ipynb")]:
    try:
        seen[what] = len(open(path).read())
    except OSError:
        seen[what] = "blocked"
try:
    with open("{course}/gradebook.db", "ab") as db:
        db.write(b"0wned")
    seen["gradebook"] = "written"
except OSError:
    seen["gradebook"] = "blocked"
try:
    socket.create_connection(("127.0.0.1", 22), timeout=2).close()
    seen["socket"] = "connected"
except OSError:
    seen["socket"] = "blocked"
print("SNOOP", sorted(seen.items()))
"""

FORK_LOOP = """
import os
import time

children = []
for _ in range(400):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(2)
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
print("forked", len(children))
"""

LINGER = """
import os
import time

if os.fork() == 0:  # a daemon: detached from the kernel, it would sleep for an hour
    os.setsid()
    if os.fork() == 0:
        time.sleep(3600)
    os._exit(0)
print("daemon started")
"""

STDERR = """
u, r = nu_turn[0], nu_turn[5]
K = np.complex128(-m * r_G[2] * u * r)  # e.g. from a complex root: the test cell warns on stderr
print("note: K came out complex with zero imaginary part", file=sys.stderr)
"""

WRONG_ALL = {"p3_b_K_answer": "u, r = nu_turn[0], nu_turn[5]\nK = 1.2345e5",
             "p3_c_phi_answer": "phi = 0.12345\nphi_deg = 12.345",
             "p3_d_answer": "K_raised = -1.2345e5\nphi_raised_deg = -12.345"}


def wrong_all(nb, course):
    nb = code_answered(nb)
    for grade_id, code in WRONG_ALL.items():
        nb.cells[index_of(nb, grade_id)].source = code
    return nb


PLANT_LINKS = """
import os

# the kernel replaces everything in its working folder by links into the course, hoping the
# grader writes, chmods or copies through them after the kernel ends
for name in os.listdir("."):
    os.remove(name)
for name, target in [("problem03.ipynb", "{course}/gradebook.db"), ("notes.html", "{course}/exercises"),
                     ("timestamp.txt", "{course}/nbgrader_config.py"), ("extra.txt", "/etc/shadow")]:
    os.symlink(target, name)
print("links planted")
"""

MALFORMED = """
kernel = get_ipython().kernel
kernel.iopub_socket.send_multipart([b"<IDS|MSG>", b"not-a-signature", b"{{", b"{{", b"{{", b"{{"])
import time
time.sleep(1)
"""

OVERSIZED = """
from IPython.display import display
display({{"text/plain": "z" * 100_000_000}}, raw=True)
"""

HTML_INJECTION = ("<script>document.title = 'pwned-markdown'</script>\n"
                  "<img src=x onerror=\"document.title='pwned-img'\">\n"
                  "<a href=\"javascript:document.title='pwned-link'\">click</a>\n\n"
                  "My working: $K = -m z_G u r$.")
HTML_OUTPUT = ("from IPython.display import HTML, Javascript, display\n"
               "display(HTML(\"<b>bold</b><script>document.title = 'pwned-output'</script>"
               "<svg onload=\\\"document.title='pwned-svg'\\\"></svg>\"))\n"
               "display(Javascript(\"document.title = 'pwned-js'\"))")


def html_injection(nb, course):
    nb = code_answered(nb)
    at = index_of(nb, "p3_b_K_answer")
    nb.cells[at:at] = [nbformat.v4.new_markdown_cell(HTML_INJECTION), new_code_cell(HTML_OUTPUT)]
    return nb


def source_copy(nb, course):
    """The instructor's source notebook itself, markers and all."""
    return source_nb()


def source_without_markers(nb, course):
    """The instructor's source with the solution markers taken out (model answers and all)."""
    nb = source_nb()
    for cell in nb.cells:
        cell.source = re.sub(r"^\s*### (BEGIN|END) SOLUTION\s*$\n?", "", cell.source, flags=re.M)
    return nb


def huge_cell(nb, course):
    nb = code_answered(nb)
    nb.cells.append(new_code_cell("x = 1\n" + "# " + "w" * 5_000_000))
    return nb


# What a student can leave in their exchange entry, applied after they submit: plant(entry, course)


def plant_link_to_source(entry: Path, course: Path) -> None:
    (entry / f"{NAME}.ipynb").unlink()
    (entry / f"{NAME}.ipynb").symlink_to(course / "exercises" / NAME / f"{NAME}.ipynb")


def plant_links_elsewhere(entry: Path, course: Path) -> None:
    (entry / "notes.txt").symlink_to(course / "gradebook.db")
    (entry / "data").symlink_to(course / "exercises")
    outside = course.parent / "outside-secret.txt"
    outside.write_text("OUTSIDE-SECRET")
    os.link(outside, entry / "key.yaml")


def plant_fifo(entry: Path, course: Path) -> None:
    os.mkfifo(entry / "pipe.txt")


def plant_flood(entry: Path, course: Path) -> None:
    for k in range(5000):
        (entry / f"zz{k:05d}.txt").write_text("x")


# --------------------------------------------------------------- THE table of cases


FULL = dict(AUTOGRADED)
ONLY_B = {"p3_b_K": 2.0}
ONLY_D = {"p3_d_K": 1.0, "p3_d_phi_deg": 1.0}
NOT_D = {k: v for k, v in FULL.items() if k != "p3_d_K"}


def without(*ids):
    return {k: v for k, v in FULL.items() if k not in ids}


HONEST, BROKEN, HOSTILE = "honest", "broken", "hostile"

# student: (kind, what it does, answer(nb, course), expected points per autograded grade id
#           (a missing id: 0), event kinds the integrity report must show for it;
#           the report names a student iff it is HOSTILE)
CASES = {
    # --- honest: graded on their answers, never named in the report
    "honest": (HONEST, "the reference answers", honest(), FULL, set()),
    "honest2": (HONEST, "the reference answers (the classmate `snoop` tries to read)", honest(), FULL, set()),
    "form_list": (HONEST, "every answer as a 1-element list", in_form("[float({v})]"), FULL, set()),
    "form_array1": (HONEST, "every answer as a 1-element array", in_form("np.array([{v}])"), FULL, set()),
    "form_npscalar": (HONEST, "every answer as np.float64", in_form("np.float64({v})"), FULL, set()),
    "form_0d": (HONEST, "every answer as a 0-d array", in_form("np.array({v})"), FULL, set()),
    "form_float32": (HONEST, "every answer as np.float32", in_form("np.float32({v})"), FULL, set()),
    "wrong_some": (HONEST, "K_raised and phi_deg wrong",
                   append_to("p3_d_answer", "K_raised = 1.0", base=append_to("p3_c_phi_answer", "phi_deg = 12.0")),
                   without("p3_d_K", "p3_c_phi_deg"), set()),
    "wrong_all": (HONEST, "every answer wrong (right form); its feedback is searched for reference values",
                  wrong_all, {}, set()),
    "stderr": (HONEST, "K handed in as complex128 (the test cell writes a ComplexWarning to stderr), "
               "the answer cell prints to stderr",
               insert_after("p3_b_K", "K = K.real", base=replace("p3_b_K_answer", STDERR)), FULL, set()),
    # --- broken: mistakes of form, graded on their answers, not named
    "nan_K": (BROKEN, "K = NaN (phi follows from K)", append_to("p3_b_K_answer", 'K = float("nan")'), ONLY_D, set()),
    "inf_K": (BROKEN, "K = inf (phi follows from K)", append_to("p3_b_K_answer", 'K = float("inf")'), ONLY_D, set()),
    "empty_phi": (BROKEN, "phi = empty array, phi_deg right",
                  replace("p3_c_phi_answer", "phi = np.array([])\nphi_deg = np.degrees(-K / (m * g * GM))"),
                  without("p3_c_phi_rad"), set()),
    "vector_K": (BROKEN, "K = [1, 2, 3] where a scalar is expected (phi follows from K)",
                 append_to("p3_b_K_answer", "K = np.array([1.0, 2.0, 3.0])"), ONLY_D, set()),
    # --- hostile: exactly what the real answers earn, named in the report
    "edits": (HOSTILE, "locked test cell of (d) K edited to `pass`, K_raised wrong", tamper(edit_to_pass),
              NOT_D, {"locked_edited"}),
    "inflates": (HOSTILE, "points of (d) K raised to 100, answers right", tamper(raise_points, wrong=False),
                 FULL, {"points_changed"}),
    "retypes": (HOSTILE, "test cell of (d) K made markdown, K_raised wrong", tamper(to_markdown),
                NOT_D, {"retyped"}),
    "forges": (HOSTILE, "test cell of (d) K edited, unlocked, checksum recomputed, K_raised wrong",
               tamper(forge_checksum), NOT_D, {"locked_edited", "checksum_forged", "reflagged"}),
    "unflags": (HOSTILE, "grade flag of (d) K flipped off, K_raised wrong", tamper(flip_grade),
                NOT_D, {"reflagged"}),
    "deletes": (HOSTILE, "test cell of (d) K deleted, K_raised wrong", tamper(delete), NOT_D, {"deleted"}),
    "duplicates": (HOSTILE, "edited (`pass`) duplicate of the test cell of (d) K, K_raised wrong",
                   tamper(duplicate_and_edit), NOT_D, {"duplicated"}),
    "always_equal": (HOSTILE, "K = float subclass whose __eq__ is always true (value 1.0)",
                     append_to("p3_b_K_answer", ALWAYS_EQUAL), ONLY_D, {"custom_comparison"}),
    "patched": (HOSTILE, "np.isclose/allclose, math.isclose, builtins.abs patched, K = 1.0",
                append_to("p3_b_K_answer", PATCHED), ONLY_D, {"patching"}),
    "data_reassigned": (HOSTILE, "`m = 1.0` before the answers: K and K_raised wrong for the real data "
                        "(phi, phi_deg, phi_raised_deg do not depend on m)",
                        replace("p3_b_K_answer", "m = 1.0\nu, r = nu_turn[0], nu_turn[5]\nK = -m * r_G[2] * u * r"),
                        without("p3_b_K", "p3_d_K"), {"data_reassigned"}),
    "silenced": (HOSTILE, "sys.excepthook, showtraceback and set_custom_exc swallow every error; "
                 "K a string, (c) unanswered", replace("p3_c_phi_answer", "raise NotImplementedError()",
                                                       base=replace("p3_b_K_answer", SILENCED)),
                 ONLY_D, {"patching", "dynamic_code"}),
    "sys_exit": (HOSTILE, "sys.exit() in a cell after (b)", insert_after("p3_b_K", "import sys\nsys.exit()"),
                 FULL, {"process"}),
    "os_exit": (HOSTILE, "os._exit(3) in a cell after (b)", insert_after("p3_b_K", "import os\nos._exit(3)"),
                ONLY_B, {"kernel_died", "cells_not_run", "process"}),
    "self_kill": (HOSTILE, "os.kill(os.getpid(), SIGKILL) after (b)",
                  insert_after("p3_b_K", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"),
                  ONLY_B, {"kernel_died", "cells_not_run", "process"}),
    "infinite_loop": (HOSTILE, "`while True: pass` in one cell after (b): interrupted at the cell timeout",
                      insert_after("p3_b_K", "while True:\n    pass"), FULL, {"cell_timeout"}),
    "slow": (HOSTILE, "200 cells of 0.5 s after (b): stopped at the notebook limit",
             insert_after("p3_b_K", *["import time\ntime.sleep(0.5)"] * 200), ONLY_B,
             {"time_limit", "cells_not_run"}),
    "floods": (HOSTILE, "a 50 MB line and a 5 MB HTML display", insert_after(
        "p3_b_K", 'print("x" * 50_000_000)',
        'from IPython.display import HTML, display\ndisplay(HTML("<p>" + "y" * 5_000_000))'),
        FULL, {"output_cut"}),
    "memory": (HOSTILE, "bytearray(64 GiB) in a cell after (b)",
               insert_after("p3_b_K", "hog = bytearray(64 * 2**30)"), FULL, {"memory_error"}),
    "fork_loop": (HOSTILE, "forks up to 400 children (each sleeps 2 s) after (b)",
                  insert_after("p3_b_K", FORK_LOOP), FULL, {"process"}),
    "lingers": (HOSTILE, "starts a detached daemon (double fork, setsid) sleeping for an hour after (b)",
                insert_after("p3_b_K", LINGER), FULL, {"process"}),
    "snoop": (HOSTILE, "reads exercises/ and a classmate's submission, writes the gradebook, "
              "connects to 127.0.0.1; answers right", insert_after("p3_b_K", SNOOP), FULL,
              {"process", "forbidden_path"}),
    # --- what the grading process itself is offered: files, links, copies, HTML, messages
    "links_source": (HOSTILE, "the submitted notebook is a symbolic link to the instructor's source",
                     honest(), {}, {"link_refused"}, plant_link_to_source),
    "copies_source": (HOSTILE, "the instructor's source notebook handed in as is (markers and all)",
                      source_copy, {}, {"source_copy"}),
    "copies_unmarked": (HOSTILE, "the instructor's source with the solution markers removed",
                        source_without_markers, {}, {"source_copy"}),
    "links_elsewhere": (HOSTILE, "right answers; beside the notebook a link to the gradebook, a link to "
                        "exercises/ and a hard link to a file outside", honest(), FULL,
                        {"link_refused", "hard_link_refused"}, plant_links_elsewhere),
    "fifo": (HOSTILE, "right answers and a fifo in the submission", honest(), FULL, {"special_file_refused"},
             plant_fifo),
    "file_flood": (HOSTILE, "right answers and 5000 extra files", honest(), FULL, {"too_many_files"},
                   plant_flood),
    "huge_cell": (HOSTILE, "right answers and a cell of 5 MB", huge_cell, FULL, {"cell_cut"}),
    "plants_links": (HOSTILE, "replaces its working folder's files by links into the course; answers right",
                     insert_after("p3_b_K", PLANT_LINKS), FULL, {"process"}),
    "html_injection": (HOSTILE, "scripts, event handlers and javascript: links in markdown and outputs; "
                       "answers right", html_injection, FULL, {"html_sanitised"}),
    "malformed": (HOSTILE, "sends a kernel message with a forged signature after (b)",
                  insert_after("p3_b_K", MALFORMED), ONLY_B, {"message_malformed", "cells_not_run"}),
    "oversized": (HOSTILE, "sends a 100 MB kernel message after (b)",
                  insert_after("p3_b_K", OVERSIZED), ONLY_B, {"kernel_unresponsive", "cells_not_run"}),
}

# cases whose report entry shows a bug of rbtutor (see the reason)
REPORT_BUGS: dict[str, str] = {}
POINTS_BUGS: dict[str, str] = {}


def _marked(student, bugs):
    if student in bugs:
        return pytest.param(student, marks=pytest.mark.xfail(strict=True, reason=bugs[student]))
    return student


@pytest.fixture(scope="module")
def hostile_class(tmp_path_factory):
    """Problem 3 released, submitted by every student of CASES, graded in ONE run."""
    from rbtutor.course import api

    tmp = tmp_path_factory.mktemp("harness")
    course = tmp / "course"
    (course / "exercises").mkdir(parents=True)
    (course / "nbgrader_config.py").write_text((ROOT / "nbgrader_config.py").read_text() + TEST_LIMITS)
    shutil.copytree(ROOT / "exercises" / NAME, course / "exercises" / NAME,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    grader = api(course)
    assert grader.generate_assignment(NAME, force=True)["success"]
    assert grader.release_assignment(NAME)["success"]
    for student, case in CASES.items():
        submit_as(course, student, NAME, lambda nb, answer=case[2]: answer(nb, course))
        if len(case) > 5:
            entry = next((course / "exchange" / "rbtutor" / "inbound").glob(f"{student}+{NAME}+*"))
            case[5](entry, course)
    collected = run_course(course, "collect", NAME)
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-3000:]
    start = time.perf_counter()
    result = run_course(course, "grade")
    seconds = time.perf_counter() - start
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = course / "integrity_report.md"
    assert f"integrity report: {report}" in result.stdout
    return course, report, result.stdout, seconds


def autograded(course, student):
    return nbformat.read(course / "autograded" / student / NAME / f"{NAME}.ipynb", as_version=4)


def printed(course, student) -> str:
    """The text the student's code printed while graded (stream outputs of all code cells)."""
    nb = autograded(course, student)
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)


@pytest.mark.parametrize("student", [_marked(s, POINTS_BUGS) for s in CASES])
def test_points_are_what_the_real_answers_earn(hostile_class, student):
    from nbgrader.api import Gradebook

    course, _, _, _ = hostile_class
    expected = CASES[student][3]
    got = {gid: grade_of(course, NAME, student, gid) for gid in AUTOGRADED}
    assert got == {gid: (expected.get(gid, 0.0), top) for gid, top in AUTOGRADED.items()}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        submission = gradebook.find_submission(NAME, student)
        assert not submission.needs_manual_grade, [g.name for g in submission.grades if g.needs_manual_grade]
        assert submission.max_score == 13.0


@pytest.mark.parametrize("student", [_marked(s, REPORT_BUGS) for s in CASES])
def test_integrity_report_names_the_hostile_only(hostile_class, student):
    course, report, _, _ = hostile_class
    entries = {e["student"]: e for e in json.loads((course / "integrity_report.json").read_text())}
    kind, _, _, _, kinds = CASES[student][:5]
    entry = entries[student]
    seen = {e["kind"] for e in entry["events"]}
    text = report.read_text()
    if kind == HOSTILE:
        assert entry["suspicious"], seen
        assert kinds <= seen, seen
        assert f"## {student} / {NAME}\n\n| notebook" in text
    else:
        assert not entry["suspicious"], entry["events"]
        assert entry["events"] == [], entry["events"]
        assert f"## {student} / {NAME}\n\nnothing suspicious" in text


def test_report_lists_the_whole_class(hostile_class):
    course, report, _, _ = hostile_class
    entries = json.loads((course / "integrity_report.json").read_text())
    assert {e["student"] for e in entries} == set(CASES)
    assert all(e["scanned"] for e in entries)
    text = report.read_text()
    assert "np.isclose =" in text
    assert "gradebook.db" in text
    assert "p3_d_K" in text


def test_wall_time_is_bounded(hostile_class):
    _, _, log, seconds = hostile_class
    assert seconds < WALL_LIMIT, log
    for line in log.splitlines():
        match = re.match(r"\[\d+/\d+\] (\w+) problem03: .* \(([\d.]+) s\)$", line)
        if match:  # kernel start, the notebook limit, feedback: no submission takes much longer
            assert float(match.group(2)) < NOTEBOOK_LIMIT + 25, line


def test_slow_notebook_is_cut_at_the_notebook_limit(hostile_class):
    course, _, _, _ = hostile_class
    not_run = [c for c in autograded(course, "slow").cells if c.cell_type == "code" and any(
        o.get("ename") == "NotRun" and f"time limit of {NOTEBOOK_LIMIT} s" in o.get("evalue", "")
        for o in c.outputs)]
    assert len(not_run) > 150


def test_infinite_loop_is_stopped_at_the_cell_timeout(hostile_class):
    course, _, _, _ = hostile_class
    nb = autograded(course, "infinite_loop")
    loop = nb.cells[index_of(nb, "p3_b_K") + 1]
    assert "while True" in loop.source
    assert [o.get("ename") for o in loop.outputs] == ["KeyboardInterrupt", "CellTimeoutError"], loop.outputs
    later = nb.cells[index_of(nb, "p3_d_phi_deg")]
    assert later.execution_count
    assert later.outputs[0].text == "p3.d.phi_deg: Correct.\n"


def test_kernel_death_keeps_earlier_outputs(hostile_class):
    course, _, _, _ = hostile_class
    for student, reason in (("os_exit", "it exited with status 3"), ("self_kill", "SIGKILL")):
        nb = autograded(course, student)
        assert nb.cells[index_of(nb, "p3_b_K")].outputs[0].output_type == "stream"
        later = nb.cells[index_of(nb, "p3_c_phi_rad")]
        assert "the kernel died" in str(later.outputs), student
        assert reason in str(nb.cells), student


def test_floods_are_cut(hostile_class):
    course, _, _, _ = hostile_class
    path = course / "autograded" / "floods" / NAME / f"{NAME}.ipynb"
    assert path.stat().st_size < 1_500_000
    assert "output cut" in path.read_text()


def test_snoop_is_blocked_by_the_sandbox(hostile_class):
    course, _, _, _ = hostile_class
    text = printed(course, "snoop")
    line = next(line for line in text.splitlines() if line.startswith("SNOOP"))
    assert line == ("SNOOP [('classmate', 'blocked'), ('exercises', 'blocked'), "
                    "('gradebook', 'blocked'), ('socket', 'blocked')]"), line
    assert b"0wned" not in (course / "gradebook.db").read_bytes()


def test_fork_loop_is_bounded(hostile_class):
    course, _, _, _ = hostile_class
    text = printed(course, "fork_loop")
    forked = int(re.search(r"forked (\d+)", text).group(1))
    assert forked < 400, "the process limit stopped the loop"


def _sandboxed_processes() -> list[str]:
    """Command lines of live processes started for a grading kernel (its argv names the sandbox's
    connection file; children inherit it), and, when grading as root, of any sandbox uid."""
    from rbtutor.grading.sandbox import SANDBOX_UID_BASE

    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            uid = proc.stat().st_uid
        except OSError:
            continue
        if "-sandbox.json" in cmdline or (os.getuid() == 0 and uid >= SANDBOX_UID_BASE):
            found.append(f"{proc.name} uid {uid}: {cmdline[:200]}")
    return found


def test_no_process_outlives_grading(hostile_class):
    course, _, _, _ = hostile_class
    assert "daemon started" in printed(course, "lingers")
    deadline = time.monotonic() + 10
    while (left := _sandboxed_processes()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, left


def test_failing_submission_feedback_leaks_no_reference(hostile_class):
    course, _, _, _ = hostile_class
    html = (course / "feedback" / "wrong_all" / NAME / f"{NAME}.html").read_text()
    assert html.count("<strong>Not accepted:</strong>") >= len(AUTOGRADED)
    text = re.sub(r"<(style|script)\b.*?</\1>", "", html, flags=re.S)
    hits = reference_hits(reference_strings(), text)
    assert not hits, hits[:10]


def test_stderr_does_not_cost_points(hostile_class):
    """nbgrader alone scores a graded cell with stderr output 0; JudgeAnswers rewrites test-cell outputs."""
    from nbgrader.utils import determine_grade

    course, _, _, _ = hostile_class
    nb = autograded(course, "stderr")
    answer = nb.cells[index_of(nb, "p3_b_K_answer")]
    assert [o.get("name") for o in answer.outputs] == ["stderr"]
    assert "complex" in answer.outputs[0].text
    test_b = nb.cells[index_of(nb, "p3_b_K")]
    assert [o.get("name") for o in test_b.outputs] == ["stdout"], test_b.outputs
    assert determine_grade(test_b) == (2.0, 2.0)
    warned = nbformat.from_dict(json.loads(json.dumps(test_b)))
    warned.outputs.append(new_output("stream", name="stderr", text="ComplexWarning: ...\n"))
    assert determine_grade(warned) == (0, 2.0)


def test_regrading_replaces_the_events(hostile_class):
    from rbtutor.course import api

    course, _, _, _ = hostile_class
    path = course / "integrity" / "deletes" / NAME / f"{NAME}.json"
    before = json.loads(path.read_text())["stages"]
    assert api(course).autograde(NAME, "deletes", force=True)["success"]
    assert json.loads(path.read_text())["stages"] == before


# ----------------------------------------------------------------- unit tests, no course


def test_reference_solutions_are_not_suspicious():
    for path in sorted((ROOT / "exercises").glob("problem*/*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code" and not grade_meta(cell).get("locked"):
                assert scan_source(cell.source) == [], (path.name, cell.source[:200])


@pytest.mark.parametrize(("source", "category"), [
    ("np.isclose = lambda *a, **k: True", "patching"),
    ("setattr(np, 'allclose', f)", "patching"),
    ("__builtins__['abs'] = f", "patching"),
    ("class A(float):\n    def __eq__(self, other):\n        return True", "custom_comparison"),
    ("import subprocess\nsubprocess.run(['ls'])", "process"),
    ("import os\nos.system('ls')", "process"),
    ("import ctypes\nctypes.string_at(0)", "process"),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "process"),
    ("import sys\nsys.exit(0)", "process"),
    ("text = open('../exercises/problem03/problem03.ipynb').read()", "forbidden_path"),
    ("import sqlite3\nsqlite3.connect('gradebook.db')", "forbidden_path"),
])
def test_scan_source_flags(source, category):
    assert category in {c for c, _ in scan_source(source)}


def test_scan_source_ignores_comments_and_plain_code():
    assert scan_source("# np.isclose = f, os.system\nK = -m * r_G[2] * u * r\nx = np.isclose(a, b)") == []


def _nb_with_outputs(*outputs):
    cell = new_code_cell("x", metadata={"nbgrader": {"grade_id": "t", "grade": True, "points": 1}})
    cell.outputs = list(outputs)
    return new_notebook(cells=[cell])


def test_cap_output_cuts_text_and_drops_big_displays_but_keeps_answers():
    answer = new_output("display_data", data={ANSWER_MIME: {"id": "p3.b.K", "value": 1.0}, "text/plain": "ok"})
    nb = _nb_with_outputs(new_output("stream", name="stdout", text="x" * 5_000_000),
                          new_output("display_data", data={"image/png": "A" * 500_000, "text/plain": "<img>"}),
                          answer)
    nb, resources = CapOutput().preprocess(nb, {"nbgrader": {}})
    outputs = nb.cells[0].outputs
    assert len(outputs[0].text.encode()) < 100_200
    assert "output cut at 100000 bytes" in outputs[0].text
    assert "image/png" not in outputs[1].data
    assert "dropped" in outputs[2].text
    assert outputs[-1].data[ANSWER_MIME] == {"id": "p3.b.K", "value": 1.0}
    assert {e["kind"] for e in resources["rbtutor"]["events"]} == {"output_cut", "output_dropped"}


def test_cap_output_drops_an_absurd_answer_payload():
    big = new_output("display_data", data={ANSWER_MIME: {"id": "p3.b.K", "value": [1.0] * 400_000}})
    nb, resources = CapOutput().preprocess(_nb_with_outputs(big), {"nbgrader": {}})
    assert ANSWER_MIME not in json.dumps(nb.cells[0].outputs)
    assert resources["rbtutor"]["events"][0]["kind"] == "answer_dropped"


def test_cap_output_per_notebook_budget():
    cells = []
    for _ in range(30):
        cell = new_code_cell("print()")
        cell.outputs = [new_output("stream", name="stdout", text="z" * 90_000)]
        cells.append(cell)
    nb, _ = CapOutput().preprocess(new_notebook(cells=cells), {"nbgrader": {}})
    total = sum(len(o.text) for c in nb.cells for o in c.outputs)
    assert total < 1_000_000 + 30 * 100


@pytest.mark.parametrize(("code", "reason"), [
    ("import ctypes\nctypes.string_at(0)", "SIGSEGV"),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "SIGKILL"),
])
def test_kernel_death_by_signal(tmp_path, code, reason):
    nb = new_notebook(cells=[new_code_cell("print('before')"), new_code_cell(code), new_code_cell("print('after')")])
    resources = {"nbgrader": {"student": "s", "assignment": "a", "notebook": "n"}}
    runner = BoundedExecute(kernel_name="python3", report_dir=str(tmp_path))
    nb, resources = runner.preprocess(nb, resources)
    assert nb.cells[0].outputs[0].text == "before\n"
    assert reason in nb.cells[1].outputs[-1].evalue
    assert "not run: the kernel died" in nb.cells[2].outputs[0].evalue
    kinds = [e["kind"] for e in resources["rbtutor"]["events"]]
    assert kinds == ["kernel_died", "cells_not_run"]
    stored = json.loads((tmp_path / "s" / "a" / "n.json").read_text())
    assert [e["kind"] for e in stored["stages"]["execute"]] == kinds


def test_report_from_records(tmp_path):
    records = [{"student": "a", "assignment": "p", "notebook": "p", "stages": {"scan": []}},
               {"student": "b", "assignment": "p", "notebook": "p", "stages": {"restore": [
                   {"kind": "deleted", "message": "'t' was missing | put back", "cell": 3, "grade_id": "t"}]}}]
    path = write_integrity_report(tmp_path, records)
    text = path.read_text()
    assert "## a / p\n\nnothing suspicious" in text
    assert "| p | 3 | t | deleted | 't' was missing \\| put back |" in text
    assert (tmp_path / "integrity_report.json").exists()


# --------------------------------------------------------------- what the grading process was offered


def _digest(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_grading_changed_nothing_outside_the_students_folders(hostile_class):
    """Links planted in the exchange and in the kernel's folder wrote, chmodded or replaced nothing."""
    from nbgrader.api import Gradebook

    course, _, _, _ = hostile_class
    source = Path("exercises") / NAME / f"{NAME}.ipynb"
    assert _digest(course / source) == _digest(ROOT / source)
    assert (course / "nbgrader_config.py").read_text().startswith((ROOT / "nbgrader_config.py").read_text())
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:  # still a gradebook, whole
        assert len(gradebook.find_assignment(NAME).submissions) == len(CASES)
    assert (course.parent / "outside-secret.txt").read_text() == "OUTSIDE-SECRET"
    assert oct((course / "gradebook.db").stat().st_mode & 0o777) == oct(0o644)


def test_no_link_and_no_special_file_reaches_the_grader_s_folders(hostile_class):
    course, _, _, _ = hostile_class
    for folder in ("submitted", "autograded", "feedback", ".grading"):
        for path in (course / folder).rglob("*"):
            assert not path.is_symlink(), path
            assert path.is_dir() or path.is_file(), path
            if path.is_file():
                assert path.stat().st_nlink == 1, path


def test_feedback_folders_hold_only_what_the_grader_wrote(hostile_class):
    course, _, _, _ = hostile_class
    secrets = ["OUTSIDE-SECRET", "SQLite format", "BEGIN SOLUTION", "c = get_config"]
    for student in CASES:
        folder = course / "feedback" / student / NAME
        assert sorted(p.name for p in folder.iterdir()) <= sorted([f"{NAME}.html", "timestamp.txt",
                                                                   "submission_secret.txt"]), student
        for path in folder.iterdir():
            text = path.read_text(errors="replace")
            assert not any(secret in text for secret in secrets), (student, path.name)


@pytest.mark.parametrize("student", ["copies_source", "copies_unmarked", "links_source"])
def test_a_copy_of_the_source_earns_nothing_and_its_text_is_not_graded(hostile_class, student):
    course, _, _, _ = hostile_class
    nb = autograded(course, student)
    assert "BEGIN SOLUTION" not in json.dumps(nb)
    written = [c for c in nb.cells if grade_meta(c).get("solution") and c.cell_type == "markdown"]
    assert written
    assert all("YOUR ANSWER HERE" in c.source for c in written)


def test_oversized_and_malformed_messages_end_the_notebook_where_they_were_sent(hostile_class):
    course, _, _, _ = hostile_class
    for student in ("malformed", "oversized"):
        outputs = [o for c in autograded(course, student).cells if c.cell_type == "code" for o in c.outputs]
        assert any(o.get("ename") == "NotRun" for o in outputs), student
        assert not any("z" * 1000 in o.get("text", "") for o in outputs), student


def test_injected_html_is_gone_from_the_autograded_notebook_and_the_feedback(hostile_class):
    from bs4 import BeautifulSoup

    course, _, _, _ = hostile_class
    nb = autograded(course, "html_injection")
    # what a browser renders of the stored notebook: markdown cells and outputs
    stored = json.dumps([c.source for c in nb.cells if c.cell_type == "markdown"]
                        + [c.get("outputs", []) for c in nb.cells])
    assert "<script" not in stored
    assert "onerror" not in stored
    assert "onload" not in stored
    assert "javascript:" not in stored
    assert "application/javascript" not in stored
    page = (course / "feedback" / "html_injection" / NAME / f"{NAME}.html").read_text()
    soup = BeautifulSoup(page, "html.parser")
    assert not soup.find_all(["script", "iframe", "object", "embed", "form"])
    for tag in soup.find_all(True):
        assert not [a for a in tag.attrs if a.lower().startswith("on")], tag
        assert "javascript:" not in str(tag.get("href", "")), tag
    assert soup.find("math") is not None  # the student's formula still renders


def test_injected_html_runs_nothing_in_a_browser(hostile_class, browser, tmp_path):  # noqa: F811 - fixture
    """The real feedback page, and the Formgrader's rendering of the stored notebook, in Chromium."""
    course, _, _, _ = hostile_class
    page = course / "feedback" / "html_injection" / NAME / f"{NAME}.html"
    state, _ = visit(browser, page)
    assert state["pwned"] == "undefined", state
    assert "pwned" not in state["title"], state
    assert [m for m in state["maths"] if m["w"] > 0 and m["h"] > 0], state["maths"]
    screenshot(browser, "hostile-class-feedback.png")
    formgrade = tmp_path / "formgrade.html"
    formgrade.write_text(formgrader_page(autograded(course, "html_injection")))
    state, _ = visit(browser, formgrade)
    assert "pwned" not in state["title"], state
    assert state["pwned"] == "undefined", state
    screenshot(browser, "hostile-class-formgrader.png")
