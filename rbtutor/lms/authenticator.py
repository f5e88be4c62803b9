"""Step: LMS (the hub's log-in). JupyterHub's LTI 1.3 log-in with the course's launch rules.

``jupyterhub-ltiauthenticator`` runs the OIDC flow (the initiation handler, the state and nonce
cookies, the redirect to the platform's authorization endpoint, the callback that receives the
id_token, the tool's configuration JSON). :class:`CourseLTIAuthenticator` keeps that flow and
replaces what happens to the id_token with :mod:`rbtutor.lms.launch`: every check, the account
name from the course's claim, the refusal of a name held by another LMS user, the record in the
gradebook (:mod:`rbtutor.lms.store`), all before any account exists. Then:

* the Unix account is made for a new LMS user by :attr:`CourseLTIAuthenticator.make_account`
  (the hub's configuration hands in ``hubctl.create_lms_account``); a local account of that
  name that the LMS did not make refuses the launch;
* the user is put in the course's instructors' or students' group (Formgrader or not), and taken
  out of the other;
* the launch's service URLs (the line items and the memberships of the course's context) are kept
  in the gradebook (:func:`rbtutor.lms.outbox.remember_services`), so the outbox and the roster
  know where the LMS's grade and roster services are;
* an instructor's deep-linking launch (``LtiDeepLinkingRequest``) goes to the picker of released
  assignments (:mod:`rbtutor.lms.deep_link`, served at ``/hub/lti13/deep_link``); the same request
  from anyone else is refused before any account is made;
* the browser goes where the link points: a student into the assignment's first notebook in
  JupyterLab, fetched for them first when they have no copy yet (:attr:`~CourseLTIAuthenticator.fetch_argv`
  run as the student, with a short-lived token of theirs that may reach the personalising
  service, so they get their own numbers as with the Fetch button); an instructor into the
  Formgrader's page of the assignment (the course's shared Formgrader,
  :attr:`~CourseLTIAuthenticator.formgrader_url`: an account the LMS made holds no course of its
  own); a link that names no assignment to JupyterLab.

The tool's public keys are served at ``/hub/lti13/jwks`` (:mod:`rbtutor.lms.keys`). A refused
launch is answered 403, "LTI log-in refused", with its one-line reason.
"""

from __future__ import annotations

import asyncio
import os
import pwd
from pathlib import Path

from jupyterhub.handlers import BaseHandler
from jupyterhub.utils import url_path_join
from ltiauthenticator.lti13.auth import LTI13Authenticator
from ltiauthenticator.lti13.handlers import LTI13CallbackHandler, LTI13LoginInitHandler, get_nonce
from ltiauthenticator.utils import convert_request_to_dict
from tornado.web import HTTPError
from traitlets import Callable, Dict, Integer, List, Unicode
from traitlets import Set as SetTrait

from .accounts import ACCOUNT_CLAIMS, AccountRefused
from .deep_link import DeepLinkError, DeepLinkHandler, DeepLinkRequest, picker_url
from .keys import ToolKeys
from .launch import Launch, LaunchRefused, LaunchRules, admit, jwks_client, read_launch
from .outbox import remember_services
from .store import connect

#: the title of the page a refused launch gets (its text is the one-line reason)
REFUSED = "LTI log-in refused"
DEEP_LINKING = "LtiDeepLinkingRequest"


def account_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def give_to_folder_owner(db_url: str) -> None:
    """A SQLite gradebook the hub (root) just made belongs to the owner of its folder (the instructor)."""
    if not db_url.startswith("sqlite:///") or os.geteuid() != 0:
        return
    path = Path(db_url.removeprefix("sqlite:///"))
    folder = path.parent.stat()
    if path.exists() and path.stat().st_uid != folder.st_uid:
        os.chown(path, folder.st_uid, folder.st_gid)


class CourseLoginInitHandler(LTI13LoginInitHandler):
    """The library's log-in initiation, refusing an initiation from another platform."""

    def post(self):
        issuer = self.get_argument("iss", "")
        if issuer != self.authenticator.issuer:
            raise HTTPError(403, f"the initiation comes from {issuer[:120]!r}, not from this course's LMS",
                            reason=REFUSED)
        return super().post()

    get = post


