"""The LMS of the LTI tests: an LTI 1.3 platform built on ``lti1p3platform`` and served by FastAPI.

``lti1p3platform`` (an LMS vendor's platform library) does the protocol: the registration, the
third-party initiated log-in URL, building and signing the id_token and its auto-submitting form,
the platform's JWKS, the OAuth2 client-credentials token (checking the tool's JWT assertion against
the tool's keys), checking the bearer token and its scopes on each service call, the AGS and NRPS
claims, and checking the tool's deep-linking response. This module holds only what the library
leaves to its user: the storage (one course, its members, resource links, line items, scores,
deep-linked items, pending launches) and the routes. Everything is kept in memory: one process
lives for one test session, and ``POST /test/reset`` puts the course back as it started.

Test-only routes live under ``/test/``; :mod:`lti_platform.client` is their Python face.
Run it with ``uvicorn --factory lti_platform.app:create_app`` (the fixture does).
"""

from __future__ import annotations

import copy
import json
import os
import secrets
import time
import typing as t
from dataclasses import dataclass, field

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI, HTTPException
from fastapi import Request as WebRequest
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from lti1p3platform import exceptions as lti_errors
from lti1p3platform.framework.fastapi.message_launch import FastapiMessageLaunch
from lti1p3platform.framework.fastapi.oidc_login import FastAPIOIDCLogin
from lti1p3platform.lineitem import TLineItem
from lti1p3platform.ltiplatform import LTI1P3PlatformConfAbstract
from lti1p3platform.membership import Context
from lti1p3platform.message_launch import LTIAdvantageMessageLaunchAbstract
from lti1p3platform.registration import Registration
from lti1p3platform.request import Request as LibraryRequest
from lti1p3platform.score import UpdateScoreStatus
from lti1p3platform.service_connector import AssignmentsGradesService, NamesRoleProvisioningService

ROLE = "http://purl.imsglobal.org/vocab/lis/v2/membership#"
INSTRUCTOR = ROLE + "Instructor"
LEARNER = ROLE + "Learner"
TEACHING_ASSISTANT = "http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant"
LIS_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/lis"
ROLES_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/roles"
DEPLOYMENT_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/deployment_id"
VERSION_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/version"
CLIENT_ID = "rbtutor-test-client"
DEPLOYMENT_ID = "rbtutor-deployment-1"
CONTEXT = {"id": "ship-dynamics-2026", "label": "SHIP301", "title": "Rigid-body dynamics of ships"}
#: the tweaks a test may ask for on one launch (``tweak=`` of the launch page), each breaking one thing
TWEAKS = ("expired", "not_yet_valid", "unknown_key", "other_audience", "other_deployment", "no_roles",
          "old_version")
#: the faults a test may switch on for the service routes (``POST /test/faults``)
FAULTS = ("503", "429", "malformed", "huge", "redirect")
SERVICE_PREFIXES = ("/token", "/ags/", "/nrps/")
HUGE_BYTES = 64 * 1024 * 1024


def first_members() -> list[dict]:
    """The course as it starts: an instructor and two students, with the claims an LMS sends."""
    people = [("inst-7c1e", "Leonhard Euler", "leonhard.euler@uni.example", "leuler", [INSTRUCTOR]),
              ("stu-2b9d", "Sofia Kovalevskaya", "sofia.kovalevskaya@uni.example", "skovalevskaya", [LEARNER]),
              ("stu-4f03", "Joseph Lagrange", "joseph.lagrange@uni.example", "jlagrange", [LEARNER])]
    return [member_record(sub, name, email, login, roles) for sub, name, email, login, roles in people]


def member_record(sub: str, name: str, email: str, login: str, roles: list[str], status: str = "Active") -> dict:
    given, _, family = name.partition(" ")
    return {"user_id": sub, "name": name, "given_name": given, "family_name": family, "email": email,
            "lis_person_sourcedid": login, "roles": list(roles), "status": status}


