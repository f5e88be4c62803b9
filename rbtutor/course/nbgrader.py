"""How the course drives nbgrader: its configuration, and an API object for one course.

``nbgrader_config.py`` in a course folder is two lines: it calls :func:`configure`
with the course root. Every nbgrader command run in that folder, the Formgrader
and rbtutor's own commands then see the same configuration:

* sources in ``exercises/``, the exchange in ``exchange/`` (or ``RBTUTOR_EXCHANGE``),
  the gradebook ``gradebook.db`` (or ``RBTUTOR_GRADEBOOK``, e.g. PostgreSQL);
* the grading options of the course's ``course.toml`` (:mod:`rbtutor.course.settings`): every
  trait option of the steps below set to the course's value or its default, and the sandbox's
  limits handed to the kernel launcher through this process's environment; a bad ``course.toml``,
  or an option set both there and in ``nbgrader_config.py``, stops the process with the error's
  one line and status 2 before anything is configured (nbgrader's own commands would otherwise
  log the error and go on without the course's configuration, so without the sandbox);
  :func:`load_course_config` checks the same first and raises
  :class:`rbtutor.course.settings.SettingsError` instead, for rbtutor's commands to report;
* late submissions penalised by :class:`rbtutor.course.late.PercentPerDay`;
* autograding runs the grading pipeline of :mod:`rbtutor.grading`: cells restored
  and scanned before execution; execution in the confined kernel
  (:mod:`rbtutor.grading.sandbox`) in a throwaway folder, bounded in time and
  output; the handed-in values judged in the grading process, each verdict recorded on its
  test cell; the scores written from the verdicts by :class:`rbtutor.grading.scores.SaveScores`
  (in place of nbgrader's ``SaveAutoGrades``), then the late penalty;
* ``python -m rbtutor.course collect`` checks that each exchange entry belongs to the Unix
  account of the student it names, as nbgrader's setting ``c.ExchangeCollect.check_owner``
  (default True) asks; set it to False for an exchange where one service account owns every
  entry (see :func:`owner_check`).
"""

from __future__ import annotations

import os
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path

from traitlets.config.loader import PyFileConfigLoader

from ..grading import sandbox
from .layout import CourseLayout
from .settings import SettingsError, apply_settings, check_agreement, load_settings, refuse_overlap


