"""The class report (rbtutor.course.class_report): a real class graded, the page checked against the gradebook.

Problem 3 is released and handed in through the exchange by ``right`` (the key's computations,
on time), ``wrong`` (wrong values of the right shape, on time) and ``late`` (right, two days
after the due date, with a forged on-time ``timestamp.txt``: a ``timestamp_mismatch`` flag);
``byhand`` is put into ``submitted/`` by hand (no receipt: a ``no_receipt`` flag), and a folder
named ``<script>window.pwned=1`` is refused as a student id (not graded, a ``bad_name`` flag).
``make grade``'s command then writes the report. Every number the test expects is worked out
here from the gradebook, never typed in.
"""

from __future__ import annotations

import base64
import html
import re
import shutil
import statistics
from html.parser import HTMLParser
from xml.etree import ElementTree

import pytest
from test_assignments import ROOT, all_wrong, answered, run_course, submit_as
from test_export import BAD_HAND_GRADES, bad_hand_grades  # noqa: F401 - a fixture

from rbtutor.course import api
from rbtutor.grading.intake import receipt_path

NAME = "problem03"
DUE = "2030-03-01T12:00:00+00:00"
HOSTILE_ID = "<script>window.pwned=1"
ON_TIME, LATE = "2030-03-01 10:00:00.000000 UTC", "2030-03-03 12:00:00.000000 UTC"


class Page(HTMLParser):
    """The parts of the report the tests read: images, tables (by caption), links and sources."""

    def __init__(self):
        super().__init__()
        self.images, self.tables, self.urls = [], {}, []
        self._caption = self._row = self._cell = None
        self._in_caption = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.urls += [v for k, v in attrs.items() if k in ("src", "href", "action", "data") and v]
        if tag == "img":
            self.images.append(attrs)
        elif tag == "caption":
            self._in_caption, self._caption = True, ""
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = ""

    def handle_endtag(self, tag):
        if tag == "caption":
            self._in_caption = False
            self.tables[self._caption] = []
        elif tag in ("td", "th") and self._row is not None:
            self._row.append(self._cell)
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.tables[self._caption].append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._in_caption:
            self._caption += data
        elif self._cell is not None:
            self._cell += data


def parse(text: str) -> Page:
    page = Page()
    page.feed(text)
    return page


def _retime(inbound, student: str, when: str):
    (entry,) = inbound.glob(f"{student}+{NAME}+*")
    return entry.rename(inbound / f"{student}+{NAME}+{when}+{entry.name.rsplit('+', 1)[1]}")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class above, graded; returns the course folder and the grade run's output."""
    from conftest import require_sandbox

    require_sandbox()
    if not (ROOT / "exercises" / NAME).is_dir():
        pytest.skip("Problem 3 is not among the assignments")
    course = tmp_path_factory.mktemp("classreport") / "course"
    (course / "exercises").mkdir(parents=True)
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "exercises" / NAME, course / "exercises" / NAME,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    (course / "exercises" / "due_dates.yaml").write_text(f"{NAME}: {DUE}\n")
    generated = run_course(course, "generate")
    assert generated.returncode == 0, generated.stdout + generated.stderr
    assert api(course).release_assignment(NAME)["success"]
    source = course / "exercises" / NAME / f"{NAME}.ipynb"
    submit_as(course, "right", NAME, lambda nb: answered(nb, source))
    submit_as(course, "wrong", NAME, lambda nb: all_wrong(nb, source))
    submit_as(course, "late", NAME, lambda nb: answered(nb, source))
    inbound = course / "exchange" / "rbtutor" / "inbound"
    for student in ("right", "wrong"):  # their claims agree with the entry's time: nothing to flag
        (_retime(inbound, student, ON_TIME) / "timestamp.txt").write_text(ON_TIME)
    (_retime(inbound, "late", LATE) / "timestamp.txt").write_text(ON_TIME)  # the claim: on time
    taken = run_course(course, "collect", NAME)
    assert taken.returncode == 0, taken.stdout + taken.stderr
    shutil.copytree(course / "submitted" / "right", course / "submitted" / "byhand")
    (course / "submitted" / "byhand" / NAME / "timestamp.txt").write_text(ON_TIME)
    receipt_path(course / "submitted", "byhand", NAME).unlink()  # handed in without collect
    shutil.copytree(course / "submitted" / "wrong", course / "submitted" / HOSTILE_ID)
    result = run_course(course, "grade")
    # the refused id is listed as not graded, so the run's status is 1; everything else is graded
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert "graded 4 submissions (1 not graded" in result.stdout, result.stdout[-3000:]
    assert "class report: " in result.stdout, result.stdout[-3000:]
    return course, result.stdout