class CourseCallbackHandler(LTI13CallbackHandler):
    """The library's callback with the course's checks, account, groups and landing page."""

    async def post(self):
        try:
            launch = await self.checked_launch()
            placing = deep_link_request(launch)
            user = await self.login_user(launch)
        except (LaunchRefused, DeepLinkError) as refusal:
            self.log.warning("LTI launch refused: %s", refusal)
            raise HTTPError(403, str(refusal), reason=REFUSED) from None
        if user is None:
            raise HTTPError(403, "the hub did not accept the user", reason=REFUSED)
        self.authenticator.set_course_group(user, launch.role)
        if placing is not None:
            self.redirect(picker_url(self.hub.base_url, placing, user.name))
            return
        self.redirect(await self.authenticator.landing_url(user, launch, self.hub.base_url))

    async def checked_launch(self) -> Launch:
        """The posted id_token checked against this browser's state and nonce cookies (read, then cleared).

        The checks read the platform's JWKS and the gradebook, so they run in a thread: a slow LMS
        does not hold up the hub."""
        args = convert_request_to_dict(self.request.arguments)
        if not args.get("id_token") or not args.get("state"):
            raise LaunchRefused("the platform sent no id_token or no state")
        nonce_state, expected_state = self._get_nonce_state_cookie(), self._get_state_cookie()
        authenticator = self.authenticator

        def check() -> Launch:
            return read_launch(args["id_token"], authenticator.rules(), state=args["state"],
                               expected_state=expected_state,
                               expected_nonce=get_nonce(nonce_state) if nonce_state else "",
                               keys=authenticator.platform_keys(), store=authenticator.store())

        return await asyncio.to_thread(check)


def deep_link_request(launch: Launch) -> DeepLinkRequest | None:
    """The deep-linking request a launch carries (None for a resource link); :class:`DeepLinkError` when
    the tool cannot answer it, a learner's among them, so that such a launch makes no account."""
    if launch.message_type != DEEP_LINKING:
        return None
    return DeepLinkRequest.from_claims(launch.claims)


class JWKSHandler(BaseHandler):
    """The tool's public keys, for the LMS to check what the tool signs."""

    def get(self):
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "max-age=300")
        self.write(ToolKeys(self.authenticator.keys_folder).jwks())


