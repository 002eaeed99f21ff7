"""The room (`make up ROOM=1` = `joinlab lab up --room`): JupyterHub in front of one native lab.

One room for the module, as a workshop has it: the native lab on free ports in a LAB_HOME of its
own, the hub's proxy over TLS with its self-signed certificate, participants who log in through the
hub's own form (tests/room.py drives it as a browser does; one of them in Chromium), each with a
JupyterLab of their own running as their own Unix user, every kernel a client of the lab's one
Spark Connect server. The participants' Unix users are removed at the end.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import pwd
import re
import ssl
import subprocess
import threading
import time
from pathlib import Path

import pytest

from joinlab.stack import procs
from tests.conftest import wait_for
from tests.room import Participant, open_room
from tests.test_lab_stack import ROOT, joinlab, port_of, stack_pids

pytestmark = pytest.mark.spark
PARTICIPANTS = ("ann", "ben", "cai")
EVERYONE = (*PARTICIPANTS, "dee", "eve", "instructor")


@pytest.fixture(scope="module")
def room():
    if os.geteuid() != 0:
        pytest.skip("the room makes Unix users: it runs as root (CI does)")
    import subprocess as sp
    if sp.run(["test", "-r", str(ROOT / "pyproject.toml")], preexec_fn=procs.as_user("nobody"), cwd="/").returncode:
        pytest.skip(f"this checkout ({ROOT}) lies in a folder other users cannot read, and the room's Spark user "
                    "must read it: clone it elsewhere (e.g. under /work or /srv) to run the room's tests")
    with open_room(EVERYONE) as opened:
        yield opened


def participant(room, name: str) -> Participant:
    return Participant(room.door, room.cert, name)


def login_error(answer) -> str:
    found = re.search(r'<p class="login_error">\s*(.*?)\s*</p>', answer.text, re.S)
    return found.group(1).replace("&#39;", "'") if found else ""


def hub_pids(room) -> set[int]:
    return procs.tree([json.loads((room.home / "run" / "hub.json").read_text())["pid"]])


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").replace("\0", " ")
    except OSError:
        return ""


def test_up_prints_the_door_its_fingerprint_and_where_the_passwords_are_not_the_passwords(room):
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding
    assert "participants open https://" in room.out and f":{room.port}/" in room.out
    der = x509.load_pem_x509_certificate(Path(room.cert).read_bytes()).public_bytes(Encoding.DER)
    fingerprint = ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())
    assert f"SHA-256 {fingerprint}" in room.out
    assert "LAB_ROOM_PASSWORD" in room.out and "LAB_ROOM_ADMIN_PASSWORD" in room.out
    for secret in ("LAB_ROOM_PASSWORD", "LAB_ROOM_ADMIN_PASSWORD", "SPARK_CONNECT_AUTHENTICATE_TOKEN"):
        assert room.secrets[secret] and room.secrets[secret] not in room.out
    assert len(room.secrets["LAB_ROOM_ADMIN_PASSWORD"]) >= 32
    assert oct((room.home / "room" / "tls" / "key.pem").stat().st_mode & 0o777) == "0o600"


def test_a_wrong_password_gets_403_and_a_name_is_its_first_owners(room):
    stranger = participant(room, "dee")
    wrong = stranger.login("not-the-room-password", own="whatever")
    assert wrong.status_code == 403 and login_error(wrong) == "Invalid username or password"
    assert stranger.session.get(f"{room.door}/hub/api/user").status_code == 403  # nothing behind the door
    assert Participant.logged_in(room, "dee")  # the room password, and an own password chosen at the first login
    again = participant(room, "dee").login(room.secrets["LAB_ROOM_PASSWORD"], own="someone-else")
    assert again.status_code == 403 and "The name 'dee' is taken in this room" in login_error(again)
    assert participant(room, "dee").login(room.secrets["LAB_ROOM_PASSWORD"], own="dee-own").status_code == 302
    bad = participant(room, "Ann_Smith").login(room.secrets["LAB_ROOM_PASSWORD"], own="xxxx")
    assert bad.status_code == 403 and "a-z, 0-9 and '-'" in login_error(bad)
    admin_wrong = participant(room, "instructor").login(room.secrets["LAB_ROOM_PASSWORD"])
    assert admin_wrong.status_code == 403  # the instructor's name takes the admin password only
    assert participant(room, "instructor").login(room.secrets["LAB_ROOM_ADMIN_PASSWORD"]).status_code == 302


def test_only_the_hubs_proxy_listens_beyond_loopback_and_it_speaks_tls(room):
    listing = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    pids = stack_pids(room.home) | hub_pids(room)
    ours = [(line.split()[3], {int(p) for p in re.findall(r"pid=(\d+)", line)}) for line in listing.splitlines()
            if {int(p) for p in re.findall(r"pid=(\d+)", line)} & pids]
    outward = [(address, owners) for address, owners in ours
               if not re.match(r"^(127\.\d+\.\d+\.\d+|\[::1\]|\[::ffff:127\.\d+\.\d+\.\d+\]):\d+$", address)]
    assert len(ours) >= 9, ours  # the lab's listeners, the hub's, the proxy's API
    assert [a for a, _ in outward] in ([f"0.0.0.0:{room.port}"], [f"*:{room.port}"], [f"[::]:{room.port}"]), outward
    assert all("configurable-http-proxy" in cmdline(pid) for _, owners in outward for pid in owners)
    with pytest.raises(ssl.SSLError):  # no certificate the system trusts: TLS, and not some other
        ssl.create_default_context().wrap_socket(__import__("socket").create_connection(("127.0.0.1", room.port)),
                                                 server_hostname="localhost")
    plain = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", f"http://127.0.0.1:{room.port}/"],
                           capture_output=True, text=True)
    assert plain.stdout in ("000", "400"), plain  # plain HTTP gets no page


@pytest.fixture(scope="module")
def three(room):
    """ann, ben and cai logged in through the form, their servers started."""
    return [Participant.joined(room, name) for name in PARTICIPANTS]


SIZE = 'import os; os.environ.update(LAB_NOTEBOOK_EVENTS="600", LAB_NOTEBOOK_RATE="300", LAB_NOTEBOOK_STRICT="1")'


def run_notebook(p: Participant, path: str, results: dict) -> None:
    """Every code cell of `path` (in their home) in a new kernel of their own server."""
    began = time.monotonic()
    kernel = p.kernel(path)
    try:
        cells = p.api("GET", f"contents/{path}").json()["content"]["cells"]
        out = [kernel.run(SIZE + "; print('as', os.environ['LAB_PARTICIPANT'], os.environ['LAB_HOME'])")]
        for cell in cells:
            if cell["cell_type"] == "code":
                out.append(kernel.run("".join(cell["source"]), timeout_s=600))
        results[p.name] = ("".join(out), time.monotonic() - began)
    except Exception as exc:  # the thread's failure, told by the test
        results[p.name] = exc
    finally:
        kernel.close()


def test_three_participants_run_the_tweet_views_notebook_at_once_each_on_their_own_topics(room, three):
    results: dict = {}
    threads = [threading.Thread(target=run_notebook, args=(p, "notebooks/tweet_views.ipynb", results)) for p in three]
    for t in threads:
        t.start()
    for t in threads:
        t.join(1500)
    failed = {name: r for name, r in results.items() if isinstance(r, BaseException)}
    assert not failed and len(results) == 3, "\n\n".join(f"{n}: {r}" for n, r in failed.items()) or results.keys()
    for name, (printed, seconds) in results.items():
        print(f"{name}: tweet_views.ipynb in {seconds:.0f} s")
        assert f"as {name} {room.home}/room/participants/{name}\n" in printed, printed[:300]
        assert re.search(r"tweet-views: \d+ expected, \d+ in output, 0 mismatches \(OK\)", printed), printed[-3000:]
    from joinlab.topics import list_topics, read_topics
    bootstrap = f"127.0.0.1:{port_of(room.env, 'broker')}"
    topics = {t.topic for t in list_topics(bootstrap)}
    for name in PARTICIPANTS:
        mine = {t for t in topics if t.startswith(f"{name}.")}
        assert f"{name}.tweets" in mine and f"{name}.notebook-tweet-views" in mine, sorted(topics)
    # No participant's output holds another's records: every view's tweet is one of their own tweets.
    from joinlab.generate import body_of
    for name in PARTICIPANTS:
        tweets = {body_of(r.value).get("tweet_id") for r in read_topics(bootstrap, [f"{name}.tweets"])} - {None}
        views = [json.loads(r.value) for r in read_topics(bootstrap, [f"{name}.notebook-tweet-views"]) if r.value]
        assert views and {v["tweet"]["tweet_id"] for v in views} <= tweets


def test_no_participant_process_runs_as_root_nor_reads_the_hubs_secrets(room, three):
    ann = three[0]
    kernel = ann.kernel()
    try:
        probe = kernel.run(f"""
