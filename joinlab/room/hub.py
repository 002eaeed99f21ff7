"""What `joinlab lab up --room` puts in front of the lab: JupyterHub, its proxy, its certificate.

Who listens where: the proxy (configurable-http-proxy, started by the hub) on LAB_ROOM_IP
(default every address) at LAB_ROOM_PORT, over TLS: the room's one door. The hub itself, the
proxy's API and every participant's JupyterLab listen on 127.0.0.1 only, as the lab's services do.
The hub runs as root (it makes a Unix user per participant); its secrets (the room's passwords,
its cookie secret, the proxy's token, the TLS key) are in files only root reads and in its
environment, never on a command line.
"""
from __future__ import annotations

import datetime
import hashlib
import ipaddress
import os
import shutil
import socket
import ssl
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from joinlab.config import lab_home
from joinlab.stack import procs
from joinlab.stack.procs import Service, StackError
from joinlab.stack import services, settings
from joinlab.stack.settings import HOST, port, project_dir, setting, token

HUB = "hub"
PROXY_PACKAGE = "configurable-http-proxy@5"
ADMIN_DEFAULT = "instructor"
IDLE_TIMEOUT_S = "3600"  # a server idle for an hour is stopped: longer than any break of a 90-minute workshop


def folder(*parts: str, mode: int = 0o700) -> Path:
    """A folder of the room's under $LAB_HOME/room, owner-only unless said otherwise."""
    path = lab_home().joinpath("room", *parts)
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(mode)
    return path


def admin() -> str:
    return setting("LAB_ROOM_ADMIN", ADMIN_DEFAULT)


def bind_ip() -> str:
    return setting("LAB_ROOM_IP", "0.0.0.0")


def passwords() -> tuple[str, str]:
    """(room, admin): from the environment or .env, else generated into .env (0600). The room's is
    short enough to write on a board; the admin's is 32 characters (JupyterHub's own minimum)."""
    return token("LAB_ROOM_PASSWORD", nbytes=5), token("LAB_ROOM_ADMIN_PASSWORD", nbytes=16)


def outward_address() -> str:
    """The address other machines reach this one at (the route's source address; nothing is sent),
    else the host name."""
    for probe in ("192.0.2.1", "10.255.255.255"):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            try:
                sock.connect((probe, 9))
            except OSError:
                continue
            if not sock.getsockname()[0].startswith("127."):
                return sock.getsockname()[0]
    return socket.gethostname()


@dataclass(frozen=True)
class Certificate:
    cert: Path
    key: Path
    made: bool  # a self-signed one, made here

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the certificate, as browsers show it (AA:BB:...)."""
        der = ssl.PEM_cert_to_DER_cert(self.cert.read_text())
        return ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())


def certificate() -> Certificate:
    """LAB_ROOM_CERT and LAB_ROOM_KEY if the instructor gives them, else a self-signed certificate
    for this machine's name and addresses, made once and kept in $LAB_HOME/room/tls (key 0600)."""
    given = setting("LAB_ROOM_CERT", ""), setting("LAB_ROOM_KEY", "")
    if any(given):
        if not all(given) or not all(Path(p).is_file() for p in given):
            raise StackError("LAB_ROOM_CERT and LAB_ROOM_KEY go together, each the path of a PEM file; "
                             f"found {given[0] or '(unset)'} and {given[1] or '(unset)'}")
        return Certificate(Path(given[0]), Path(given[1]), made=False)
    tls = folder("tls")
    cert, key = tls / "cert.pem", tls / "key.pem"
    if not (cert.exists() and key.exists()) or _expires_within(cert, days=2):
        _self_signed(cert, key)
    return Certificate(cert, key, made=True)


def _expires_within(cert: Path, days: int) -> bool:
    from cryptography import x509
    until = x509.load_pem_x509_certificate(cert.read_bytes()).not_valid_after_utc
    return until - datetime.datetime.now(datetime.timezone.utc) < datetime.timedelta(days=days)


def _self_signed(cert: Path, key: Path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    private = ec.generate_private_key(ec.SECP256R1())
    host = socket.gethostname()
    addresses = {"127.0.0.1", outward_address()}
    alt = [x509.DNSName(host), x509.DNSName("localhost")]
    for address in sorted(addresses):
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(address)))
        except ValueError:
            alt.append(x509.DNSName(address))
    now = datetime.datetime.now(datetime.timezone.utc)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"Stream Join Lab room on {host}")])
    made = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(private.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName(alt), critical=False)
            .sign(private, hashes.SHA256()))
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    cert.write_bytes(made.public_bytes(serialization.Encoding.PEM))