class CourseLTIAuthenticator(LTI13Authenticator):
    """LTI 1.3 log-in for the course (see the module's docstring)."""

    login_handler = CourseLoginInitHandler
    callback_handler = CourseCallbackHandler

    deployment_ids = SetTrait(Unicode(), config=True, help="The LMS deployment ids this course accepts.")
    account_claim = Unicode("login", config=True, help=f"What names a user's account: {', '.join(ACCOUNT_CLAIMS)}.")
    gradebook_url = Unicode(config=True, help="The course gradebook's database URL: the LMS users are kept there.")
    keys_folder = Unicode(config=True, help="The folder of the tool's signing keys (rbtutor.lms.keys).")
    instructor_group = Unicode(config=True, help="The hub group of instructors (the Formgrader).")
    student_group = Unicode(config=True, help="The hub group of students.")
    leeway = Integer(60, config=True, help="Seconds of clock skew allowed on the id_token's times.")
    make_account = Callable(None, allow_none=True, config=True,
                            help="make_account(name): makes the Unix account of a new LMS user; None: it must exist.")
    formgrader_url = Unicode("", config=True,
                             help="Where an instructor's launch goes: the course's shared Formgrader (on the hub, the "
                                  "service /services/<course>/formgrader); empty: the Formgrader of their own server.")
    fetch_argv = List(Unicode(), config=True,
                      help="The command that fetches an assignment for a student, run as the student in their home; "
                           "'{assignment}' is replaced. Empty: no fetch at launch.")
    fetch_env = Dict(config=True, help="The fetch command's environment ('{user}' is replaced in values).")
    fetch_scopes = List(Unicode(), config=True,
                        help="Scopes of the student's token the fetch command gets ('{user}' is replaced).")
    fetch_timeout = Integer(180, config=True, help="Seconds the fetch at launch may take.")
    course_folder = Unicode(config=True, help="The course folder (course.toml, nbgrader_config.py); the deep-"
                                              "linking picker lists its released assignments.")
    released_folder = Unicode(config=True, help="The exchange's outbound folder of the course (what `rbtutor "
                                                "release` put there); empty: nbgrader's own listing.")

    _store = None
    _keys = None

    def rules(self) -> LaunchRules:
        return LaunchRules(issuer=self.issuer, client_ids=tuple(sorted(self.client_id)),
                           deployment_ids=tuple(sorted(self.deployment_ids)), jwks_url=self.jwks_endpoint,
                           account_claim=self.account_claim, leeway=self.leeway)

    def store(self):
        if self._store is None:
            self._store = connect(self.gradebook_url)
            give_to_folder_owner(self.gradebook_url)
        return self._store

    def platform_keys(self):
        if self._keys is None:
            self._keys = jwks_client(self.jwks_endpoint)
        return self._keys

    def get_handlers(self, app):
        return [*super().get_handlers(app), (url_path_join("lti13", "jwks"), JWKSHandler),
                (url_path_join("lti13", "deep_link"), DeepLinkHandler)]

    def claim_account(self, account: str, new: bool) -> None:
        """Make the Unix account of a new LMS user; refuse a local account the LMS did not make."""
        if new and account_exists(account):
            raise AccountRefused(f"a local account {account!r} exists that the LMS did not make; refused, not "
                                 "merged (ask the operator)")
        if not account_exists(account):
            if self.make_account is None:
                raise AccountRefused(f"there is no account {account!r} on this machine and the hub makes none")
            self.make_account(account)

    async def authenticate(self, handler, data: Launch = None):
        """The checked launch admitted: its nonce used, the LMS user recorded, the account made."""
        if not isinstance(data, Launch):
            return None
        user = await asyncio.to_thread(lambda: admit(data, self.store(), self.claim_account))
        await asyncio.to_thread(self.keep_services, data)
        return {"name": user.account, "auth_state": {"lms_issuer": user.issuer, "lms_sub": user.sub,
                                                     "role": data.role, "assignment": data.assignment}}

    def keep_services(self, launch: Launch) -> None:
        """Keep the launch's AGS and NRPS URLs (:func:`rbtutor.lms.outbox.remember_services`); a URL the
        course does not accept is logged and not kept, and the log-in goes on."""
        try:
            kept = remember_services(self.store().engine, launch.claims)
        except ValueError as error:
            self.log.warning("LTI launch of %s: the platform's service URLs were not kept: %s", launch.account, error)
            return
        if not kept:
            self.log.info("LTI launch of %s: no service URLs kept (none offered, or another context)", launch.account)

    def set_course_group(self, user, role: str) -> None:
        """Put the user in the course group of ``role`` and out of the other; other groups stay."""
        course = {self.instructor_group, self.student_group}
        wanted = self.instructor_group if role == "instructor" else self.student_group
        kept = {group.name for group in user.groups} - course
        user.sync_groups(sorted(kept | {wanted}))

    async def landing_url(self, user, launch: Launch, hub_base: str) -> str:
        """Where the browser goes after a launch (see the module's docstring)."""
        name = launch.assignment
        if launch.role == "instructor":
            formgrader = self.formgrader_url or url_path_join(hub_base, "user-redirect", "formgrader")
            return url_path_join(formgrader, "manage_submissions", name) if name else formgrader
        lab = url_path_join(hub_base, "user-redirect", "lab")
        if not name:
            return lab
        notebook = await self.fetched_notebook(user, name)
        return url_path_join(lab, "tree", name, *([notebook] if notebook else []))

    async def fetched_notebook(self, user, assignment: str) -> str | None:
        """The first notebook of the student's copy of ``assignment``, fetched now if they have none."""
        account = pwd.getpwnam(user.name)
        folder = Path(account.pw_dir) / assignment
        if not folder.is_dir() and self.fetch_argv:
            await self.fetch_for(user, account, assignment)
        notebooks = sorted(path.name for path in folder.glob("*.ipynb")) if folder.is_dir() else []
        return notebooks[0] if notebooks else None

    async def fetch_for(self, user, account, assignment: str) -> None:
        """Run :attr:`fetch_argv` as the student; a failure is logged, and the student lands in JupyterLab."""
        token = user.new_api_token(note="rbtutor: fetch at LTI launch", expires_in=self.fetch_timeout + 60,
                                   scopes=[scope.format(user=user.name) for scope in self.fetch_scopes])
        env = {key: value.format(user=user.name) for key, value in self.fetch_env.items()}
        env.update({"HOME": account.pw_dir, "USER": user.name, "JUPYTERHUB_USER": user.name,
                    "JUPYTERHUB_API_TOKEN": token})
        argv = [arg.format(assignment=assignment) for arg in self.fetch_argv]
        process = await asyncio.create_subprocess_exec(
            *argv, cwd=account.pw_dir, env=env, user=account.pw_uid, group=account.pw_gid, extra_groups=[],
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        try:
            output, _ = await asyncio.wait_for(process.communicate(), self.fetch_timeout)
        except TimeoutError:
            process.kill()
            self.log.error("fetch of %s for %s took more than %s s", assignment, user.name, self.fetch_timeout)
            return
        if process.returncode != 0:
            self.log.error("fetch of %s for %s failed (%s): %s", assignment, user.name, process.returncode,
                           output.decode(errors="replace")[-2000:])
