"""A real LTI 1.3 platform for the tests: ``lti1p3platform`` under uvicorn on 127.0.0.1, playing the LMS.

Use it from a test module (``tests/`` is on ``sys.path``)::

    from lti_platform import platform_fixture as platform_fixture  # the fixtures, by these names
    from lti_platform import platform_server_fixture as platform_server_fixture
    from lti_platform import INSTRUCTOR, STUDENT1, STUDENT2, LEARNER

    def test_something(lti_platform):
        lti_platform.register_tool(oidc_login_url=..., redirect_uris=[...], target_link_uri=...,
                                   jwks_url=... or jwks={"keys": [...]})
        lti_platform.add_resource_link("rl-ps1", "Problem 3", custom={"assignment": "problem03"},
                                       line_item={"label": "Problem 3", "scoreMaximum": 10})
        token = lti_platform.id_token(STUDENT1, "rl-ps1", redirect_uri=..., nonce=..., state=...)

Fixtures (import both functions into the test module; pytest knows them by these names):

* ``lti_platform_server`` (session): starts the platform once per test process (each xdist
  worker has its own, on its own free port); its log is ``test-artifacts/lti-platform-<worker>.log``.
* ``lti_platform`` (function): the same platform put back as it started (:meth:`Platform.reset`):
  course ``ship-dynamics-2026``, the instructor :data:`INSTRUCTOR` and the students :data:`STUDENT1`
  and :data:`STUDENT2`, no tool registered, no links, line items, scores or faults.

What it serves (all under :attr:`Platform.url`, which is also the issuer): ``/jwks``; ``/auth``
(the OIDC authorization endpoint: answers with the library's auto-submitting form posting
``id_token`` and ``state`` to the registered redirect URI); ``/course/<sub>`` (a member's page of
launch links) and ``/launch?user=&resource_link=`` or ``&deep_link=1`` (third-party initiated
log-in: redirects to the tool's initiation URL with iss, login_hint, target_link_uri,
lti_message_hint, client_id, lti_deployment_id); ``/token`` (client credentials with the tool's
signed JWT assertion; only known scopes are granted); AGS under :attr:`Platform.lineitems_url`
(list, create, get, update, delete line items; ``/scores``; ``/results``); NRPS at
:attr:`Platform.memberships_url` (``limit``/``page`` paging with a ``Link: rel="next"`` header);
``/deep_link/return`` (checks the tool's deep-linking response JWT and adds each returned
resource link, with its line item, to the course). Test routes: :meth:`Platform.store` (scores,
every score posted, line items, deep-linked items, service requests), :meth:`Platform.fault`
(503, 429, malformed JSON, a 64 MiB body, a redirect to another host), :meth:`Platform.add_member`,
:meth:`Platform.remove_member`, :meth:`Platform.add_resource_link`.
"""

from __future__ import annotations

import pytest

from .client import INSTRUCTOR, INSTRUCTOR_ROLE, LEARNER, STUDENT1, STUDENT2, TEACHING_ASSISTANT, Platform, serve

__all__ = ["INSTRUCTOR", "INSTRUCTOR_ROLE", "LEARNER", "STUDENT1", "STUDENT2", "TEACHING_ASSISTANT", "Platform",
           "platform_fixture", "platform_server_fixture", "serve"]


@pytest.fixture(scope="session", name="lti_platform_server")
def platform_server_fixture():
    """The platform process of this test session (see the module's docstring)."""
    with serve() as platform:
        yield platform


@pytest.fixture(name="lti_platform")
def platform_fixture(lti_platform_server):
    """The session's platform, reset to the course as it started."""
    lti_platform_server.reset()
    return lti_platform_server
