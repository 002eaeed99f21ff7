"""A participant of the room, as a test drives one: the hub's login form, their server, and code
run in a kernel of their own server (its REST API and the kernel's websocket, as JupyterLab does)."""
from __future__ import annotations

import contextlib
import json
import re
import shutil
import ssl
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import requests

from tests.conftest import wait_for


def dotenv(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line and line[0] != "#")


@contextlib.contextmanager
def open_room(names: tuple[str, ...], log=print):
    """`joinlab lab up --room` on free ports, in a fresh folder that Spark's user and the
    participants can reach (pytest's own temporary folders are 0700), the participants' Python in
    it; everything stopped, and the Unix users of `names` removed, at the end."""
    from tests.test_lab_stack import ROOT, joinlab, lab_env, port_of
    home = Path(tempfile.mkdtemp(prefix="joinlab-room-"))
    home.chmod(0o755)
    env = lab_env(home)
    env["LAB_ROOM_VENV"] = str(home / "venv")
    shutil.copytree(ROOT / "notebooks", home / "notebooks")
    began = time.monotonic()
    done = joinlab(env, "lab", "up", "--room", timeout=900)
    try:
        assert done.returncode == 0, f"lab up --room failed:\n{done.stdout}\n{done.stderr}"
        log(f"room up after {time.monotonic() - began:.1f} s")
        lab = home / "lab"
        yield SimpleNamespace(env=env, home=lab, out=done.stdout, secrets=dotenv(home / ".env"),
                              door=f"https://127.0.0.1:{port_of(env, 'room')}", port=port_of(env, "room"),
                              cert=str(lab / "room" / "tls" / "cert.pem"),
                              bootstrap=f"127.0.0.1:{port_of(env, 'broker')}",
                              connect_ui=f"http://127.0.0.1:{port_of(env, 'connect-ui')}")
    finally:
        joinlab(env, "lab", "down", timeout=180)
        for name in names:
            subprocess.run(["userdel", "--remove", f"lab-{name}"], capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


@dataclass
class Participant:
    base: str            # https://127.0.0.1:PORT, the room's door
    cert: str            # its certificate, the one CA trusted
    name: str
    session: requests.Session = field(default_factory=requests.Session)

    def __post_init__(self):
        self.session.trust_env = False  # no CA bundle from the environment: only the room's certificate
        self.session.verify = self.cert

    def login(self, password: str, own: str = "") -> requests.Response:
        """The login form, filled and sent as a browser does (its _xsrf field included)."""
        page = self.session.get(f"{self.base}/hub/login")
        xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page.text).group(1)
        return self.session.post(f"{self.base}/hub/login", allow_redirects=False,
                                 data={"_xsrf": xsrf, "username": self.name, "password": password, "otp": own})

    def start_server(self, timeout_s: float = 180) -> None:
        """Their JupyterLab, started through the hub, then opened (the OAuth round trip gives the cookie)."""
        self.session.get(f"{self.base}/hub/spawn")
        lab = f"{self.base}/user/{self.name}/lab"

        def opened() -> bool:  # while it starts, the hub answers that URL with its "pending" page
            page = self.session.get(lab)
            return page.status_code == 200 and page.url == lab
        wait_for(opened, timeout_s, f"{self.name}'s JupyterLab")

    def api(self, method: str, path: str, **kwargs) -> requests.Response:
        xsrf = self.session.cookies.get("_xsrf", path=f"/user/{self.name}/") or ""
        return self.session.request(method, f"{self.base}/user/{self.name}/api/{path}",
                                    headers={"X-XSRFToken": xsrf}, **kwargs)

    @classmethod
    def logged_in(cls, room, name: str) -> "Participant":
        """`name` logged in to `room` through its form (own password NAME-own)."""
        p = cls(room.door, room.cert, name)
        answer = p.login(room.secrets["LAB_ROOM_PASSWORD"], own=f"{name}-own")
        assert answer.status_code == 302, answer.text[-2000:]
        return p

    @classmethod
    def joined(cls, room, name: str) -> "Participant":
        """`name` logged in to `room`, their server started."""
        p = cls.logged_in(room, name)
        p.start_server()
        return p

    def kernel(self, notebook: str = "") -> "Kernel":
        made = self.api("POST", "sessions", json={"path": notebook or f"test-{uuid.uuid4().hex}.ipynb",
                                                  "type": "notebook", "kernel": {"name": "python3"}})
        made.raise_for_status()
        return Kernel(self, made.json()["kernel"]["id"])


class CellError(AssertionError):
    pass


class Kernel:
    """Code run in a participant's kernel over its websocket, a new one for each `run` (the server
    closes one that answers no ping while a test waits); `run` returns what the code printed."""

    def __init__(self, participant: Participant, kernel_id: str):
        self.participant, self.id = participant, kernel_id

    def _connect(self):
        import websocket
        p = self.participant
        cookies = "; ".join(f"{c.name}={c.value}" for c in p.session.cookies)
        url = p.base.replace("https://", "wss://") + f"/user/{p.name}/api/kernels/{self.id}/channels"
        xsrf = p.session.cookies.get("_xsrf", path=f"/user/{p.name}/") or ""
        return websocket.create_connection(
            url + (f"?_xsrf={xsrf}" if xsrf else ""), header=[f"Cookie: {cookies}"], origin=p.base,
            sslopt={"cert_reqs": ssl.CERT_REQUIRED, "ca_certs": p.cert}, timeout=30)

    def run(self, code: str, timeout_s: float = 300) -> str:
        with contextlib.closing(self._connect()) as socket:
            return self._run(socket, code, timeout_s)

    def _run(self, socket, code: str, timeout_s: float) -> str:
        msg_id = uuid.uuid4().hex
        socket.send(json.dumps({
            "header": {"msg_id": msg_id, "username": self.participant.name, "session": self.id, "msg_type":
                       "execute_request", "version": "5.3", "date": ""},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True}}))
        printed, deadline = [], time.monotonic() + timeout_s
        replied = idle = False  # the shell's reply and the kernel's "idle" on iopub come in either order
        while not (replied and idle):
            socket.settimeout(max(1.0, deadline - time.monotonic()))
            message = json.loads(socket.recv())
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = message["msg_type"], message["content"]
            if kind == "stream":
                printed.append(content["text"])
            elif kind in ("execute_result", "display_data"):
                printed.append(content["data"].get("text/plain", ""))
            elif kind == "error":
                raise CellError(f"{self.participant.name}'s cell failed:\n{code}\n" + "\n".join(content["traceback"]))
            elif kind == "execute_reply" and message["channel"] == "shell":
                replied = True
            elif kind == "status" and content["execution_state"] == "idle":
                idle = True
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.participant.name}'s cell ran past {timeout_s:.0f} s:\n{code}")
        return "".join(printed)

    def close(self) -> None:
        self.participant.api("DELETE", f"kernels/{self.id}")
