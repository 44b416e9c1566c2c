"""``python -m pytest_hetero.cli``: the ``hetero`` command."""

import sys

from pytest_hetero.cli import main

sys.exit(main())
