"""Step: placing assignments in the LMS. The answer to an LTI Deep Linking request: pick a released assignment.

An instructor adds the tool from the LMS's "add external tool" dialog; the LMS launches the tool
with an ``LtiDeepLinkingRequest`` (an id_token the launch has already verified,
:mod:`rbtutor.lms.launch`). The tool then:

1. reads the request's deep-linking settings (:class:`DeepLinkRequest.from_claims`: where to return,
   what it accepts, the opaque ``data`` to give back) and refuses a request that accepts no
   ``ltiResourceLink`` or comes from a learner;
2. shows the released assignments (:func:`released_assignments`, in the hub :func:`released_in`:
   those in nbgrader's exchange, which ``rbtutor release`` puts there, with their points from the
   gradebook), one button each
   (:func:`picker_page`); the pick comes back with a one-use ticket bound to the verified request
   (:class:`PendingPicks`), never with the request's fields, which the page cannot be trusted to keep;
3. on the pick, signs an ``LtiDeepLinkingResponse`` with the course's current key
   (:func:`response_token`): one ``ltiResourceLink`` whose ``lineItem`` has ``scoreMaximum`` = the
   assignment's points and ``resourceId`` = the assignment's id, and a custom parameter naming the
   assignment; :func:`return_page` posts it to the platform's ``deep_link_return_url`` at once.

The grades of that assignment then go to the line item the platform made from this item (the
outbox finds it by ``resourceId``, :func:`rbtutor.lms.outbox.line_item_for`).
:class:`DeepLinkHandler` serves steps 2 and 3 in the hub (see its docstring for its wiring).
"""

from __future__ import annotations

import html
import os
import secrets
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from jupyterhub.handlers import BaseHandler
from tornado import web

from .keys import ToolKeys
from .services import require

MESSAGE_TYPE = "https://purl.imsglobal.org/spec/lti/claim/message_type"
VERSION = "https://purl.imsglobal.org/spec/lti/claim/version"
DEPLOYMENT = "https://purl.imsglobal.org/spec/lti/claim/deployment_id"
ROLES = "https://purl.imsglobal.org/spec/lti/claim/roles"
TARGET = "https://purl.imsglobal.org/spec/lti/claim/target_link_uri"
SETTINGS = "https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings"
CONTENT_ITEMS = "https://purl.imsglobal.org/spec/lti-dl/claim/content_items"
DATA = "https://purl.imsglobal.org/spec/lti-dl/claim/data"
RESOURCE_LINK = "ltiResourceLink"
CUSTOM_KEY = "assignment"  # the custom parameter the launch reads (rbtutor.lms.launch.assignment_of)
TAG = "rbtutor"
TEACHING_ROLES = ("Instructor", "Administrator", "ContentDeveloper", "TeachingAssistant")
TICKET_SECONDS = 600


class DeepLinkError(ValueError):
    """The deep-linking request or pick cannot be answered; the message says why."""


@dataclass(frozen=True)
class DeepLinkRequest:
    """What the tool needs of a verified ``LtiDeepLinkingRequest``."""

    issuer: str
    client_id: str
    deployment_id: str
    return_url: str
    data: object  # opaque: given back as it came (most platforms send text; lti1p3platform an object)
    accept_multiple: bool
    launch_url: str  # where the placed links launch: the request's target link URI (the tool's)

    @classmethod
    def from_claims(cls, claims: dict) -> DeepLinkRequest:
        """From the verified id_token's claims; :class:`DeepLinkError` for a request the tool cannot answer."""
        try:
            if claims.get(MESSAGE_TYPE) != "LtiDeepLinkingRequest":
                raise ValueError(f"expected an LtiDeepLinkingRequest, got {claims.get(MESSAGE_TYPE)!r}")
            roles = [role.rsplit("#", 1)[-1] for role in require(claims.get(ROLES), list, "the roles claim")]
            if not set(roles) & set(TEACHING_ROLES):
                raise ValueError("only an instructor may place assignments in the course")
            settings = require(claims.get(SETTINGS), dict, "the deep-linking settings")
            accepted = require(settings.get("accept_types"), list, "accept_types")
            if RESOURCE_LINK not in accepted:
                raise ValueError(f"the LMS accepts {', '.join(map(str, accepted))} here, not {RESOURCE_LINK}")
            audience = claims.get("aud")
            client_id = audience[0] if isinstance(audience, list) and audience else audience
            data = settings.get("data")
            return cls(issuer=require(claims.get("iss"), str, "iss"), client_id=require(client_id, str, "aud"),
                       deployment_id=require(claims.get(DEPLOYMENT), str, "the deployment id"),
                       return_url=require(settings.get("deep_link_return_url"), str, "deep_link_return_url"),
                       data=data,
                       accept_multiple=settings.get("accept_multiple") is True,
                       launch_url=require(claims.get(TARGET), str, "the target link URI"))
        except ValueError as exc:
            raise DeepLinkError(f"deep linking: {exc}") from None


