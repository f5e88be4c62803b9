"""Step: the class list from the LMS. The course's roster read through Names and Roles (NRPS), kept in the gradebook.

:func:`fetch_members` reads the context's memberships (every ``rel="next"`` page, bounded in pages
and members) through :class:`rbtutor.lms.services.ServiceClient`, and checks each member's fields
before anything is kept. :func:`sync_roster` then writes, in one pass:

* the LMS users table (:mod:`rbtutor.lms.store`): every member, with the account name it has (a
  member who launched before keeps theirs; a new one gets the name the launch would give,
  ``account_for``), name, e-mail, roles and status; a name held by another LMS user is refused for
  that member, named in the result, and never merged;
* nbgrader's students (``Student``: id = the account, first and last name, e-mail, ``lms_user_id``)
  for the learners;
* ``inactive`` for a member the LMS lists as Inactive or Deleted, or no longer lists at all: their
  rows, submissions and grades stay; only the status changes (back to ``active`` when they return).

:func:`roster_rows` gives the learners as the roster the file exports read
(:data:`rbtutor.course.export.ROSTER_COLUMNS`), for ``rbtutor lms roster --write roster.csv``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..grading.student_ids import id_problem
from .services import SCOPE_MEMBERSHIPS, ServiceClient, ServiceError, pages, require
from .store import AccountTaken, LmsStore

MEMBERSHIPS_TYPE = "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"
MAX_PAGES = 100
MAX_MEMBERS = 20_000
MAX_FIELD = 255
LEARNER = "Learner"
ACTIVE = "Active"
STATUSES = ("Active", "Inactive", "Deleted")
OPTIONAL_TEXT = ("name", "given_name", "family_name", "email", "lis_person_sourcedid")


@dataclass(frozen=True)
class Member:
    """One member of the course as NRPS lists them (the fields the tool uses)."""

    user_id: str
    roles: tuple[str, ...]
    status: str = ACTIVE
    name: str = ""
    given_name: str = ""
    family_name: str = ""
    email: str = ""
    lis_person_sourcedid: str = ""

    @property
    def learner(self) -> bool:
        """A student: a Learner role (``...membership#Learner`` or the short ``Learner``), no instructor role."""
        short = {role.rsplit("#", 1)[-1] for role in self.roles}
        return LEARNER in short and not short & {"Instructor", "Administrator", "ContentDeveloper"}

    def claims(self) -> dict:
        """The member as the claims of a launch would state them (for the account-name rule)."""
        return {"sub": self.user_id, "name": self.name, "given_name": self.given_name,
                "family_name": self.family_name, "email": self.email,
                "https://purl.imsglobal.org/spec/lti/claim/roles": list(self.roles),
                "https://purl.imsglobal.org/spec/lti/claim/lis": {"person_sourcedid": self.lis_person_sourcedid}}


def parse_member(data: object, where: str) -> Member:
    """A :class:`Member` from one entry of the reply; ``ValueError`` naming the field otherwise."""
    require(data, dict, where)
    user_id = require(data.get("user_id"), str, f"{where} user_id")
    if not user_id or len(user_id) > MAX_FIELD:
        raise ValueError(f"expected {where} user_id of 1 to {MAX_FIELD} characters, got {len(user_id)}")
    roles = require(data.get("roles"), list, f"{where} roles")
    for role in roles:
        require(role, str, f"{where} role")
    status = require(data.get("status", ACTIVE), str, f"{where} status")
    if status not in STATUSES:
        raise ValueError(f"expected {where} status among {', '.join(STATUSES)}, got {status!r}")
    text = {}
    for name in OPTIONAL_TEXT:
        value = data.get(name)
        if value is not None:
            value = require(value, str, f"{where} {name}")
            if len(value) > MAX_FIELD or any(ord(char) < 32 for char in value):
                raise ValueError(f"expected {where} {name} to be one line of at most {MAX_FIELD} characters")
            text[name] = value.strip()
    return Member(user_id, tuple(roles), status, **text)


def fetch_members(client: ServiceClient, memberships_url: str) -> list[Member]:
    """Every member of the context, all pages read and checked; ``ServiceError`` before anything is kept."""
    members: dict[str, Member] = {}
    for number, reply in enumerate(pages(client, memberships_url, [SCOPE_MEMBERSHIPS], MEMBERSHIPS_TYPE,
                                         "the course's memberships", MAX_PAGES), start=1):
        try:
            require(reply.data, dict, "the memberships reply")
            entries = require(reply.data.get("members"), list, "the memberships reply's members")
            for index, entry in enumerate(entries):
                member = parse_member(entry, f"page {number} member {index + 1}")
                members[member.user_id] = member
        except ValueError as exc:
            raise ServiceError(f"the course's memberships: {exc}; nothing was stored") from None
        if len(members) > MAX_MEMBERS:
            raise ServiceError(f"the course's memberships: more than {MAX_MEMBERS} members; nothing was stored")
    return list(members.values())


@dataclass
class RosterSync:
    """What :func:`sync_roster` changed."""

    added: list[str] = field(default_factory=list)  # accounts new to the LMS users table
    updated: int = 0
    inactive: list[str] = field(default_factory=list)  # accounts marked inactive by this sync
    students: int = 0  # learners written into nbgrader's students
    refused: list[str] = field(default_factory=list)  # "user_id: why"


def _split(member: Member) -> tuple[str, str]:
    if member.given_name or member.family_name:
        return member.given_name, member.family_name
    first, _, last = member.name.rpartition(" ")
    return (first, last) if first else (member.name, "")


def sync_roster(store: LmsStore, gradebook, issuer: str, members: list[Member],
                account_for: Callable[[dict], str]) -> RosterSync:
    """Keep ``members`` (from :func:`fetch_members`) in the LMS users table and nbgrader's students.

    ``gradebook`` is an open ``nbgrader.api.Gradebook`` on the same database; ``account_for``
    gives a new member's account name from their claims (the launch's rule), raising ``ValueError``
    to refuse one. A member already known keeps their account.
    """
    result = RosterSync()
    listed = set()
    for member in members:
        listed.add(member.user_id)
        known = store.user(issuer, member.user_id)
        try:
            account = known.account if known else account_for(member.claims())
            problem = id_problem(account)
            if problem:
                raise ValueError(f"the account name {account!r} {problem}")
            status = "active" if member.status == ACTIVE else "inactive"
            store.record_user(issuer, member.user_id, account, name=member.name, email=member.email,
                              roles=member.roles, status=status)
        except (AccountTaken, ValueError) as exc:
            result.refused.append(f"{member.user_id}: {exc}")
            continue
        if known is None:
            result.added.append(account)
        else:
            result.updated += 1
        if status == "inactive" and (known is None or known.status == "active"):
            result.inactive.append(account)
        if member.learner:
            first, last = _split(member)
            gradebook.update_or_create_student(account, first_name=first, last_name=last,
                                               email=member.email or None, lms_user_id=member.user_id)
            result.students += 1
    for user in store.users():
        if user.issuer == issuer and user.sub not in listed and user.status == "active":
            store.set_status(issuer, user.sub, "inactive")  # left the course: marked, never deleted
            result.inactive.append(user.account)
    return result


def roster_rows(store: LmsStore, issuer: str, members: list[Member]) -> list[dict[str, str]]:
    """The active learners as roster lines (:data:`rbtutor.course.export.ROSTER_COLUMNS`), by account.

    ``sis_user_id`` is the member's ``lis_person_sourcedid`` from ``members`` (the listing just read).
    Canvas's numeric user id and Blackboard's user name are not part of NRPS: they stay empty for the
    instructor to fill (Canvas also matches by the SIS user id).
    """
    sourced = {member.user_id: member.lis_person_sourcedid for member in members}
    rows = []
    for user in store.users():
        learner = any(role.rsplit("#", 1)[-1] == LEARNER for role in user.roles)
        if user.issuer != issuer or user.status != "active" or not learner:
            continue
        rows.append({"student_id": user.account, "name": user.name, "email": user.email, "canvas_user_id": "",
                     "blackboard_username": "", "sis_user_id": sourced.get(user.sub, ""), "sis_login_id": "",
                     "section": "", "lms_user_id": user.sub})
    return rows
