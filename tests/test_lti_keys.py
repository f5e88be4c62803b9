"""The tool's signing keys (rbtutor.lms.keys): made once, kept private, published as a JWKS, rotated so that
the key it replaces stays published; a real platform (tests/lti_platform) accepts a client assertion
signed with the current key and fetched from the published set, before and after a rotation."""

from __future__ import annotations

import os
import pwd
import stat
import time
import uuid

import httpx
import jwt
import pytest
from lti_platform import platform_fixture as platform_fixture  # the fixtures
from lti_platform import platform_server_fixture as platform_server_fixture

from rbtutor.lms.keys import KeyStoreError, ToolKeys

SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"


def test_the_first_key_is_made_once_and_kept_private(tmp_path):
    folder = tmp_path / "secrets" / "lti"
    keys = ToolKeys(folder).ensure()
    first = keys.current()
    assert ToolKeys(folder).ensure().current().kid == first.kid  # a second ensure makes no new key
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(keys.path.stat().st_mode) == 0o600
    assert [p.name for p in folder.iterdir()] == [keys.path.name]  # no temporary file left


def test_the_jwks_publishes_public_keys_only_with_their_kid(tmp_path):
    keys = ToolKeys(tmp_path / "lti").ensure()
    [published] = keys.jwks()["keys"]
    assert published["kid"] == keys.current().kid
    assert (published["kty"], published["alg"], published["use"]) == ("RSA", "RS256", "sig")
    assert not {"d", "p", "q", "dp", "dq", "qi"} & set(published), "a private part is published"
    token = keys.sign({"iss": "tool", "n": 1})
    assert jwt.get_unverified_header(token)["kid"] == published["kid"]
    public = jwt.PyJWK(published).key
    assert jwt.decode(token, public, algorithms=["RS256"]) == {"iss": "tool", "n": 1}


def test_rotation_keeps_the_previous_key_published_until_the_next_rotation(tmp_path):
    keys = ToolKeys(tmp_path / "lti").ensure()
    first = keys.current().kid
    second = keys.rotate().kid
    assert second != first
    assert keys.current().kid == second
    assert [k["kid"] for k in keys.jwks()["keys"]] == [second, first]
    third = keys.rotate().kid
    assert [k["kid"] for k in keys.jwks()["keys"]] == [third, second]
    assert stat.S_IMODE(keys.path.stat().st_mode) == 0o600


def test_a_key_file_others_can_read_is_refused(tmp_path):
    keys = ToolKeys(tmp_path / "lti").ensure()
    os.chmod(keys.path, 0o644)
    with pytest.raises(KeyStoreError, match=r"may be read by others.*chmod 600"):
        keys.current()


def test_no_keys_yet_is_a_clear_error(tmp_path):
    with pytest.raises(KeyStoreError, match=r"no tool keys in .*ensure"):
        ToolKeys(tmp_path / "none").current()


@pytest.mark.skipif(os.geteuid() != 0, reason="handing the keys to another account needs root")
def test_the_keys_belong_to_the_named_account(tmp_path):
    keys = ToolKeys(tmp_path / "lti", owner="nobody").ensure()
    nobody = pwd.getpwnam("nobody").pw_uid
    assert keys.path.stat().st_uid == nobody
    assert keys.folder.stat().st_uid == nobody