def pem_key() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def public_pem(private: str) -> str:
    key = serialization.load_pem_private_key(private.encode(), password=None)
    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo).decode()


@dataclass
class Store:
    """Everything the platform remembers; ``reset`` puts back the course as it started."""

    base_url: str = ""
    platform_key: str = field(default_factory=pem_key)
    stranger_key: str = field(default_factory=pem_key)  # signs the ``unknown_key`` launches; never published
    tool: dict = field(default_factory=dict)
    members: list = field(default_factory=first_members)
    resource_links: dict = field(default_factory=dict)
    line_items: dict = field(default_factory=dict)
    scores: dict = field(default_factory=dict)  # line item id -> user id -> the last score posted
    score_posts: list = field(default_factory=list)  # every score posted, in order
    deep_links: list = field(default_factory=list)
    launches: dict = field(default_factory=dict)  # lti_message_hint -> the launch it stands for
    faults: list = field(default_factory=list)
    requests: list = field(default_factory=list)  # (method, path, status) of every service call

    def reset(self) -> None:
        fresh = Store(base_url=self.base_url, platform_key=self.platform_key, stranger_key=self.stranger_key)
        self.__dict__.update(fresh.__dict__)

    def member(self, sub: str) -> dict:
        for member in self.members:
            if member["user_id"] == sub:
                return member
        raise HTTPException(404, f"no member {sub!r} in the course")


class PlatformConfig(LTI1P3PlatformConfAbstract):
    """The library's platform configuration over :class:`Store`, made anew for every request.

    A fresh registration each time means the tool's JWKS URL is read again on every token
    request, so a key the tool rotated in is seen at once.
    """

    def init_platform_config(self, store: Store, signing_key: str | None = None, **_: t.Any) -> None:
        self.store = store
        self.signing_key = signing_key or store.platform_key
        self.get_registration()  # the library's services expect it made

    def get_registration_by_params(self, **_: t.Any) -> Registration:
        tool = self.store.tool
        registration = (Registration().set_iss(self.store.base_url).set_client_id(tool.get("client_id", CLIENT_ID))
                        .set_deployment_id(tool.get("deployment_id", DEPLOYMENT_ID))
                        .set_platform_private_key(self.signing_key)
                        .set_platform_public_key(public_pem(self.store.platform_key)))
        for key, setter in (("target_link_uri", registration.set_launch_url),
                            ("oidc_login_url", registration.set_oidc_login_url),
                            ("deep_link_uri", registration.set_deeplink_launch_url),
                            ("jwks_url", registration.set_tool_key_set_url),
                            ("jwks", registration.set_tool_key_set)):
            if tool.get(key):
                setter(tool[key])
        return registration


class PreparedRequest(LibraryRequest):
    """The library's request object from what the route already read (FastAPI reads bodies asynchronously)."""

    def build_metadata(self, request: t.Any) -> t.Any:
        return request


class Launch(FastapiMessageLaunch, LTIAdvantageMessageLaunchAbstract):
    """The library's launch with the test tweaks: claims dropped or replaced after it built the message."""

    drop: tuple = ()
    replace: t.ClassVar[dict] = {}  # each launch sets its own (tweaked)

    def get_launch_message(self, include_extra_claims: bool = True) -> dict:
        message = super().get_launch_message(include_extra_claims)
        message.update(self.replace)
        for claim in self.drop:
            message.pop(claim, None)
        return message


