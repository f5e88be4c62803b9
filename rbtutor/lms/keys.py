"""Step: LMS (the tool's keys). The course's RSA signing keys for LTI 1.3, kept with its secrets.

The tool signs what it sends to the LMS (the client assertion of each service token, the
deep-linking response) with its current key; the LMS checks those signatures against the tool's
JWKS, which the hub publishes (:func:`ToolKeys.jwks`). The keys live in one file,
``tool-keys.json``, in a folder given by a path (the course's secrets): the folder is made mode
0700 and the file 0600, owned by ``owner`` when one is named and this process is root (the hub's
service account), so no student reads them. A file that others can read is refused.

Interface (stable; :mod:`rbtutor.lms.services` signs with it)::

    keys = ToolKeys("/srv/rbtutor/secrets/lti", owner="rbtutor-fetch").ensure()  # made once, then kept
    keys.current()     # SigningKey(kid, private_key, created): sign with this
    keys.sign(claims)  # a compact JWT, RS256, header kid = current kid
    keys.jwks()        # {"keys": [public JWK with kid, alg RS256, use sig, ...]}: publish this
    keys.rotate()      # a new current key; the previous one stays published until the next rotation

Keys are made with ``cryptography`` (RSA 2048, e = 65537); the key id is the key's RFC 7638
thumbprint (``jwcrypto``); signatures are PyJWT's. Nothing here does cryptography by hand.
"""

from __future__ import annotations

import json
import os
import pwd
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwcrypto.jwk import JWK

FILE_NAME = "tool-keys.json"
#: keys published at once: the current one and the one it replaced
PUBLISHED = 2
KEY_BITS = 2048


class KeyStoreError(RuntimeError):
    """The tool's keys cannot be read or written safely; the message says why."""


@dataclass(frozen=True)
class SigningKey:
    """One key of the tool: its id, its private key (a ``cryptography`` RSA key) and when it was made."""

    kid: str
    private_key: rsa.RSAPrivateKey
    created: float

    @property
    def pem(self) -> str:
        return self.private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption()).decode()

    def public_jwk(self) -> dict:
        """The public half as a JWK: kty, n, e, kid, alg RS256, use sig."""
        public = self.private_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                            serialization.PublicFormat.SubjectPublicKeyInfo)
        jwk = JWK.from_pem(public).export_public(as_dict=True)
        return {**jwk, "kid": self.kid, "alg": "RS256", "use": "sig"}


def new_key() -> SigningKey:
    private = rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)
    public = private.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo)
    return SigningKey(kid=JWK.from_pem(public).thumbprint(), private_key=private, created=time.time())


def key_from_record(record: dict) -> SigningKey:
    private = serialization.load_pem_private_key(record["pem"].encode(), password=None)
    return SigningKey(kid=record["kid"], private_key=private, created=float(record["created"]))


class ToolKeys:
    """The tool's keys in ``folder`` (see the module's docstring); ``owner`` is a user name or None."""

    def __init__(self, folder: str | os.PathLike, owner: str | None = None):
        self.folder = Path(folder)
        self.owner = owner
        self.path = self.folder / FILE_NAME

    def ensure(self) -> ToolKeys:
        """Make the first key when there is none; check the folder's and file's modes either way."""
        if not self.path.exists():
            self._write([new_key()])
        self._load()
        return self

    def current(self) -> SigningKey:
        """The key to sign with now."""
        return self._load()[0]

    def published(self) -> list[SigningKey]:
        """The keys the JWKS shows: the current one first."""
        return self._load()[:PUBLISHED]

    def jwks(self) -> dict:
        """The public JWKS: ``{"keys": [...]}``, current key first."""
        return {"keys": [key.public_jwk() for key in self.published()]}

    def rotate(self) -> SigningKey:
        """Make a new current key; the one it replaces stays published, older ones are dropped."""
        fresh = new_key()
        self._write([fresh, *self._load()][:PUBLISHED])
        return fresh

    def sign(self, claims: dict, headers: dict | None = None) -> str:
        """``claims`` as a compact JWT signed RS256 with the current key (``kid`` in the header)."""
        key = self.current()
        return jwt.encode(claims, key.private_key, algorithm="RS256", headers={**(headers or {}), "kid": key.kid})

    def _load(self) -> list[SigningKey]:
        try:
            mode = self.path.stat().st_mode
        except FileNotFoundError:
            raise KeyStoreError(f"no tool keys in {self.folder}: make them with ToolKeys(...).ensure()") from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise KeyStoreError(f"{self.path} may be read by others (mode {stat.filemode(mode)}): "
                                f"expected 0600 (chmod 600 {self.path})")
        try:
            records = json.loads(self.path.read_text())["keys"]
            keys = [key_from_record(record) for record in records]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise KeyStoreError(f"cannot read the tool keys {self.path}: {error}") from None
        if not keys:
            raise KeyStoreError(f"{self.path} holds no key")
        return keys

    def _write(self, keys: list[SigningKey]) -> None:
        """Write ``keys`` at once (a new file renamed over the old), folder 0700, file 0600."""
        self.folder.mkdir(parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)
        records = [{"kid": key.kid, "created": key.created, "pem": key.pem} for key in keys]
        handle, temporary = tempfile.mkstemp(dir=self.folder, prefix=".tool-keys-")
        with os.fdopen(handle, "w") as out:
            json.dump({"keys": records}, out, indent=1)
        os.chmod(temporary, 0o600)
        self._give_to_owner(temporary)
        os.replace(temporary, self.path)

    def _give_to_owner(self, file: str) -> None:
        if self.owner is None or os.geteuid() != 0:
            return
        entry = pwd.getpwnam(self.owner)
        for path in (self.folder, Path(file)):
            os.chown(path, entry.pw_uid, entry.pw_gid)