import os, pwd
print("user", pwd.getpwuid(os.getuid()).pw_name)
for path in {[str(room.home.parent / '.env'), str(room.home / 'room' / 'hub' / 'names.json'),
              str(room.home / 'room' / 'hub' / 'jupyterhub_cookie_secret'), str(room.home / 'room' / 'tls' / 'key.pem'),
              '/home/lab-ben/notebooks']!r}:
    try:
        (os.listdir if os.path.isdir(path) else lambda p: open(p).read())(path)
        print("READ", path)
    except PermissionError:
        print("refused", path)
""")
    finally:
        kernel.close()
    assert "user lab-ann" in probe and "READ" not in probe, probe
    for p in three:
        uid = pwd.getpwnam(f"lab-{p.name}").pw_uid
        servers = [pid for pid in hub_pids(room) if "jupyterhub-singleuser" in cmdline(pid)
                   and os.stat(f"/proc/{pid}").st_uid == uid]
        assert servers, f"no server of {p.name} running as lab-{p.name}"
    rooted = [cmdline(pid) for pid in hub_pids(room) if os.stat(f"/proc/{pid}").st_uid == 0
              and ("singleuser" in cmdline(pid) or "ipykernel" in cmdline(pid))]
    assert rooted == []
    # No secret on any command line of the room.
    secrets = [room.secrets[k] for k in ("LAB_ROOM_PASSWORD", "LAB_ROOM_ADMIN_PASSWORD", "SPARK_CONNECT_AUTHENTICATE_TOKEN")]
    assert not [pid for pid in stack_pids(room.home) | hub_pids(room) if any(s in cmdline(pid) for s in secrets)]


def test_a_participant_logs_in_through_the_form_in_chromium(room):
    from tests import chromium
    if problem := chromium.problem():
        pytest.fail(f"needs a headless browser: {problem} (scripts/chromium.sh installs one)")
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
    key = x509.load_pem_x509_certificate(Path(room.cert).read_bytes()).public_key()
    spki = base64.b64encode(hashlib.sha256(key.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)).digest())
    flags = [f"--ignore-certificate-errors-spki-list={spki.decode()}"]  # this certificate, and no other
    with chromium.open_page(f"{room.door}/hub/login", flags=flags) as page:
        wait_for(lambda: page.evaluate("!!document.getElementById('login_submit')"), 60, "the hub's login form")
        page.evaluate(f"""(() => {{
            document.getElementById('username_input').value = 'eve';
            document.getElementById('password_input').value = {json.dumps(room.secrets['LAB_ROOM_PASSWORD'])};
            document.getElementById('otp_input').value = 'eve-own';
            document.getElementById('login_submit').click(); }})()""")
        wait_for(lambda: "/user/eve/lab" in (page.evaluate("location.href") or ""), 180, "eve's JupyterLab")
        listed = wait_for(lambda: page.evaluate(
            "(document.querySelector('.jp-DirListing-content') || {}).innerText"), 180, "eve's file browser")
        assert "notebooks" in listed and "exercises" in listed


def test_a_participants_query_reads_no_file_the_room_keeps_from_them(room, three):
    """Spark reads the files a query names as its own user (joinlab), not as root: the room's
    secrets stay out of a participant's reach through Spark too (Spark refuses the path, or reads
    no line of it), while a file every user may read comes back whole."""
    readable = room.home / "readable.txt"
    readable.write_text("every user may read this\n")
    readable.chmod(0o644)
    kernel = three[1].kernel()
    try:
        out = kernel.run(f"""