def configure(c, root: str | os.PathLike) -> None:
    """Fill the traitlets config ``c`` (from ``get_config()``) for the course at ``root``."""
    # deferred: nbconvert.preprocessors takes 2.4 s to import (python -X importtime, 2026-12-06)
    from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor

    # deferred: nbgrader takes 3.1 s to import (python -X importtime, 2026-12-06); only this step needs it
    from nbgrader.preprocessors import (
        AssignLatePenalties,
        ClearOutput,
        GetGrades,
        IgnorePattern,
        LimitOutput,
        OverwriteKernelspec,
    )

    # deferred: it brings in nbgrader (3.1 s to import, python -X importtime 2026-12-06), needed only here
    from ..grading.execute import BoundedExecute

    # deferred: it brings in nbgrader (3.1 s to import, python -X importtime 2026-12-06), needed only here
    from ..grading.grader_notes import DropGraderNotes, DueDateNote, GraderNotes

    # deferred: it brings in nbgrader (3.1 s to import, python -X importtime 2026-12-06), needed only here
    from ..grading.judge import JudgeAnswers

    # deferred: it brings in nbgrader (3.1 s to import, python -X importtime 2026-12-06), needed only here
    from ..grading.outputs import CapOutput

    # deferred: it brings in nbgrader (3.1 s to import, python -X importtime 2026-12-06), needed only here
    from ..grading.restore import CheckMetadata, RestoreCells

    # deferred: it brings in nbgrader (3.1 s to import, python -X importtime 2026-12-06), needed only here
    from ..grading.sanitize import SanitizeNotebook

    # deferred: it brings in nbgrader (3.1 s to import, python -X importtime 2026-12-06), needed only here
    from ..grading.scan import ScanSubmission

    # deferred: it brings in nbgrader (3.1 s to import, python -X importtime 2026-12-06), needed only here
    from ..grading.scores import SaveScores

    # deferred: it brings in nbgrader (3.1 s to import, python -X importtime 2026-12-06), needed only here
    from .hand_grades import guard_hand_grades

    # every nbgrader process of the course, the Formgrader's included, refuses a hand grade that is
    # not a finite number from 0 to the part's points where it is entered (rbtutor.course.hand_grades)
    guard_hand_grades()
    layout = CourseLayout(Path(root))
    # course.toml, checked before anything is set (rbtutor.course.settings). nbgrader's own commands log
    # an exception raised by a configuration file and go on without that file, so without the sandbox:
    # the process stops here instead, with the error's one line and status 2.
    try:
        settings = load_settings(layout.root)
        refuse_overlap(settings, layout.config)
    except SettingsError as exc:
        print(exc, file=sys.stderr)
        raise SystemExit(2) from exc
    c.CourseDirectory.root = str(layout.root)
    c.CourseDirectory.course_id = "rbtutor"
    c.CourseDirectory.source_directory = "exercises"
    c.CourseDirectory.db_url = layout.gradebook_url
    c.Exchange.root = str(layout.exchange)

    c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
    c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

    c.JudgeAnswers.data_file = str(layout.data_file)
    # the class's keys, worked out once per run by rbtutor.course.grade.start_run
    c.JudgeAnswers.class_keys = str(layout.scratch / "class_keys")
    c.GraderNotes.source_directory = str(layout.exercises)
    # nbgrader's own feedback (its command, the Formgrader's button) without the grader's notes
    c.GenerateFeedback.preprocessors = [GetGrades, CSSHTMLHeaderPreprocessor, DropGraderNotes]
    c.Execute.kernel_name = sandbox.install()
    # The confined kernel has no network: it talks to the grader over IPC sockets in a private
    # folder that BoundedExecute makes afresh for every notebook and removes after it.
    c.KernelManager.transport = "ipc"
    c.Autograde.sanitize_preprocessors = [
        ClearOutput,
        OverwriteKernelspec,
        RestoreCells,
        ScanSubmission,
        CheckMetadata,
    ]
    c.Autograde.autograde_preprocessors = [
        BoundedExecute,
        CapOutput,
        JudgeAnswers,
        IgnorePattern,
        ClearMetadataPreprocessor,
        LimitOutput,
        SaveScores,  # where a grade is decided: points from the verdicts (rbtutor.grading.scores)
        SanitizeNotebook,
        GraderNotes,
        DueDateNote,  # the student's own due date, for the grader (the Formgrader shows the class's only)
        AssignLatePenalties,
        CheckMetadata,
    ]
    # late policy: a share of the score per started day late; due dates from exercises/due_dates.yaml
    # deferred: it brings in nbgrader (3.1 s to import, python -X importtime 2026-12-06), needed only here
    from .late import PercentPerDay

    c.AssignLatePenalties.plugin_class = PercentPerDay
    # the grading options the course sets in course.toml (defaults for the others): every trait read
    # by a step above, and the sandbox's limits through the environment its launcher inherits
    apply_settings(c, settings)
    # nbconvert validates the notebook after every preprocessor above (17 times a notebook); once,
    # after the last, finds an invalid notebook all the same (0.5 ms a validation here)
    c.Exporter.optimistic_validation = True


def owner_check(config) -> bool:
    """Whether ``collect`` checks the owners of exchange entries: ``c.ExchangeCollect.check_owner``.

    nbgrader's own collect reads the same setting (and only warns); rbtutor's refuses an entry
    that belongs to another account than the student it names. Default True.

    Raises
    ------
    ValueError
        The setting is not True or False.
    """
    section = config.ExchangeCollect
    value = section.check_owner if "check_owner" in section else True
    if not isinstance(value, bool):
        raise ValueError(f"expected c.ExchangeCollect.check_owner to be True or False, got {value!r}")
    return value


_ENGINES: dict = {}  # the shared engines, by URL and options
_SET_UP: set | None = None  # (database URL, course id) set up inside gradebooks_set_up_once, or None outside