class Grades(AssignmentsGradesService):
    """AGS line items and scores over :class:`Store` (the library checks the token and its scopes)."""

    def __init__(self, request, config, store: Store):
        super().__init__(request, config, f"{store.base_url}/ags/{CONTEXT['id']}/lineitems")
        self.store = store

    def find_lineitems(self, page=1, limit=None, line_item_id=None, resource_link_id=None, resource_id=None,
                       tag=None, **_):
        items = [item for item in self.store.line_items.values()
                 if all(want is None or item.get(key) == want for key, want in
                        (("resourceLinkId", resource_link_id), ("resourceId", resource_id), ("tag", tag)))]
        return {"content": items, "has_next": False, "next": None}

    def find_lineitem(self, line_item_id: str) -> TLineItem:
        try:
            return self.store.line_items[line_item_id]
        except KeyError:
            raise lti_errors.LineItemNotFoundException(line_item_id) from None

    def create_lineitem(self, creation_data: TLineItem) -> TLineItem:
        number = str(len(self.store.line_items) + 1)
        item = {**creation_data, "id": f"{self.ags.lineitems_url}/{number}"}
        self.store.line_items[number] = item
        return item

    def update_lineitem(self, update_data: TLineItem) -> TLineItem:
        number = str(update_data["id"]).rstrip("/").rsplit("/", 1)[-1]
        item = {**self.find_lineitem(number), **update_data, "id": self.find_lineitem(number)["id"]}
        self.store.line_items[number] = item
        return item

    def delete_lineitem(self, line_item_id: str) -> None:
        self.find_lineitem(line_item_id)
        del self.store.line_items[line_item_id]

    def update_score(self, line_item_id: str, score) -> UpdateScoreStatus:
        self.find_lineitem(line_item_id)
        if not isinstance(score, dict):
            raise lti_errors.LtiServiceException("a score is a JSON object", 400)
        missing = [key for key in ("userId", "activityProgress", "gradingProgress", "timestamp") if key not in score]
        if missing:
            raise lti_errors.LtiServiceException(f"score without {', '.join(missing)}", 400)
        self.store.member(str(score["userId"]))
        kept = self.store.scores.setdefault(line_item_id, {})
        earlier = kept.get(str(score["userId"]))
        if earlier and str(score["timestamp"]) < str(earlier["timestamp"]):
            return UpdateScoreStatus.OLD_TIMESTAMP
        kept[str(score["userId"])] = dict(score)
        self.store.score_posts.append({"line_item": line_item_id, **score})
        return UpdateScoreStatus.SUCCESS if earlier else UpdateScoreStatus.CREATED

    def get_results(self, line_item_id: str, page=1, limit=None, user_id=None, **_):
        item = self.find_lineitem(line_item_id)
        results = [{"id": f"{item['id']}/results/{user}", "userId": user, "resultScore": s.get("scoreGiven"),
                    "resultMaximum": s.get("scoreMaximum"), "scoreOf": item["id"]}
                   for user, s in self.store.scores.get(line_item_id, {}).items() if user_id in (None, user)]
        return {"content": results, "has_next": False, "next": None}


class Roster(NamesRoleProvisioningService):
    """NRPS context memberships over :class:`Store`, a page of ``limit`` members at a time."""

    def __init__(self, request, config, store: Store):
        super().__init__(request, config, f"{store.base_url}/nrps/{CONTEXT['id']}/memberships")
        self.store = store

    def get_context_by_id(self) -> Context:
        return Context(**CONTEXT)

    def is_resource_link_valid(self, context_id: str, resource_link_id: str) -> bool:
        return resource_link_id in self.store.resource_links

    def get_member_data_page(self, page=1, limit=None, role=None, since=None, **_):
        members = [copy.deepcopy(m) for m in self.store.members if role is None or role in m["roles"]]
        if limit is None:
            return {"content": members, "has_next": False, "next": None}
        start = (int(page) - 1) * int(limit)
        return {"content": members[start:start + int(limit)], "has_next": start + int(limit) < len(members),
                "next": None}


def library_response(answer) -> Response:
    """A response of the library's services as a FastAPI response (a ``next`` page also as a Link header)."""
    if answer.code >= 400 or answer.result is None:
        body = {"error": answer.message} if answer.code >= 400 else None
        return JSONResponse(body, status_code=answer.code) if body else Response(status_code=answer.code)
    headers = {"Link": f'<{answer.result["next"]}>; rel="next"'} if answer.result.get("next") else {}
    return JSONResponse(answer.result, status_code=answer.code, media_type=answer.media_type, headers=headers)


