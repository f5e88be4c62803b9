"""Step: after grading, grades back to the LMS. The outbox: each student's score, kept until the platform has it.

Releasing grades (``rbtutor feedback``, :func:`rbtutor.course.release.release_grades`) puts one row
per student and assignment into the ``lms_outbox`` table of the course's gradebook
(:func:`queue_grades`), then sends what is pending (:func:`send_pending`); ``rbtutor lms sync``
sends again whatever is left, and ``rbtutor lms status`` shows the table (:func:`outbox_status`).
The table, not the process, is the truth: a grade queued before a crash or an outage is sent by
the next ``sync``.

What a row holds, and where each part comes from:

* the score is the final score of the course's grade rows (:func:`rbtutor.course.grade_rows.class_rows`,
  the number grades.csv and the file exports carry: late penalty and extensions already applied),
  never computed a second time; ``scoreMaximum`` is the assignment's points;
* ``gradingProgress`` is ``PendingManual`` (with ``activityProgress`` ``Submitted``) while written
  parts are still to grade, ``FullyGraded`` (with ``Completed``) once none is;
* the LMS user id comes from the LMS users table (:mod:`rbtutor.lms.store`, filled at launch and by
  the roster), never from a notebook or a file name; a student without one is ``failed`` and says so;
* the service URLs are those of the course's LMS context, kept from a verified launch
  (:func:`remember_services`, which the hub's log-in calls);
* the line item is the platform's line item whose ``resourceId`` is the assignment: found, or made
  with the assignment's points (:func:`line_item_for`), by one sender at a time, and kept in
  ``lms_line_items`` (:func:`kept_line_item`); its URL is checked to be on the platform's own
  origin, and its ``resourceId`` to be the assignment, before a score is posted to it.

Idempotent: queuing the same score again changes nothing (a sent row stays sent, nothing is
posted twice); a changed score (a regrade) becomes pending again with a newer timestamp. Rows are
claimed before they are sent (``state = 'sending'``), so two senders at once do not post one row
twice; a claim older than :data:`STALE_CLAIM` (a sender that died) is taken over.
"""

from __future__ import annotations