def _set_up_already(db_url, course_id: str) -> bool:
    """Whether nbgrader's ``Gradebook.__init__`` would find nothing to do for this database and course:
    every table of its schema there and the course's row in it. nbgrader checks each table one by one
    (``create_all``) and then the course's row: 15 queries, 3.7 CPU ms, where these two take 0.36 ms
    (SQLite, 2026-12-07); when something is missing, nbgrader's own set-up runs and makes it."""
    # deferred: nbgrader takes 3.1 s to import (python -X importtime, 2026-12-06); only this step needs it
    import nbgrader.api

    # deferred: sqlalchemy takes 0.24 s to import (python -X importtime, 2026-12-06); only this step needs it
    from sqlalchemy import inspect, select

    with nbgrader.api.create_engine(db_url, echo=False, future=True).connect() as connection:
        if not set(nbgrader.api.Base.metadata.tables) <= set(inspect(connection).get_table_names()):
            return False
        course = nbgrader.api.Course
        return connection.execute(select(course.id).where(course.id == course_id)).first() is not None


def share_gradebook_engines() -> None:
    """Let every nbgrader ``Gradebook`` of this process use one SQLAlchemy engine per database URL,
    and, inside :func:`gradebooks_set_up_once`, set each database up once.

    nbgrader makes a new engine for each ``Gradebook`` (a dozen per graded notebook) and disposes of
    it on ``close()``, so SQLAlchemy compiles every statement afresh each time: 0.04 CPU s per
    notebook. A shared engine keeps its compiled statements; ``close()`` still gives back the
    connections (``dispose()`` empties the pool; the engine opens new ones when next used).
    For grading workers, which use one thread.
    """
    # deferred: nbgrader takes 3.1 s to import (python -X importtime, 2026-12-06); only this step needs it
    import nbgrader.api

    # deferred: sqlalchemy takes 0.24 s to import (python -X importtime, 2026-12-06); only this step needs it
    from sqlalchemy import create_engine
    from sqlalchemy.orm import scoped_session, sessionmaker  # deferred: with sqlalchemy, above

    if getattr(nbgrader.api.create_engine, "shared", False):
        return

    def shared_engine(url, **options):
        key = (str(url), tuple(sorted(options.items())))
        if key not in _ENGINES:
            _ENGINES[key] = create_engine(url, **options)
        return _ENGINES[key]

    shared_engine.shared = True
    nbgrader.api.create_engine = shared_engine
    set_up, close = nbgrader.api.Gradebook.__init__, nbgrader.api.Gradebook.close

    def connect_or_set_up(self, db_url, course_id="default_course", authenticator=None):
        key = (str(db_url), course_id)
        if _SET_UP is None or (key not in _SET_UP and not _set_up_already(db_url, course_id)):
            set_up(self, db_url, course_id, authenticator)
            if _SET_UP is not None:
                _SET_UP.add(key)
            return
        _SET_UP.add(key)
        # what nbgrader's __init__ does but its checks: the tables and the course's row are there
        # (found or made by the block's first Gradebook of this course), and nothing of a grading
        # run removes them
        self.engine = nbgrader.api.create_engine(db_url, echo=False, future=True)
        self.db = scoped_session(sessionmaker(autoflush=True, bind=self.engine, future=True))
        self.course_id = course_id
        self.authenticator = authenticator

    def give_back(self):
        if _SET_UP is None:
            close(self)
        else:  # the session's connection goes back to the pool, which the block's end empties
            self.db.remove()

    connect_or_set_up.__wrapped__, give_back.__wrapped__ = set_up, close  # nbgrader's, for inspect.unwrap
    nbgrader.api.Gradebook.__init__ = connect_or_set_up
    nbgrader.api.Gradebook.close = give_back