@dataclass(frozen=True)
class Choice:
    """One assignment the instructor may place: its id, its title and its points."""

    assignment: str
    title: str
    points: float


def released_assignments(grader) -> list[Choice]:
    """The assignments released to the students (nbgrader's exchange), with their points from the
    gradebook, in name order; one the gradebook does not know (no points) is left out."""
    released = set(grader.get_released_assignments())
    with grader.gradebook as gradebook:
        known = {a.name: float(a.max_score) for a in gradebook.assignments}
    return [Choice(name, name, known[name]) for name in sorted(released) if name in known and known[name] > 0]


class PendingPicks:
    """Verified requests waiting for the instructor's pick, each behind a random one-use ticket that
    only the account it was made for can use."""

    def __init__(self, lifetime: float = TICKET_SECONDS, clock=time.monotonic):
        self.lifetime, self.clock = lifetime, clock
        self._waiting: dict[str, tuple[float, str, DeepLinkRequest]] = {}

    def put(self, request: DeepLinkRequest, account: str) -> str:
        """A new ticket for ``request``, made by ``account``'s launch."""
        now = self.clock()
        self._waiting = {t: entry for t, entry in self._waiting.items() if entry[0] > now}
        ticket = secrets.token_urlsafe(24)
        self._waiting[ticket] = (now + self.lifetime, account, request)
        return ticket

    def peek(self, ticket: str, account: str) -> DeepLinkRequest:
        """The request of ``ticket``, left waiting; :class:`DeepLinkError` for an unknown, old or other's one."""
        expires, owner, request = self._waiting.get(ticket, (0.0, "", None))
        if request is None or expires <= self.clock() or owner != account:
            raise DeepLinkError("deep linking: this page has expired or was used; open the tool from the LMS again")
        return request

    def take(self, ticket: str, account: str) -> DeepLinkRequest:
        """The request of ``ticket``, which is used up (see :meth:`peek`)."""
        request = self.peek(ticket, account)
        del self._waiting[ticket]
        return request


def content_item(choice: Choice, launch_url: str) -> dict:
    """The ``ltiResourceLink`` of one assignment, with its line item."""
    return {"type": RESOURCE_LINK, "title": choice.title, "url": launch_url,
            "custom": {CUSTOM_KEY: choice.assignment},
            "lineItem": {"scoreMaximum": choice.points, "label": choice.title, "resourceId": choice.assignment,
                         "tag": TAG}}


def response_token(keys, request: DeepLinkRequest, choices: list[Choice], lifetime: int = 300) -> str:
    """The signed ``LtiDeepLinkingResponse`` (RS256, the current key's ``kid``) carrying ``choices``."""
    if not choices:
        raise DeepLinkError("deep linking: no assignment was picked")
    if len(choices) > 1 and not request.accept_multiple:
        raise DeepLinkError("deep linking: the LMS accepts one item here; pick one assignment")
    now = int(time.time())
    claims = {"iss": request.client_id, "aud": request.issuer, "iat": now, "exp": now + lifetime,
              "nonce": uuid.uuid4().hex, MESSAGE_TYPE: "LtiDeepLinkingResponse", VERSION: "1.3.0",
              DEPLOYMENT: request.deployment_id, CONTENT_ITEMS: [content_item(c, request.launch_url) for c in choices]}
    if request.data is not None:
        claims[DATA] = request.data
    return keys.sign(claims)