def client_assertion(keys: ToolKeys, platform) -> dict:
    """The form of a client-credentials token request, the assertion signed with the tool's current key."""
    now = int(time.time())
    claims = {"iss": platform.client_id, "sub": platform.client_id, "aud": platform.token_url, "iat": now,
              "exp": now + 300, "jti": uuid.uuid4().hex}
    return {"grant_type": "client_credentials", "scope": SCORE_SCOPE,
            "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            "client_assertion": keys.sign(claims)}


def test_the_platform_accepts_assertions_signed_with_the_published_key_across_a_rotation(tmp_path, lti_platform):
    """The platform reads the tool's JWKS (registered here as keys, as an LMS admin may paste them) and
    grants a token; after a rotation the new key signs and the platform, given the new set, accepts it,
    while an assertion signed by a key it was never given is refused."""
    keys = ToolKeys(tmp_path / "lti").ensure()

    def register():
        lti_platform.register_tool(oidc_login_url="http://127.0.0.1:9/login", redirect_uris=["http://127.0.0.1:9/cb"],
                                   target_link_uri="http://127.0.0.1:9/", jwks=keys.jwks())

    register()
    granted = httpx.post(lti_platform.token_url, data=client_assertion(keys, lti_platform))
    assert granted.status_code == 200, granted.text
    assert granted.json()["scope"] == SCORE_SCOPE
    keys.rotate()
    stale = httpx.post(lti_platform.token_url, data=client_assertion(keys, lti_platform))
    assert stale.status_code == 401, "the platform accepted a key it was never given"
    register()
    assert httpx.post(lti_platform.token_url, data=client_assertion(keys, lti_platform)).status_code == 200


SCOPES = {"lineitem": "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
          "score": SCORE_SCOPE,
          "roster": "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"}


@pytest.fixture
def registered(tmp_path, lti_platform):
    keys = ToolKeys(tmp_path / "lti").ensure()
    lti_platform.register_tool(oidc_login_url="http://127.0.0.1:9/login", redirect_uris=["http://127.0.0.1:9/cb"],
                               target_link_uri="http://127.0.0.1:9/", jwks=keys.jwks())
    return keys, lti_platform


def bearer(keys: ToolKeys, platform, *scopes: str) -> dict:
    form = {**client_assertion(keys, platform), "scope": " ".join(scopes)}
    token = httpx.post(platform.token_url, data=form).raise_for_status().json()["access_token"]
    return {"Authorization": f"Bearer {token}"}


def test_the_services_answer_a_token_of_the_tools_key_and_keep_what_they_get(registered):
    """With a token from a tool-signed assertion: the roster (status and roles), a line item made, a score
    posted and read back from the platform's store; without a token, or with another scope, no access."""
    keys, platform = registered
    assert httpx.get(platform.memberships_url).status_code == 401
    members = httpx.get(platform.memberships_url, headers=bearer(keys, platform, SCOPES["roster"])).json()["members"]
    assert {(m["user_id"], m["status"]) for m in members} == {(m["user_id"], "Active") for m in platform.members()}
    only_roster = bearer(keys, platform, SCOPES["roster"])
    refused = httpx.post(platform.lineitems_url, json={"label": "x", "scoreMaximum": 1}, headers=only_roster)
    assert refused.status_code == 401
    grades = bearer(keys, platform, SCOPES["lineitem"], SCOPES["score"])
    new_item = {"label": "Problem 3", "scoreMaximum": 10, "resourceId": "problem03"}
    item = httpx.post(platform.lineitems_url, json=new_item, headers=grades).raise_for_status().json()
    score = {"userId": "stu-2b9d", "scoreGiven": 7.5, "scoreMaximum": 10, "activityProgress": "Submitted",
             "gradingProgress": "PendingManual", "timestamp": "2026-12-06T10:00:00+00:00"}
    assert httpx.post(item["id"] + "/scores", json=score, headers=grades).status_code == 201
    kept = platform.store()["scores"][item["id"].rsplit("/", 1)[1]]["stu-2b9d"]
    assert (kept["scoreGiven"], kept["gradingProgress"]) == (7.5, "PendingManual")
    older = {**score, "timestamp": "2026-12-06T09:00:00+00:00", "scoreGiven": 1}
    assert httpx.post(item["id"] + "/scores", json=older, headers=grades).status_code == 409


@pytest.mark.parametrize(("fault", "check"), [
    ("503", lambda r: r.status_code == 503),
    ("429", lambda r: r.status_code == 429 and r.headers["retry-after"] == "1"),
    ("malformed", lambda r: r.status_code == 200 and r.text == '{"members": ['),
    ("huge", lambda r: len(r.content) > 60 * 1024 * 1024),
    ("redirect", lambda r: r.status_code == 307 and "lms-elsewhere.invalid" in r.headers["location"]),
])
def test_a_fault_answers_the_next_service_call_once(registered, fault, check):
    keys, platform = registered
    headers = bearer(keys, platform, SCOPES["roster"])
    platform.fault(fault, path="/nrps/")
    assert check(httpx.get(platform.memberships_url, headers=headers, timeout=120))
    assert httpx.get(platform.memberships_url, headers=headers).status_code == 200


def test_a_deep_linking_response_signed_by_the_tool_adds_a_link_with_its_line_item(registered):
    keys, platform = registered
    now = int(time.time())
    item = {"type": "ltiResourceLink", "title": "Problem 3", "url": "http://127.0.0.1:9/hub/?assignment=problem03",
            "custom": {"assignment": "problem03"}, "lineItem": {"label": "Problem 3", "scoreMaximum": 10}}
    response = keys.sign({"iss": platform.client_id, "aud": platform.issuer, "iat": now, "exp": now + 300,
                          "nonce": uuid.uuid4().hex,
                          "https://purl.imsglobal.org/spec/lti/claim/message_type": "LtiDeepLinkingResponse",
                          "https://purl.imsglobal.org/spec/lti/claim/version": "1.3.0",
                          "https://purl.imsglobal.org/spec/lti/claim/deployment_id": platform.deployment_id,
                          "https://purl.imsglobal.org/spec/lti-dl/claim/content_items": [item]})
    assert httpx.post(platform.deep_link_return_url, data={"JWT": response}).status_code == 200
    [[kept]] = platform.store()["deep_links"]
    assert kept["custom"] == {"assignment": "problem03"}
    [line_item] = platform.store()["line_items"].values()
    assert (line_item["scoreMaximum"], line_item["resourceLinkId"]) == (10, kept["resource_link"])
    stranger = ToolKeys(keys.folder.parent / "stranger").ensure()
    assert httpx.post(platform.deep_link_return_url, data={"JWT": stranger.sign({"iss": "x"})}).status_code == 400
