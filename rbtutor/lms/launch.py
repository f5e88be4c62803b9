"""Step: LMS (the launch). An LTI 1.3 id_token checked claim by claim, then admitted or refused.

An LMS logs a user into the tool with a signed id_token (OIDC third-party initiated log-in). Nothing
in it is trusted before :func:`read_launch` has checked, in this order, each refusal one
:class:`LaunchRefused` with one line saying what was wrong:

1. the ``state`` posted back is the one the tool issued for this browser (else a forged or
   crossed launch);
2. the signature, against the platform's JWKS (PyJWT's ``PyJWKClient``; an unknown key id makes
   it read the set again once, so a platform's rotated key is found);
3. ``iss`` is the configured issuer, ``aud`` holds the client id and ``azp`` (when there are
   several audiences, or when present) is it; ``exp``, ``nbf`` and ``iat`` with :data:`LEEWAY`
   seconds of clock skew, and ``iat`` no older than :data:`MAX_AGE`;
4. the ``nonce`` is the one issued with the state, and not used before;
5. the deployment id is one the course registered, the message type a resource-link or
   deep-linking request, the version ``1.3.0``, the roles claim present and a known role;
6. the account name can be made from the configured claim (:mod:`rbtutor.lms.accounts`).

:func:`admit` then records it (:meth:`rbtutor.lms.store.LmsStore.admit`): the nonce used, the
LMS user recorded, the account claimed, in one transaction; a replayed nonce or an account name
held by another LMS user is refused there, and nothing is kept.

The assignment the link points to comes from the custom parameter ``assignment`` or, failing
that, from the target link URI (``...?assignment=NAME`` or a path ending ``/assignments/NAME``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlparse

import jwt

from .accounts import CUSTOM_CLAIM, LTI, ROLES_CLAIM, AccountRefused, account_name, hub_role
from .store import AccountTaken, LmsStore, LmsUser, Replayed

#: seconds of clock skew allowed on exp, nbf and iat
LEEWAY = 60
#: an id_token issued longer ago than this (seconds) is refused
MAX_AGE = 600
MESSAGE_TYPES = ("LtiResourceLinkRequest", "LtiDeepLinkingRequest")
DEPLOYMENT_CLAIM = LTI + "deployment_id"
ASSIGNMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class LaunchRefused(ValueError):
    """A launch that is not let in; the text is one line saying why."""


@dataclass(frozen=True)
class LaunchRules:
    """What a course accepts: its platform, its registration and how accounts are named."""

    issuer: str
    client_ids: tuple
    deployment_ids: tuple
    jwks_url: str
    account_claim: str = "login"
    leeway: int = LEEWAY
    max_age: int = MAX_AGE


@dataclass(frozen=True)
class Launch:
    """A checked launch: who, in which role, into what."""

    issuer: str
    sub: str
    account: str
    role: str  # instructor or student
    name: str
    email: str
    roles: tuple
    message_type: str
    assignment: str | None
    nonce: str
    expires_at: datetime
    claims: dict = field(repr=False, compare=False)


def jwks_client(url: str) -> jwt.PyJWKClient:
    """A cached reader of the platform's JWKS (keys kept five minutes; an unknown kid reads again)."""
    return jwt.PyJWKClient(url, cache_keys=True, lifespan=300, timeout=10)


def verify_signature(id_token: str, rules: LaunchRules, keys: jwt.PyJWKClient) -> dict:
    """The payload of ``id_token`` once its signature, issuer, audience and times hold."""
    try:
        key = keys.get_signing_key_from_jwt(id_token)
    except jwt.PyJWKClientError as error:
        raise LaunchRefused(f"the id_token is signed by a key the platform does not publish ({error})") from None
    except jwt.PyJWTError as error:
        raise LaunchRefused(f"the id_token cannot be read: {error}") from None
    try:
        return jwt.decode(id_token, key.key, algorithms=["RS256"], audience=list(rules.client_ids),
                          issuer=rules.issuer, leeway=rules.leeway,
                          options={"require": ["iss", "aud", "exp", "iat", "sub", "nonce"]})
    except jwt.ExpiredSignatureError:
        raise LaunchRefused("the id_token has expired") from None
    except jwt.ImmatureSignatureError:
        raise LaunchRefused("the id_token is not valid yet (nbf or iat in the future)") from None
    except jwt.InvalidAudienceError:
        raise LaunchRefused("the id_token is meant for another tool (aud is not this course's client id)") from None
    except jwt.InvalidIssuerError:
        raise LaunchRefused("the id_token comes from another platform (iss is not this course's issuer)") from None
    except jwt.PyJWTError as error:
        raise LaunchRefused(f"the id_token is not acceptable: {error}") from None