def gradebook_facts(course) -> dict:
    """What the report must show, worked out here from the gradebook (nbgrader's own API)."""
    facts = {"final": {}, "late": set(), "parts": {}, "pending": set(), "failed_auto": {}}
    with api(course).gradebook as gradebook:
        assignment = gradebook.find_assignment(NAME)
        facts["max"] = assignment.max_score
        for submission in assignment.submissions:
            student = submission.student.id
            facts["final"][student] = submission.score - submission.late_submission_penalty
            if submission.total_seconds_late > 0:
                facts["late"].add(student)
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    graded, full = facts["parts"].setdefault(grade.name, [0, 0])
                    if grade.needs_manual_grade:
                        facts["pending"].add(student)
                        continue
                    facts["parts"][grade.name] = [graded + 1, full + (grade.score >= grade.max_score)]
                    if grade.score < grade.max_score and grade.auto_score is not None:
                        facts["failed_auto"][grade.name] = facts["failed_auto"].get(grade.name, 0) + 1
    return facts


def report_text(course) -> str:
    return (course / "report" / "index.html").read_text(encoding="utf-8")


def test_histogram_alt_text_states_the_gradebook_numbers(graded):
    course, _ = graded
    facts = gradebook_facts(course)
    scores = list(facts["final"].values())
    assert sorted(facts["final"]) == ["byhand", "late", "right", "wrong"]
    assert len(set(scores)) > 1  # right, wrong and late differ: a wrong number could not pass unseen
    expected = (f"Histogram of final scores for {NAME}: {len(scores)} students graded, median "
                f"{statistics.median(scores):.4g} of {facts['max']:.4g}, lowest {min(scores):.4g}, "
                f"highest {max(scores):.4g}, mean {statistics.fmean(scores):.4g}")
    alts = [image["alt"] for image in parse(report_text(course)).images]
    assert any(alt.startswith(expected) for alt in alts), (expected, alts)
    assert any(f"{len(facts['pending'])} of them with written parts still to grade" in alt for alt in alts), alts


def test_pass_rate_of_each_part_in_alt_text_and_table(graded):
    course, _ = graded
    facts = gradebook_facts(course)
    page = parse(report_text(course))
    (chart,) = [i["alt"] for i in page.images if i["alt"].startswith("Bar chart of the pass rate")]
    rows = {row[0]: row for row in page.tables[f"Parts of {NAME}"][1:]}
    assert set(rows) == set(facts["parts"])
    for grade_id, (graded_count, full) in facts["parts"].items():
        assert rows[grade_id][2:4] == [str(graded_count), str(full)], rows[grade_id]
        if graded_count:
            assert f"{grade_id} {full} of {graded_count} ({100 * full / graded_count:.0f} %)" in chart, chart
    assert any(0 < full < n for n, full in facts["parts"].values()), "expected a part some students failed"


def test_diagnoses_count_every_failed_autograded_part(graded):
    course, _ = graded
    facts = gradebook_facts(course)
    table = parse(report_text(course)).tables[f"Most common diagnoses of the failed parts of {NAME}"][1:]
    counted: dict[str, int] = {}
    for grade_id, _label, n in table:
        counted[grade_id] = counted.get(grade_id, 0) + int(n)
    assert counted == facts["failed_auto"]
    labels = {grade_id: label for grade_id, label, _ in table}
    assert labels, labels
    assert not any(label.startswith("no verdict") for label in labels.values()), labels
    # wrong's values are none of the recognised slips; its written answers are the released blanks
    assert labels["p3_b_K"] == "wrong_value", labels
    assert labels["p3_a_derivation"].startswith("unanswered"), labels


