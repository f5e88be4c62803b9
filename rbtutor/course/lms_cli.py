"""``rbtutor lms status|sync|roster``: the course's grades and roster in the LMS, through LTI Advantage.

``status``
    what the grades outbox holds (:mod:`rbtutor.lms.outbox`), per assignment: sent, pending and
    failed, with the reason of each row still waiting;
``sync [--assignment A]``
    send what is pending (and retry what failed), one line per grade; exit status 1 when anything
    is still pending or failed afterwards;
``roster [--write ROSTER]``
    read the course's members from the LMS (:mod:`rbtutor.lms.roster`) into the gradebook, and
    write them as the roster of the file exports (``rbtutor export --roster``).

Releasing grades puts them into the outbox and sends them: ``rbtutor feedback`` calls
:func:`grades_to_lms` after returning the feedback (:func:`rbtutor.course.release.release_grades`).
A course without an ``[lms]`` section in ``course.toml`` has no LMS: ``status`` and ``sync`` say so
and exit 2, the feedback verb does nothing more. Errors are one line starting ``rbtutor lms:``.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from sqlalchemy.exc import SQLAlchemyError

from ..command_line import BriefParser
from ..grading.report import csv_cell, terminal_text
from ..lms import outbox, roster
from ..lms.accounts import account_name
from ..lms.keys import KeyStoreError, ToolKeys
from ..lms.services import PlatformServices, ServiceClient, ServiceError
from ..lms.store import LmsStore, connect
from .export import ROSTER_COLUMNS, plural
from .layout import CourseError, CourseLayout
from .nbgrader import api
from .settings import SettingsError, load_settings

PROG = "rbtutor lms"
EXAMPLES = {"status": "status", "sync": "sync --assignment problem03", "roster": "roster --write roster.csv"}


class LmsUnavailable(RuntimeError):
    """The course has no LMS configured, or its keys or gradebook cannot be used; one line."""


@dataclass
class Connection:
    """What talking to the course's LMS needs: the records, the issuer, the services client."""

    store: LmsStore
    issuer: str
    platform: PlatformServices
    keys: ToolKeys
    account_claim: str

    def client(self, on_wait=None) -> ServiceClient:
        return ServiceClient(self.platform, self.keys, on_wait=on_wait)


#: where the course hub keeps the tool's keys (``LTI_KEYS`` of hub/hubctl.py; root may read them)
HUB_KEYS = Path("/var/lib/rbtutor-hub/lti-keys")


def keys_folder(layout: CourseLayout) -> Path:
    """Where the course's tool keys are (:class:`rbtutor.lms.keys.ToolKeys`): ``RBTUTOR_LMS_KEYS``, else
    the course hub's folder when there is one, else ``secrets/lti`` in the course folder."""
    if os.environ.get("RBTUTOR_LMS_KEYS"):
        return Path(os.environ["RBTUTOR_LMS_KEYS"])
    try:
        on_hub = HUB_KEYS.is_dir()
    except PermissionError:  # the hub's folder, which only root may look into: the instructor's case on the hub
        on_hub = True
    return HUB_KEYS if on_hub else layout.root / "secrets" / "lti"


def connection(layout: CourseLayout) -> Connection | None:
    """The course's LMS connection, or None when ``course.toml`` has no ``[lms]`` section.

    The service URLs are those the course's last launch stated (:func:`rbtutor.lms.outbox.recall_services`)."""
    config = load_settings(layout.root).lms
    if config is None:
        return None
    store = connect(layout.gradebook_url)
    lineitems, memberships = outbox.recall_services(store.engine, config.issuer)
    platform = PlatformServices(client_id=config.client_id, token_url=config.token_url,
                                lineitems_url=lineitems, memberships_url=memberships)
    return Connection(store, config.issuer, platform, ToolKeys(keys_folder(layout)), config.account_claim)


def _require(layout: CourseLayout) -> Connection:
    found = connection(layout)
    if found is None:
        raise LmsUnavailable(f"{layout.settings_file} has no [lms] section: this course is not connected to an "
                             "LMS (the file exports serve it: rbtutor export --help)")
    return found


