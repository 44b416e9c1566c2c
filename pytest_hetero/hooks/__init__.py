"""The one extension mechanism: every ``pytest_hetero_*`` hook (:mod:`.specs`), the built-in
last-resort implementations (:mod:`.builtin`), and the registry that resolves them for the pytest
run and the ``hetero`` command alike (:mod:`.registry`). Imports nothing heavy."""
