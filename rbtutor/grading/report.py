"""Step: report. The integrity events of each graded notebook, and the class's integrity report.

Every grading step appends what it observed (an *event*: a kind, a sentence, the
cell and grade id, and evidence) to ``resources["rbtutor"]["events"]`` and to
``<report_dir>/<student>/<assignment>/<notebook>.json``, one section per step,
replaced on every run so that a re-run leaves no duplicates. ``report_dir``
defaults to ``<CourseDirectory.root>/integrity``. :func:`write_integrity_report`
gathers those files into ``integrity_report.md`` and ``integrity_report.json`` at
the course root.

What a student wrote (ids, file and cell names, text quoted in messages) is escaped where it
lands, by the three helpers here: :func:`markdown_text` for the report (text that would start a tag,
an entity, a link or an image is written as a code span), :func:`csv_cell` for spreadsheets (a cell that a
spreadsheet would read as a formula gets a leading ``'``, as OWASP advises against CSV
injection) and :func:`terminal_text` for progress lines (control characters, such as
terminal escape sequences and carriage returns, are shown as escapes, never sent).
"""

from __future__ import annotations

import json
import os
import tempfile
import unicodedata
from datetime import UTC, datetime
from pathlib import Path

EVENTS_DIR = "integrity"
REPORT_NAME = "integrity_report"

# --------------------------------------------------------------------------- escaping

#: characters that start HTML (tags, entities), markdown links and images, escapes or code spans: text
#: holding one is written as a code span, in which markdown reads nothing (a cell's ``|`` still as ``\|``)
_MARKUP = frozenset("&<>[]\\`")
#: first characters a spreadsheet reads as the start of a formula (OWASP, CSV injection)
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _visible(char: str) -> str:
    """One character as text that cannot steer a terminal or the order of a line."""
    if char == " " or (char.isprintable() and unicodedata.category(char) != "Cf"):
        return char
    return ascii(char)[1:-1]


def terminal_text(value: object) -> str:
    """``value`` as one line of terminal output: control and format characters shown as escapes.

    >>> terminal_text("ok\\r[9/9] forged\\x1b[2K")
    'ok\\\\r[9/9] forged\\\\x1b[2K'
    """
    return "".join(_visible(char) for char in str(value))


def markdown_text(value: object) -> str:
    r"""``value`` as inert text in a markdown table cell or heading: no tag, link or image, one line.

    Text that holds a character markdown or HTML would act on is written as a code span, fenced with
    one backtick more than its longest run of backticks, so it reads as written in an editor and
    renders as the same characters; other text is left as it is (emphasis characters ``* _ ~`` at
    worst change how it looks). A ``|`` is escaped as ``\|`` either way, as a table cell needs.

    >>> print(markdown_text("<img src=x onerror=alert(1)> | [a](javascript:x)"))
    `<img src=x onerror=alert(1)> \| [a](javascript:x)`
    >>> print(markdown_text("the kernel wrote 12 bytes"))
    the kernel wrote 12 bytes
    """
    text = terminal_text(value)
    if not _MARKUP.intersection(text):
        return text.replace("|", "\\|")
    fence = "`" * (_longest_backticks(text) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or text.startswith(" ") else ""
    return f"{fence}{pad}{text.replace('|', chr(92) + '|')}{pad}{fence}"


def _longest_backticks(text: str) -> int:
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return longest


#: categories of characters a reader does not see before a cell's text (format characters such as the
#: BOM and zero-width space, spaces such as the no-break space, controls, marks, private and unassigned)
_UNSEEN = frozenset({"Cf", "Cc", "Zs", "Zl", "Zp", "Mn", "Me", "Co", "Cn"})


def _starts_like_formula(text: str) -> bool:
    """Whether ``text`` starts like a formula, also behind characters nobody sees and in another width.

    Spreadsheets and their import filters drop a leading BOM or zero-width space, trim spaces of
    every kind and may fold a full-width equals sign (U+FF1D) to ``=``; so the characters nobody sees are passed
    over and the first one left is compared after NFKC normalisation (U+FF1D and U+FE66 become ``=``).
    """
    if text.startswith(FORMULA_STARTS):
        return True
    for char in text:
        folded = unicodedata.normalize("NFKC", char)
        if unicodedata.category(char) in _UNSEEN or not folded.strip():
            continue
        return folded.startswith(FORMULA_STARTS)
    return False


def csv_cell(value: object) -> str:
    """``value`` as a CSV cell no spreadsheet runs: a leading ``'`` when it starts like a formula,
    also when the formula hides behind invisible characters or is written in full-width signs.

    >>> csv_cell("=SUM(7;7)"), csv_cell("\ufeff=1+1"), csv_cell("ann")
    ("'=SUM(7;7)", "'\ufeff=1+1", 'ann')
    """
    text = str(value)
    return "'" + text if _starts_like_formula(text) else text


# --------------------------------------------------------------------------- events


class Events:
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
        try:
            record_events(path, info["student"], info["assignment"], info["notebook"], self.stage, events,
                          fresh=fresh)
        except OSError as exc:  # the report is secondary: never fail grading because of it
            self.log.warning("could not write the integrity events to %s: %s", path, exc)


def record_events(path: Path, student: str, assignment: str, notebook: str, stage: str, events: list[dict],
                  *, fresh: bool = False) -> None:
    """Put ``events`` into the ``stage`` section of the events file ``path`` (atomically)."""
    record = {"student": student, "assignment": assignment, "notebook": notebook, "stages": {}}
    if path.exists() and not fresh:
        try:
            old = json.loads(path.read_text())
            if isinstance(old, dict) and isinstance(old.get("stages"), dict):
                record["stages"] = old["stages"]
        except (OSError, ValueError):
            pass
    record["stages"][stage] = events
    record["updated"] = datetime.now(UTC).isoformat(timespec="seconds")
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(handle, "w") as out:
        json.dump(record, out, indent=1, default=str)
    os.replace(tmp, path)


def event(kind: str, message: str, *, cell=None, grade_id=None, **evidence) -> dict:
    event = {"kind": kind, "message": message}
    if cell is not None:
        event["cell"] = cell
    if grade_id:
        event["grade_id"] = grade_id
    event.update({k: v for k, v in evidence.items() if v is not None})
    return event


def grading_meta(cell) -> dict:
    meta = cell.get("metadata", {}).get("nbgrader")
    return meta if isinstance(meta, dict) else {}


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
        lines.append(f"## {markdown_text(entry['student'])} / {markdown_text(entry['assignment'])}")
        lines.append("")
        if not entry["scanned"]:
            lines.append("not scanned (not autograded with the integrity preprocessors)")
        elif not entry["events"]:
            lines.append("nothing suspicious")
        else:
            lines.append("| notebook | cell | grade id | kind | what was seen |")
            lines.append("| --- | --- | --- | --- | --- |")
            for event in entry["events"]:
                cells = (event.get("notebook", ""), event.get("cell", ""), event.get("grade_id", "") or "",
                         event.get("kind", ""), event.get("message", ""))
                lines.append("| " + " | ".join(markdown_text("" if c is None else c) for c in cells) + " |")
        lines.append("")
    path = root / f"{REPORT_NAME}.md"
    path.write_text("\n".join(lines))
    return path