@contextmanager
def gradebooks_set_up_once():
    """Within the block, only the first ``Gradebook`` of each database and course checks the
    database: it looks for every table and the course's row (:func:`_set_up_already`), and runs
    nbgrader's own set-up, which makes what is missing, only when something is. A closed
    ``Gradebook`` leaves its connection in the engine's pool for the next; the block's end closes
    them. Needs :func:`share_gradebook_engines`.

    nbgrader's ``Gradebook.__init__`` does those checks every time, and its ``close()`` closes the
    connection: grading one notebook makes 13 gradebooks (its preprocessors, the converter, the
    feedback), and each cost 2.4 CPU ms made and closed, 0.9 ms more to connect again for its
    first query (SQLite, 2026-12-06). A grading worker puts one submission in the block, so
    nothing that happens between two submissions (a gradebook replaced, a course renamed) can be
    missed, and no connection is held between them.
    """
    global _SET_UP
    outer, _SET_UP = _SET_UP, set()
    try:
        yield
    finally:
        _SET_UP = outer
        if outer is None:
            for engine in _ENGINES.values():
                engine.dispose()


#: (table, column) of nbgrader's gradebook that the grader looks rows up by for every notebook, and
#: that no index of nbgrader's starts with: without these, each lookup scanned a table that grows
#: with the class (a submitted notebook's grades and comments, a student's submissions).
GRADEBOOK_INDEXES = (("grade", "notebook_id"), ("comment", "notebook_id"),
                     ("submitted_notebook", "assignment_id"), ("submitted_assignment", "student_id"))


def index_gradebook(engine) -> None:
    """Add each of :data:`GRADEBOOK_INDEXES` (``rbtutor_<table>_<column>``) where it is missing.

    An index changes no row and no answer of any query; nbgrader's own tools read the gradebook
    as before. SQLite and PostgreSQL both take ``CREATE INDEX IF NOT EXISTS``.
    """
    # deferred: sqlalchemy takes 0.24 s to import (python -X importtime, 2026-12-06); only this step needs it
    from sqlalchemy import inspect, text
    from sqlalchemy.exc import DBAPIError  # deferred: with sqlalchemy, above

    for table, column in GRADEBOOK_INDEXES:
        name = f"rbtutor_{table}_{column}"
        try:
            with engine.begin() as connection:
                connection.execute(text(f"CREATE INDEX IF NOT EXISTS {name} ON {table} ({column})"))
        except DBAPIError:
            # graders starting at once on PostgreSQL, whose IF NOT EXISTS can lose that race: fine
            # when the other grader made it
            if name not in {index["name"] for index in inspect(engine).get_indexes(table)}:
                raise


def api(course: CourseLayout | str | os.PathLike):
    """An ``NbGraderAPI`` configured by the course's ``nbgrader_config.py`` (a layout or its root)."""
    layout = course if isinstance(course, CourseLayout) else CourseLayout(Path(course))

    # deferred: nbgrader takes 3.1 s to import (python -X importtime, 2026-12-06); only this step needs it
    from nbgrader.apps import NbGraderAPI

    # deferred: sqlalchemy takes 0.24 s to import (python -X importtime, 2026-12-06); only this step needs it
    from sqlalchemy.exc import SAWarning

    # nbgrader 0.9.6 trips SQLAlchemy's autoflush warnings on every submission; they say
    # nothing about the grades and would bury the progress lines
    warnings.filterwarnings("ignore", category=SAWarning, module=r"nbgrader\.")

    # a new gradebook runs `alembic`, which lives beside this interpreter
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")

    config = load_course_config(layout)
    config.CourseDirectory.root = str(layout.root)
    return NbGraderAPI(config=config)


def load_course_config(layout: CourseLayout):
    """The traitlets configuration the course's ``nbgrader_config.py`` builds, checked against its
    ``course.toml`` (:func:`rbtutor.course.settings.check_agreement`).

    Raises
    ------
    rbtutor.course.settings.SettingsError
        ``course.toml`` is wrong, or ``nbgrader_config.py`` sets an option it sets too.
    """
    settings = load_settings(layout.root)
    refuse_overlap(settings, layout.config)
    config = PyFileConfigLoader(layout.config.name, path=str(layout.root)).load_config()
    check_agreement(settings, config, layout.config.name)
    return config