def lms_scores(layout: CourseLayout, store: LmsStore, issuer: str, assignments=None) -> list[outbox.Score]:
    """The scores to post: the course's grade rows (grades.csv's numbers), each with the student's
    LMS user id from the LMS users table."""
    # deferred: grade_rows brings in nbgrader (3.1 s to import, python -X importtime 2026-12-06)
    from .grade_rows import class_rows

    lms_ids = {user.account: user.sub for user in store.users() if user.issuer == issuer}
    with api(layout).gradebook as gradebook:
        rows = class_rows(gradebook)
    wanted = None if assignments is None else set(assignments)
    scores = [outbox.score_of(row, lms_ids.get(row.student)) for row in rows
              if wanted is None or row.assignment in wanted]
    return [score for score in scores if score is not None]


def _progress(out):
    return lambda line: print(terminal_text(line), file=out, flush=True)


def _waiting(err):
    return lambda why, wait: print(f"{terminal_text(why)}; trying again in {wait:.1f} s", file=err, flush=True)


def send(link: Connection, assignments=None, out=None, err=None) -> outbox.Sent:
    """Send the outbox's pending rows (of ``assignments``, or all), printing one line per grade."""
    out, err = out or sys.stdout, err or sys.stderr
    with link.client(on_wait=_waiting(err)) as client:
        return outbox.send_pending(link.store.engine, client, link.platform.lineitems_url, _progress(out),
                                   assignments)


def _report(result: outbox.Sent, started: float, out, err) -> int:
    for line in result.failed:
        print(f"{PROG}: not sent: {terminal_text(line)}", file=err)
    if result.left_pending:
        print(f"{PROG}: the platform did not answer; {plural(len(result.left_pending), 'grade')} left pending "
              f"({terminal_text(', '.join(result.left_pending[:5]))}{' ...' if len(result.left_pending) > 5 else ''}): "
              "`rbtutor lms sync` sends them later", file=err)
    print(f"sent {plural(result.sent, 'grade')} in {time.monotonic() - started:.1f} s; failed: {len(result.failed)}; "
          f"pending: {len(result.left_pending)}", file=out)
    return 1 if result.failed or result.left_pending else 0


def grades_to_lms(layout: CourseLayout, assignments=None, out=None, err=None) -> int:
    """Queue every graded student's score of ``assignments`` (default: all) and send them; 0 when
    all went, 1 when some did not (they stay in the outbox), 0 at once for a course without an LMS."""
    out, err = out or sys.stdout, err or sys.stderr
    started = time.monotonic()
    try:
        link = connection(layout)
        if link is None:
            return 0
        queued = outbox.queue_grades(link.store.engine, lms_scores(layout, link.store, link.issuer, assignments))
    except (LmsUnavailable, KeyStoreError, OSError) as exc:
        print(f"{PROG}: grades not queued for the LMS: {terminal_text(exc)}", file=err)
        return 1
    print(f"grades for the LMS: {queued.added} new, {queued.changed} changed, {queued.unchanged} as before",
          file=out, flush=True)
    if not link.platform.lineitems_url:
        print(f"{PROG}: grades kept in the outbox, not sent: no line items URL known yet (it comes with the "
              "first launch from the LMS; then `rbtutor lms sync`)", file=err)
        return 1
    try:
        link.keys.current()
    except PermissionError:  # on the hub the keys are root's: the hub's sender posts them (sync --every)
        print(f"the LMS's grades are queued; the tool keys ({link.keys.folder}) are not this account's, so the "
              "hub's LMS sender posts them (`rbtutor lms status` shows when)", file=out)
        return 0
    except (KeyStoreError, OSError) as exc:
        print(f"{PROG}: grades kept in the outbox, not sent: {terminal_text(exc)}", file=err)
        return 1
    return _report(send(link, assignments, out, err), started, out, err)


