"""The course's verbs of the ``rbtutor`` command (:mod:`rbtutor.cli`); also ``python -m rbtutor.course VERB``.

Verbs, in the order an instructor uses them (``[--root COURSE]`` before or after the verb):

``render [--data FILE]``
    write the locked helper and data cells of every source notebook (from the
    reference data, or from FILE merged over it);
``assign`` (also ``generate``)
    student versions of every assignment into ``release/``;
``release ASSIGNMENT [--force]``
    one assignment's student version into the exchange, for the students to fetch
    (:mod:`rbtutor.course.release`);
``collect ASSIGNMENT [--clear-planted ACCOUNT]``
    take the students' submissions from the exchange into ``submitted/``, each checked
    by the intake (links, special files, floods and source copies refused); entries planted
    under another student's name stay named in the report until cleared;
``similarity ASSIGNMENT [--threshold SHARE]``
    compare every pair of students' code answers; ``similarity/ASSIGNMENT.csv`` and
    ``.html`` (:mod:`rbtutor.course.similarity`);
``grade [--jobs N | --scheduler ADDRESS]``
    autograde every submission, write feedback, ``grades.csv`` and the integrity report;
    with ``--scheduler``, on the workers of a Dask cluster (:mod:`rbtutor.course.cluster`);
``feedback`` (also ``return-feedback``)
    put the feedback into the exchange for the students to fetch; a course connected to an LMS
    also sends the grades there (:func:`rbtutor.course.release.release_grades`);
``export --to canvas|moodle|blackboard --roster ROSTER --out FILE [--columns FILE]``
    the final scores as the file that LMS imports (:mod:`rbtutor.course.export`);
``report``
    the class report, ``report/index.html`` (:mod:`rbtutor.course.class_report`), which
    ``grade`` also writes;
``due [ASSIGNMENT]``
    each assignment's due date and every extension, read and checked as grading reads them
    (:mod:`rbtutor.course.late`);
``try [ASSIGNMENT] [--into FOLDER]``
    the whole loop of one assignment in a folder of its own, as a pretend student and
    instructor, with no hub and no system configuration (:mod:`rbtutor.course.trial`);
``config [--json]``
    every grading option with its value, default, unit and description, and what the
    course's ``nbgrader_config.py`` sets (:mod:`rbtutor.course.options`).
"""

from __future__ import annotations

import argparse
import sys

from ..command_line import BriefParser
from .cluster import grade_on_cluster
from .layout import CourseError, CourseLayout
from .options import run_config
from .settings import SettingsError

# The other verbs import their modules when they run: together those bring in nbgrader, nbconvert
# and SciPy (2.2-2.8 CPU s, 2026-12-08), which `rbtutor config` and a refused verb never need.

#: an example of each verb, shown at the end of its ``--help``
EXAMPLES = {
    "render": "render --data next_year.yaml",
    "assign": "assign",
    "release": "release problem03",
    "collect": "collect problem03",
    "similarity": "similarity problem03 --threshold 0.5",
    "grade": "grade --jobs 3",
    "feedback": "feedback",
    "export": "export --to canvas --roster roster.csv --out grades-canvas.csv",
    "report": "report",
    "config": "config --json",
    "try": "try problem03 --into rbtutor-try",
    "due": "due problem03",
}


