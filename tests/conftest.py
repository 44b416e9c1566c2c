"""Suite-wide setup: importing :mod:`suite_setup` runs it once per session (environment, preloads, a KWOK plane
per pytest-xdist worker); its ``outside_inputs`` fixture and its hooks (the lanes under ``-n``) are registered
here.

The body lives in tests/suite_setup.py, not here: mypy names a module by its file name, and tests/ would
otherwise hold two modules called ``conftest`` (this one and tests/kubernetes/conftest.py).
"""

import suite_setup  # noqa: F401
from suite_setup import (
    outside_inputs,  # noqa: F401 - the fixture, for the modules that take it
    pytest_collection_modifyitems,  # noqa: F401 - the real node's fixtures stay in its lane
    pytest_runtest_protocol,  # noqa: F401 - per-test CPU, when HETERO_TEST_CPU_LOG names a file
    pytest_xdist_make_scheduler,  # noqa: F401 - the lanes under pytest-xdist
)