def test_late_not_graded_and_integrity_flags(graded):
    course, _ = graded
    facts = gradebook_facts(course)
    assert facts["late"] == {"late"}
    text = report_text(course)
    page = parse(text)
    assert f"{len(facts['late'])} late" in text
    assert "1 not graded" in text
    not_graded = page.tables[f"Submissions of {NAME} not graded"][1:]
    assert [row[0] for row in not_graded] == [HOSTILE_ID]
    assert "bad_name" in not_graded[0][1]
    caption = f"Integrity flags of {NAME} (integrity_report.md has every event)"
    flags = {row[0]: row[1] for row in page.tables[caption][1:]}
    assert "no_receipt" in flags["byhand"], flags
    assert "timestamp_mismatch" in flags["late"], flags
    assert "bad_name" in flags[HOSTILE_ID], flags
    assert "right" not in flags, flags
    assert "wrong" not in flags, flags


def test_student_text_is_escaped_and_nothing_is_loaded(graded):
    course, _ = graded
    text = report_text(course)
    assert HOSTILE_ID not in text
    assert html.escape(HOSTILE_ID) in text
    assert "<script" not in text.lower()
    page = parse(text)
    external = [u for u in page.urls if not u.startswith(("data:image/svg+xml;base64,", "#"))]
    assert not external, external
    words = re.sub(r"data:image/svg\+xml;base64,[A-Za-z0-9+/=]+", "", text).replace("http-equiv", "")
    assert not re.search(r"(?:https?:)?//|url\(", words), "a URL in the page"
    assert 'http-equiv="Content-Security-Policy" content="default-src \'none\'; img-src data:' in text


def test_figures_are_svg_with_alt_text(graded):
    """Each figure is an SVG document that draws bars, loads nothing and holds no script."""
    course, _ = graded
    images = parse(report_text(course)).images
    assert len(images) == 2
    for image in images:
        svg = ElementTree.fromstring(base64.b64decode(image["src"].split(",", 1)[1]))
        assert svg.tag == "{http://www.w3.org/2000/svg}svg"
        tags = {element.tag.split("}")[1] for element in svg.iter()}
        assert {"rect", "text", "line"} <= tags
        assert not tags & {"script", "image", "use", "foreignObject", "a"}, tags
        assert not [v for e in svg.iter() for k, v in e.attrib.items() if "href" in k]
        assert len([e for e in svg.iter("{http://www.w3.org/2000/svg}rect")]) > 1  # the background and a bar
        assert re.search(r"\d", image["alt"])
        assert NAME in image["alt"]


def test_report_command_rewrites_the_same_page(graded):
    course, _ = graded
    before = report_text(course)
    (course / "report" / "index.html").unlink()
    try:
        result = run_course(course, "report")
        assert result.returncode == 0, result.stdout + result.stderr
        after = report_text(course)
    finally:  # the other tests read the page the grade run wrote, whatever order they run in
        (course / "report" / "index.html").write_text(before, encoding="utf-8")
    stamp = re.compile(r"Generated [^ ]+ ")
    # the not-graded reason differs: the run knew the refusal, the command sees a folder without a grade
    assert parse(stamp.sub("", after)).images == parse(stamp.sub("", before)).images


def test_hostile_diagnosis_text_is_escaped():
    """A test cell's error is the student's: its name reaches the diagnosis table as text."""
    from rbtutor.course.class_report import AssignmentResult, PartResult, diagnosis_label, render_page

    label = diagnosis_label({"outputs": [{"output_type": "error", "ename": "<script>pwned=1</script>",
                                          "evalue": ""}]})
    part = PartResult("p1_a", 2.0, graded=1)
    part.diagnoses[label] += 1
    result = AssignmentResult(NAME, 2.0, final_scores={"ann": 0.0}, parts={"p1_a": part})
    text = render_page([result], "now")
    assert "<script>pwned" not in text
    assert html.escape(label) in text