def check_times_and_party(claims: dict, rules: LaunchRules, now: float) -> None:
    """``iat`` neither in the future nor too old; ``azp`` the client id when present or needed."""
    issued = claims["iat"]
    if not isinstance(issued, int | float) or issued > now + rules.leeway:
        raise LaunchRefused("the id_token is not valid yet (nbf or iat in the future)")
    if issued < now - rules.max_age - rules.leeway:
        raise LaunchRefused(f"the id_token was issued more than {rules.max_age} s ago")
    audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    if ("azp" in claims or len(audiences) > 1) and claims.get("azp") not in rules.client_ids:
        raise LaunchRefused("the id_token's azp is not this course's client id")


def check_lti_claims(claims: dict, rules: LaunchRules) -> None:
    """Deployment, message type, version and the roles claim."""
    if claims.get(DEPLOYMENT_CLAIM) not in rules.deployment_ids:
        raise LaunchRefused(f"the launch is for deployment {claims.get(DEPLOYMENT_CLAIM)!r}, which this course "
                            "has not registered ([lms] deployment_ids)")
    if claims.get(LTI + "message_type") not in MESSAGE_TYPES:
        raise LaunchRefused(f"the launch's message type {claims.get(LTI + 'message_type')!r} is not one of "
                            f"{', '.join(MESSAGE_TYPES)}")
    if claims.get(LTI + "version") != "1.3.0":
        raise LaunchRefused(f"the launch's LTI version {claims.get(LTI + 'version')!r} is not 1.3.0")
    if ROLES_CLAIM not in claims:
        raise LaunchRefused("the launch has no roles claim")


def assignment_of(claims: dict) -> str | None:
    """The assignment the link names (custom ``assignment``, else the target link URI), or None."""
    custom = claims.get(CUSTOM_CLAIM) or {}
    named = custom.get("assignment") if isinstance(custom, dict) else None
    if not named:
        target = urlparse(str(claims.get(LTI + "target_link_uri") or ""))
        named = (parse_qs(target.query).get("assignment") or [None])[0]
        parts = [part for part in target.path.split("/") if part]
        if not named and len(parts) >= 2 and parts[-2] == "assignments":
            named = parts[-1]
    if named is None:
        return None
    if not isinstance(named, str) or not ASSIGNMENT.fullmatch(named) or ".." in named:
        raise LaunchRefused(f"the link names the assignment {str(named)[:80]!a}, which is not an "
                            "assignment name (letters, digits, '_', '.', '-')")
    return named


def read_launch(id_token: str, rules: LaunchRules, *, state: str, expected_state: str, expected_nonce: str,
                keys: jwt.PyJWKClient, store: LmsStore | None = None, now: float | None = None) -> Launch:
    """Check a launch (see the module's docstring); return it, or raise :class:`LaunchRefused`."""
    if not expected_state or state != expected_state:
        raise LaunchRefused("the launch's state does not match the one this browser was given")
    claims = verify_signature(id_token, rules, keys)
    now = datetime.now(UTC).timestamp() if now is None else now
    check_times_and_party(claims, rules, now)
    if not expected_nonce or claims.get("nonce") != expected_nonce:
        raise LaunchRefused("the id_token's nonce is not the one this browser was given")
    if store is not None and store.is_used("nonce", claims["nonce"]):
        raise LaunchRefused("this launch was used before: a replayed launch is refused")
    check_lti_claims(claims, rules)
    try:
        role = hub_role(claims[ROLES_CLAIM])
        account = account_name(claims, rules.account_claim)
    except AccountRefused as error:
        raise LaunchRefused(str(error)) from None
    return Launch(issuer=claims["iss"], sub=str(claims["sub"]), account=account, role=role,
                  name=str(claims.get("name") or ""), email=str(claims.get("email") or ""),
                  roles=tuple(claims[ROLES_CLAIM]), message_type=claims[LTI + "message_type"],
                  assignment=assignment_of(claims), nonce=claims["nonce"],
                  expires_at=datetime.fromtimestamp(claims["exp"] + rules.leeway, UTC).replace(tzinfo=None),
                  claims=claims)


def admit(launch: Launch, store: LmsStore, claim_account=None) -> LmsUser:
    """Record a checked launch, all or nothing (see the module's docstring); :class:`LaunchRefused` if refused.

    ``claim_account(account, new)`` makes or checks the Unix account inside the transaction; an
    exception it raises refuses the launch (its message is passed on)."""
    try:
        return store.admit(launch.issuer, launch.sub, launch.account, nonce=launch.nonce,
                           expires_at=launch.expires_at, name=launch.name, email=launch.email,
                           roles=launch.roles, claim_account=claim_account)
    except (AccountTaken, Replayed, AccountRefused) as error:
        raise LaunchRefused(str(error)) from None
