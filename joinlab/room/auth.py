"""The room's login: a name and the room password; the first login with a name makes it yours.

A room password alone (JupyterHub's SharedPasswordAuthenticator) would hand a name to whoever types
it, with its notebooks and its queries. So a participant also chooses a password of their own at
their first login; from then on the name opens only with it, and someone else who picks the same
name is told it is taken. The instructor (LAB_ROOM_ADMIN) logs in with the admin password alone.
Passwords are compared in constant time; the own passwords are kept as scrypt hashes in a file only
the hub's user reads.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path

from jupyterhub.auth import Authenticator
from tornado import web
from traitlets import Bool, Unicode

from joinlab.room import names

OWN_MIN = 4  # an own password only keeps a name apart in the room; the room password keeps others out


def _hash(password: str, salt: bytes) -> str:
    return hashlib.scrypt(password.encode(), salt=salt, n=2**14, r=8, p=1).hex()


def same(given: str, expected: str) -> bool:
    return bool(expected) and hmac.compare_digest(given.encode(), expected.encode())


class RoomAuthenticator(Authenticator):
    room_password = Unicode(help="what every participant types (LAB_ROOM_PASSWORD)").tag(config=True)
    admin_password = Unicode(help="the instructor's (LAB_ROOM_ADMIN_PASSWORD)").tag(config=True)
    claims_file = Unicode(help="name -> salt and scrypt hash of its own password").tag(config=True)
    request_otp = Bool(True)  # the login form's third field, shown as a password field (templates/)
    otp_prompt = Unicode("Your own password (the first time, choose one: it keeps your name yours)")

    def _claims(self) -> dict[str, dict[str, str]]:
        try:
            return json.loads(Path(self.claims_file).read_text())
        except FileNotFoundError:
            return {}

    def _claim(self, name: str, password: str) -> None:
        claims = self._claims()
        salt = secrets.token_bytes(16)
        claims[name] = {"salt": salt.hex(), "scrypt": _hash(password, salt)}
        fd = os.open(self.claims_file + ".new", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(claims, handle)
        os.replace(self.claims_file + ".new", self.claims_file)

    async def authenticate(self, handler, data):
        name = data.get("username", "").strip().lower()
        password, own = data.get("password", ""), data.get("otp", "")
        if name in self.admin_users:
            return name if same(password, self.admin_password) else None
        if not same(password, self.room_password):
            return None  # JupyterHub's 403: "Invalid username or password", whatever the name
        if why := names.problem(name):
            raise web.HTTPError(403, why)
        claimed = self._claims().get(name)
        if claimed is None:
            if len(own) < OWN_MIN:
                raise web.HTTPError(403, f"Choose your own password (at least {OWN_MIN} characters) for the name "
                                         f"{name!r}: you will type it with the room password from now on")
            self._claim(name, own)
            self.log.info("room: %s joined", name)
            return name
        if same(_hash(own, bytes.fromhex(claimed["salt"])), claimed["scrypt"]):
            return name
        raise web.HTTPError(403, f"The name {name!r} is taken in this room: pick another one "
                                 "(or, if it is yours, type the own password you chose for it)")