def test_page_opens_in_chromium_without_errors(graded):
    from conftest import headless_chromium

    course, _ = graded
    page = course / "report" / "index.html"
    with headless_chromium("chromium-class-report.log", block_web=True) as browser:
        since = len(browser.events)
        browser.send("Page.navigate", {"url": page.as_uri()})
        browser.wait_event("Page.loadEventFired", since)
        state = browser.evaluate("""(() => ({
            pwned: typeof window.pwned, scripts: document.scripts.length,
            images: [...document.images].map(i => ({alt: i.alt, width: i.naturalWidth, done: i.complete})),
            title: document.title, h2: [...document.querySelectorAll('h2')].map(h => h.textContent)}))()""")
        events = browser.events[since:]
        browser.send("Emulation.setDeviceMetricsOverride",
                     {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True})
        broken = browser.evaluate("""[...document.querySelectorAll('td')]
            .filter(td => /^[A-Za-z0-9_.-]+$/.test(td.textContent.trim()))
            .filter(td => { const r = document.createRange(); r.selectNodeContents(td);
                            return r.getClientRects().length > 1; })
            .map(td => td.textContent)""")
    assert broken == [], f"ids split across lines at 390 px: {broken}"
    assert state["pwned"] == "undefined"
    assert state["scripts"] == 0
    assert state["title"] == "Class report"
    assert state["h2"] == ["Summary", NAME]
    assert len(state["images"]) == 2
    assert all(i["done"] and i["width"] > 100 and i["alt"] for i in state["images"])
    errors = [e for e in events if e.get("method") in ("Runtime.exceptionThrown", "Runtime.consoleAPICalled")
              or (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] in ("error", "warning"))]
    assert not errors, errors
    requested = [e["params"]["request"]["url"] for e in events if e.get("method") == "Network.requestWillBeSent"]
    assert requested[0] == page.as_uri(), requested
    assert all(u.startswith("data:image/svg+xml") for u in requested[1:]), requested


def test_a_hand_grade_that_is_not_a_number_is_named_not_counted(bad_hand_grades):  # noqa: F811 - the fixture
    """inf, -inf, NaN and out-of-range hand grades (the Formgrader's API takes them): each part is
    counted as still to grade, the final scores are finite, and the page names every one."""
    import math

    from rbtutor.course.class_report import class_results, render_page
    from rbtutor.course.layout import CourseLayout

    course, grader, _roster = bad_hand_grades
    [result] = class_results(CourseLayout(course), grader)
    assert all(math.isfinite(score) for score in result.final_scores.values())
    assert result.final_scores["fay"] == 5.0
    assert result.final_scores["kim"] == 7.5
    written = result.parts["p1_written"]
    assert (written.graded, written.to_grade, written.full) == (2, len(BAD_HAND_GRADES), 0)  # kim and lee graded
    assert result.parts["p1_auto"].graded == len(BAD_HAND_GRADES) + 2  # lee's refused override: 5 stands
    assert result.pending == {s: 1 for s in BAD_HAND_GRADES}
    page = render_page([result], "now")
    text = html.unescape(re.sub(r"<[^>]*>", " ", page)) + " ".join(i.get("alt", "") for i in parse(page).images)
    named, = re.findall(r"Hand grades not counted[^\n]*", text)  # the one place that quotes them
    for student in [*BAD_HAND_GRADES, "lee"]:
        assert re.search(rf"{student} problem01/p1_\w+: ", named), student
    found = re.search(r"\binf\b|\bnan\b", text.replace(named, ""), re.I)  # as a score: nowhere
    assert not found, text[found.start() - 80:found.end() + 40]


def test_the_report_opens_with_a_summary_and_shows_only_released_assignments(graded):
    """The page starts with the class's numbers; an assignment of the gradebook that nobody has been
    given or handed in has no section (it had one of empty tables), and has one once it is released."""
    from rbtutor.course.class_report import class_results, render_page
    from rbtutor.course.layout import CourseLayout

    course, _ = graded
    layout = CourseLayout(course)
    grader = api(course)
    with grader.gradebook as gradebook:
        if "problem07" not in {a.name for a in gradebook.assignments}:
            gradebook.add_assignment("problem07")
    results = class_results(layout, grader)
    assert [r.name for r in results] == [NAME]
    page = render_page(results, "now")
    summary = page[page.index('<section id="summary"'):page.index("</section>")]
    graded_count = len(results[0].final_scores)
    assert f"<li>{graded_count} submissions graded</li>" in summary
    assert f"<li>{len(results[0].late)} late</li>" in summary
    assert "The hardest parts" in summary
    assert f"{NAME} " in summary
    outbound = layout.exchange / "rbtutor" / "outbound" / "problem07"
    outbound.mkdir(parents=True)
    try:
        assert [r.name for r in class_results(layout, api(course))] == [NAME, "problem07"]
    finally:
        shutil.rmtree(outbound)
