"""The pytest glue, and the only package that imports pytest: options, markers, matrix collection,
layer items, stash keys, pytest-xdist scheduling and the session-finish wiring of evidence."""
