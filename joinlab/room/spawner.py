"""A participant's JupyterLab: a Unix user of their own (`lab-NAME`, as The Littlest JupyterHub
does), their own copy of the notebooks and exercises, and the lab's settings with their name.

Why a Unix user each: a notebook is code, so a participant's server and kernels must not run as
root (the hub's user) nor read what the hub keeps (the admin password, its cookie secret, the TLS
key), and one participant's files are not another's to read or change: their homes are 0700. Their
LAB_HOME (checkpoints) is a folder of theirs in the room's state, 0711, since the lab's Spark, a
user of its own, writes the checkpoints there.
"""
from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from pathlib import Path

from jupyterhub.spawner import LocalProcessSpawner, set_user_setuid
from traitlets import Dict, Unicode

from joinlab.room import names

SEEDED = ("notebooks", "exercises")  # copied into a participant's home at their first start


def ensure_user(name: str, homes: str) -> pwd.struct_passwd:
    """The participant's Unix user, made at their first start (its home 0700, its own group)."""
    user = names.unix_user(name)
    try:
        return pwd.getpwnam(user)
    except KeyError:
        subprocess.run(["useradd", "--create-home", "--home-dir", f"{homes}/{user}", "--shell", "/bin/bash",
                        "--user-group", "--comment", f"Stream Join Lab participant {name}", user],
                       check=True, capture_output=True, text=True)
        entry = pwd.getpwnam(user)
        os.chmod(entry.pw_dir, 0o700)
        return entry


def seed_home(entry: pwd.struct_passwd, project: Path) -> None:
    """Copy the notebooks and exercises into a new participant's home; never over their own work."""
    for folder in SEEDED:
        target = Path(entry.pw_dir) / folder
        if target.exists() or not (project / folder).is_dir():
            continue
        shutil.copytree(project / folder, target, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints",
                                                                                "hidden"))
        for path in [target, *target.rglob("*")]:
            os.chown(path, entry.pw_uid, entry.pw_gid, follow_symlinks=False)


class RoomSpawner(LocalProcessSpawner):
    project = Unicode(help="the lab's checkout: notebooks/ and exercises/ are copied from it").tag(config=True)
    homes = Unicode("/home", help="where participants' homes are made").tag(config=True)
    lab_env = Dict(help="the lab's settings every participant gets (Kafka, Spark Connect, lookup)").tag(config=True)
    lab_homes = Unicode(help="where each participant's LAB_HOME is made (NAME/ below it)").tag(config=True)

    @property
    def unix_name(self) -> str:
        return names.unix_user(self.user.name)

    def make_preexec_fn(self, name):
        return set_user_setuid(names.unix_user(name))

    def user_env(self, env):
        entry = pwd.getpwnam(self.unix_name)
        env.update(USER=entry.pw_name, LOGNAME=entry.pw_name, HOME=entry.pw_dir, SHELL=entry.pw_shell)
        return env

    def get_env(self):
        env = super().get_env()
        env.update(self.lab_env)
        # Their name on every topic and query they make (joinlab.config.participant), their checkpoints apart.
        env.update(LAB_PARTICIPANT=self.user.name, LAB_HOME=str(Path(self.lab_homes, self.user.name)))
        env["PATH"] = os.pathsep.join([str(Path(self.cmd[0]).parent), env.get("PATH", "/usr/bin:/bin")])
        return env

    async def start(self):
        entry = ensure_user(self.user.name, self.homes)
        seed_home(entry, Path(self.project))
        lab_home = Path(self.lab_homes, self.user.name)
        lab_home.mkdir(parents=True, exist_ok=True)
        os.chown(lab_home, entry.pw_uid, entry.pw_gid)
        lab_home.chmod(0o711)
        self.notebook_dir = entry.pw_dir
        return await super().start()
