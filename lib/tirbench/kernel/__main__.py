"""``python -m tirbench.kernel ...``: the rules' kernels for one workload (``tirbench.kernel.cli``)."""
import sys

from tirbench.kernel.cli import main

sys.exit(main())
