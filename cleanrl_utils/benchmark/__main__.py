"""`python -m cleanrl_utils.benchmark`: see the package docstring."""

import sys

from cleanrl_utils.benchmark.cli import main

sys.exit(main())