async def prepared(request: WebRequest) -> PreparedRequest:
    body = await request.body()
    query = {key: (int(value) if key in ("page", "limit") and value.isdigit() else value)
             for key, value in request.query_params.items()}
    try:
        data = json.loads(body) if body else None
    except ValueError:
        raise HTTPException(400, "the body is not JSON") from None
    return PreparedRequest({"method": request.method, "form_data": {}, "get_data": query,
                            "headers": request.headers, "content_type": request.headers.get("content-type"),
                            "path": request.url.path, "json": data})


def fault_response(store: Store, path: str) -> Response | None:
    """The answer of the first fault switched on for ``path``, counted down; None when none applies."""
    for fault in store.faults:
        if fault["count"] > 0 and path.startswith(fault["path"]):
            fault["count"] -= 1
            kind = fault["kind"]
            if kind == "503":
                return PlainTextResponse("down for maintenance", status_code=503)
            if kind == "429":
                return PlainTextResponse("slow down", status_code=429, headers={"Retry-After": "1"})
            if kind == "malformed":
                return Response('{"members": [', media_type="application/json")
            if kind == "huge":
                return Response(b"[" + b" " * HUGE_BYTES + b"]", media_type="application/json")
            return RedirectResponse(f"http://lms-elsewhere.invalid{path}", status_code=307)
    return None


class Login(FastAPIOIDCLogin):
    """The library's third-party initiated log-in; the message hint names the launch kept in :class:`Store`."""

    def set_lti_message_hint(self, **kwargs: t.Any) -> None:
        self._lti_message_hint = kwargs["hint"]


def course_page(store: Store, sub: str) -> str:
    """The member's course page: one launch link a resource link, and deep linking for instructors."""
    member = store.member(sub)
    links = [f'<li><a href="/launch?user={sub}&amp;resource_link={link_id}">{link["title"]}</a></li>'
             for link_id, link in store.resource_links.items()]
    if INSTRUCTOR in member["roles"]:
        links.append(f'<li><a href="/launch?user={sub}&amp;deep_link=1">Add an external tool</a></li>')
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{CONTEXT['title']}</title></head>"
            f"<body><h1>{CONTEXT['title']}</h1><p>Signed in as {member['name']}</p><ul>{''.join(links)}</ul>"
            "</body></html>")


def pending_launch(store: Store, query: dict) -> tuple[str, dict]:
    """Keep the launch a member asked for under a fresh message hint; return the hint and the launch."""
    sub = query.get("user", "")
    store.member(sub)
    tweaks = [tweak for tweak in query.get("tweak", "").split(",") if tweak]
    unknown = sorted(set(tweaks) - set(TWEAKS))
    if unknown:
        raise HTTPException(400, f"unknown tweak(s) {unknown}; known: {TWEAKS}")
    link_id = query.get("resource_link")
    if not query.get("deep_link") and link_id not in store.resource_links:
        raise HTTPException(404, f"no resource link {link_id!r}")
    hint = secrets.token_urlsafe(16)
    store.launches[hint] = {"user": sub, "resource_link": link_id, "deep_link": bool(query.get("deep_link")),
                            "tweaks": tweaks}
    return hint, store.launches[hint]


def tweaked(launch: Launch, store: Store, tweaks: list[str]) -> Launch:
    """Break the launch the way each tweak says (an id_token a tool must refuse)."""
    replace, drop = {}, []
    if "expired" in tweaks:
        launch.set_id_token_expiration(-120)
    if "not_yet_valid" in tweaks:
        replace["nbf"] = int(time.time()) + 600
    if "other_audience" in tweaks:
        replace["aud"] = "another-tool"
        replace["azp"] = "another-tool"
    if "other_deployment" in tweaks:
        replace[DEPLOYMENT_CLAIM] = "deployment-nobody-registered"
    if "old_version" in tweaks:
        replace[VERSION_CLAIM] = "1.1"
    if "no_roles" in tweaks:
        drop.append(ROLES_CLAIM)
    launch.replace, launch.drop = replace, tuple(drop)
    return launch


