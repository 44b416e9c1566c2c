"""Suite-wide setup: importing :mod:`suite_setup` runs it once per session (environment, preloads); its
``outside_inputs`` fixture is registered here for the modules that take it.

The body lives in tests/suite_setup.py, not here: mypy names a module by its file name, and tests/ would
otherwise hold two modules called ``conftest`` (this one and tests/kubernetes/conftest.py).
"""

import suite_setup  # noqa: F401
from suite_setup import outside_inputs  # noqa: F401 - the fixture, for the modules that take it
