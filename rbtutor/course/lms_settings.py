"""Step: run (the course's settings, LMS part). The ``[lms]`` section of ``course.toml``: the LMS platform of an
LTI 1.3 course, read by :func:`rbtutor.course.settings.load_settings` with the same one-line errors.

A course whose file has no ``[lms]`` section has no LMS: the hub keeps its PAM log-in. With one, the
hub logs users in from the LMS (:mod:`rbtutor.lms.authenticator`). The values come from the LMS's
registration of the tool (the operator's guide says where each LMS shows them)::

    [lms]
    issuer = "https://canvas.instructure.com"            # the platform's issuer (iss)
    client_id = "10000000000042"                          # the tool's client id in the LMS
    deployment_ids = ["42:8865aa05b4b79b64a91a86042e43af5ea8ae79eb"]
    auth_url = "https://sso.canvaslms.com/api/lti/authorize_redirect"  # OIDC authorization endpoint
    token_url = "https://sso.canvaslms.com/login/oauth2/token"          # OAuth2 token endpoint
    jwks_url = "https://sso.canvaslms.com/api/lti/security/jwks"       # the platform's public keys
    account_claim = "login"                               # login, email or sub

URLs must be ``https``, except on the machine itself (``127.0.0.1``, ``localhost``: a test platform).
:func:`parse_lms` raises :class:`LmsSettingError` (line, key, message); ``settings.py`` turns it into
its ``SettingsError``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from urllib.parse import urlparse

SECTION = "lms"
ACCOUNT_CLAIMS = ("login", "email", "sub")  # as rbtutor.lms.accounts.ACCOUNT_CLAIMS (course imports no lms)
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
#: key -> what it holds, for messages and ``rbtutor config``
KEYS = {
    "issuer": "the platform's issuer (iss of its id_tokens)",
    "client_id": "the tool's client id in the LMS",
    "deployment_ids": "the deployment ids of the tool in the LMS (a list of text)",
    "auth_url": "the platform's OIDC authorization endpoint",
    "token_url": "the platform's OAuth2 token endpoint (grade and roster services)",
    "jwks_url": "the platform's public keys (JWKS)",
    "account_claim": "what names a user's account: login, email or sub",
}
REQUIRED = ("issuer", "client_id", "deployment_ids", "auth_url", "token_url", "jwks_url")


class LmsSettingError(ValueError):
    """A value of ``[lms]`` that cannot be used: ``line``, ``key`` (or None) and what is wrong."""

    def __init__(self, line: int, key: str | None, message: str):
        self.line, self.key = line, key
        super().__init__(message)


@dataclass(frozen=True)
class LmsSettings:
    """The course's LMS platform (see the module's docstring)."""

    issuer: str
    client_id: str
    deployment_ids: tuple
    auth_url: str
    token_url: str
    jwks_url: str
    account_claim: str = "login"

    def as_dict(self) -> dict:
        return {**asdict(self), "deployment_ids": list(self.deployment_ids)}


def check_url(key: str, value, line: int) -> str:
    parts = urlparse(value) if isinstance(value, str) else None
    if parts is None or not parts.netloc or parts.scheme not in ("https", "http"):
        raise LmsSettingError(line, key, f"expected an https URL, got {value!r}")
    if parts.scheme == "http" and parts.hostname not in LOCAL_HOSTS:
        raise LmsSettingError(line, key, f"expected an https URL (http only on this machine), got {value!r}")
    return value


def check_value(key: str, value, line: int):
    """``value`` of ``key`` when it is acceptable, else :class:`LmsSettingError`."""
    if key in ("auth_url", "token_url", "jwks_url", "issuer"):
        return check_url(key, value, line)
    if key == "deployment_ids":
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
            raise LmsSettingError(line, key, "expected a list of deployment ids (text), got "
                                  f"{value!r}")
        return tuple(value)
    if key == "account_claim":
        if value not in ACCOUNT_CLAIMS:
            raise LmsSettingError(line, key, f"expected one of {', '.join(ACCOUNT_CLAIMS)}, got {value!r}")
        return value
    if not isinstance(value, str) or not value.strip():
        raise LmsSettingError(line, key, f"expected text, got {value!r}")
    return value


def parse_lms(table, where: dict) -> LmsSettings:
    """The ``[lms]`` table of a parsed ``course.toml``; ``where`` maps ``(section, key)`` to lines."""
    header = where.get((SECTION, None), 1)
    if not isinstance(table, dict):
        raise LmsSettingError(header, SECTION, "expected the section [lms], got a value")
    values = {}
    for key, value in table.items():
        line = where.get((SECTION, key), header)
        if key not in KEYS:
            raise LmsSettingError(line, key, f"no such key in [lms]; expected one of {', '.join(KEYS)}")
        values[key] = check_value(key, value, line)
    missing = [key for key in REQUIRED if key not in values]
    if missing:
        raise LmsSettingError(header, None, f"[lms] lacks {', '.join(missing)} ({KEYS[missing[0]]})")
    return LmsSettings(**values)


def lms_rows(lms: LmsSettings | None) -> list[str]:
    """Lines for ``rbtutor config``: the course's LMS, or that it has none."""
    if lms is None:
        return ["LMS (course.toml [lms]): none; the hub logs users in with their Unix passwords (PAM)"]
    rows = ["LMS (course.toml [lms]): LTI 1.3 log-in from the platform below"]
    for key, value in lms.as_dict().items():
        shown = ", ".join(value) if isinstance(value, list) else value
        rows.append(f"  {key:<15} {shown}  - {KEYS[key]}")
    return rows
