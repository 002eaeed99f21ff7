"""The participants' Python: a virtualenv with the lab that every participant's Unix user can run.

Why not the lab's own `.venv`: it is the instructor's, and its interpreter may live where no other
user can reach (a pyenv under /root, a home folder that is 0700). So the room installs the lab,
not editable, into a folder of its own (LAB_ROOM_VENV, default /opt/stream-join-lab/venv, as The
Littlest JupyterHub keeps /opt/tljh/user) from an interpreter any user can run, and checks that an
unprivileged user can import it. The lab's own code is installed again whenever it changed.
"""
from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from joinlab.stack import procs
from joinlab.stack.procs import StackError
from joinlab.stack.settings import project_dir, setting

NOBODY = "nobody"  # the unprivileged user the checks run as
SOURCES = ("pyproject.toml", "joinlab", "jobs", "generators", "references")


def location() -> Path:
    return Path(setting("LAB_ROOM_VENV", "/opt/stream-join-lab/venv"))


def _as_nobody(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, preexec_fn=procs.as_user(NOBODY), capture_output=True, text=True, cwd="/",
                          env={"PATH": "/usr/bin:/bin"})


def interpreter() -> str:
    """$LAB_ROOM_PYTHON, else this lab's own base interpreter, else /usr/bin/python3: the first that
    an unprivileged user can run, at 3.10 or later."""
    tried = []
    for candidate in filter(None, [setting("LAB_ROOM_PYTHON", ""), getattr(sys, "_base_executable", ""),
                                   "/usr/bin/python3"]):
        try:
            done = _as_nobody([candidate, "-c", "import sys, venv; assert sys.version_info >= (3, 10)"])
        except OSError as exc:
            tried.append(f"{candidate} ({exc.strerror})")
            continue
        if done.returncode == 0:
            return candidate
        tried.append(f"{candidate} ({(done.stderr.strip().splitlines() or ['not runnable'])[-1]})")
    raise StackError("the room needs a Python 3.10+ with venv that every user can run, for the participants' "
                     f"servers; none of these is: {'; '.join(tried)}. Install one (Debian: `apt-get install python3 "
                     "python3-venv`) or name it in LAB_ROOM_PYTHON")


def digest(project: Path) -> str:
    """What the installed lab was made from: every source file's path and content."""
    h = hashlib.sha256()
    for top in SOURCES:
        paths = [project / top] if (project / top).is_file() else sorted((project / top).rglob("*"))
        for path in paths:
            if path.is_file() and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(project)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def ensure() -> Path:
    """The room's virtualenv with this checkout's lab in it; made or brought up to date here."""
    venv, project = location(), project_dir()
    python, stamp = venv / "bin" / "python", venv / ".lab-installed"
    wanted = digest(project)
    if stamp.exists() and stamp.read_text() == wanted:
        return venv
    if not python.exists():
        print(f"  {'participants':<19}making their Python in {venv} (once; a few minutes)")
        venv.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        subprocess.run([interpreter(), "-m", "venv", str(venv)], check=True)
    print(f"  {'participants':<19}installing the lab into {venv}")
    done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                           f"{project}[lab]"], capture_output=True, text=True)
    if done.returncode != 0:
        raise StackError(f"pip could not install the lab into {venv}:\n{done.stderr.strip()[-2000:]}")
    if stamp.exists():  # the lab's code changed since: its new version over the old one
        done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                               "--no-deps", "--force-reinstall", str(project)], capture_output=True, text=True)
        if done.returncode != 0:
            raise StackError(f"pip could not install the lab into {venv}:\n{done.stderr.strip()[-2000:]}")
    subprocess.run(["chmod", "-R", "a+rX", str(venv)], check=True)
    check = _as_nobody([str(python), "-c", "import joinlab.notebook, jobs, jupyterhub"])
    if check.returncode != 0:
        raise StackError(f"an unprivileged user cannot use the participants' Python in {venv} "
                         f"({(check.stderr.strip().splitlines() or ['?'])[-1]}): every folder above it must be "
                         "readable by all; choose another place with LAB_ROOM_VENV")
    stamp.write_text(wanted)
    return venv
