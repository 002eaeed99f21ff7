import sys

from joinlab.cli import main

sys.exit(main())
