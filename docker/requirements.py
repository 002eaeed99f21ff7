"""Write the lab's runtime requirements (dependencies + the `lab` extra) from pyproject.toml
to the file named by argv[1], so the image installs them before it copies the lab's code."""
import sys
import tomllib

project = tomllib.load(open("pyproject.toml", "rb"))["project"]
requirements = project["dependencies"] + project["optional-dependencies"]["lab"]
open(sys.argv[1], "w").write("\n".join(requirements) + "\n")
