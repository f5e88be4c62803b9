"""The ``rbtutor`` command: one verb for each task of the course, each with ``--help`` and an example.

``rbtutor --help`` lists the verbs; ``rbtutor VERB --help`` shows one verb's options and an
example. ``python -m rbtutor`` is the same command. Each verb belongs to one module, which
parses its own options: the answers (:mod:`rbtutor.problems.cli`), the course's steps
(:mod:`rbtutor.course.cli`), the LMS (:mod:`rbtutor.course.lms_cli`), the instant-check
service (:mod:`rbtutor.course.checks.service`) and the hub (``hub/hubctl.py`` of a checkout).
A mistyped verb or a bad option exits with status 2 and a short message, never a traceback.
"""

from __future__ import annotations

import difflib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

PROG = "rbtutor"


@dataclass(frozen=True)
class Verb:
    """One verb: the module that runs it, the name it has there, what it does and who uses it."""

    owner: str  # "answers", "course", "lms", "checks" or "hub"
    name: str
    help: str
    who: str  # "newcomer", "instructor" or "operator"


VERBS = {
    "try": Verb("course", "try", "the whole loop of one assignment, as a pretend student and instructor",
                "newcomer"),
    "key": Verb("answers", "key", "the answer key computed from the problem data", "instructor"),
    "data": Verb("answers", "data", "a student's problem data, or a whole class's with its key", "instructor"),
    "render": Verb("course", "render", "write the data and helper cells of every source notebook", "instructor"),
    "assign": Verb("course", "assign", "student versions of every assignment into release/", "instructor"),
    "release": Verb("course", "release", "one assignment into the exchange, for the students to fetch", "instructor"),
    "collect": Verb("course", "collect", "take the submissions from the exchange into submitted/", "instructor"),
    "similarity": Verb("course", "similarity", "compare the students' code of one assignment", "instructor"),
    "grade": Verb("course", "grade", "autograde every submission: feedback, grades.csv, reports", "instructor"),
    "feedback": Verb("course", "feedback", "put the feedback pages into the exchange for students", "instructor"),
    "export": Verb("course", "export", "final scores as the file Canvas, Moodle or Blackboard imports",
                   "instructor"),
    "lms": Verb("lms", "lms", "grades and roster in the LMS through LTI: status, sync, roster", "instructor"),
    "due": Verb("course", "due", "each assignment's due date and extensions, checked as grading reads them",
                "instructor"),
    "report": Verb("course", "report", "the class report, report/index.html", "instructor"),
    "config": Verb("course", "config", "every grading option: value, default, unit, where it is set",
                   "instructor"),
    "checks": Verb("checks", "checks", "run the instant-check service (the hub starts it)", "operator"),
    "hub": Verb("hub", "hub", "set up, start or stop the course's JupyterHub on this machine (root)", "operator"),
}
#: the older names of two verbs, still accepted
ALIASES = {"generate": "assign", "return-feedback": "feedback"}


def usage() -> str:
    """The text of ``rbtutor --help``."""
    width = max(map(len, VERBS))
    lines = [f"usage: {PROG} VERB [options]      ({PROG} VERB --help: a verb's options and an example)", "",
             "One command for each task of the course, from the answer key to the hub.", ""]
    for who in ("newcomer", "instructor", "operator"):
        lines.append(f"for the {who}:")
        lines += [f"  {name:<{width}}  {verb.help}" for name, verb in VERBS.items() if verb.who == who]
        lines.append("")
    lines.append(f"example: {PROG} grade --jobs 3")
    return "\n".join(lines)


def _refuse(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    """Run ``rbtutor VERB ...``; the exit status (2 for a verb or option that is not understood)."""
    args = sys.argv[1:] if argv is None else list(argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0 if args else 2
    word, rest = args[0], args[1:]
    if word.startswith("-") and word != "--root":
        return _refuse(f"expected a verb first, got the option {word!r}; `{PROG} --help` lists the verbs")
    if word == "--root":  # rbtutor --root COURSE VERB ...: the course's option before the verb
        if len(rest) < 2:
            return _refuse(f"expected --root COURSE VERB, got {' '.join(args)!r}")
        word, rest = rest[1], ["--root", rest[0], *rest[2:]]
    word = ALIASES.get(word, word)
    verb = VERBS.get(word)
    if verb is None:
        close = difflib.get_close_matches(word, [*VERBS, *ALIASES], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return _refuse(f"no verb {word!r}{hint} (`{PROG} --help` lists them)")
    try:
        return _run(verb, rest)
    except KeyboardInterrupt:
        print(f"{PROG} {word}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (rbtutor config | head): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def _run(verb: Verb, rest: list[str]) -> int:
    if verb.owner == "answers":
        from .problems.cli import main as answers  # deferred: 35 ms (python -X importtime 2026-12-06)

        return answers([verb.name, *rest], prog=PROG)
    if verb.owner == "course":
        from .course.cli import main as course  # deferred: 0.08 s (python -X importtime 2026-12-08)

        return course([verb.name, *rest], prog=PROG)
    if verb.owner == "lms":
        from .course.lms_cli import main as lms  # deferred: 2.4 s (python -X importtime 2026-12-06)

        return lms(rest)
    if verb.owner == "checks":
        return _checks(rest)
    return _hub(rest)


def _checks(rest: list[str]) -> int:
    """``rbtutor checks``: the instant-check service, configured by the environment as the hub does."""
    if rest in (["-h"], ["--help"]):
        print(f"usage: {PROG} checks\n\n{VERBS['checks'].help}. It reads RBTUTOR_COURSE (the course folder)"
              " and the JupyterHub service variables from the environment.\n\n"
              f"example: RBTUTOR_COURSE=/srv/course {PROG} checks")
        return 0
    if rest:
        return _refuse(f"checks takes no arguments, got {' '.join(rest)!r}")
    from .course.checks.service import main as serve  # deferred: 0.78 s (python -X importtime 2026-12-06)

    try:
        return serve()
    except SystemExit as exc:  # the service's own one-line refusal (no course folder)
        if isinstance(exc.code, str):
            return _refuse(exc.code)
        raise


def hub_script() -> Path | None:
    """``hub/hubctl.py`` of the checkout this package runs from, or None (an installed package)."""
    script = Path(__file__).resolve().parents[1] / "hub" / "hubctl.py"
    return script if script.is_file() else None


def _hub(rest: list[str]) -> int:
    """``rbtutor hub up|setup|down|units``: ``hub/hubctl.py`` with the same arguments."""
    script = hub_script()
    if script is None:
        return _refuse("the hub's files (hub/hubctl.py) come with a checkout of rbtutor; none is beside "
                       f"{Path(__file__).resolve().parent}")
    env = dict(os.environ)
    env["RBTUTOR_PROG"] = f"{PROG} hub"
    return subprocess.run([sys.executable, str(script), *rest], env=env, check=False).returncode