def proxy_command() -> list[str]:
    """configurable-http-proxy, JupyterHub's proxy, from the npm registry into $LAB_HOME/room/proxy
    the first time (Node.js 18+ is the one thing the room adds to what the lab needs)."""
    prefix = folder("proxy", mode=0o755)
    binary = prefix / "node_modules" / ".bin" / "configurable-http-proxy"
    if binary.exists():
        return [str(binary)]
    if not shutil.which("npm") or not shutil.which("node"):
        raise StackError("the room's proxy (configurable-http-proxy) needs Node.js 18+ and npm: install them "
                         "(Debian: `apt-get install nodejs npm`; elsewhere https://nodejs.org) and run it again")
    print(f"  {'proxy':<19}installing {PROXY_PACKAGE} from the npm registry into {prefix}")
    done = subprocess.run(["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--loglevel=error",
                           PROXY_PACKAGE], capture_output=True, text=True)
    if done.returncode != 0 or not binary.exists():
        raise StackError(f"npm could not install {PROXY_PACKAGE} (exit {done.returncode}):\n{done.stderr.strip()}")
    return [str(binary)]


SPARK_USER = "joinlab"  # who runs Spark's worker and server in a room (participants are lab-NAME)


def spark_user() -> str:
    """The Unix user that runs the room's Spark (worker, executors, Python workers, the Connect
    server): participants' queries are code, and they run there, so not as root, who reads the
    room's secrets. Made here the first time: a system user with a home of its own in the room."""
    import pwd
    user = setting("LAB_ROOM_SPARK_USER", SPARK_USER)
    try:
        pwd.getpwnam(user)
    except KeyError:
        subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/usr/sbin/nologin", "--comment", "Stream Join Lab's Spark in a room", user],
                       check=True, capture_output=True, text=True)
    home = folder("spark-home")  # HOME for its JVMs and Python workers (caches), not root's
    shutil.chown(home, user, user)
    return user


def prepare(spark: list[Service | None]) -> tuple[str, str]:
    """(Spark's user, the participants' Python) for a room about to start: as root, that user made,
    the Python installed (joinlab.room.venv), what Spark starts from readable by it, and the
    lookup service's token in .env (Spark's user cannot read the file the service would write).
    `spark`: the lab's worker and server, refused if they already run as another user."""
    import pwd

    from joinlab.room import venv
    refuse_unless_root()
    user = spark_user()
    if any(procs.owner(service) not in (None, pwd.getpwnam(user).pw_uid) for service in spark):
        raise StackError(f"the lab's Spark runs as root; in a room it runs as {user}, since participants' queries "
                         "run there: stop the lab (`make down`), then `make up ROOM=1`")
    token("LAB_LOOKUP_TOKEN")
    python = str(venv.ensure() / "bin" / "python")
    check_reachable(user)
    return user, python


def check_reachable(user: str) -> None:
    """Fail, naming the folder, when `user` (Spark's) cannot read what its JVMs and Python workers
    start from: the lab's state (LAB_HOME, with the class archive), Spark, the connector's jars."""
    from joinlab import class_archive
    from joinlab.config import spark_home
    from joinlab.jars import cache
    for path in [lab_home(), Path(spark_home()), cache(), class_archive.path() or lab_home()]:
        readable = subprocess.run(["test", "-r", str(path), "-a", "(", "!", "-d", str(path), "-o", "-x", str(path), ")"],
                                  preexec_fn=procs.as_user(user), cwd="/")
        if readable.returncode != 0:
            raise StackError(f"the room runs Spark as {user}, who cannot read {path}: every folder above it must be "
                             "readable by all (a checkout or LAB_HOME under a 0700 home is not); move it, or set "
                             "LAB_HOME")


def refuse_unless_root() -> None:
    if os.geteuid() != 0:
        raise StackError("the room makes one Unix user per participant and runs their servers as those users, "
                         "as The Littlest JupyterHub does: start it as root (in a root shell, `sudo -i`, in the "
                         "project folder: `make up ROOM=1`)")


def start(environment: dict[str, str], participants_python: Path) -> Service:
    """The hub, as root, in $LAB_HOME/room/hub (its database and cookie secret), reading
    jupyterhub_config.py beside this file. `environment`: the lab's (base_env), to which this adds
    the room's passwords, so that they reach the hub and never a command line;
    `participants_python`: the virtualenv their servers run (joinlab.room.venv)."""
    room, admin_password = passwords()
    settings.env_file().chmod(0o600)  # it holds the passwords, whoever wrote it (a copy of .env.example is 0644)
    home = folder("hub")
    cert = certificate()
    env = {**environment, "LAB_ROOM_PASSWORD": room, "LAB_ROOM_ADMIN_PASSWORD": admin_password,
           "LAB_ROOM_CERT": str(cert.cert), "LAB_ROOM_KEY": str(cert.key),
           "LAB_ROOM_PROXY": os.pathsep.join(proxy_command()), "LAB_ROOM_VENV": str(participants_python)}
    cmd = [str(Path(sys.executable).parent / "jupyterhub"), "-f", str(Path(__file__).with_name("jupyterhub_config.py"))]
    public = outward_address() if bind_ip() in ("0.0.0.0", "::", "") else bind_ip()
    return procs.spawn(HUB, cmd, "jupyterhub", env, url=f"https://{public}:{port('room')}/", cwd=str(home),
                       extra={"fingerprint": cert.fingerprint, "admin": admin(), "hub": f"http://{HOST}:{port('room-hub')}",
                              "self_signed": cert.made})


