"""A real headless Chromium for page checks, driven over the DevTools protocol (no test framework to
install: websocket-client comes with jupyter_server). `problem()` says why it cannot run here."""
from __future__ import annotations

import contextlib
import itertools
import json
import re
import shutil
import subprocess
import tempfile
import urllib.request

from tests.conftest import wait_for

# As root, in a closed network: no sandbox, and none of Chromium's background requests.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-port=0", "--window-size=1280,900"]


def executable() -> str | None:
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)


def problem() -> str | None:
    if executable() is None:
        return "no Chromium installed (on Debian: apt-get install chromium)"
    try:
        import websocket  # noqa: F401
    except ImportError:
        return "websocket-client is not installed"
    return None


class Page:
    def __init__(self, socket):
        self.socket = socket
        self.ids = itertools.count(1)

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page."""
        message_id = next(self.ids)
        self.socket.send(json.dumps({"id": message_id, "method": "Runtime.evaluate",
                                     "params": {"expression": expression, "returnByValue": True}}))
        while True:
            answer = json.loads(self.socket.recv())
            if answer.get("id") == message_id:
                return answer["result"]["result"].get("value")


@contextlib.contextmanager
def open_page(url: str, flags: list[str] | None = None):
    """Chromium showing `url` (with `flags` beside FLAGS); yields a Page to evaluate JavaScript in."""
    import websocket
    with tempfile.TemporaryDirectory(prefix="chromium-", ignore_cleanup_errors=True) as profile:
        browser = subprocess.Popen([executable(), *FLAGS, *(flags or []), f"--user-data-dir={profile}", url],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            port_file = f"{profile}/DevToolsActivePort"
            port = wait_for(lambda: _read(port_file), 60, "Chromium's DevTools port").splitlines()[0]

            def page_target():
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as listing:
                    return next((t for t in json.load(listing) if t["type"] == "page"), None)
            target = wait_for(page_target, 30, "Chromium's page")
            socket = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=30)
            try:
                yield Page(socket)
            finally:
                socket.close()
        finally:
            browser.kill()
            browser.wait()


def _read(path: str) -> str | None:
    try:
        text = open(path).read()
    except OSError:
        return None
    return text if re.match(r"\d+\n", text) else None