def status_lines(link: Connection) -> list[str]:
    """The outbox per assignment, as ``rbtutor lms status`` prints it."""
    found = outbox.outbox_status(link.store.engine)
    if not found:
        return ["the outbox is empty: no grades released yet (rbtutor feedback releases them)"]
    width = max(len("assignment"), *(len(s.assignment) for s in found))
    lines = [f"{'assignment':<{width}}  {'sent':>6}  {'pending':>7}  {'sending':>7}  {'failed':>6}"]
    total = dict.fromkeys(("sent", "pending", "sending", "failed"), 0)
    for entry in found:
        c = entry.counts
        lines.append(f"{entry.assignment:<{width}}  {c['sent']:>6}  {c['pending']:>7}  {c['sending']:>7}  "
                     f"{c['failed']:>6}")
        total = {key: total[key] + c[key] for key in total}
    lines.append(f"{'all':<{width}}  {total['sent']:>6}  {total['pending']:>7}  {total['sending']:>7}  "
                 f"{total['failed']:>6}")
    for entry in found:
        lines += [f"  {entry.assignment} {terminal_text(problem)}" for problem in entry.problems]
    if any(entry.problems for entry in found):
        lines.insert(len(found) + 2, "waiting or failed, and why:")
    if total["pending"] or total["failed"]:
        lines.append("`rbtutor lms sync` sends what is pending and tries the failed again")
    return lines


def sync_roster(layout: CourseLayout, link: Connection, write: Path | None, out, err) -> int:
    """``rbtutor lms roster``: the LMS's members into the gradebook (and the roster file)."""
    # deferred: nbgrader takes 3.1 s to import (python -X importtime 2026-12-06); only this verb needs it
    from nbgrader.api import Gradebook

    with link.client(on_wait=_waiting(err)) as client:
        members = roster.fetch_members(client, link.platform.memberships_url)
    with Gradebook(layout.gradebook_url, course_id="rbtutor") as gradebook:
        result = roster.sync_roster(link.store, gradebook, link.issuer, members,
                                    lambda claims: account_name(claims, link.account_claim))
    for line in result.refused:
        print(f"{PROG}: member not taken in: {terminal_text(line)}", file=err)
    print(f"roster: {plural(len(members), 'member')} listed; {len(result.added)} new, {result.updated} known, "
          f"{len(result.inactive)} marked inactive ({terminal_text(', '.join(result.inactive)) or 'none'}), "
          f"{plural(result.students, 'student')} in the gradebook", file=out)
    if write is not None:
        write_roster(write, roster.roster_rows(link.store, link.issuer, members))
        print(f"wrote {write}: the roster of `rbtutor export --roster`", file=out)
    return 1 if result.refused else 0


