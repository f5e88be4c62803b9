"""Step: talking to the LMS. The tool's HTTP client for the platform's LTI Advantage services.

The roster (:mod:`rbtutor.lms.roster`, Names and Roles) and the grades (:mod:`rbtutor.lms.outbox`,
Assignment and Grade Services) reach the platform only through :class:`ServiceClient`, which:

* gets an OAuth2 access token by the client-credentials grant, proving who the tool is with a
  short JWT signed by the course's current key (:func:`rbtutor.lms.keys.current`), and keeps it
  until shortly before it expires (one token per set of scopes);
* sends each request with a time-out, and reads the reply as a stream that it stops reading past
  :attr:`ServiceLimits.max_reply_bytes`, so a huge reply costs no more than that;
* follows a redirect only for a ``GET`` and only on the same origin (scheme, host and port), and
  sends nothing to an origin the platform was not configured with: a reply that points elsewhere
  is refused, so no token and no grade leaves for another host;
* retries a connection error, a ``5xx`` and a ``429`` with exponential back-off and jitter
  (a ``Retry-After`` the platform sends is honoured), bounded both in attempts and in total time;
  a retried ``POST`` of a score carries the same timestamp, so a platform that had taken the
  first one keeps one score (the outbox marks a row sent only once the platform has answered);
* parses the JSON and hands it to a shape check (:func:`require`) before the caller sees it, so a
  malformed reply is a :class:`ServiceError` that names what was wrong, and nothing is stored.

Libraries: ``httpx`` for HTTP (streaming, time-outs, no automatic redirects), ``PyJWT`` for the
signed client assertion. ``pylti1p3`` has AGS and NRPS clients too, but they are built on
``requests`` without a reply-size bound, redirect rule or back-off, so the few requests are
written here instead.
"""

from __future__ import annotations

import email.utils
import json
import random
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx
import jwt

from ..grading.report import terminal_text

CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
SCOPE_LINE_ITEM = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
SCOPE_RESULT_READONLY = "https://purl.imsglobal.org/spec/lti-ags/scope/result.readonly"
SCOPE_SCORE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
SCOPE_MEMBERSHIPS = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")


class ServiceError(RuntimeError):
    """A service call that did not succeed; ``transient`` when trying again later may work
    (the platform was down, busy or slow), false when the platform refused or answered nonsense."""

    def __init__(self, message: str, transient: bool = False, status: int | None = None,
                 wait: float | None = None):
        super().__init__(terminal_text(message))
        self.transient = transient
        self.status = status
        self.wait = wait  # seconds the platform asked to wait (Retry-After), if it did


@dataclass(frozen=True)
class ServiceLimits:
    """How long, how much and how often the client tries, per request."""

    timeout: float = 10.0  # seconds, for connecting and for each read
    max_reply_bytes: int = 2 * 1024 * 1024  # a reply past this is refused, unread
    attempts: int = 5  # tries per request, the first included
    total_seconds: float = 60.0  # no retry starts after this long
    first_backoff: float = 0.5  # seconds before the second try; doubled each time
    max_backoff: float = 8.0
    max_redirects: int = 3  # same-origin redirects of a GET
    token_margin: float = 30.0  # a token is renewed this many seconds before it expires


@dataclass(frozen=True)
class PlatformServices:
    """Where the platform's services are and who the tool is to them (from the course's ``[lms]``)."""

    client_id: str
    token_url: str
    token_audience: str = ""  # the ``aud`` of the client assertion; the token URL when empty
    lineitems_url: str = ""  # the context's line items (the AGS claim's ``lineitems``)
    memberships_url: str = ""  # the context's memberships (the NRPS claim's ``context_memberships_url``)
    extra_origins: tuple[str, ...] = ()

    def origins(self) -> set[str]:
        """Every origin the client may send to: those of the configured URLs."""
        urls = [self.token_url, self.lineitems_url, self.memberships_url, *self.extra_origins]
        return {origin(url) for url in urls if url}


@dataclass(frozen=True)
class Reply:
    """A reply that passed the checks: its status, headers and parsed JSON (None when empty)."""

    status: int
    headers: httpx.Headers
    data: object


AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
NRPS_CLAIM = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"


def service_urls(claims: dict) -> tuple[str, str]:
    """The context's line items URL and memberships URL from a verified launch's claims ("" when the
    platform did not offer the service); ``ValueError`` for a URL that :func:`origin` refuses."""
    ags = claims.get(AGS_CLAIM) if isinstance(claims.get(AGS_CLAIM), dict) else {}
    nrps = claims.get(NRPS_CLAIM) if isinstance(claims.get(NRPS_CLAIM), dict) else {}
    urls = (ags.get("lineitems") or "", nrps.get("context_memberships_url") or "")
    for url in urls:
        if url:
            origin(require(url, str, "a service URL of the launch"))
    return urls


def origin(url: str) -> str:
    """``scheme://host:port`` of ``url`` (the port spelled out), or ``ValueError`` for a URL that is
    not absolute http(s), or plain http to a host that is not this machine."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"expected an absolute http(s) URL, got {url!r}")
    if parts.scheme == "http" and parts.hostname not in LOOPBACK_HOSTS:
        raise ValueError(f"expected https for a platform that is not on this machine, got {url!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{parts.hostname}:{port}"


def require(value: object, kind: type | tuple[type, ...], where: str) -> object:
    """``value`` when it is of ``kind`` (a bool is not a number), else ``ValueError`` naming ``where``."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    is_bool_as_number = isinstance(value, bool) and bool not in kinds
    if not isinstance(value, kinds) or is_bool_as_number:
        names = " or ".join(k.__name__ for k in kinds)
        raise ValueError(f"expected {where} to be {names}, got {type(value).__name__}")
    return value


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass
class _Token:
    value: str
    expires: float  # on the client's monotonic clock