def pick(choices: list[Choice], assignment: str) -> Choice:
    """The released assignment the instructor picked; :class:`DeepLinkError` for any other name."""
    for choice in choices:
        if choice.assignment == assignment:
            return choice
    raise DeepLinkError(f"deep linking: {assignment!r} is not a released assignment "
                        f"({', '.join(c.assignment for c in choices) or 'none is released yet'})")


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: sans-serif; max-width: 40rem; margin: 2rem auto">
{body}
</body></html>
"""


def picker_page(choices: list[Choice], action: str, ticket: str, xsrf: str = "") -> str:
    """The page listing the released assignments, one button each, posting the pick to ``action``."""
    if not choices:
        body = ("<h1>No assignment to place yet</h1><p>Release an assignment first (<code>rbtutor release "
                "ASSIGNMENT</code>), then add the tool again.</p>")
        return PAGE.format(title="No assignment released", body=body)
    hidden = (f'<input type="hidden" name="ticket" value="{html.escape(ticket)}">'
              + (f'<input type="hidden" name="_xsrf" value="{html.escape(xsrf)}">' if xsrf else ""))
    rows = "\n".join(f'<li><button type="submit" name="assignment" value="{html.escape(c.assignment)}">'
                     f"{html.escape(c.title)}</button> {c.points:g} points</li>" for c in choices)
    body = (f"<h1>Place an assignment in the course</h1><p>Pick the assignment this link opens. Its grades "
            f"come back to the LMS column it creates.</p><form method=\"post\" action=\"{html.escape(action)}\">"
            f"{hidden}<ul>\n{rows}\n</ul></form>")
    return PAGE.format(title="Place an assignment", body=body)


def return_page(return_url: str, token: str) -> str:
    """The page that posts the signed response to the LMS at once (a button when scripts are off)."""
    body = (f'<form id="return" method="post" action="{html.escape(return_url)}">'
            f'<input type="hidden" name="JWT" value="{html.escape(token)}">'
            "<p>Returning to the LMS…</p><noscript><button type=\"submit\">Continue</button></noscript></form>"
            "<script>document.getElementById('return').submit()</script>")
    return PAGE.format(title="Returning to the LMS", body=body)


#: the picks waiting in this hub process (the hub is one process)
PICKS = PendingPicks()


def picker_url(hub_base: str, request: DeepLinkRequest, account: str) -> str:
    """Where the hub's log-in sends an instructor's deep-linking launch: the picker, with a new ticket."""
    return f"{hub_base.rstrip('/')}/lti13/deep_link?ticket={PICKS.put(request, account)}"


def released_in(outbound: Path, db_url: str) -> list[Choice]:
    """As :func:`released_assignments`, from the exchange's outbound folder and the gradebook at ``db_url``
    (the hub's way: no nbgrader configuration is loaded into the hub's process)."""
    # deferred: nbgrader takes 3.1 s to import (python -X importtime 2026-12-06); only a pick needs it
    from nbgrader.api import Gradebook

    released = {entry.name for entry in outbound.iterdir() if entry.is_dir()} if outbound.is_dir() else set()
    with Gradebook(db_url) as gradebook:
        known = {a.name: float(a.max_score) for a in gradebook.assignments}
    return [Choice(name, name, known[name]) for name in sorted(released) if name in known and known[name] > 0]


def framed_by(return_url: str) -> str:
    """The page's Content-Security-Policy: it may be shown in a frame of the LMS that asked (the origin of
    the request's return URL: Canvas opens its "add a tool" dialogs in a frame), and of the hub."""
    parts = urlsplit(return_url)
    lms = f"{parts.scheme}://{parts.netloc}" if parts.scheme in ("http", "https") and parts.netloc else ""
    return f"frame-ancestors 'self' {lms}".rstrip()


class DeepLinkHandler(BaseHandler):
    """``/hub/lti13/deep_link``: the picker (GET) and the signed answer posted back to the LMS (POST).

    Wired in by :mod:`rbtutor.lms.authenticator` (its ``get_handlers``; its callback sends an
    instructor's deep-linking launch here with :func:`picker_url`). The released assignments are
    those in the authenticator's ``released_folder`` with their points from its ``gradebook_url``;
    without a ``released_folder``, nbgrader's listing of the course in ``course_folder`` (else
    ``RBTUTOR_COURSE``). Both pages may be framed by the LMS that asked (:func:`framed_by`); every
    other hub page keeps JupyterHub's ``frame-ancestors 'none'``.
    """

    def choices(self) -> list[Choice]:
        authenticator = self.authenticator
        if getattr(authenticator, "released_folder", ""):
            authenticator.store()  # a SQLite gradebook the hub makes is given to the instructor first
            return released_in(Path(authenticator.released_folder), authenticator.gradebook_url)
        from ..course.layout import CourseLayout  # deferred: 1 ms, beside the next one

        # deferred: nbgrader takes 3.1 s to import (python -X importtime 2026-12-06); only a pick needs it
        from ..course.nbgrader import api

        folder = getattr(authenticator, "course_folder", "") or os.environ.get("RBTUTOR_COURSE", "")
        if not folder:
            raise web.HTTPError(500, "the hub knows no course folder (RBTUTOR_COURSE)")
        return released_assignments(api(CourseLayout(folder)))

    @web.authenticated
    def get(self):
        try:
            request = PICKS.peek(self.get_argument("ticket", ""), self.current_user.name)
        except DeepLinkError as exc:
            raise web.HTTPError(403, str(exc), reason="Deep linking refused") from None
        self.set_header("Content-Security-Policy", framed_by(request.return_url))
        page = picker_page(self.choices(), self.request.path, self.get_argument("ticket"), self.xsrf_token.decode())
        self.finish(page)

    @web.authenticated
    def post(self):
        try:
            request = PICKS.take(self.get_argument("ticket", ""), self.current_user.name)
            choice = pick(self.choices(), self.get_argument("assignment", ""))
            token = response_token(ToolKeys(self.authenticator.keys_folder), request, [choice])
        except DeepLinkError as exc:
            raise web.HTTPError(403, str(exc), reason="Deep linking refused") from None
        self.set_header("Content-Security-Policy", framed_by(request.return_url))
        self.log.info("deep linking: %s placed %s (%g points) in the LMS", self.current_user.name, choice.assignment,
                      choice.points)
        self.finish(return_page(request.return_url, token))