def write_roster(path: Path, rows: list[dict[str, str]]) -> None:
    """The roster CSV, with the header of :data:`rbtutor.course.export.ROSTER_COLUMNS`."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(ROSTER_COLUMNS)
        writer.writerows([csv_cell(row[column]) for column in ROSTER_COLUMNS] for row in rows)


def _parser() -> argparse.ArgumentParser:
    parser = BriefParser(prog=PROG, description="The course's grades and roster in the LMS, through LTI Advantage: "
                         "what the outbox holds, sending it, and the class list.",
                         epilog=f"example: {PROG} {EXAMPLES['status']}")
    parser.add_argument("--root", default=None, help="course folder (default: this folder or the nearest above)")
    sub = parser.add_subparsers(dest="command", required=True)
    helps = {"status": "what is sent, pending and failed, per assignment",
             "sync": "send the pending grades now (and try the failed again)",
             "roster": "read the course's members from the LMS into the gradebook"}
    commands = {}
    for name, text in helps.items():
        commands[name] = sub.add_parser(name, help=text, description=text, epilog=f"example: {PROG} {EXAMPLES[name]}")
        commands[name].add_argument("--root", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    commands["sync"].add_argument("--assignment", action="append", default=None, metavar="A",
                                  help="only this assignment (may be repeated)")
    commands["sync"].add_argument("--every", type=float, default=None, metavar="SECONDS",
                                  help="keep running: send what is pending every SECONDS (the hub's LMS sender)")
    commands["roster"].add_argument("--write", type=Path, default=None, metavar="ROSTER",
                                    help="also write the roster CSV of the file exports here")
    return parser


def main(argv=None, out=None, err=None) -> int:
    """Run ``rbtutor lms ...``; the exit status."""
    out, err = out or sys.stdout, err or sys.stderr
    args = _parser().parse_args(argv)
    try:
        layout = CourseLayout(args.root) if args.root else CourseLayout.find()
    except CourseError as exc:
        print(f"{PROG}: {exc}", file=err)
        return 2
    try:
        link = _require(layout)
        if args.command == "status":
            print("\n".join(status_lines(link)), file=out)
            return 0
        if args.command == "sync" and args.every is not None:
            return keep_sending(layout, args.every, out, err)
        if args.command == "sync":
            _check_sync(link, args.assignment)
            started = time.monotonic()
            return _report(send(link, args.assignment, out, err), started, out, err)
        return sync_roster(layout, link, args.write, out, err)
    except (LmsUnavailable, KeyStoreError, SettingsError, OSError) as exc:
        print(f"{PROG}: {terminal_text(exc)}", file=err)
        return 2
    except ServiceError as exc:
        print(f"{PROG}: {terminal_text(exc)}", file=err)
        return 1


def keep_sending(layout: CourseLayout, every: float, out, err, rounds: int | None = None) -> int:
    """``sync --every SECONDS``: send what is pending, then wait, for ever (or ``rounds`` times); the
    service account that holds the tool keys runs it (the hub starts it as a service, every few seconds).
    A round asks the outbox one question (:func:`rbtutor.lms.outbox.due_count`) and prints nothing
    when nothing is due (the failed wait for an instructor's ``sync``); a round that fails (an outage,
    a locked gradebook) says why and the next round tries again. A SQLite gradebook that does not
    exist yet is waited for, never made here (it would be made the service account's)."""
    if not every > 0:
        raise LmsUnavailable(f"expected --every to be a positive number of seconds, got {every:g}")
    link, done = None, 0
    while rounds is None or done < rounds:
        try:
            link = _send_round(layout, link, out, err)
        except (ServiceError, LmsUnavailable, KeyStoreError, SettingsError, OSError, SQLAlchemyError) as exc:
            print(f"{PROG}: {terminal_text(exc)}", file=err, flush=True)
        done += 1
        if rounds is None or done < rounds:
            time.sleep(every)
    return 0


def _send_round(layout: CourseLayout, link: Connection | None, out, err) -> Connection | None:
    """One round of :func:`keep_sending`; the connection, kept for the next round."""
    if not os.environ.get("RBTUTOR_GRADEBOOK") and not layout.gradebook_file.exists():
        return link
    link = link or _require(layout)
    if not outbox.due_count(link.store.engine):
        return link
    lineitems, memberships = outbox.recall_services(link.store.engine, link.issuer)  # a newer launch's
    link.platform = replace(link.platform, lineitems_url=lineitems, memberships_url=memberships)
    if link.platform.lineitems_url:
        started = time.monotonic()
        _report(send(link, None, out, err), started, out, err)
    return link


def _check_sync(link: Connection, assignments) -> None:
    """``LmsUnavailable`` for a sync that cannot go anywhere, or names no assignment of the outbox."""
    if not link.platform.lineitems_url:
        raise LmsUnavailable("no line items URL known yet: it comes with the first launch from the LMS "
                             "(open the course from the LMS once)")
    known = {entry.assignment for entry in outbox.outbox_status(link.store.engine)}
    unknown = [a for a in assignments or () if a not in known]
    if unknown:
        raise LmsUnavailable(f"no grades of {', '.join(unknown)} in the outbox (it holds "
                             f"{', '.join(sorted(known)) or 'none'})")