def healthy(hub: Service) -> bool:
    """The hub answers on loopback, and its proxy serves the login page over TLS."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # its own certificate: checked by fingerprint
    try:
        with urllib.request.urlopen(f"{hub.extra['hub']}/hub/api/", timeout=5) as api:
            if api.status != 200:
                return False
        with urllib.request.urlopen(f"https://127.0.0.1:{port('room')}/hub/login", timeout=5, context=context) as page:
            return page.status == 200
    except OSError:
        return False


services.HEALTH[HUB] = (healthy, "answering on loopback, its proxy serving the login page over TLS")


def configure(c) -> None:
    """JupyterHub's settings for the room (jupyterhub_config.py calls this with its `c`)."""
    from joinlab import broker, kafka_settings
    from joinlab.config import participant_max_offsets
    from joinlab.room import board
    from joinlab.room.auth import RoomAuthenticator
    from joinlab.room.spawner import RoomSpawner
    from joinlab.spark import TOKEN_VARIABLE
    from joinlab.stack.procs import CONNECT
    here = Path(__file__).parent
    home = folder("hub")
    c.JupyterHub.bind_url = f"https://{bind_ip()}:{port('room')}"
    c.JupyterHub.ssl_cert, c.JupyterHub.ssl_key = os.environ["LAB_ROOM_CERT"], os.environ["LAB_ROOM_KEY"]
    c.JupyterHub.hub_bind_url = f"http://{HOST}:{port('room-hub')}"
    c.ConfigurableHTTPProxy.api_url = f"http://{HOST}:{port('room-api')}"
    c.ConfigurableHTTPProxy.command = os.environ["LAB_ROOM_PROXY"].split(os.pathsep)
    c.JupyterHub.db_url = f"sqlite:///{home / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(home / "jupyterhub_cookie_secret")
    c.JupyterHub.pid_file = str(home / "jupyterhub.pid")
    c.JupyterHub.template_paths = [str(here / "templates")]
    c.JupyterHub.authenticator_class = RoomAuthenticator
    c.Authenticator.allow_all = True
    c.Authenticator.admin_users = {admin()}
    c.RoomAuthenticator.room_password = os.environ["LAB_ROOM_PASSWORD"]
    c.RoomAuthenticator.admin_password = os.environ["LAB_ROOM_ADMIN_PASSWORD"]
    c.RoomAuthenticator.claims_file = str(home / "names.json")
    c.JupyterHub.spawner_class = RoomSpawner
    c.Spawner.cmd = [str(Path(os.environ["LAB_ROOM_VENV"], "bin", "jupyterhub-singleuser"))]
    c.Spawner.default_url = "/lab"
    c.Spawner.start_timeout = 120
    c.Spawner.http_timeout = 60
    connect = procs.load(CONNECT)
    c.RoomSpawner.project = str(project_dir())
    c.RoomSpawner.lab_homes = str(folder("participants", mode=0o711))
    # The lab's Kafka and Spark Connect server. No LAB_LOOKUP_URL: the lab's lookup service reads the
    # pattern's own `sessions` topic, so a participant's money-enrichment job starts a service of its
    # own on their `NAME.sessions` (joinlab.runner.services), which the room's Spark reaches on loopback.
    c.RoomSpawner.lab_env = {"KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers(),
                             "SPARK_REMOTE": connect.url, TOKEN_VARIABLE: connect.extra["token"],
                             "LAB_ROOM_MAX_OFFSETS_PER_TRIGGER": str(participant_max_offsets())}
    # JupyterLab's defaults for a room (no news pop-up, no update check: joinlab.stack.services).
    settings_dir, _ = services.jupyter_folders()
    c.Spawner.args = [f"--LabApp.app_settings_dir={settings_dir}"]
    # Servers idle this long are stopped (their kernels, and so their queries, with them); the
    # instructor's board (joinlab.room.board), linked from the hub's Services menu.
    c.JupyterHub.services = [
        {"name": "idle-culler", "command": [sys.executable, "-m", "jupyterhub_idle_culler",
                                            f"--timeout={setting('LAB_ROOM_IDLE_TIMEOUT', IDLE_TIMEOUT_S)}"]},
        {"name": board.SERVICE, "url": f"http://{HOST}:{port('room-board')}", "display": True, "oauth_no_confirm": True,
         "command": [sys.executable, "-m", "joinlab.room.board"],
         "environment": {**kafka_settings.environment(), "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers()}}]
    c.JupyterHub.load_roles = [
        {"name": "idle-culler", "services": ["idle-culler"],
         "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"]},
        {"name": board.SERVICE, "services": [board.SERVICE], "scopes": ["list:users", "read:users", "read:servers"]}]
