"""Step: LMS (who a launch is). The account name and the hub role of an LMS user, from verified claims.

The account name is one Unix account, one hub user and one nbgrader student id, so it must be
acceptable to all three. It comes from one claim, chosen by the course (``[lms] account_claim``):

* ``login``: the LMS's login id: the custom parameter ``login`` (which the operator sets in the
  LMS to its login-id variable, such as Canvas's ``$Canvas.user.loginId``), else the LIS claim's
  ``person_sourcedid``, else ``preferred_username``;
* ``email``: the e-mail address's local part (``ada.lovelace`` of ``ada.lovelace@uni.example``);
* ``sub``: the LMS's own user id (stable, but often an opaque number or UUID).

:func:`safe_account` makes the value safe: accents dropped, lower case, every character other than
``a-z``, ``0-9``, ``_`` and ``-`` replaced by ``_``, a leading digit prefixed with ``u``; then it
must be at most :data:`MAX_ACCOUNT_CHARS` characters (Unix's limit) and pass the course's student-id
rule (:func:`rbtutor.grading.student_ids.check_id`: no reserved id such as ``instructor``). Two LMS
users who map to the same name are not merged: the second is refused (:mod:`rbtutor.lms.store`).

Roles: Instructor and TeachingAssistant (context roles) make an instructor of the hub (the
Formgrader), Learner a student; institution roles give nothing, and a launch with neither is
refused. The same functions read NRPS members (``lis_person_sourcedid``, ``email``, ``user_id``).
"""

from __future__ import annotations

import re
import unicodedata

from rbtutor.grading.student_ids import id_problem

ACCOUNT_CLAIMS = ("login", "email", "sub")
MAX_ACCOUNT_CHARS = 32
LTI = "https://purl.imsglobal.org/spec/lti/claim/"
ROLES_CLAIM = LTI + "roles"
LIS_CLAIM = LTI + "lis"
CUSTOM_CLAIM = LTI + "custom"
MEMBERSHIP = "http://purl.imsglobal.org/vocab/lis/v2/membership#"
#: context roles that make a hub instructor (full URIs, the sub-role of TAs, and LTI's short names)
INSTRUCTOR_ROLES = frozenset({MEMBERSHIP + "Instructor", MEMBERSHIP + "Administrator",
                              MEMBERSHIP + "ContentDeveloper",
                              "http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant",
                              "Instructor", "TeachingAssistant"})
LEARNER_ROLES = frozenset({MEMBERSHIP + "Learner", "Learner",
                           "http://purl.imsglobal.org/vocab/lis/v2/membership/Learner#Learner"})


class AccountRefused(ValueError):
    """The claims give no acceptable account name or role; the message says which and why."""


def claim_value(claims: dict, rule: str) -> str:
    """The text the account name is made from, by ``rule`` (one of :data:`ACCOUNT_CLAIMS`).

    ``claims`` is an id_token's payload or an NRPS member (``user_id``, ``lis_person_sourcedid``)."""
    if rule not in ACCOUNT_CLAIMS:
        raise ValueError(f"expected an account claim in {ACCOUNT_CLAIMS}, got {rule!r}")
    if rule == "sub":
        value = claims.get("sub") or claims.get("user_id")
    elif rule == "email":
        value = (claims.get("email") or "").rpartition("@")[0] if "@" in (claims.get("email") or "") else None
    else:
        value = (table(claims, CUSTOM_CLAIM).get("login") or table(claims, LIS_CLAIM).get("person_sourcedid")
                 or claims.get("lis_person_sourcedid") or claims.get("preferred_username"))
    if not isinstance(value, str) or not value.strip():
        raise AccountRefused(f"the launch has no {describe(rule)}, which this course names accounts by "
                             "([lms] account_claim)")
    return value.strip()


def table(claims: dict, claim: str) -> dict:
    """The claim ``claim`` when it is a JSON object, else an empty one."""
    value = claims.get(claim)
    return value if isinstance(value, dict) else {}


def describe(rule: str) -> str:
    return {"login": "LMS login id (custom login, lis person_sourcedid or preferred_username)",
            "email": "e-mail address", "sub": "LMS user id (sub)"}[rule]


def safe_account(value: str) -> str:
    """``value`` as an account name every part of the course accepts, or :class:`AccountRefused` saying why.

    >>> safe_account("Zoë.Müller")
    'zoe_muller'
    >>> safe_account("12345")
    'u12345'
    """
    plain = unicodedata.normalize("NFKD", value).encode("ascii", "ignore").decode().lower()
    name = re.sub(r"_+", "_", re.sub(r"[^a-z0-9_-]", "_", plain)).strip("_-")
    if name[:1].isdigit():
        name = "u" + name
    if not name:
        raise AccountRefused(f"no account name can be made of {value[:80]!a}: it has no letter or digit")
    if len(name) > MAX_ACCOUNT_CHARS:
        raise AccountRefused(f"the account name {name[:40]!r}... made of {value[:80]!a} is longer than "
                             f"{MAX_ACCOUNT_CHARS} characters (Unix's limit); name accounts by another claim")
    problem = id_problem(name)
    if problem:
        raise AccountRefused(f"the account name {name!r} made of {value[:80]!a} {problem}")
    return name


def account_name(claims: dict, rule: str) -> str:
    """The account name of the user ``claims`` describe, by ``rule``."""
    return safe_account(claim_value(claims, rule))


def hub_role(roles) -> str:
    """``instructor`` or ``student`` from the LTI roles; :class:`AccountRefused` when neither applies."""
    if not isinstance(roles, list | tuple) or not all(isinstance(role, str) for role in roles):
        raise AccountRefused("the roles claim is not a list of role names")
    if INSTRUCTOR_ROLES.intersection(roles):
        return "instructor"
    if LEARNER_ROLES.intersection(roles):
        return "student"
    raise AccountRefused("the launch carries no course role the hub knows (Instructor, TeachingAssistant or "
                         "Learner)")