import datetime as dt
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from sqlalchemy import (
    Column,
    Float,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
    and_,
    delete,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from .services import SCOPE_LINE_ITEM, SCOPE_SCORE, ServiceClient, ServiceError, pages, require, service_urls
from .store import METADATA

PENDING, SENDING, SENT, FAILED = "pending", "sending", "sent", "failed"
STALE_CLAIM = dt.timedelta(minutes=10)
LINE_ITEM_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
LINE_ITEMS_TYPE = "application/vnd.ims.lis.v2.lineitemcontainer+json"
SCORE_TYPE = "application/vnd.ims.lis.v1.score+json"
TAG = "rbtutor"
MAX_LINE_ITEM_PAGES = 20

OUTBOX = Table(
    "lms_outbox", METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("assignment", String(128), nullable=False),
    Column("student", String(128), nullable=False),
    Column("lms_user_id", String(255)),
    Column("line_item_url", Text),
    Column("score_given", Float, nullable=False),
    Column("score_maximum", Float, nullable=False),
    Column("activity_progress", String(16), nullable=False),
    Column("grading_progress", String(16), nullable=False),
    Column("timestamp", String(40), nullable=False),  # ISO 8601, UTC, microseconds: the score's time
    Column("state", String(16), nullable=False),
    Column("attempts", Integer, nullable=False, default=0),
    Column("last_error", Text),
    Column("version", Integer, nullable=False, default=1),  # raised by every change of the score
    Column("claimed_at", String(40)),
    Column("sent_at", String(40)),
    UniqueConstraint("assignment", "student", name="lms_outbox_one_row"),
)


LINE_ITEMS = Table(
    "lms_line_items", METADATA,
    Column("assignment", String(128), primary_key=True),
    Column("url", Text),  # None while a sender is finding or making it
    Column("score_maximum", Float),
    Column("claimed_at", String(40), nullable=False),
)
LINE_ITEM_WAIT = 60.0  # seconds a sender waits for another that is finding or making the same line item

SERVICES = Table(
    "lms_services", METADATA,
    Column("issuer", String(255), primary_key=True),
    Column("context_id", String(255), nullable=False),
    Column("lineitems_url", Text, nullable=False),
    Column("memberships_url", Text, nullable=False),
    Column("updated_at", String(40), nullable=False),
)
CONTEXT_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/context"


def remember_services(engine, claims: dict) -> bool:
    """Keep the service URLs of a verified launch (its AGS and NRPS claims) for the course's context.

    The first context launched from is the course's: a launch from another context of the same
    platform (a copy of the course) changes nothing and gives False, so grades never follow it to
    another course's line items. ``ValueError`` for a URL that is not acceptable."""
    lineitems, memberships = service_urls(claims)
    METADATA.create_all(engine, tables=[SERVICES, OUTBOX, LINE_ITEMS])  # the hub's store may predate them
    context = (claims.get(CONTEXT_CLAIM) or {}).get("id") if isinstance(claims.get(CONTEXT_CLAIM), dict) else None
    if not (lineitems or memberships) or not isinstance(context, str):
        return False
    issuer = claims["iss"]
    with engine.begin() as db:
        known = db.execute(select(SERVICES).where(SERVICES.c.issuer == issuer)).mappings().first()
        if known is not None and known["context_id"] != context:
            return False
        values = {"lineitems_url": lineitems or (known or {}).get("lineitems_url", ""),
                  "memberships_url": memberships or (known or {}).get("memberships_url", ""),
                  "updated_at": now_text()}
        if known is None:
            db.execute(SERVICES.insert().values(issuer=issuer, context_id=context, **values))
        else:
            db.execute(update(SERVICES).where(SERVICES.c.issuer == issuer).values(**values))
    return True


def recall_services(engine, issuer: str) -> tuple[str, str]:
    """The line items and memberships URLs last kept for ``issuer`` ("" for one never seen)."""
    with engine.connect() as db:
        row = db.execute(select(SERVICES).where(SERVICES.c.issuer == issuer)).mappings().first()
    return (row["lineitems_url"], row["memberships_url"]) if row else ("", "")


@dataclass(frozen=True)
class Score:
    """What is to be posted for one student in one assignment."""

    assignment: str
    student: str
    lms_user_id: str | None
    score_given: float
    score_maximum: float
    activity_progress: str
    grading_progress: str


def score_of(row, lms_user_id: str | None) -> Score | None:
    """The :class:`Score` of one grade row (:class:`rbtutor.course.grade_rows.GradeRow`), None when
    the submission could not be graded (no score to post)."""
    if row.final_score is None:
        return None
    done = row.pending == 0
    return Score(row.assignment, row.student, lms_user_id, round(max(0.0, row.final_score), 6),
                 float(row.max_score), "Completed" if done else "Submitted",
                 "FullyGraded" if done else "PendingManual")


def now_text(now: dt.datetime | None = None) -> str:
    """``now`` (default: the current time) as the ISO 8601 UTC text the rows and the platform get."""
    return (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC).isoformat(timespec="microseconds")


def _later(previous: str, now: dt.datetime) -> str:
    """``now``, or a microsecond after ``previous`` when the clock has not moved past it."""
    before = dt.datetime.fromisoformat(previous)
    return now_text(max(now, before + dt.timedelta(microseconds=1)))


@dataclass
class Queued:
    """What :func:`queue_grades` did: rows added, changed (regrades), and left as they were."""

    added: int = 0
    changed: int = 0
    unchanged: int = 0


SCORE_FIELDS = ("lms_user_id", "score_given", "score_maximum", "activity_progress", "grading_progress")


def queue_grades(engine, scores: Iterable[Score], now: dt.datetime | None = None) -> Queued:
    """Put each score into the outbox, pending, unless the same score is already there."""
    now = now or dt.datetime.now(dt.UTC)
    result = Queued()
    with engine.begin() as db:
        for score in scores:
            values = {name: getattr(score, name) for name in SCORE_FIELDS}
            key = and_(OUTBOX.c.assignment == score.assignment, OUTBOX.c.student == score.student)
            old = db.execute(select(OUTBOX).where(key)).mappings().first()
            if old is None:
                db.execute(OUTBOX.insert().values(assignment=score.assignment, student=score.student,
                                                  timestamp=now_text(now), state=PENDING, attempts=0,
                                                  version=1, **values))
                result.added += 1
            elif all(old[name] == value for name, value in values.items()):
                result.unchanged += 1
            else:
                db.execute(update(OUTBOX).where(OUTBOX.c.id == old["id"]).values(
                    timestamp=_later(old["timestamp"], now), state=PENDING, attempts=0, last_error=None,
                    version=old["version"] + 1, **values))
                result.changed += 1
    return result


def _claimable(now: dt.datetime):
    stale = now_text(now - STALE_CLAIM)
    return or_(OUTBOX.c.state.in_((PENDING, FAILED)),
               and_(OUTBOX.c.state == SENDING, OUTBOX.c.claimed_at < stale))


def _claim(engine, row_id: int, now: dt.datetime) -> dict | None:
    """The row, claimed for sending; None when another sender has it or it is no longer due."""
    with engine.begin() as db:
        claimed = db.execute(update(OUTBOX).where(and_(OUTBOX.c.id == row_id, _claimable(now)))
                             .values(state=SENDING, claimed_at=now_text(now)))
        if claimed.rowcount != 1:
            return None
        return dict(db.execute(select(OUTBOX).where(OUTBOX.c.id == row_id)).mappings().one())


def _finish(engine, row: dict, state: str, error: str | None = None, line_item: str | None = None) -> None:
    """Record the outcome of sending ``row``; a row changed meanwhile (newer version) stays pending."""
    values = {"state": state, "attempts": row["attempts"] + 1, "last_error": error, "claimed_at": None}
    if state == SENT:
        values["sent_at"] = now_text()
    if line_item:
        values["line_item_url"] = line_item
    with engine.begin() as db:
        done = db.execute(update(OUTBOX).where(and_(OUTBOX.c.id == row["id"], OUTBOX.c.version == row["version"]))
                          .values(**values))
        if done.rowcount == 0:  # re-queued while it was being sent: the new score is still to go
            db.execute(update(OUTBOX).where(OUTBOX.c.id == row["id"]).values(
                state=PENDING, claimed_at=None, attempts=row["attempts"] + 1))


# ---------------------------------------------------------------------------- line items

def _line_item(data: object, where: str) -> dict:
    """A line item of the platform's reply, its fields checked."""
    require(data, dict, where)
    require(data.get("id"), str, f"{where} id")
    maximum = require(data.get("scoreMaximum"), (int, float), f"{where} scoreMaximum")
    if not maximum > 0:
        raise ValueError(f"expected {where} scoreMaximum above 0, got {maximum}")
    for optional in ("resourceId", "tag", "label", "resourceLinkId"):
        if data.get(optional) is not None:
            require(data[optional], str, f"{where} {optional}")
    return data


def find_line_items(client: ServiceClient, lineitems_url: str, assignment: str) -> list[dict]:
    """The context's line items whose ``resourceId`` is ``assignment`` (following ``next`` pages)."""
    url = _with_query(lineitems_url, f"resource_id={assignment}")
    found = []
    for reply in pages(client, url, [SCOPE_LINE_ITEM], LINE_ITEMS_TYPE, "the line items", MAX_LINE_ITEM_PAGES):
        try:
            items = [_line_item(item, "a line item") for item in _container(reply.data)]
        except ValueError as exc:
            raise ServiceError(f"the line items: {exc}") from None
        found += [item for item in items if item.get("resourceId") == assignment]
    return found


def _container(data: object) -> list:
    """The line items of one page: the JSON array AGS specifies, or the ``content`` array of the paged
    object ``lti1p3platform`` answers with."""
    if isinstance(data, dict) and "content" in data:
        return require(data["content"], list, "the line items' content")
    return require(data, list, "the line items")


def line_item_for(client: ServiceClient, lineitems_url: str, assignment: str, points: float) -> str:
    """The URL of ``assignment``'s line item, found by ``resourceId`` or made with ``points``; its
    ``scoreMaximum`` put right when the assignment's points changed."""
    found = find_line_items(client, lineitems_url, assignment)
    if not found:
        body = {"scoreMaximum": points, "label": assignment, "resourceId": assignment, "tag": TAG}
        reply = client.post(lineitems_url, [SCOPE_LINE_ITEM], body, LINE_ITEM_TYPE, "the new line item",
                            accept=LINE_ITEM_TYPE)
        try:
            item = _line_item(reply.data, "the new line item")
        except ValueError as exc:
            raise ServiceError(f"the new line item: {exc}") from None
    else:
        item = sorted(found, key=lambda i: (i.get("tag") != TAG, i["id"]))[0]
    client.check_destination(item["id"])
    if item.get("resourceId") not in (None, assignment):
        raise ServiceError(f"the platform's line item {item['id']} is for {item['resourceId']!r}, not {assignment!r}")
    if abs(float(item["scoreMaximum"]) - points) > 1e-9:
        changed = {key: item[key] for key in ("label", "resourceId", "tag", "resourceLinkId") if item.get(key)}
        client.put(item["id"], [SCOPE_LINE_ITEM], {**changed, "id": item["id"], "scoreMaximum": points},
                   LINE_ITEM_TYPE, "the line item's new maximum")
    return item["id"]


def _with_query(url: str, query: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(query=f"{parts.query}&{query}" if parts.query else query))


def scores_url(line_item: str) -> str:
    """The line item's score endpoint: ``/scores`` after its path, its query kept."""
    parts = urlsplit(line_item)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/scores"))


# ---------------------------------------------------------------------------- sending

@dataclass
class Sent:
    """What :func:`send_pending` did."""

    sent: int = 0
    failed: list[str] = field(default_factory=list)  # "student assignment: why"
    left_pending: list[str] = field(default_factory=list)  # platform unreachable: tried again by sync


def score_body(row: dict) -> dict:
    """The AGS score of an outbox row."""
    return {"userId": row["lms_user_id"], "scoreGiven": row["score_given"], "scoreMaximum": row["score_maximum"],
            "activityProgress": row["activity_progress"], "gradingProgress": row["grading_progress"],
            "timestamp": row["timestamp"]}


def send_pending(engine, client: ServiceClient, lineitems_url: str,
                 progress: Callable[[str], None] | None = None, assignments: Iterable[str] | None = None) -> Sent:
    """Post every pending (or failed, or stale) row; stop at the first outage, leaving the rest pending."""
    now = dt.datetime.now(dt.UTC)
    query = select(OUTBOX.c.id).where(_claimable(now)).order_by(OUTBOX.c.assignment, OUTBOX.c.student)
    if assignments is not None:
        query = query.where(OUTBOX.c.assignment.in_(list(assignments)))
    with engine.connect() as db:
        ids = list(db.execute(query).scalars())
    result, items = Sent(), {}
    for number, row_id in enumerate(ids, start=1):
        row = _claim(engine, row_id, now)
        if row is None:
            continue
        name = f"{row['student']} {row['assignment']}"
        try:
            _post(engine, client, lineitems_url, row, items)
        except ServiceError as exc:
            if exc.transient:
                _finish(engine, row, PENDING, str(exc))
                result.left_pending = [name] + _release_claims(engine, ids[number:])
                break
            _finish(engine, row, FAILED, str(exc))
            result.failed.append(f"{name}: {exc}")
            continue
        _finish(engine, row, SENT, line_item=items[row["assignment"]])
        result.sent += 1
        if progress:
            progress(f"[{number}/{len(ids)}] sent {name}: {row['score_given']:g}/{row['score_maximum']:g} "
                     f"{row['grading_progress']}")
    return result


def _post(engine, client: ServiceClient, lineitems_url: str, row: dict, items: dict[str, str]) -> None:
    if not row["lms_user_id"]:
        raise ServiceError(f"no LMS user id for {row['student']}: they have not launched the course from the "
                           "LMS and are not on its roster yet (rbtutor lms roster)")
    if row["assignment"] not in items:
        items[row["assignment"]] = kept_line_item(engine, client, lineitems_url, row["assignment"],
                                                  row["score_maximum"])
    url = scores_url(items[row["assignment"]])
    try:
        client.post(url, [SCOPE_SCORE], score_body(row), SCORE_TYPE, _what(row["student"]))
    except ServiceError as exc:
        if exc.status == 404:  # the line item was deleted in the LMS: found or made again next time
            forget_line_item(engine, row["assignment"])
            items.pop(row["assignment"], None)
        raise


def _what(student: str) -> str:
    return f"the score of {student}"


def kept_line_item(engine, client: ServiceClient, lineitems_url: str, assignment: str, points: float,
                   sleep=time.sleep, clock=time.monotonic) -> str:
    """The assignment's line item URL: the one kept in ``lms_line_items`` for these points, else found or
    made on the platform (:func:`line_item_for`) by one sender at a time; another sender that is at it
    meanwhile is waited for (up to :data:`LINE_ITEM_WAIT` seconds), so no assignment gets two line items."""
    deadline = clock() + LINE_ITEM_WAIT
    while True:
        with engine.connect() as db:
            kept = db.execute(select(LINE_ITEMS).where(LINE_ITEMS.c.assignment == assignment)).mappings().first()
        if kept and kept["url"] and kept["score_maximum"] == points:
            return kept["url"]
        if kept is None or kept["url"] or kept["claimed_at"] < now_text(dt.datetime.now(dt.UTC) - STALE_CLAIM):
            if _claim_line_item(engine, assignment, kept):
                break
        elif clock() > deadline:
            raise ServiceError(f"another sender has been making the line item of {assignment} for over "
                               f"{LINE_ITEM_WAIT:.0f} s", transient=True)
        sleep(0.2)
    try:
        url = line_item_for(client, lineitems_url, assignment, points)
    except BaseException:
        forget_line_item(engine, assignment)
        raise
    with engine.begin() as db:
        db.execute(update(LINE_ITEMS).where(LINE_ITEMS.c.assignment == assignment).values(url=url,
                                                                                          score_maximum=points))
    return url


def _claim_line_item(engine, assignment: str, kept) -> bool:
    """True when this sender now holds the assignment's row of ``lms_line_items`` (url None: being made)."""
    try:
        with engine.begin() as db:
            if kept is None:
                db.execute(LINE_ITEMS.insert().values(assignment=assignment, url=None, claimed_at=now_text()))
                return True
            done = db.execute(update(LINE_ITEMS).where(and_(LINE_ITEMS.c.assignment == assignment,
                                                            LINE_ITEMS.c.claimed_at == kept["claimed_at"]))
                              .values(url=None, claimed_at=now_text()))
            return done.rowcount == 1
    except IntegrityError:  # another sender inserted it first
        return False


def forget_line_item(engine, assignment: str) -> None:
    """Drop the kept line item of ``assignment`` (it is found or made again)."""
    with engine.begin() as db:
        db.execute(delete(LINE_ITEMS).where(LINE_ITEMS.c.assignment == assignment))


def _release_claims(engine, ids: list[int]) -> list[str]:
    """Names of the rows not tried because the platform was unreachable (they stay as they were)."""
    if not ids:
        return []
    with engine.connect() as db:
        rows = db.execute(select(OUTBOX.c.student, OUTBOX.c.assignment).where(OUTBOX.c.id.in_(ids))).all()
    return [f"{student} {assignment}" for student, assignment in rows]


# ---------------------------------------------------------------------------- status

def due_count(engine, now: dt.datetime | None = None) -> int:
    """How many rows wait to be sent: pending, or claimed by a sender that died (one cheap query, for the
    hub's sender to ask often); the failed wait for an instructor's ``sync``."""
    stale = now_text((now or dt.datetime.now(dt.UTC)) - STALE_CLAIM)
    due = or_(OUTBOX.c.state == PENDING, and_(OUTBOX.c.state == SENDING, OUTBOX.c.claimed_at < stale))
    with engine.connect() as db:
        return db.execute(select(func.count()).select_from(OUTBOX).where(due)).scalar_one()


@dataclass(frozen=True)
class AssignmentStatus:
    """The outbox's counts for one assignment, and the reason of each failed row."""

    assignment: str
    counts: dict[str, int]
    problems: list[str]


def outbox_status(engine, stale_after: dt.timedelta = STALE_CLAIM) -> list[AssignmentStatus]:
    """Per assignment: how many rows are sent, pending (a stale claim counts as pending) and failed."""
    now = dt.datetime.now(dt.UTC)
    with engine.connect() as db:
        rows = db.execute(select(OUTBOX).order_by(OUTBOX.c.assignment, OUTBOX.c.student)).mappings().all()
    by_assignment: dict[str, list] = {}
    for row in rows:
        by_assignment.setdefault(row["assignment"], []).append(row)
    found = []
    for assignment, members in by_assignment.items():
        counts = Counter(_shown_state(row, now, stale_after) for row in members)
        problems = [f"{row['student']}: {row['last_error'].removeprefix(_what(row['student']) + ': ')}"
                    for row in members if row["state"] in (FAILED, PENDING) and row["last_error"]]
        found.append(AssignmentStatus(assignment, {s: counts.get(s, 0) for s in (SENT, PENDING, SENDING, FAILED)},
                                      problems))
    return found


def _shown_state(row, now: dt.datetime, stale_after: dt.timedelta) -> str:
    if row["state"] == SENDING and (row["claimed_at"] or "") < now_text(now - stale_after):
        return PENDING
    return row["state"]
