# The room's JupyterHub settings: all in joinlab.room.hub.configure, one place to read them.
from joinlab.room.hub import configure

configure(get_config())  # noqa: F821 (JupyterHub's config loader provides get_config)