from joinlab.spark import session
spark = session("probe")
for path in {[str(room.home.parent / '.env'), str(room.home / 'room' / 'tls' / 'key.pem'), str(readable)]!r}:
    try:
        print("lines", len(spark.read.text(path).collect()), path)
    except Exception as exc:
        print("refused", path, str(exc).splitlines()[0][:120])
spark.stop()
""")
    finally:
        kernel.close()
    assert f"lines 1 {readable}" in out, out  # the probe reads what it may
    for secret in (room.home.parent / ".env", room.home / "room" / "tls" / "key.pem"):
        assert f"lines 0 {secret}" in out or f"refused {secret}" in out, out


def active_queries(room) -> str:
    """The 'Active Streaming Queries' part of the server's Spark UI (every session's queries)."""
    import urllib.request
    with urllib.request.urlopen(f"{room.connect_ui}/StreamingQuery/", timeout=10) as page:
        text = page.read().decode()
    return text.split("Active Streaming Queries", 1)[-1].split("Completed Streaming Queries", 1)[0]


START = SIZE + """
from joinlab.notebook import Lab
lab = Lab("tweet-views")
lab.create_topics()
feed = lab.start_generator(count=100000, rate=50)
query = lab.start_job(trigger="1 second")
"""


def test_the_board_shows_the_room_and_a_stopped_server_or_restarted_kernel_stops_its_query_alone(room, three):
    ann, ben, cai = three
    kernels = {p.name: p.kernel() for p in three}
    for kernel in kernels.values():
        kernel.run(START)
    instructor = participant(room, "instructor")
    assert instructor.login(room.secrets["LAB_ROOM_ADMIN_PASSWORD"]).status_code == 302
    board = f"{room.door}/services/room-board/"

    def rows() -> list[dict]:
        answer = instructor.session.get(board + "api/room")
        return answer.json() if answer.status_code == 200 and answer.url == board + "api/room" else []

    def reported(name: str) -> dict | None:
        return next((r for r in rows() if r.get("query") == f"{name}.notebook_tweet_views" and r.get("batch")), None)
    for name in PARTICIPANTS:
        row = wait_for(lambda: reported(name), 180, f"{name}'s query on the room's board")
        assert row["participant"] == name and row["server"] == "running" and row["pattern"] == "tweet-views"
        assert row["batch_ms"] > 0 and row["state_rows"] >= 0 and row["input_per_s"] >= 0
    assert {"ann", "ben", "cai", "instructor"} <= {r["participant"] for r in rows()}
    page = instructor.session.get(board)
    assert page.status_code == 200 and "ann.notebook_tweet_views" in page.text and "state rows" in page.text
    assert ben.session.get(board + "api/room").status_code == 403  # the instructor's only
    for name in PARTICIPANTS:
        assert f"{name}.notebook_tweet_views" in active_queries(room)
    # The hub's admin page stops ann's server (its button calls this); ben's kernel restarts.
    xsrf = instructor.session.cookies.get("_xsrf", path="/hub/") or ""
    stopped = instructor.session.delete(f"{room.door}/hub/api/users/ann/server", headers={"X-XSRFToken": xsrf})
    assert stopped.status_code in (202, 204), stopped.text
    restarted = ben.api("POST", f"kernels/{kernels['ben'].id}/restart")
    assert restarted.status_code == 200, restarted.text
    # Their clients are gone: the server ends their sessions after its 60 s timeout, and the queries with them.
    wait_for(lambda: "ann.notebook_tweet_views" not in active_queries(room)
             and "ben.notebook_tweet_views" not in active_queries(room), 180,
             "ann's and ben's queries to leave the Spark server")
    assert "cai.notebook_tweet_views" in active_queries(room)  # the others go on
    assert wait_for(lambda: reported("cai"), 30, "cai's query still on the board")
    kernels["cai"].run("lab.stop()")
    for name in ("ben", "cai"):
        kernels[name].close()


def test_after_the_hub_restarts_a_participant_logs_in_again_with_their_own_password(room):
    """The hub's state (its database, the names' own passwords) is in $LAB_HOME/room/hub: a hub
    stopped and started again (`joinlab lab down hub`, `joinlab lab up --room`) keeps every name."""
    assert joinlab(room.env, "lab", "down", "hub").returncode == 0
    again = joinlab(room.env, "lab", "up", "--room", timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert re.search(r"^\s+hub\s+started", again.stdout, re.M) and re.search(r"spark-connect\s+already running",
                                                                             again.stdout)
    assert participant(room, "ann").login(room.secrets["LAB_ROOM_PASSWORD"], own="ann-own").status_code == 302
    taken = participant(room, "ann").login(room.secrets["LAB_ROOM_PASSWORD"], own="not-ann")
    assert taken.status_code == 403 and "is taken" in login_error(taken)