def build_launch(request: WebRequest, store: Store, pending: dict) -> Launch:
    """The library's launch message for ``pending``: the user, the course, the link and its services."""
    tweaks = pending["tweaks"]
    config = PlatformConfig(store=store, signing_key=store.stranger_key if "unknown_key" in tweaks else None)
    launch = Launch(request, config)
    member = store.member(pending["user"])
    launch.set_user_data(member["user_id"], member["roles"], member["name"], member["email"],
                         member["lis_person_sourcedid"])
    launch.set_launch_context_claim(CONTEXT["id"], ["http://purl.imsglobal.org/vocab/lis/v2/course#CourseOffering"],
                                    CONTEXT["title"], CONTEXT["label"])
    launch.set_extra_claims({LIS_CLAIM: {"person_sourcedid": member["lis_person_sourcedid"]}})
    base = store.base_url
    launch.set_nrps(f"{base}/nrps/{CONTEXT['id']}/memberships")
    if pending["deep_link"]:
        launch.set_dl(f"{base}/deep_link/return", "Choose an assignment", accept_types={"ltiResourceLink"},
                      extra_data={"hint": secrets.token_hex(4)})
        launch.set_custom_parameters_claim({"login": member["lis_person_sourcedid"]})
    else:
        link = store.resource_links[pending["resource_link"]]
        launch.set_resource_link_claim(pending["resource_link"], title=link["title"])
        launch.set_custom_parameters_claim({"login": member["lis_person_sourcedid"], **link.get("custom", {})})
        if link.get("target_link_uri"):
            launch.set_launch_url(link["target_link_uri"])
        item = next((i for i in store.line_items.values() if i.get("resourceLinkId") == pending["resource_link"]),
                    None)
        launch.set_ags(f"{base}/ags/{CONTEXT['id']}/lineitems", item["id"] if item else None)
    return tweaked(launch, store, tweaks)


def check_authorization_request(store: Store, query: dict) -> dict:
    """The tool's OIDC authorization request checked against the registration; returns the pending launch."""
    if query.get("response_type") != "id_token" or "openid" not in query.get("scope", "").split():
        raise HTTPException(400, "expected response_type=id_token and scope openid")
    if query.get("redirect_uri") not in store.tool.get("redirect_uris", []):
        raise HTTPException(400, f"redirect_uri {query.get('redirect_uri')!r} is not registered for the tool")
    pending = store.launches.get(query.get("lti_message_hint", ""))
    if pending is None or pending["user"] != query.get("login_hint"):
        raise HTTPException(400, "lti_message_hint and login_hint name no launch of this user")
    return pending


def add_deep_linked(store: Store, items: list[dict]) -> list[dict]:
    """Keep the tool's content items; each resource link becomes a link of the course, with its line item."""
    kept = []
    for item in items:
        link_id = f"rl-{len(store.resource_links) + 1}"
        store.resource_links[link_id] = {"title": item.get("title", link_id), "target_link_uri": item.get("url"),
                                         "custom": item.get("custom", {})}
        if item.get("lineItem"):
            number = str(len(store.line_items) + 1)
            store.line_items[number] = {**item["lineItem"], "resourceLinkId": link_id,
                                        "id": f"{store.base_url}/ags/{CONTEXT['id']}/lineitems/{number}"}
        kept.append({**item, "resource_link": link_id})
    store.deep_links.append(kept)
    return kept


