import sys

from perf.bench.run import main

sys.exit(main())
