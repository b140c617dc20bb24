"""``python -m tirbench.tuning ...``: the tuning CLI."""
import sys

from tirbench.tuning.tune import main

sys.exit(main())