@dataclass
class ServiceClient:
    """Requests to one platform's services; see the module docstring for what each one is held to.

    ``keys`` is the course's :class:`rbtutor.lms.keys.ToolKeys` (anything whose ``current()`` has a
    ``kid`` and a ``private_key`` PyJWT signs RS256 with). ``on_wait`` hears of each wait before a
    retry (the command line prints it); ``sleep`` and ``clock`` are the ones the waits use.
    """

    platform: PlatformServices
    keys: object
    limits: ServiceLimits = field(default_factory=ServiceLimits)
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    on_wait: Callable[[str, float], None] | None = None
    _http: httpx.Client | None = None
    _tokens: dict[frozenset[str], _Token] = field(default_factory=dict)

    def __post_init__(self):
        self._allowed = self.platform.origins()
        timeout = httpx.Timeout(self.limits.timeout)
        self._http = self._http or httpx.Client(timeout=timeout, follow_redirects=False, trust_env=False)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ the token

    def client_assertion(self) -> str:
        """The signed JWT that proves the tool's identity to the token endpoint (five minutes' life)."""
        key = self.keys.current()
        now = int(time.time())
        claims = {"iss": self.platform.client_id, "sub": self.platform.client_id,
                  "aud": self.platform.token_audience or self.platform.token_url,
                  "iat": now, "exp": now + 300, "jti": uuid.uuid4().hex}
        return jwt.encode(claims, key.private_key, algorithm="RS256", headers={"kid": key.kid})

    def token(self, scopes: Iterable[str]) -> str:
        """An access token for ``scopes``, from the cache while it is valid, else a new one."""
        wanted = frozenset(scopes)
        cached = self._tokens.get(wanted)
        if cached and self.clock() < cached.expires:
            return cached.value
        form = {"grant_type": "client_credentials", "client_assertion_type": CLIENT_ASSERTION_TYPE,
                "client_assertion": self.client_assertion(), "scope": " ".join(sorted(wanted))}
        reply = self._send("POST", self.platform.token_url, {"Accept": "application/json"},
                           {"data": form}, "the token reply")
        value, lifetime = check_token(reply.data)
        self._tokens[wanted] = _Token(value, self.clock() + max(0.0, lifetime - self.limits.token_margin))
        return value

    # ------------------------------------------------------------------ the requests

    def get(self, url: str, scopes: Iterable[str], accept: str, what: str) -> Reply:
        """``GET url`` with a token for ``scopes``; ``what`` names the reply in errors."""
        return self._authorised("GET", url, scopes, {"Accept": accept}, {}, what)

    def post(self, url: str, scopes: Iterable[str], body: dict, content_type: str, what: str,
             accept: str = "application/json") -> Reply:
        """``POST`` the JSON ``body`` to ``url`` with a token for ``scopes``."""
        headers = {"Accept": accept, "Content-Type": content_type}
        return self._authorised("POST", url, scopes, headers, {"content": json.dumps(body)}, what)

    def put(self, url: str, scopes: Iterable[str], body: dict, content_type: str, what: str) -> Reply:
        """``PUT`` the JSON ``body`` to ``url`` with a token for ``scopes``."""
        headers = {"Accept": content_type, "Content-Type": content_type}
        return self._authorised("PUT", url, scopes, headers, {"content": json.dumps(body)}, what)

    def _authorised(self, method, url, scopes, headers, payload, what) -> Reply:
        scopes = frozenset(scopes)
        try:
            return self._send(method, url, {**headers, "Authorization": f"Bearer {self.token(scopes)}"},
                              payload, what)
        except ServiceError as exc:
            if exc.status != 401:
                raise
        self._tokens.pop(scopes, None)  # revoked or expired early: one more try with a new token
        return self._send(method, url, {**headers, "Authorization": f"Bearer {self.token(scopes)}"},
                          payload, what)

    def _send(self, method: str, url: str, headers: dict, payload: dict, what: str) -> Reply:
        """One request, retried on an outage within the limits; the checked reply."""
        self.check_destination(url)
        deadline = self.clock() + self.limits.total_seconds
        for attempt in range(1, self.limits.attempts + 1):
            try:
                return self._follow(method, url, headers, payload, what)
            except ServiceError as exc:
                if not exc.transient:
                    raise
                failure = exc
            wait = failure.wait if failure.wait is not None else self._backoff(attempt)
            if attempt == self.limits.attempts or self.clock() + wait > deadline:
                raise ServiceError(f"{failure} (gave up after {attempt} tries)", transient=True,
                                   status=failure.status)
            if self.on_wait:
                self.on_wait(str(failure), wait)
            self.sleep(wait)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _backoff(self, attempt: int) -> float:
        """Exponential back-off with jitter: a random wait between half the step and the step, which doubles
        with each try up to :attr:`ServiceLimits.max_backoff` (so senders that failed together spread out)."""
        step = min(self.limits.max_backoff, self.limits.first_backoff * 2 ** (attempt - 1))
        return random.uniform(step / 2, step)

    def check_destination(self, url: str) -> None:
        """``ServiceError`` unless ``url`` is on one of the platform's configured origins."""
        try:
            where = origin(url)
        except ValueError as exc:
            raise ServiceError(str(exc)) from None
        if where not in self._allowed:
            raise ServiceError(f"refused to send to {where}: not one of the platform's origins "
                               f"({', '.join(sorted(self._allowed))})")

    def _follow(self, method, url, headers, payload, what) -> Reply:
        """The request, following at most a few same-origin redirects of a GET."""
        for _ in range(self.limits.max_redirects + 1):
            status, reply_headers, body = self._once(method, url, headers, payload, what)
            if not 300 <= status < 400:
                return _checked(status, reply_headers, body, what, url)
            target = str(httpx.URL(url).join(reply_headers.get("Location", "")))
            if method != "GET" or not _same_origin(target, url):
                raise ServiceError(f"{what}: the platform redirected a {method} from {url} to {target}; "
                                   "not followed", status=status)
            url = target
        raise ServiceError(f"{what}: more than {self.limits.max_redirects} redirects from {url}")

    def _once(self, method, url, headers, payload, what) -> tuple[int, httpx.Headers, bytes]:
        """Send once; the status, headers and body, read no further than the size limit."""
        limit = self.limits.max_reply_bytes
        try:
            # identity: the size read is the size sent, with no compressed body to inflate past the limit
            with self._http.stream(method, url, headers={**headers, "Accept-Encoding": "identity"},
                                   **payload) as reply:
                declared = reply.headers.get("Content-Length", "")
                if declared.isdigit() and int(declared) > limit:
                    raise ServiceError(f"{what}: the platform's reply is {declared} bytes, more than the "
                                       f"{limit} bytes accepted; not read", status=reply.status_code)
                body = bytearray()
                for chunk in reply.iter_bytes():
                    body += chunk
                    if len(body) > limit:
                        raise ServiceError(f"{what}: the platform's reply is more than the {limit} bytes "
                                           "accepted; reading stopped there", status=reply.status_code)
                status, reply_headers = reply.status_code, reply.headers
        except httpx.TransportError as exc:
            raise ServiceError(f"{what}: could not reach {origin(url)} ({type(exc).__name__}: {exc})",
                               transient=True) from None
        if status == 429 or status >= 500:
            raise ServiceError(f"{what}: the platform answered {status}", transient=True, status=status,
                               wait=retry_after(reply_headers.get("Retry-After")))
        return status, reply_headers, bytes(body)