def _parser(prog: str = "python -m rbtutor.course") -> argparse.ArgumentParser:
    """The command line: one subcommand per step of the course (``assign`` is also ``generate``,
    ``feedback`` also ``return-feedback``, their names before the ``rbtutor`` command)."""
    parser = BriefParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=None, help="course folder (with nbgrader_config.py); "
                        "default: this folder or the nearest one above it")
    sub = parser.add_subparsers(dest="command", required=True)

    def verb(name, handler, help, aliases=()):
        command = sub.add_parser(name, aliases=list(aliases), help=help, description=help,
                                 epilog=f"example: {prog} {EXAMPLES[name]}")
        command.set_defaults(handler=handler, verb_parser=command)
        return command

    render = verb("render", _render, "write the locked helper and data cells of every notebook")
    render.add_argument("--data", help="variant data (YAML) merged over the reference data")
    verb("assign", _generate, "student versions of every assignment into release/", aliases=["generate"])
    release = verb("release", _release, "one assignment into the exchange, for the students to fetch")
    release.add_argument("assignment")
    release.add_argument("--force", action="store_true", help="release it again when it is already released")
    collect = verb("collect", _collect, "take submissions from the exchange into submitted/")
    collect.add_argument("assignment")
    collect.add_argument("--clear-planted", action="append", default=[], metavar="ACCOUNT",
                         help="first forget the kept evidence of entries ACCOUNT planted under other names "
                         "(once dealt with; an entry still in the exchange is named again)")
    similarity = verb("similarity", _similarity, "compare the students' code answers of one assignment")
    similarity.add_argument("assignment")
    similarity.add_argument("--threshold", type=float, default=None,
                            help="flag pairs with at least this score (default: the module's THRESHOLD)")
    grade = verb("grade", _grade, "autograde every submission, feedback, grades.csv, report")
    grade.add_argument("--jobs", type=int, default=None,
                       help="grade this many submissions at once (default: one per core, plus one)")
    grade.add_argument("--scheduler", default=None, metavar="ADDRESS",
                       help="grade on the workers of this Dask scheduler (tcp://host:8786) instead of here")
    verb("feedback", _return_feedback, "put the feedback into the exchange", aliases=["return-feedback"])
    export = verb("export", _export, "final scores as the file an LMS imports")
    export.add_argument("--to", required=True, choices=["canvas", "moodle", "blackboard"], dest="lms")
    export.add_argument("--roster", required=True, help="CSV: student_id,name,email and the LMS's id columns "
                        "(canvas_user_id, blackboard_username, sis_user_id, sis_login_id, section)")
    export.add_argument("--out", required=True, help="the file to write")
    export.add_argument("--assignments", default=None, metavar="A,B",
                        help="only these assignments (default: those released or with a graded submission)")
    export.add_argument("--columns", default=None, metavar="FILE", help="CSV: assignment,canvas_assignment_id,"
                        "blackboard_column_id[,title]: each column's id in the LMS, so it is matched by id")
    verb("report", _report, "the class report, report/index.html")
    due = verb("due", _due, "each assignment's due date and extensions, as grading will read them")
    due.add_argument("assignment", nargs="?", default=None, help="only this assignment")
    trial = verb("try", _try, "the whole loop of one assignment, as a pretend student and instructor")
    trial.add_argument("assignment", nargs="?", default="problem03", help="the assignment (default: problem03)")
    trial.add_argument("--into", default=None, metavar="FOLDER",
                       help="an empty or new folder for the trial course and student (default: ./rbtutor-try)")
    config = verb("config", _config, "every grading option: value, default, unit, description")
    config.add_argument("--json", action="store_true", help="JSON for machines instead of the table")
    # --root is accepted after the command too (python -m rbtutor.course grade --root DIR)
    for command in {id(c): c for c in sub.choices.values()}.values():  # an alias names the same parser
        command.add_argument("--root", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return parser


def main(argv=None, prog: str = "python -m rbtutor.course") -> int:
    parser = _parser(prog)
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the verb's own parser, which knows its options
        args.verb_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        layout = CourseLayout(args.root) if args.root else CourseLayout.find()
    except CourseError as exc:
        if args.handler is not _config or args.root:
            print(f"{prog}: {exc}", file=sys.stderr)
            return 2
        layout = None  # config outside a course: the defaults
    try:
        return args.handler(layout, args, parser)
    except SettingsError as exc:  # a bad course.toml: its one line, whichever verb read it
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2


def _render(layout: CourseLayout, args, parser) -> int:
    # deferred: 0.9 s to import (python -X importtime, 2026-12-08), needed only by this verb
    from .render import render_course

    try:
        changed = render_course(layout, args.data)
    except (OSError, ValueError) as exc:
        print(f"rbtutor render: {exc}", file=sys.stderr)
        return 2
    for path in changed:
        print(f"updated {path.relative_to(layout.root)}")
    return 0


def _grade(layout: CourseLayout, args, parser) -> int:
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    if args.scheduler:
        if args.jobs is not None:
            parser.error("--jobs and --scheduler exclude each other (a cluster has its own workers)")
        return grade_on_cluster(layout, args.scheduler)
    # deferred: 2.8 s to import (python -X importtime, 2026-12-08), needed only by this verb
    from .grade import grade as run

    return run(layout, args.jobs)


def _release(layout: CourseLayout, args, parser) -> int:
    # deferred: 0.7 s to import (python -X importtime, 2026-12-08), needed only by this verb
    from .release import release

    return release(layout, args.assignment, args.force)


def _export(layout: CourseLayout, args, parser) -> int:
    # deferred: 0.7 s to import (python -X importtime, 2026-12-08), needed only by this verb
    from .export import run_export

    named = [a.strip() for a in args.assignments.split(",") if a.strip()] if args.assignments else None
    return run_export(layout, args.lms, args.roster, args.out, named, args.columns)


def _config(layout: CourseLayout | None, args, parser) -> int:
    return run_config(layout, args.json)


def _report(layout: CourseLayout, args, parser) -> int:
    # deferred: 1.4 s to import (python -X importtime, 2026-12-08), needed only by this verb
    from .class_report import run_report

    return run_report(layout)


def _collect(layout: CourseLayout, args, parser) -> int:
    # deferred: 2.8 s to import (python -X importtime, 2026-12-08), needed only by this verb
    from .grade import collect

    return collect(layout, args.assignment, tuple(args.clear_planted))


def _due(layout: CourseLayout, args, parser) -> int:
    # deferred: 1.7 s to import (python -X importtime, 2026-12-08), needed only by this verb
    from .late import due_dates_table, read_due_dates

    if args.assignment is not None and args.assignment not in layout.assignments():
        print(f"{parser.prog} due: no assignment {args.assignment!r} in {layout.exercises}", file=sys.stderr)
        return 2
    try:
        deadlines = read_due_dates(layout)
    except ValueError as exc:  # the loader's one line, naming the entry
        print(f"{parser.prog} due: {exc}", file=sys.stderr)
        return 2
    print("\n".join(due_dates_table(deadlines, args.assignment)))
    return 0


def _try(layout: CourseLayout, args, parser) -> int:
    # deferred: 2.6 s to import (python -X importtime, 2026-12-08), needed only by this verb
    from .trial import run_try

    return run_try(layout, args.assignment, args.into)


def _similarity(layout: CourseLayout, args, parser) -> int:
    # deferred: 0.8 s to import (python -X importtime, 2026-12-08), needed only by this verb
    from .similarity import THRESHOLD, similarity_report

    try:
        threshold = THRESHOLD if args.threshold is None else args.threshold
        written = similarity_report(layout, args.assignment, threshold)
    except (CourseError, OSError, ValueError) as exc:
        print(f"rbtutor similarity: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path.relative_to(layout.root)}")
    return 0


def _generate(layout: CourseLayout, args, parser) -> int:
    # deferred: 2.8 s to import (python -X importtime, 2026-12-08), needed only by this verb
    from .grade import generate

    return generate(layout)


def _return_feedback(layout: CourseLayout, args, parser) -> int:
    # deferred: 2.8 s to import (python -X importtime, 2026-12-08), needed only by this verb
    from .grade import return_feedback
    from .release import release_grades  # deferred: 0.3 ms after .grade (python -X importtime, 2026-12-08)

    returned = return_feedback(layout)
    return max(returned, release_grades(layout))  # the grades to the LMS too, when the course has one
