"""Step: LMS (the course's LMS records). LMS users and used launch nonces, in the course's gradebook database.

The tables live beside nbgrader's in the gradebook (the same URL: SQLite or PostgreSQL), under
names that start with ``lms_`` so they never meet nbgrader's:

* ``lms_users``: one row an LMS user: ``issuer`` + ``sub`` (unique together: who the LMS says
  this is) -> ``account`` (unique: the hub and Unix account and the nbgrader student id), ``name``,
  ``email``, ``roles`` (the LTI role URIs, JSON), ``status`` (``active`` or ``inactive``: a user
  who left the course is marked, never deleted), ``first_seen`` and ``last_seen`` (UTC);
* ``lms_used``: the launch nonces and states already used (``kind``, ``value``, ``issuer``,
  ``expires_at``): a launch that brings one again is a replay and is refused. Rows past their
  expiry are dropped as new ones come in (a token that old is refused for its age anyway).

Interface (stable; :mod:`rbtutor.lms.roster` and the outbox add their own tables)::

    METADATA                      # SQLAlchemy MetaData: define more tables on it, then connect()
    store = connect(db_url)       # an LmsStore; creates every table METADATA knows (idempotent)
    store.user(issuer, sub)       # LmsUser or None
    store.user_by_account(name)   # LmsUser or None
    store.users()                 # every LmsUser, by account
    store.record_user(issuer, sub, account, name=, email=, roles=, status=)  # insert or update
    store.set_status(issuer, sub, "inactive")
    store.admit(issuer, sub, account, nonce=, expires_at=, claim_account=, ...)  # a launch, all or nothing
    store.engine                  # the SQLAlchemy engine, for the tables of other modules

:class:`AccountTaken` (an account name already held by another LMS user) and :class:`Replayed`
(a nonce used before) are the refusals; each leaves the database as it was.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    Integer,
    MetaData,
    String,
    Table,
    UniqueConstraint,
    create_engine,
    delete,
    insert,
    inspect,
    select,
    update,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

METADATA = MetaData()
STATUSES = ("active", "inactive")

USERS = Table(
    "lms_users", METADATA,
    Column("id", Integer, primary_key=True),
    Column("issuer", String(255), nullable=False),
    Column("sub", String(255), nullable=False),
    Column("account", String(64), nullable=False, unique=True),
    Column("name", String(255), nullable=False, default=""),
    Column("email", String(255), nullable=False, default=""),
    Column("roles", JSON, nullable=False, default=list),
    Column("status", String(16), nullable=False, default="active"),
    Column("first_seen", DateTime, nullable=False),
    Column("last_seen", DateTime, nullable=False),
    UniqueConstraint("issuer", "sub", name="lms_users_issuer_sub"),
)

USED = Table(
    "lms_used", METADATA,
    Column("kind", String(16), primary_key=True),  # nonce or state
    Column("value", String(255), primary_key=True),
    Column("issuer", String(255), nullable=False),
    Column("expires_at", DateTime, nullable=False),
)


class AccountTaken(ValueError):
    """The account name is held by another LMS user (or another account): refused, never merged."""


class Replayed(ValueError):
    """A launch nonce or state that was used before."""


@dataclass(frozen=True)
class LmsUser:
    """One row of ``lms_users``."""

    issuer: str
    sub: str
    account: str
    name: str
    email: str
    roles: tuple
    status: str
    first_seen: datetime
    last_seen: datetime


def now() -> datetime:
    """The time as stored: UTC, without a zone (SQLite keeps none)."""
    return datetime.now(UTC).replace(tzinfo=None)


def as_user(row) -> LmsUser:
    return LmsUser(row.issuer, row.sub, row.account, row.name, row.email, tuple(row.roles or ()), row.status,
                   row.first_seen, row.last_seen)


def connect(db_url: str, **engine_options) -> LmsStore:
    """The LMS records of the gradebook at ``db_url``; makes the tables METADATA knows that are missing.

    A database with no table yet is first made a gradebook by nbgrader: nbgrader takes a database
    that has any table for one of its own, and would then not record its schema's version."""
    engine = create_engine(db_url, **engine_options)
    if not inspect(engine).get_table_names():
        # deferred: nbgrader takes 3.1 s to import (python -X importtime, 2026-12-06); only a new database needs it
        from nbgrader.api import Gradebook

        bin_dir = str(Path(sys.executable).parent)  # a new gradebook runs `alembic`, beside this interpreter
        if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
            os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
        Gradebook(db_url).close()
    METADATA.create_all(engine)
    return LmsStore(engine)