def _same_origin(target: str, url: str) -> bool:
    try:
        return origin(target) == origin(url)
    except ValueError:
        return False


def _checked(status: int, headers: httpx.Headers, body: bytes, what: str, url: str) -> Reply:
    """The reply parsed, or ``ServiceError`` for a refusal (4xx) or a body that is not JSON."""
    if status >= 400:
        excerpt = body[:200].decode("utf-8", "replace").strip()
        raise ServiceError(f"{what}: the platform refused the request to {url} with {status}"
                           + (f": {excerpt}" if excerpt else ""), status=status)
    if not body.strip():
        return Reply(status, headers, None)
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ServiceError(f"{what}: the platform's reply is not JSON ({exc})", status=status) from None
    return Reply(status, headers, data)


def check_token(data: object) -> tuple[str, float]:
    """The access token and its lifetime in seconds from a token reply; ``ServiceError`` otherwise."""
    try:
        require(data, dict, "the token reply")
        value = require(data.get("access_token"), str, "access_token")
        kind = require(data.get("token_type", "Bearer"), str, "token_type")
        lifetime = require(data.get("expires_in", 3600), (int, float), "expires_in")
        if not value or kind.lower() != "bearer" or lifetime <= 0:
            raise ValueError(f"expected a non-empty bearer token with a positive lifetime, got token_type "
                             f"{kind!r}, expires_in {lifetime!r}")
    except ValueError as exc:
        raise ServiceError(f"the token reply: {exc}") from None
    return value, float(lifetime)


def next_link(headers: httpx.Headers) -> str | None:
    """The ``rel="next"`` target of a reply's ``Link`` header, or None."""
    for value in headers.get_list("Link"):
        for part in value.split(","):
            target, _, params = part.partition(";")
            rels = [p.split("=", 1)[1].strip().strip('"') for p in params.split(";") if "=" in p
                    and p.split("=", 1)[0].strip().lower() == "rel"]
            if any("next" in rel.split() for rel in rels):
                return target.strip().strip("<>")
    return None


def pages(client: ServiceClient, url: str, scopes: Iterable[str], accept: str, what: str,
          max_pages: int) -> Iterable[Reply]:
    """Each page of a paged listing, following ``rel="next"`` links (or a ``next`` field of the body);
    ``ServiceError`` past ``max_pages`` pages or for a link that comes back to a page already read.
    Every page's URL is checked like any other (:meth:`ServiceClient.check_destination`)."""
    seen = set()
    while url:
        if url in seen:
            raise ServiceError(f"{what}: the next page {url} was already read; stopped")
        if len(seen) == max_pages:
            raise ServiceError(f"{what}: more than {max_pages} pages; stopped")
        seen.add(url)
        reply = client.get(url, scopes, accept, what)
        yield reply
        target = next_link(reply.headers) or _next_field(reply.data)
        url = str(httpx.URL(url).join(target)) if target else None


def _next_field(data: object) -> str | None:
    """The ``next`` URL some platforms put in the reply's body instead of a ``Link`` header
    (``lti1p3platform``'s paged containers: ``{"content": [...], "next": URL}``)."""
    target = data.get("next") if isinstance(data, dict) else None
    return target if isinstance(target, str) and target else None