def add_protocol_routes(app: FastAPI, store: Store) -> None:
    """The routes an LMS has: course pages, log-in, JWKS, token, deep-linking return."""

    @app.get("/jwks")
    def jwks():
        config = PlatformConfig(store=store)
        return config.get_jwks()

    @app.get("/course/{sub}", response_class=HTMLResponse)
    def course(sub: str):
        return course_page(store, sub)

    @app.get("/launch")
    def launch_login(request: WebRequest):
        hint, pending = pending_launch(store, dict(request.query_params))
        config = PlatformConfig(store=store)
        login = Login(request, config)
        login.set_lti_message_hint(hint=hint)
        if pending["deep_link"]:
            login.set_deeplinking_launch_url()
        elif store.resource_links[pending["resource_link"]].get("target_link_uri"):
            login.set_launch_url(store.resource_links[pending["resource_link"]]["target_link_uri"])
        return login.initiate_login(pending["user"])

    @app.get("/auth")
    def authorize(request: WebRequest):
        pending = check_authorization_request(store, dict(request.query_params))
        try:
            return build_launch(request, store, pending).lti_launch()
        except lti_errors.PreflightRequestValidationException:
            raise HTTPException(400, "the authorization request lacks nonce, state, redirect_uri or "
                                     "the registered client_id") from None

    @app.post("/token")
    async def token(request: WebRequest):
        form = dict(await request.form())
        config = PlatformConfig(store=store)
        try:
            answer = config.get_access_token(form)
        except (lti_errors.MissingRequiredClaim, lti_errors.UnsupportedGrantType) as error:
            return JSONResponse({"error": "invalid_request", "error_description": str(error)}, status_code=400)
        except Exception as error:  # noqa: BLE001 - any failed assertion check is the client's fault
            return JSONResponse({"error": "invalid_client", "error_description": str(error)}, status_code=401)
        if not answer["scope"]:
            return JSONResponse({"error": "invalid_scope"}, status_code=400)
        return answer

    @app.post("/deep_link/return", response_class=HTMLResponse)
    async def deep_link_return(request: WebRequest):
        form = dict(await request.form())
        config = PlatformConfig(store=store)
        try:
            items = config.validate_deeplinking_resp({"JWT": form.get("JWT", "")})
        except Exception as error:  # noqa: BLE001 - whatever the library refuses is refused here
            raise HTTPException(400, f"deep-linking response refused: {error}") from None
        kept = add_deep_linked(store, items)
        return f"<!DOCTYPE html><html lang='en'><body><p>{len(kept)} item(s) added.</p></body></html>"


def add_service_routes(app: FastAPI, store: Store) -> None:
    """AGS and NRPS: the library checks the bearer token, this module keeps the data."""
    lineitems = f"/ags/{CONTEXT['id']}/lineitems"

    async def grades(request: WebRequest) -> Grades:
        return Grades(await prepared(request), PlatformConfig(store=store), store)

    @app.get(lineitems)
    async def list_items(request: WebRequest):
        service = await grades(request)
        return library_response(service.handle_resp(service.handle_get_lineitems))

    @app.post(lineitems)
    async def create_item(request: WebRequest):
        service = await grades(request)
        return library_response(service.handle_resp(service.handle_create_lineitem))

    @app.api_route(lineitems + "/{number}", methods=["GET", "PUT", "DELETE"])
    async def one_item(number: str, request: WebRequest):
        service = await grades(request)
        handler = {"GET": service.handle_get_lineitem, "PUT": service.handle_update_lineitem,
                   "DELETE": service.handle_delete_lineitem}[request.method]
        return library_response(service.handle_resp(handler, line_item_id=number))

    @app.post(lineitems + "/{number}/scores")
    async def score(number: str, request: WebRequest):
        service = await grades(request)
        return library_response(service.handle_resp(service.handle_update_score, line_item_id=number))

    @app.get(lineitems + "/{number}/results")
    async def results(number: str, request: WebRequest):
        service = await grades(request)
        return library_response(service.handle_resp(service.handle_get_results, line_item_id=number))

    @app.get(f"/nrps/{CONTEXT['id']}/memberships")
    async def memberships(request: WebRequest):
        service = Roster(await prepared(request), PlatformConfig(store=store), store)
        return library_response(service.handle_resp(service.handle_get_members))


