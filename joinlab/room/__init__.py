"""The room: JupyterHub in front of one lab, so that a workshop's participants need only a browser.

`make up ROOM=1` (`joinlab lab up --room`) starts the native lab and, in front of it, JupyterHub:
its proxy is the one listener beyond loopback (TLS), each participant logs in with a name of their
own and the room password, and gets a JupyterLab that runs as a Unix user of their own, a client
of the lab's one Spark Connect server. docs/room.md says how it works.

- `names`: a participant's name, and the Unix user and topic prefix it becomes.
- `auth`: the login (the room password; a name stays its first owner's).
- `spawner`: a participant's JupyterLab, as their Unix user, with the lab's settings.
- `hub`: what `lab up --room` starts: the certificate, the proxy, the hub's settings.
- `jupyterhub_config.py`: the file the hub reads, which only calls `hub.configure`.
"""