class LmsStore:
    """The LMS records over one engine (see the module's docstring)."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def create_tables(self) -> None:
        """Make the tables defined on METADATA since :func:`connect`."""
        METADATA.create_all(self.engine)

    def user(self, issuer: str, sub: str, connection: Connection | None = None) -> LmsUser | None:
        query = select(USERS).where(USERS.c.issuer == issuer, USERS.c.sub == sub)
        with self._connection(connection) as conn:
            row = conn.execute(query).first()
        return as_user(row) if row else None

    def user_by_account(self, account: str, connection: Connection | None = None) -> LmsUser | None:
        with self._connection(connection) as conn:
            row = conn.execute(select(USERS).where(USERS.c.account == account)).first()
        return as_user(row) if row else None

    def users(self) -> list[LmsUser]:
        with self.engine.connect() as conn:
            return [as_user(row) for row in conn.execute(select(USERS).order_by(USERS.c.account))]

    def record_user(self, issuer: str, sub: str, account: str, *, name: str = "", email: str = "",
                    roles=(), status: str = "active", connection: Connection | None = None) -> LmsUser:
        """Insert the user, or update name, e-mail, roles, status and last_seen of a known one.

        A known user keeps the account they were given first. A new user whose ``account`` is held
        by another raises :class:`AccountTaken`."""
        if status not in STATUSES:
            raise ValueError(f"expected an LMS user status in {STATUSES}, got {status!r}")
        with self._transaction(connection) as conn:
            known = self.user(issuer, sub, conn)
            values = {"name": name or "", "email": email or "", "roles": list(roles), "status": status,
                      "last_seen": now()}
            if known:
                conn.execute(update(USERS).where(USERS.c.issuer == issuer, USERS.c.sub == sub).values(**values))
            else:
                holder = self.user_by_account(account, conn)
                if holder:
                    raise AccountTaken(f"the account name {account!r} belongs to another LMS user "
                                       f"({holder.name or holder.sub}); refused, not merged")
                try:  # a refusal here rolls the whole transaction back
                    conn.execute(insert(USERS).values(issuer=issuer, sub=sub, account=account,
                                                      first_seen=values["last_seen"], **values))
                except IntegrityError:
                    raise AccountTaken(f"the account name {account!r} was just taken by another LMS user; "
                                       "refused, not merged") from None
            return self.user(issuer, sub, conn)

    def set_status(self, issuer: str, sub: str, status: str) -> None:
        """Mark a user ``active`` or ``inactive`` (one who left the course keeps their row and work)."""
        if status not in STATUSES:
            raise ValueError(f"expected an LMS user status in {STATUSES}, got {status!r}")
        with self.engine.begin() as conn:
            conn.execute(update(USERS).where(USERS.c.issuer == issuer, USERS.c.sub == sub).values(status=status))

    def is_used(self, kind: str, value: str) -> bool:
        with self.engine.connect() as conn:
            found = conn.execute(select(USED.c.value).where(USED.c.kind == kind, USED.c.value == value)).first()
        return found is not None

    def use_once(self, kind: str, value: str, issuer: str, expires_at: datetime,
                 connection: Connection | None = None) -> None:
        """Record ``value`` as used; :class:`Replayed` if it was used before. Drops expired rows."""
        with self._transaction(connection) as conn:
            conn.execute(delete(USED).where(USED.c.expires_at < now()))
            try:  # a refusal here rolls the whole transaction back
                conn.execute(insert(USED).values(kind=kind, value=value, issuer=issuer, expires_at=expires_at))
            except IntegrityError:
                raise Replayed(f"this launch's {kind} was used before: a replayed launch is refused") from None

    def admit(self, issuer: str, sub: str, account: str, *, nonce: str, expires_at: datetime, name: str = "",
              email: str = "", roles=(), claim_account: Callable[[str, bool], None] | None = None) -> LmsUser:
        """A checked launch, all or nothing: the nonce used, the user recorded, the account claimed.

        ``claim_account(account, new)`` runs inside the transaction after the user's row is
        written (``new`` says whether the row is new): it makes or checks the Unix account and
        raises to refuse; then nothing is kept, neither the nonce nor the user."""
        with self.engine.begin() as conn:
            self.use_once("nonce", nonce, issuer, expires_at, conn)
            known = self.user(issuer, sub, conn)
            user = self.record_user(issuer, sub, known.account if known else account, name=name, email=email,
                                    roles=roles, status="active", connection=conn)
            if claim_account is not None:
                claim_account(user.account, known is None)
        return user

    @contextlib.contextmanager
    def _connection(self, connection: Connection | None):
        if connection is not None:
            yield connection
        else:
            with self.engine.connect() as conn:
                yield conn

    @contextlib.contextmanager
    def _transaction(self, connection: Connection | None):
        if connection is not None:
            yield connection
        else:
            with self.engine.begin() as conn:
                yield conn