def add_test_routes(app: FastAPI, store: Store) -> None:
    """Routes no LMS has: what the tests set up, switch on and read back."""

    @app.get("/health")
    def health():
        return {"ok": True}

    @app.get("/test/config")
    def config():
        base = store.base_url
        return {"issuer": base, "client_id": store.tool.get("client_id", CLIENT_ID),
                "deployment_id": store.tool.get("deployment_id", DEPLOYMENT_ID), "context": CONTEXT,
                "auth_url": f"{base}/auth", "token_url": f"{base}/token", "jwks_url": f"{base}/jwks",
                "lineitems_url": f"{base}/ags/{CONTEXT['id']}/lineitems",
                "memberships_url": f"{base}/nrps/{CONTEXT['id']}/memberships",
                "deep_link_return_url": f"{base}/deep_link/return", "members": store.members,
                "resource_links": store.resource_links, "tool": store.tool}

    @app.post("/test/reset")
    def reset():
        store.reset()
        return {"ok": True}

    @app.post("/test/tool")
    async def register_tool(request: WebRequest):
        store.tool = await request.json()
        return store.tool

    @app.post("/test/members")
    async def add_member(request: WebRequest):
        body = await request.json()
        record = member_record(body["user_id"], body["name"], body["email"], body["login"],
                               body.get("roles", [LEARNER]), body.get("status", "Active"))
        store.members = [m for m in store.members if m["user_id"] != record["user_id"]] + [record]
        return record

    @app.delete("/test/members/{user_id}")
    def remove_member(user_id: str):
        store.member(user_id)
        store.members = [m for m in store.members if m["user_id"] != user_id]
        return {"ok": True}

    @app.post("/test/resource_links")
    async def add_resource_link(request: WebRequest):
        body = await request.json()
        store.resource_links[body["id"]] = {key: body[key] for key in ("title", "target_link_uri", "custom")
                                            if key in body}
        if body.get("line_item"):
            number = str(len(store.line_items) + 1)
            store.line_items[number] = {**body["line_item"], "resourceLinkId": body["id"],
                                        "id": f"{store.base_url}/ags/{CONTEXT['id']}/lineitems/{number}"}
        return store.resource_links[body["id"]]

    @app.get("/test/store")
    def read_store():
        return {"scores": store.scores, "score_posts": store.score_posts, "line_items": store.line_items,
                "deep_links": store.deep_links, "requests": store.requests}

    @app.post("/test/faults")
    async def add_fault(request: WebRequest):
        body = await request.json()
        if body.get("kind") not in FAULTS:
            raise HTTPException(400, f"unknown fault {body.get('kind')!r}; known: {FAULTS}")
        store.faults.append({"kind": body["kind"], "count": int(body.get("count", 1)), "path": body.get("path", "/")})
        return store.faults

    @app.delete("/test/faults")
    def clear_faults():
        store.faults.clear()
        return store.faults


def create_app(base_url: str | None = None) -> FastAPI:
    """The platform's application; ``base_url`` (or ``LTI_PLATFORM_URL``) is its issuer and the root of its URLs."""
    store = Store(base_url=(base_url or os.environ.get("LTI_PLATFORM_URL", "http://127.0.0.1")).rstrip("/"))
    app = FastAPI(title="LTI test platform")
    app.state.store = store

    @app.middleware("http")
    async def faults_and_log(request: WebRequest, call_next):
        path = request.url.path
        service = path.startswith(SERVICE_PREFIXES)
        answer = fault_response(store, path) if service else None
        if answer is None:
            answer = await call_next(request)
        if service:
            store.requests.append({"method": request.method, "path": path, "status": answer.status_code})
        return answer

    add_protocol_routes(app, store)
    add_service_routes(app, store)
    add_test_routes(app, store)
    return app
