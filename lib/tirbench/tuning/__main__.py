"""``python -m tirbench.tuning ...``: the tuning CLI (``tirbench.tuning.cli``)."""
import sys

from tirbench.tuning.cli import main

sys.exit(main())
